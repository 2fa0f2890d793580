"""Transcripts as subtitles (SubRip and WebVTT) and as plain text.

A segment's speaker is shown where the transcript has one (a ``speaker`` attribute that is not
empty: the diarization stage's label or the name a user gave it): SubRip has no speaker markup,
so the line starts with ``Name: ``; WebVTT uses its voice span, ``<v Name>``. Times may be
shifted (``offset``: subtitles for a clip cut out of the video start at the clip's start) and
cut to a window, so a segment that overlaps a clip's edge is shown for the part inside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

Format = Literal["srt", "vtt", "txt"]


def speaker_of(segment: Any) -> str:
    """The segment's speaker label, ``""`` when the transcript has none."""
    return str(getattr(segment, "speaker", "") or "")


def _stamp(t: float, sep: str) -> str:
    ms = max(0, round(t * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _cues(
    segments: Sequence[Any], offset: float, window: tuple[float, float] | None
) -> list[tuple[float, float, str, str]]:
    out = []
    for seg in segments:
        t0, t1 = float(seg.t0), float(seg.t1)
        if window is not None:
            t0, t1 = max(t0, window[0]), min(t1, window[1])
            if t1 <= t0:
                continue
        text = " ".join(str(seg.text).split())
        if text:
            out.append((t0 - offset, max(t1, t0 + 0.001) - offset, text, speaker_of(seg)))
    return out


def subtitles(
    segments: Sequence[Any],
    fmt: Format,
    *,
    offset: float = 0.0,
    window: tuple[float, float] | None = None,
) -> str:
    """``segments`` (anything with ``t0``, ``t1``, ``text`` and maybe ``speaker``) as SubRip
    (``srt``), WebVTT (``vtt``) or text lines ``[HH:MM:SS.mmm] Speaker: words`` (``txt``),
    each time minus ``offset``, only the part of each segment inside ``window`` when given."""
    cues = _cues(segments, offset, window)
    if fmt == "srt":
        blocks = [
            f"{n}\n{_stamp(a, ',')} --> {_stamp(b, ',')}\n{f'{who}: ' if who else ''}{text}\n"
            for n, (a, b, text, who) in enumerate(cues, 1)
        ]
        return "\n".join(blocks)
    if fmt == "vtt":
        blocks = [
            f"{_stamp(a, '.')} --> {_stamp(b, '.')}\n{f'<v {who}>' if who else ''}{text}\n"
            for a, b, text, who in cues
        ]
        return "WEBVTT\n\n" + "\n".join(blocks)
    return "".join(
        f"[{_stamp(a, '.')}] {f'{who}: ' if who else ''}{text}\n" for a, b, text, who in cues
    )


def video_subtitles(core: Any, ref: str, fmt: Format) -> str:
    """A video's whole transcript as ``fmt`` (``srt``, ``vtt`` or ``txt``).

    Raises:
        VideoNotFoundError: no such video.
        UserError: the video has no transcript (it was not transcribed, or nothing is said).
    """
    from vidagent.exceptions import UserError

    lib = core.existing_library()
    video = lib.get_video(ref)
    segments = lib.transcript(video.video_id)
    if not segments:
        done = "transcribe" in video.stages
        why = "nothing is said in it" if done else "it was not transcribed (vidagent index)"
        raise UserError(f"{video.name} has no transcript: {why}")
    return subtitles(segments, fmt)
