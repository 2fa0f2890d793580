"""The transcribe stage: speech to text with word times, stored per segment and per clip.

The audio (16 kHz mono) is decoded twice and never held whole (an hour is 230 MB; decoding it
costs about 2 CPU seconds): once for its loudness, from which the windows are cut, and once
more while the windows are transcribed, each from the samples of that window alone. It is
transcribed in windows of ``window_seconds`` (default 60), each written as soon as it is done, so a killed
index keeps every window it finished and its rerun transcribes only the rest: a crash loses at
most one window. (The default was 300 s, which made any video under five minutes one window,
all lost to a kill; Whisper decodes 30 s at a time anyway, and 60 s windows cut at pauses lose
no word at the cuts, see the tests.) Windows are cut at the quietest point within
``search_seconds`` (default 5) of each nominal boundary, so no word is split between two
windows: the loudness is the RMS of 20 ms frames averaged over 200 ms (about one syllable), and
its minimum is a pause between words or sentences whenever the speaker takes one. (On the
narrated ``wannaworktogether.mp4`` with 60 s windows the cuts fall at 61.44 s and 121.98 s,
each in the gap between two sentences.)

Per window: the segments go to the ``transcript`` table with ``segment_index = window * 10000 +
local index`` (stable across reruns, since the cuts depend only on the audio and the settings),
and every pending clip that window completes (the last window it overlaps) gets ``transcript``,
the words whose midpoint falls in ``[t0, t1)`` joined by spaces. On a rerun only the windows
overlapping a pending clip are transcribed again, and their old segments replaced, except the
windows already done under the current fingerprint (a clip they complete is stored): a killed
index's rerun starts after the last window it finished, and the clips that straddle that cut
take the stored words of the window before it.

A video without audio is not an error: its clips get an empty transcript and :attr:`note` says
``"no audio track"``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vidagent.exceptions import NoAudioError
from vidagent.ingest.base import IngestContext, Stage, StageEstimate
from vidagent.library.schema import TranscriptSegment, spoken
from vidagent.media import audio_spans, iter_audio
from vidagent.models.base import TranscribeRequest

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo
    from vidagent.models.base import Transcript

SAMPLE_RATE = 16000
#: segment_index = window index * this + index within the window
SEGMENTS_PER_WINDOW = 10_000
_RMS_FRAME = 0.02  # seconds per loudness frame
_RMS_SMOOTH = 10  # frames averaged: 200 ms
#: CPU seconds per second of audio (int8, beam 5, VAD, one thread; :data:`~vidagent.ingest.
#: base.MEASURED_ON`): 23 for the 20-minute composed video (60% of it speech); the 180 s of
#: narration alone take 7.4 (0.041), silence next to nothing.
CPU_PER_SECOND = {"faster-whisper:tiny.en": 0.02}

Window = tuple[float, float]
WordTimes = tuple[float, float, str]  # (t0, t1, word) in seconds from the video start


_FRAME = round(_RMS_FRAME * SAMPLE_RATE)  # samples per loudness frame


def cut_windows(audio: np.ndarray, total: float, window: float, search: float) -> list[Window]:
    """Back-to-back windows covering ``[0, total)``, cut where ``audio`` is quietest
    (:func:`cut_at_pauses` of its :func:`loudness`).  # audio: (S,) float32 at SAMPLE_RATE"""
    return cut_at_pauses(*loudness([audio]), total, window, search)


def loudness(pieces: Iterable[np.ndarray]) -> tuple[np.ndarray, int]:
    """The RMS of each whole 20 ms frame of the waveform given in consecutive pieces, and its
    length in samples: all :func:`cut_at_pauses` needs, 50 numbers a second.

    Returns:
        (rms, samples).  # rms: (samples // 320,) float64
    """
    rms: list[np.ndarray] = []
    left = np.zeros(0, np.float32)  # the samples of a frame not yet whole
    samples = 0
    for piece in pieces:
        samples += len(piece)
        joined = np.concatenate([left, piece]) if len(left) else piece
        n = len(joined) // _FRAME
        frames = joined[: n * _FRAME].reshape(n, _FRAME)  # (n, 320)
        rms.append(np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)))
        left = joined[n * _FRAME :]
    return (np.concatenate(rms) if rms else np.zeros(0)), samples


def cut_at_pauses(
    rms: np.ndarray, samples: int, total: float, window: float, search: float
) -> list[Window]:
    """Back-to-back windows covering ``[0, total)``, cut where the audio is quietest.

    Each boundary is searched within ``search`` seconds (at most a quarter window) of its
    nominal place ``k * window``; a last window shorter than ``search`` is merged.

    Args:
        rms: the loudness of each 20 ms frame, and ``samples`` the waveform's length
            (:func:`loudness`).
        total: seconds to cover (the longer of the audio and the video).
        window: nominal window length in seconds.
        search: how far from the nominal boundary a cut may move, in seconds.
    """
    search = min(search, window / 4)
    cuts = [0.0]
    k = 1
    while k * window < total - search:
        cuts.append(_quietest(rms, samples, k * window - search, k * window + search))
        k += 1
    cuts.append(total)
    return list(itertools.pairwise(cuts))


def _quietest(rms: np.ndarray, samples: int, lo: float, hi: float) -> float:
    """The time in ``[lo, hi]`` at the centre of the quietest 200 ms: of whole 20 ms frames
    from the first that starts at or after ``lo`` (frames start at multiples of 20 ms)."""
    first = -(-round(lo * SAMPLE_RATE) // _FRAME)  # ceil
    n = min(round(hi * SAMPLE_RATE), samples) // _FRAME - first
    if n < _RMS_SMOOTH:  # the audio ends before the search range: any cut is silent
        return (lo + hi) / 2
    smooth = np.convolve(rms[first : first + n], np.ones(_RMS_SMOOTH) / _RMS_SMOOTH, "valid")
    best = int(np.argmin(smooth))  # window [best, best + _RMS_SMOOTH) is quietest
    return (first + best + _RMS_SMOOTH / 2) * _RMS_FRAME


def clip_text(words: list[WordTimes], t0: float, t1: float) -> str:
    """The words whose midpoint falls in ``[t0, t1)``, as said (:func:`~vidagent.library.schema.spoken`)."""
    return spoken(w for a, b, w in words if t0 <= (a + b) / 2 < t1)


class Transcribe(Stage):
    """ASR in crash-safe windows into the ``transcript`` table and ``transcript`` per clip.

    Args:
        window_seconds: nominal length of the windows transcribed (and written) one at a time.
        search_seconds: how far a window boundary may move to reach a pause.

    After :meth:`run`, ``note`` is ``"no audio track"`` for a video without audio, else ``""``.
    """

    name: ClassVar[str] = "transcribe"
    role: ClassVar[str | None] = "asr"
    column: ClassVar[str | None] = "transcript_model"

    def __init__(self, window_seconds: float = 60.0, search_seconds: float = 5.0) -> None:
        self.window_seconds = window_seconds
        self.search_seconds = search_seconds
        self.note = ""

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        fp = self.fingerprint(ctx.settings)
        self.note = ""
        if not clips:
            return
        loud = self._loudness(ctx)
        if loud is None:
            self.note = "no audio track"
            for clip in clips:
                self.finished(ctx, _update(clip, "", fp), bar)
            return
        total = max(loud[1] / SAMPLE_RATE, ctx.video.duration, max(c.t1 for c in clips))
        windows = cut_at_pauses(*loud, total, self.window_seconds, self.search_seconds)
        # Every window a pending clip overlaps reruns, but those a killed run finished (their
        # segments stored under this fingerprint); a clip is finished once the last window it
        # needs is done, its text from the words of every window it overlaps.
        overlaps = {c.clip_index: _overlapping(c, windows) for c in clips}
        todo = sorted({i for found in overlaps.values() for i in found} - _stored(ctx, windows, fp))
        needs = {
            k: max((i for i in found if i in todo), default=-1) for k, found in overlaps.items()
        }
        segments = _kept_segments(ctx, windows, todo)
        words: list[WordTimes] = [(w[0], w[1], w[2]) for s in segments for w in json.loads(s.words)]
        self._finish(ctx, [c for c in clips if needs[c.clip_index] == -1], words, fp, bar)
        client = ctx.models.client(str(self.role))
        pieces = audio_spans(iter_audio(ctx.path, SAMPLE_RATE), [windows[i] for i in todo])
        for i, piece in zip(todo, pieces, strict=True):
            a, b = windows[i]
            found = client.transcribe(TranscribeRequest(piece)) if piece.size else None
            new = _segments(ctx.video.video_id, i, a, b, found, fp)
            words += [(w[0], w[1], w[2]) for s in new for w in json.loads(s.words)]
            segments += new
            # Segments first, then clips: a crash in between leaves the clips pending.
            ctx.library.put_transcript(ctx.video.video_id, segments)
            self._finish(ctx, [c for c in clips if needs[c.clip_index] == i], words, fp, bar)

    def _finish(
        self,
        ctx: IngestContext,
        clips: list[ClipRow],
        words: list[WordTimes],
        fp: str,
        bar: tqdm,
    ) -> None:
        """Store these clips' transcripts from ``words``, in one commit."""
        for clip in clips:
            last = clip.t1 >= ctx.video.duration - 1e-6  # takes words past the end too
            text = clip_text(words, clip.t0, math.inf if last else clip.t1)
            self.finished(ctx, _update(clip, text, fp), bar)
        self.flush(ctx)

    def _loudness(self, ctx: IngestContext) -> tuple[np.ndarray, int] | None:
        """The audio's :func:`loudness`, or None where the video has none."""
        if not ctx.video.has_audio:
            return None
        try:
            return loudness(iter_audio(ctx.path, SAMPLE_RATE))
        except NoAudioError:
            return None

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        spec = settings.spec(str(self.role))
        est = StageEstimate(self.name, self.role, spec)
        if not info.has_audio:
            est.notes.append("no audio track")
            return est
        search = min(self.search_seconds, self.window_seconds / 4)
        est.calls = max(1, math.ceil((info.duration - search) / self.window_seconds))
        if spec in CPU_PER_SECOND:
            est.measured(0.5 + info.duration * CPU_PER_SECOND[spec])  # 0.5: the load
        else:
            est.notes.append(f"no measured speed for {spec}")
        return est


def _update(clip: ClipRow, text: str, fp: str) -> dict[str, Any]:
    return {"clip_index": clip.clip_index, "transcript": text, "transcript_model": fp}


def _overlapping(clip: ClipRow, windows: list[Window]) -> list[int]:
    return [i for i, (a, b) in enumerate(windows) if a < clip.t1 and b > clip.t0]


def _stored(ctx: IngestContext, windows: list[Window], fp: str) -> set[int]:
    """Windows a run with fingerprint ``fp`` finished: it stored a clip that window completes
    (the last window the clip overlaps), which it writes only after the window's segments."""
    return {
        _overlapping(c, windows)[-1]
        for c in ctx.library.clips(ctx.video.video_id)
        if c.transcript_model == fp and _overlapping(c, windows)
    }


def _kept_segments(
    ctx: IngestContext, windows: list[Window], todo: list[int]
) -> list[TranscriptSegment]:
    """Stored segments outside the windows about to be redone (by index and by time)."""
    spans = [windows[i] for i in todo]
    return [
        s
        for s in ctx.library.transcript(ctx.video.video_id)
        if s.segment_index // SEGMENTS_PER_WINDOW not in todo
        and not any(a <= (s.t0 + s.t1) / 2 < b for a, b in spans)
    ]


def _segments(
    video_id: str, window: int, a: float, b: float, found: Transcript | None, fp: str
) -> list[TranscriptSegment]:
    """A window's segments with times shifted to the video and clamped to the window."""

    def at(t: float) -> float:
        return round(min(max(a + t, a), b), 3)

    out = []
    for j, s in enumerate(found.segments if found is not None else ()):
        words = [[at(w.t0), at(w.t1), w.text, round(w.probability, 3)] for w in s.words]
        index = window * SEGMENTS_PER_WINDOW + j
        out.append(
            TranscriptSegment(video_id, index, at(s.t0), at(s.t1), s.text, json.dumps(words), fp)
        )
    return out
