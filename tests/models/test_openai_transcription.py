"""The ``asr`` role over an OpenAI-compatible ``/audio/transcriptions`` endpoint.

The server is a real one on loopback that serves the bundled Whisper (faster-whisper tiny.en)
behind the protocol, as speaches or faster-whisper-server would: the adapter's WAV upload,
form fields and ``verbose_json`` parsing are checked against a real transcription of the
narrated clip.
"""

from __future__ import annotations

import io
import threading
import wave
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from liveserver import serve

from vidagent.exceptions import MalformedResponseError
from vidagent.models.base import Decoding, TranscribeRequest
from vidagent.models.openai import OpenAIAdapter

pytest.importorskip("fastapi", reason="the serve extra runs the loopback endpoint")
from fastapi import FastAPI, Request

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def whisper_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``(base_url, forms)``: a transcription endpoint over the bundled Whisper; each request's
    form fields are recorded."""
    from vidagent.models.whisper import FasterWhisperAdapter

    whisper = FasterWhisperAdapter("tiny.en")
    forms: list[dict[str, Any]] = []
    lock = threading.Lock()
    app = FastAPI()

    @app.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request) -> dict[str, Any]:
        async with request.form() as form:  # closes the upload's temporary file
            fields = {k: form.getlist(k) for k in form if k != "file"}
            data = await form["file"].read()  # type: ignore[union-attr]
        with wave.open(io.BytesIO(data)) as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
            pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        with lock:
            forms.append(fields)
            if fields.get("model") == ["broken"]:
                return {"segments": [{"start": 0.0}]}
            t = whisper.transcribe(TranscribeRequest(pcm.astype(np.float32) / 32767.0))
        return {
            "language": t.language,
            "text": t.text,
            "segments": [{"start": s.t0, "end": s.t1, "text": s.text} for s in t.segments],
            "words": [
                {"start": w.t0, "end": w.t1, "word": w.text} for s in t.segments for w in s.words
            ],
        }

    live = serve(app)
    yield f"{live.url}/v1", forms
    live.stop()


@pytest.mark.realmedia
def test_a_served_whisper_transcribes_the_narrated_clip(
    whisper_server: tuple[str, list[dict[str, Any]]],
) -> None:
    from realmedia import get_clip

    from vidagent.media import extract_audio

    base_url, forms = whisper_server
    audio = extract_audio(get_clip("wannaworktogether.mp4"), 16000)[: 16000 * 30]
    adapter = OpenAIAdapter("whisper-tiny", base_url=base_url)
    request = TranscribeRequest(audio, language="en", decoding=Decoding(temperature=0.0))
    transcript = adapter.transcribe(request)
    adapter.close()  # its connection, else a ResourceWarning when it is collected

    words = " ".join(s.text for s in transcript.segments).lower()
    assert "creativity" in words and "inspired" in words
    assert all(0.0 <= s.t0 < s.t1 <= 30.5 for s in transcript.segments)
    assert sum(len(s.words) for s in transcript.segments) >= 10  # word times came back
    assert forms[-1] == {
        "model": ["whisper-tiny"],
        "response_format": ["verbose_json"],
        "timestamp_granularities[]": ["segment", "word"],
        "language": ["en"],
        "temperature": ["0.0"],
    }


def test_a_body_without_the_promised_fields_is_a_malformed_response(
    whisper_server: tuple[str, list[dict[str, Any]]],
) -> None:
    base_url, _ = whisper_server
    adapter = OpenAIAdapter("broken", base_url=base_url)
    with pytest.raises(MalformedResponseError, match="unexpected transcription body"):
        adapter.transcribe(TranscribeRequest(np.zeros(16000, np.float32)))
    adapter.close()
