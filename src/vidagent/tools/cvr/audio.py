"""AgentCVR's audio sub-agent: the speech of an interval as ``[12.34s - 15.67s]: text`` lines.

As the released code answers ``get_caption`` (spec/agentcvr.md §2.3, §5.2): a header
``Caption for Video 2 (0.0s - 294.7s):`` then one line per speech segment in the requested
interval, times in the clip's own timeline; no speech is the published sentence. The speech
comes from the Library's transcript when the video's ``transcribe`` stage covered it (the whole
video), else from the ``asr`` role on the interval's audio, cut from the file on demand.

Whisper's decoding settings are the paper's (App. C.1), sent with each request as
:data:`PAPER_DECODING`: beam 5, temperature 0 (no fallback), log-probability threshold -1, no
conditioning on previous text, no-speech threshold 0.6, and no VAD pass (the paper's Whisper has
none). The faster-whisper adapter applies all of them; another ``asr`` backend applies those it
supports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vidagent.models.base import Decoding, TranscribeRequest

if TYPE_CHECKING:
    from vidagent.models.client import Client

PAPER_DECODING = Decoding(
    beam_size=5,
    temperature=0.0,
    log_prob_threshold=-1.0,
    no_speech_threshold=0.6,
    condition_on_previous_text=False,
    vad=False,
)

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class Speech:
    """One speech segment in source seconds."""

    t0: float
    t1: float
    text: str


def no_speech(video: int, start: float, end: float) -> str:
    """The released code's sentence for an interval without speech."""
    return (
        f"No speech detected in Video {video} between {start}s and {end}s (or generation failed)."
    )


def caption_text(
    video: int, start: float, end: float, lines: Sequence[tuple[float, float, str]]
) -> str:
    """The header and ``[t0s - t1s]: text`` lines (clip times), or :func:`no_speech`."""
    kept = [(a, b, t.strip()) for a, b, t in lines if t.strip()]
    if not kept:
        return no_speech(video, round(start, 2), round(end, 2))
    body = "\n".join(f"[{a:.2f}s - {b:.2f}s]: {t}" for a, b, t in kept)
    return f"Caption for Video {video} ({start:.1f}s - {end:.1f}s):\n{body}"


def in_window(speech: Sequence[Speech], src_start: float, src_end: float) -> list[Speech]:
    """The segments overlapping ``[src_start, src_end]``."""
    return [s for s in speech if s.t1 > src_start and s.t0 < src_end]


def transcribe_window(
    asr: Client, audio: np.ndarray, src_start: float, src_end: float, *, language: str | None = None
) -> list[Speech]:
    """Speech of ``audio[src_start:src_end]`` (16 kHz mono), times back in source seconds.

    Args:
        asr: the ``asr`` role's client.
        audio: the whole file's waveform.  # (S,) float32 mono at 16 kHz
    """
    lo = max(0, int(src_start * SAMPLE_RATE))
    hi = min(len(audio), int(src_end * SAMPLE_RATE))
    if hi - lo < SAMPLE_RATE // 10:  # under 0.1 s: nothing to hear
        return []
    window = np.ascontiguousarray(audio[lo:hi])
    transcript = asr.transcribe(
        TranscribeRequest(window, language=language, decoding=PAPER_DECODING)
    )
    offset = lo / SAMPLE_RATE
    return [Speech(s.t0 + offset, s.t1 + offset, s.text) for s in transcript.segments]


def load_audio(path: str | Path) -> np.ndarray:
    """The file's audio, 16 kHz mono.  # (S,) float32

    Raises:
        NoAudioError: the file has no audio stream.
    """
    from vidagent.media import extract_audio

    return extract_audio(path, SAMPLE_RATE)
