"""Speaker embeddings offline: Resemblyzer's voice encoder, from the weights its wheel ships.

The ``resemblyzer`` wheel carries ``pretrained.pt`` (17 MB), a GE2E speaker encoder (three LSTM
layers of 256 over 40 mel bands, a linear layer to 256, ReLU, L2 norm) trained on
VoxCeleb and LibriSpeech. Its own package cannot be imported here: ``resemblyzer/__init__``
imports ``webrtcvad``, whose module imports ``pkg_resources``, gone from setuptools since 81. So
this module finds the weights without importing the package and runs the same network and the
same features (mel power spectrogram, 25 ms Hann windows every 10 ms, centred and zero-padded,
Slaney mel filters from librosa, a Resemblyzer dependency) on 1.6 s partials — Resemblyzer's
``partials_n_frames`` — so its embeddings match ``VoiceEncoder.embed_utterance`` of one
partial. Each window's loudness is set to -30 dBFS first, as ``preprocess_wav`` does.

torch is imported on first use only (``vidagent --help`` stays light).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from vidagent.exceptions import BackendMissingError
from vidagent.models.registry import package_path

SAMPLE_RATE = 16000
#: One partial utterance: 160 mel frames of 10 ms (Resemblyzer's ``partials_n_frames``).
PARTIAL_SECONDS = 1.6
_FRAMES = 160
_N_FFT = 400  # 25 ms
_HOP = 160  # 10 ms
_MELS = 40
_TARGET_DBFS = -30.0
_BATCH = 32


def weights_path() -> Path | None:
    """Where the bundled weights are, or None when ``resemblyzer`` is not installed."""
    return package_path("resemblyzer", "pretrained.pt")


def available() -> bool:
    """Whether the voice encoder can run here (its weights and torch are installed)."""
    from vidagent.models.registry import module_available

    return weights_path() is not None and module_available("torch")


class VoiceEncoder:
    """Embeds windows of 16 kHz mono speech as unit vectors. Loading takes about 0.1 s after
    torch's import, so the speakers stage makes one per run. Thread-safe: one forward pass at
    a time.

    Raises:
        BackendMissingError: ``resemblyzer`` (its weights) or torch is not installed.
    """

    def __init__(self) -> None:
        path = weights_path()
        if path is None or not available():
            raise BackendMissingError("the voice encoder (resemblyzer)", "speakers")
        from vidagent.models.cpu import quiet_openmp

        quiet_openmp()  # before torch loads its OpenMP runtime, as the other adapters do
        import librosa
        import torch
        from torch import nn

        class _Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lstm = nn.LSTM(_MELS, 256, 3, batch_first=True)
                self.linear = nn.Linear(256, 256)

            def forward(self, mels: Any) -> Any:
                _, (hidden, _) = self.lstm(mels)
                raw = torch.relu(self.linear(hidden[-1]))
                return raw / torch.norm(raw, dim=1, keepdim=True).clamp_min(1e-8)

        self._torch = torch
        self._net = _Net()
        state = torch.load(path, map_location="cpu", weights_only=True)["model_state"]
        # The checkpoint also holds GE2E's similarity scale and bias, used only in training.
        self._net.load_state_dict(state, strict=False)
        self._net.eval()
        self._filters = librosa.filters.mel(sr=SAMPLE_RATE, n_fft=_N_FFT, n_mels=_MELS).astype(
            np.float32
        )  # (40, 201)
        self._window = np.hanning(_N_FFT + 1)[:-1].astype(np.float32)  # periodic Hann
        self._lock = threading.Lock()

    def mel(self, wav: np.ndarray) -> np.ndarray:
        """The encoder's features of one partial: (160, 40) float32, zero-padded or cut."""
        wav = _normalised(wav[: round(PARTIAL_SECONDS * SAMPLE_RATE)])
        padded = np.pad(wav, (_N_FFT // 2, _N_FFT // 2))
        n = 1 + (len(padded) - _N_FFT) // _HOP
        index = np.arange(_N_FFT)[None, :] + _HOP * np.arange(n)[:, None]  # (n, 400)
        power = np.abs(np.fft.rfft(padded[index] * self._window, axis=1)) ** 2  # (n, 201)
        mel = (power @ self._filters.T).astype(np.float32)[:_FRAMES]  # (<=160, 40)
        return np.pad(mel, ((0, _FRAMES - len(mel)), (0, 0)))

    def embed(self, windows: list[np.ndarray]) -> np.ndarray:
        """One unit vector per window (the first 1.6 s of each; shorter ones are zero-padded,
        as Resemblyzer pads).

        Returns:
            (N, 256) float32.
        """
        if not windows:
            return np.zeros((0, 256), np.float32)
        from vidagent.models.cpu import torch_threads

        mels = np.stack([self.mel(w) for w in windows])  # (N, 160, 40)
        out = []
        torch_threads()  # the cores free now (ingest runs stages side by side)
        with self._lock, self._torch.no_grad():
            for i in range(0, len(mels), _BATCH):
                batch = self._torch.from_numpy(mels[i : i + _BATCH])
                out.append(self._net(batch).numpy())
        return np.concatenate(out).astype(np.float32)


def _normalised(wav: np.ndarray) -> np.ndarray:
    """``wav`` scaled to -30 dBFS (silence is left as it is)."""
    wav = wav.astype(np.float32)
    rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2))) if wav.size else 0.0
    if rms < 1e-6:
        return wav
    return wav * (10 ** (_TARGET_DBFS / 20) / rms)
