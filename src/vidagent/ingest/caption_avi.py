"""AVI's clip captions (Fig. 7): the request and the answer of one independently captioned clip.

The caption stage (:mod:`vidagent.ingest.caption`) runs this under ``caption_style = "avi"``.
Eq. 1 of the AVI paper is ``d_i = VLM_caption(f_i)``: the clip's frames and nothing else, so the
request holds the Fig. 7 prompt verbatim (``avi_caption.txt``) with ``CLIP_START_TIME_IN_SECONDS``
and ``CLIP_END_TIME_IN_SECONDS`` replaced by the clip's seconds as JSON numbers (``5.0``), then
the frames at 2 fps, 720p, each after a label ``t=<seconds>s``: the template asks for times in
seconds, and ``first_seen`` needs to know when a frame was taken. No system prompt (Fig. 7 is one
prompt), no transcript, no history: the paper's prompt has no slot for either.

The answer's ``clip_description`` is the caption; its ``subject_registry`` is kept as the clip's
own, under the model's local ids (``subject_1`` in one clip is not ``subject_1`` in the next; the
spec's B.11 #1 leaves cross-clip identity to a later merge). Each entry keeps the four Fig. 7
fields, ``first_seen`` in seconds where it reads as a time.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from vidagent.models.base import ChatRequest, ImagePart, Message
from vidagent.prompts import load_prompt
from vidagent.timecode import parse_time

if TYPE_CHECKING:
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo

PROMPT = "avi_caption"
_PLACEHOLDERS = re.compile(r"CLIP_START_TIME_IN_SECONDS|CLIP_END_TIME_IN_SECONDS")


def seconds_label(t: float) -> str:
    """``t=12.5s``: a frame's time in the unit the Fig. 7 template asks for."""
    return f"t={round(t, 2):g}s"


def avi_prompt(clip: ClipRow) -> str:
    """Fig. 7 with the clip's start and end filled in seconds."""
    values = {
        "CLIP_START_TIME_IN_SECONDS": json.dumps(round(float(clip.t0), 3)),
        "CLIP_END_TIME_IN_SECONDS": json.dumps(round(float(clip.t1), 3)),
    }
    return _PLACEHOLDERS.sub(lambda m: values[m.group(0)], load_prompt(PROMPT))


def avi_request(
    info: VideoInfo, clip: ClipRow, times: list[float], *, size: int, quality: int
) -> ChatRequest:
    """One clip's Fig. 7 request: the filled prompt, then each frame after its time label."""
    from vidagent.media import encode_jpeg, frames_at

    frames = frames_at(info, times, size=size)  # (N, H, W, 3) uint8
    parts: list[str | ImagePart] = [avi_prompt(clip)]
    for t, rgb in zip(times, frames, strict=False):
        parts += [seconds_label(t), ImagePart(encode_jpeg(rgb, quality))]
    return ChatRequest(messages=(Message("user", tuple(parts)),), json_mode=True, temperature=0.0)


def parse_avi_caption(obj: Any) -> tuple[str, dict[str, Any]] | None:
    """``(clip_description, subject_registry)`` from the JSON object of a Fig. 7 answer, or None
    when it has no description (lenient: a DVD-shaped description, entries as a list)."""
    if not isinstance(obj, dict):
        return None
    desc = obj.get("clip_description")
    if isinstance(desc, dict):  # a model that borrowed DVD's shape
        desc = desc.get("captions")
    if isinstance(desc, list):
        desc = " ".join(str(d) for d in desc)
    if not isinstance(desc, str):
        return None
    entries = obj.get("subject_registry")
    if isinstance(entries, list):  # some models list the entries instead of keying them by id
        entries = {
            str(e.get("subject_id") or f"subject_{i + 1}"): e
            for i, e in enumerate(entries)
            if isinstance(e, dict)
        }
    registry = (
        {str(k): local_subject(v) for k, v in entries.items()} if isinstance(entries, dict) else {}
    )
    return desc.strip(), registry


def local_subject(entry: Any) -> dict[str, Any]:
    """One ``subject_registry`` entry with Fig. 7's four fields, ``first_seen`` in seconds."""
    entry = entry if isinstance(entry, dict) else {"appearance": entry}
    return {
        "name": str(entry.get("name") or "unknown"),
        "appearance": as_list(entry.get("appearance")),
        "identity": as_list(entry.get("identity")),
        "first_seen": _seconds(entry.get("first_seen")),
    }


def as_list(value: Any) -> list[str]:
    """A field that should be a list of strings, from whatever the model wrote."""
    if value is None or value == "":
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _seconds(value: Any) -> float | str | None:
    """Seconds from a number, ``12.5``, ``12.5s`` or ``HH:MM:SS``; other text kept as given."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return parse_time(text.removesuffix("s").strip())
    except ValueError:
        return text
