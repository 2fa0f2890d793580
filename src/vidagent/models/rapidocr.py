"""Embedded OCR: RapidOCR with the PP-OCR ONNX models it ships, on the CPU.

``rapidocr:pp-ocr`` is the only model name. Options: ``min_score`` (default 0.5) drops low
confidence lines; ``max_side`` (default 960) is the longest side text detection works at;
``workers`` (default: one per core this process may use, see
:func:`~vidagent.models.registry.cpu_share`) how many frames are read at once, each by its own
engine; ``threads`` (default 1; 0 leaves onnxruntime's choice, one per core) the threads of
each engine. A video frame is too small for onnxruntime's threads to share well: on 2 idle
cores, 91 frames of the narrated 480x352 clip took 21.0 s with one engine of one thread,
16.4 s with one engine of two (32 CPU seconds), and 11.2 s with two engines of one thread
each reading different frames (21 CPU seconds); beside the other ingest stages they take
whatever core those leave free.
Lines with fewer than two letters or digits are dropped: on textured video frames PP-OCR reads
lone dots and single glyphs out of noise far more often than it finds one-character signs.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import BackendMissingError
from vidagent.models.base import Adapter, BackendStatus, Capabilities, TextLine
from vidagent.models.registry import cpu_share, module_available

if TYPE_CHECKING:
    from vidagent.config import Settings


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("rapidocr") or not module_available("onnxruntime"):
        return BackendStatus(model, False, "rapidocr missing: pip install 'vidagent[ocr]'")
    return BackendStatus(model, True, "rapidocr, bundled PP-OCR models")


class RapidOCRAdapter(Adapter):
    """Text lines with boxes from RGB frames."""

    provider = "rapidocr"
    capabilities = Capabilities(roles=frozenset({"ocr"}), local=True)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        self.max_side = self.number("max_side", 960, minimum=32)
        self.min_score = self.number("min_score", 0.5, whole=False)
        self.workers = self.number("workers", cpu_share(), minimum=1)
        self.threads = self.number("threads", 1)
        self._engines: queue.SimpleQueue[Any] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> RapidOCRAdapter:
        return cls(model, options)

    def _load(self) -> tuple[queue.SimpleQueue[Any], ThreadPoolExecutor]:
        with self._lock:
            if self._engines is None or self._pool is None:
                try:
                    from rapidocr import RapidOCR
                except ImportError:
                    raise BackendMissingError("rapidocr", "ocr") from None
                # By default RapidOCR scales every frame up until its short side is 736 px;
                # capping the long side at 960 instead read the same text 2-4x faster on video
                # frames. It also logs each model load and every frame without text: errors only.
                params = {
                    "Global.log_level": "error",
                    "Det.limit_type": "max",
                    "Det.limit_side_len": self.max_side,
                    "EngineConfig.onnxruntime.intra_op_num_threads": self.threads,
                }
                engines: queue.SimpleQueue[Any] = queue.SimpleQueue()
                for _ in range(self.workers):
                    engines.put(RapidOCR(params=params))
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="ocr")
                self._engines = engines
            return self._engines, self._pool

    def _read(self, bgr: np.ndarray) -> list[TextLine]:
        engines, _ = self._load()
        engine = engines.get()  # a free engine: each reads one frame at a time
        try:
            result = engine(bgr)
        finally:
            engines.put(engine)
        lines = []
        for box, text, score in zip(
            result.boxes if result.boxes is not None else [], result.txts or (), result.scores or ()
        ):
            if score < self.min_score or sum(ch.isalnum() for ch in text) < 2:
                continue
            pts = np.asarray(box, dtype=np.float32)  # (4, 2) corners
            x0, y0 = pts.min(axis=0)
            x1, y1 = pts.max(axis=0)
            lines.append(
                TextLine(text.strip(), (float(x0), float(y0), float(x1), float(y1)), float(score))
            )
        return lines

    def read_text(self, images: list[np.ndarray]) -> list[list[TextLine]]:
        """Lines per image (each (H, W, 3) uint8 RGB), in order; frames are read in parallel."""
        _, pool = self._load()
        bgr = [np.ascontiguousarray(rgb[:, :, ::-1]) for rgb in images]  # RapidOCR expects BGR
        return list(pool.map(self._read, bgr))

    def close(self) -> None:
        """Stop the reading threads and drop the engines (a later call loads them again)."""
        with self._lock:
            pool, self._pool, self._engines = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=True)
