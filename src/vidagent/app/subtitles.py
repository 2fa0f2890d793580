"""Transcripts as subtitles (SubRip and WebVTT) and as plain text.

A segment's speaker is shown where the transcript has one (a ``speaker`` attribute that is not
empty: the diarization stage's label, or the name a user gave it, which the callers put in its
place: :func:`~vidagent.app.speakers.with_names`): SubRip has no speaker markup,
so the line starts with ``Name: ``; WebVTT uses its voice span, ``<v Name>``. Times may be
shifted (``offset``: subtitles for a clip cut out of the video start at the clip's start) and
cut to a window (:func:`cut`): a segment that overlaps a clip's edge shows the words said inside
it, at their own times, so a sentence two clips share is split between them, never repeated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from vidagent.library.schema import spoken

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


def cut(segment: Any, window: tuple[float, float] | None) -> tuple[float, float, str] | None:
    """What of ``segment`` is said inside ``window``: ``(t0, t1, text)``, None when nothing.

    A segment inside the window (or no window) is whole, at its own times. One the window cuts
    keeps the words whose middle lies inside it (the rule the citation checker reads a quote's
    words by; a middle on the window's end belongs to the next window, so two windows that meet
    never both hold a word), from the first kept word's start to the last one's end. A
    segment stored without word times (``words`` empty: an ASR that gives none) keeps its whole
    text for the part of its time inside the window: where in it each word falls is not known.
    """
    t0, t1 = float(segment.t0), float(segment.t1)
    text = " ".join(str(segment.text).split())
    if window is None or (window[0] <= t0 and t1 <= window[1]):
        return (t0, t1, text) if text else None
    lo, hi = window
    if min(t1, hi) <= max(t0, lo):
        return None
    try:
        words = [(float(w[0]), float(w[1]), str(w[2])) for w in json.loads(segment.words or "[]")]
    except (AttributeError, TypeError, ValueError, IndexError):  # no words kept, or unreadable
        words = []
    if not words:
        return (max(t0, lo), min(t1, hi), text) if text else None
    inside = [w for w in words if lo <= (w[0] + w[1]) / 2 < hi]
    said = spoken(w[2] for w in inside)
    if not said:
        return None
    return max(inside[0][0], lo), min(inside[-1][1], hi), said


def _cues(
    segments: Sequence[Any], offset: float, window: tuple[float, float] | None
) -> list[tuple[float, float, str, str]]:
    out = []
    for seg in segments:
        part = cut(seg, window)
        if part is not None:
            t0, t1, text = part
            out.append((t0 - offset, max(t1, t0 + 0.001) - offset, text, speaker_of(seg)))
    return out


def _escaped(text: str) -> str:
    """Text as WebVTT cue text: its three markup characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
    if fmt == "vtt":  # cue text and voice names are markup there: & < > escaped
        blocks = [
            f"{_stamp(a, '.')} --> {_stamp(b, '.')}\n"
            f"{f'<v {_escaped(who)}>' if who else ''}{_escaped(text)}\n"
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
    from vidagent.app.speakers import with_names
    from vidagent.exceptions import UserError

    if fmt not in ("srt", "vtt", "txt"):  # the Python API's: the CLI and HTTP API check it
        raise UserError(f"subtitles are written as srt, vtt or txt, not {fmt!r}")
    lib = core.existing_library()
    video = lib.get_video(ref)
    segments = with_names(lib, video.video_id, lib.transcript(video.video_id))
    if not segments:
        done = "transcribe" in video.stages
        why = "nothing is said in it" if done else "it was not transcribed (vidagent index)"
        raise UserError(f"{video.name} has no transcript: {why}")
    return subtitles(segments, fmt)
