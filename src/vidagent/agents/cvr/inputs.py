"""What AgentCVR's master calls "Video 1", "Video 2", ...: Library videos, clips of them, or
frame folders, and the question that carries them.

A plain :class:`~vidagent.agents.base.Question` gives each of its videos whole, in order. A
benchmark that knows more (CrossVid: clip bounds, one source cut into shuffled segments, the
drone views' frame folders and object boxes) hands the strategy a :class:`CvrQuestion`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vidagent.agents.base import Question

#: ``{object name: {frame index: (x0, y0, x1, y1)}}`` in the source image's pixels
BoxTable = Mapping[str, Mapping[int, tuple[float, float, float, float]]]


@dataclass(frozen=True)
class CvrInput:
    """One video as the master sees it.

    Attributes:
        video_id: the Library video (a file) it is cut from; ``None`` for a frame folder.
        folder: a folder of frame images (the drone views); ``None`` for a video file.
        spans: the source's ``[start, end]`` seconds making the clip, laid end to end (CrossVid's
            ``begin``/``end``, a PI beginning, a PSS segment); empty: the whole source. The
            master's times are the clip's own, from 0.
        boxes: objects to draw on a folder's frames, by the name the question uses.
        label: how the trace names it (the file or folder).
    """

    video_id: str | None = None
    folder: str | None = None
    spans: tuple[tuple[float, float], ...] = ()
    boxes: BoxTable = field(default_factory=dict)
    label: str = ""

    def __post_init__(self) -> None:
        if (self.video_id is None) == (self.folder is None):
            raise ValueError("a CvrInput is a Library video or a frame folder, exactly one")


@dataclass(frozen=True)
class CvrQuestion(Question):
    """A question with its master-facing videos spelled out.

    Attributes:
        cvr_task: the CrossVid task code choosing the master prompt and answer format (``None``:
            the generic prompt).
        inputs: Video 1, Video 2, ... in order; ``video_ids`` holds the Library videos among
            them (for the trace's list of videos).
    """

    cvr_task: str | None = None
    inputs: tuple[CvrInput, ...] = ()


def inputs_of(question: Question) -> tuple[CvrInput, ...]:
    """The master's videos: a :class:`CvrQuestion`'s own, else each video of the question whole."""
    if isinstance(question, CvrQuestion) and question.inputs:
        return question.inputs
    return tuple(CvrInput(video_id=v) for v in question.video_ids)


def task_of(question: Question) -> str | None:
    return question.cvr_task if isinstance(question, CvrQuestion) else None
