"""Read views of stored rows: the text forms that prompts and tools show of the index.

They live beside the Library (not in ingest) because ingest stages, tools and agents all
render the same rows the same way: the clip-caption lines ``C`` of VideoAgent2's
prompt_Summary and the ``[SUBJECTS]`` view of DVD's subject registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vidagent.library.schema import Artifact, ClipRow

#: The fields of a registry entry that DVD's prompts show (Table 9's ``[SUBJECTS]``); the
#: caption stage keeps more per subject (``first_clip``, a colour signature, spans).
REGISTRY_FIELDS = ("name", "appearance", "identity", "first_seen")


@dataclass(frozen=True)
class Line:
    """One entry of ``C``: a span and its text (a clip caption or a chunk summary).

    ``str(line)`` is ``"{start}s-{end}s: {text}"`` (spec A.11 #8): times as integers when
    whole, else with one decimal, and the text's whitespace collapsed so it stays on one line.
    """

    t0: float
    t1: float
    text: str

    def __str__(self) -> str:
        return f"{_secs(self.t0)}s-{_secs(self.t1)}s: {' '.join(self.text.split())}"


def _secs(t: float) -> str:
    return f"{t:.0f}" if abs(t - round(t)) < 0.05 else f"{t:.1f}"


def caption_lines(clips: list[ClipRow]) -> list[Line]:
    """``C``: the captioned clips in order; clips with a blank caption are left out."""
    return [Line(c.t0, c.t1, c.caption) for c in clips if c.caption.strip()]


def registry_view(registry: dict[str, Any]) -> str:
    """``[SUBJECTS]``: the registry as compact JSON with the prompt's fields only."""
    view = {sid: {k: e[k] for k in REGISTRY_FIELDS if k in e} for sid, e in registry.items()}
    return json.dumps(view, ensure_ascii=False)


def context_key(segment_seconds: float, fps: float) -> str:
    """The artefact key of VideoAgent2's general context of n-second segments at fps_d (built by
    :mod:`vidagent.ingest.context`, read by the strategy)."""
    return f"videoagent2:{segment_seconds:g}s@{fps:g}fps"


def reuses_index(
    mode: str, clip_seconds: Any, sample_fps: Any, segment_seconds: float, fps: float
) -> bool:
    """Whether a general context's ``C`` is the index's clip captions: always in mode ``index``,
    in ``auto`` when the index was cut into ``segment_seconds`` clips sampled at ``fps``."""

    def same(value: Any, want: float) -> bool:
        return isinstance(value, (int, float)) and abs(float(value) - want) < 1e-6

    fits = same(clip_seconds, segment_seconds) and same(sample_fps, fps)
    return mode == "index" or (mode == "auto" and fits)


def context_lines(artifact: Artifact) -> tuple[list[Line], str, str]:
    """A general context artefact as ``(C lines, S summary, source)``."""
    segments = artifact.data.get("segments", [])
    return [Line(*s) for s in segments], artifact.text, str(artifact.data.get("source", ""))
