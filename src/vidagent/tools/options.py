"""Typed settings a strategy gives its tools, one object per tool family.

A strategy builds one :class:`ToolOptions` per question
(:meth:`vidagent.agents.base.Agent.tool_options`); tools read their family's object from
``ctx.options``. Defaults follow the papers.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetrievalOptions:
    """``clip_search`` and ``global_browse`` (:mod:`vidagent.tools.retrieval`).

    Attributes:
        caption_words: cut each clip's text to this many words (None keeps all; DVD A.11 #22).
        browse_frames: frames sampled uniformly over the video by global_browse (DVD: 250).
        browse_height: their short side in pixels (DVD: 360).
        browse_splice: frames spliced side by side into one image (DVD: 5, so 250 frames are
            50 images); more only when the model's image limit forces it.
        browse_prompt: the browse prompt template ("" = DVD Table 12).
        speech_and_text: clip_search shows each clip's transcript and on-screen text after its
            caption (DVD as published shows the caption alone).
    """

    caption_words: int | None = None
    browse_frames: int = 250
    browse_height: int = 360
    browse_splice: int = 5
    browse_prompt: str = ""
    speech_and_text: bool = True


@dataclass(frozen=True)
class FrameOptions:
    """``frame_inspect`` (:mod:`vidagent.tools.frames`).

    Attributes:
        inspect_frames: at most this many frames per call (DVD: 50).
        inspect_fps: frames per second inside the ranges (DVD: 2).
        inspect_height: their short side in pixels (DVD: 720).
        inspect_prompt: the user prompt template ("" = DVD Table 11).
    """

    inspect_frames: int = 50
    inspect_fps: float = 2.0
    inspect_height: int = 720
    inspect_prompt: str = ""


@dataclass(frozen=True)
class PerceptionOptions:
    """The perception tools (:mod:`vidagent.tools.perception`, :mod:`vidagent.tools.tracking`).

    Attributes:
        detect_alpha: frames either side searched for the most confident detection (VideoAgent2: 5).
        detect_threshold: detections below this confidence are dropped (0.5).
        object_detector: a registered detector name: ``role`` (the ``detector`` model role;
            any object name with ``transformers:<dir>``, people and faces offline) or ``vlm``
            (boxes asked of the ``tool_vlm``, any object name).
        object_tracker: a registered tracker name (``template``: template matching).
    """

    detect_alpha: int = 5
    detect_threshold: float = 0.5
    object_detector: str = "role"
    object_tracker: str = "template"


@dataclass(frozen=True)
class ToolOptions:
    """What a strategy tells its tools: the question, and each family's settings."""

    question: str = ""
    retrieval: RetrievalOptions = field(default_factory=RetrievalOptions)
    frames: FrameOptions = field(default_factory=FrameOptions)
    perception: PerceptionOptions = field(default_factory=PerceptionOptions)
