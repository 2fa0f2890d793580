"""Speech to text over an OpenAI-compatible ``/audio/transcriptions`` endpoint (the ``asr`` role).

``--asr openai:whisper-1`` (OpenAI), or a Whisper served elsewhere, e.g.
``openai:Systran/faster-whisper-large-v3?base_url=http://localhost:8000/v1`` (speaches,
faster-whisper-server, vLLM and others speak the same protocol). The audio goes up as 16-bit
mono WAV at 16 kHz; the reply is asked for as ``verbose_json`` with segment and word times.

Of a request's :class:`~vidagent.models.base.Decoding` the protocol carries only
``temperature`` (and the request's ``language``); beam size, thresholds, conditioning and VAD
are the server's own settings, so a paper setting that needs them is configured on the server.
"""

from __future__ import annotations

import io
import wave
from typing import Any

import numpy as np

from vidagent.models.base import Segment, TranscribeRequest, Transcript, Word


def wav_bytes(audio: np.ndarray, rate: int = 16000) -> bytes:
    """``audio`` (S,) float32 in [-1, 1] as a 16-bit mono WAV file."""
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return out.getvalue()


def transcription_form(model: str, request: TranscribeRequest) -> dict[str, Any]:
    """The multipart form fields besides the file."""
    form: dict[str, Any] = {
        "model": model,
        "response_format": "verbose_json",
        "timestamp_granularities[]": ["segment", "word"],
    }
    if request.language:
        form["language"] = request.language
    if request.decoding.temperature is not None:
        form["temperature"] = str(request.decoding.temperature)
    return form


def parse_transcription(body: dict[str, Any]) -> Transcript:
    """A ``verbose_json`` body as a transcript; words go to the segment whose span holds them.

    Raises:
        KeyError, TypeError, ValueError: the body lacks what the protocol promises (the adapter
            reports it as a malformed response).
    """
    words = [
        (float(w["start"]), float(w["end"]), str(w["word"]).strip())
        for w in body.get("words") or ()
    ]
    raw = body.get("segments")
    if raw is None:  # a server that answers with the text only: one segment
        text = str(body["text"]).strip()
        end = max((w[1] for w in words), default=float(body.get("duration") or 0.0))
        raw = [{"start": 0.0, "end": end, "text": text}] if text else []
    segments = []
    for s in raw:
        t0, t1 = float(s["start"]), float(s["end"])
        inside = tuple(Word(a, b, w, 1.0) for a, b, w in words if t0 <= (a + b) / 2 <= t1)
        segments.append(Segment(t0, t1, str(s["text"]).strip(), inside))
    return Transcript(language=str(body.get("language") or ""), segments=tuple(segments))
