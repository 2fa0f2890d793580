"""Transcripts as subtitles (SubRip and WebVTT) and as plain text.

A segment's speaker is shown where the transcript has one (a ``speaker`` attribute that is not
empty: the diarization stage's label, or the name a user gave it, which the callers put in its
place: :func:`~vidagent.app.speakers.with_names`): SubRip has no speaker markup,
so the line starts with ``Name: ``; WebVTT uses its voice span, ``<v Name>``. Times may be
shifted (``offset``: subtitles for a clip cut out of the video start at the clip's start) and
cut to a window (:func:`cut`): a segment that overlaps a clip's edge shows the words said inside
it, at their own times, so a sentence two clips share is split between them, never repeated.
A segment longer than a cue should be (:data:`CUE_CHARS`, :data:`CUE_SECONDS`) is split into
cues at its words' times, after a sentence or clause end where one falls in a cue's second half.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
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


#: A cue's most: two lines of 42 characters, shown for 7 seconds (the usual subtitling
#: guidelines). A Whisper segment runs up to 30 s: one was a cue of 16 s and 153 characters.
CUE_CHARS = 84
CUE_SECONDS = 7.0

Word = tuple[float, float, str]


def cut(segment: Any, window: tuple[float, float] | None) -> tuple[float, float, str] | None:
    """What of ``segment`` is said inside ``window``: ``(t0, t1, text)``, None when nothing.

    A segment inside the window (or no window) is whole, at its own times. One the window cuts
    keeps the words whose middle lies inside it (the rule the citation checker reads a quote's
    words by; a middle on the window's end belongs to the next window, so two windows that meet
    never both hold a word), from the first kept word's start to the last one's end. A
    segment stored without word times (``words`` empty: an ASR that gives none) keeps its whole
    text for the part of its time inside the window: where in it each word falls is not known.
    """
    said = _said(segment, window)
    return said[:3] if said is not None else None


@dataclass(frozen=True)
class Piece:
    """What of a segment a window holds (:func:`piece`), subtitled as a segment is: split
    into cues at its words' times where it is long. ``words`` is the transcript's JSON of
    them, ``[[t0, t1, word], ...]``."""

    t0: float
    t1: float
    text: str
    speaker: str = ""
    words: str = "[]"


def piece(segment: Any, window: tuple[float, float], speaker: str | None = None) -> Piece | None:
    """What of ``segment`` is said inside ``window`` (:func:`cut`) with the words it holds,
    shown as said by ``speaker`` (default: the segment's own); None when nothing."""
    said = _said(segment, window)
    if said is None:
        return None
    t0, t1, text, words = said
    who = speaker_of(segment) if speaker is None else speaker
    return Piece(t0, t1, text, who, json.dumps([list(w) for w in words]))


def _said(
    segment: Any, window: tuple[float, float] | None
) -> tuple[float, float, str, list[Word]] | None:
    """:func:`cut`'s ``(t0, t1, text)`` and the words it holds, with their times (``[]``
    where the segment keeps none)."""
    t0, t1 = float(segment.t0), float(segment.t1)
    text = " ".join(str(segment.text).split())
    try:
        words = [(float(w[0]), float(w[1]), str(w[2])) for w in json.loads(segment.words or "[]")]
    except (AttributeError, TypeError, ValueError, IndexError):  # no words kept, or unreadable
        words = []
    if window is None or (window[0] <= t0 and t1 <= window[1]):
        return (t0, t1, text, words) if text else None
    lo, hi = window
    if min(t1, hi) <= max(t0, lo):
        return None
    if not words:
        return (max(t0, lo), min(t1, hi), text, []) if text else None
    inside = [w for w in words if lo <= (w[0] + w[1]) / 2 < hi]
    said = spoken(w[2] for w in inside)
    if not said:
        return None
    return max(inside[0][0], lo), min(inside[-1][1], hi), said, inside


def _split(t0: float, t1: float, text: str, words: list[Word]) -> list[tuple[float, float, str]]:
    """A segment's cue, or cues of at most :data:`CUE_CHARS` and :data:`CUE_SECONDS` each,
    at their words' own times where it is longer: each broken after the last sentence end in
    its second half, else the last clause end there, else before the word that would not
    fit. A segment without word times is one cue: where its words fall is not known."""
    if (t1 - t0 <= CUE_SECONDS and len(text) <= CUE_CHARS) or len(words) < 2:
        return [(t0, t1, text)]

    def fits(run: list[Word]) -> bool:
        return run[-1][1] - run[0][0] <= CUE_SECONDS and len(spoken(w[2] for w in run)) <= CUE_CHARS

    def at_end(run: list[Word]) -> int:
        for marks in (".?!", ",;:"):
            for k in range(len(run) - 1, len(run) // 2 - 1, -1):
                if run[k][2].rstrip("\"')»”").endswith(tuple(marks)):
                    return k + 1
        return len(run)

    runs: list[list[Word]] = []
    run: list[Word] = []
    for w in words:
        if run and not fits([*run, w]):
            k = at_end(run)
            runs.append(run[:k])
            run = run[k:]
        run.append(w)
    runs.append(run)
    return [(r[0][0], r[-1][1], spoken(w[2] for w in r)) for r in runs if r]


def _cues(
    segments: Sequence[Any], offset: float, window: tuple[float, float] | None
) -> list[tuple[float, float, str, str]]:
    out = []
    for seg in segments:
        said = _said(seg, window)
        if said is not None:
            for t0, t1, text in _split(*said):
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
