"""Embedded OCR: RapidOCR with the PP-OCR ONNX models it ships, on the CPU.

``rapidocr:pp-ocr`` is the only model name. Options: ``min_score`` (default 0.5) drops low
confidence lines; ``max_side`` (default 960) is the longest side text detection works at.
Lines with fewer than two letters or digits are dropped: on textured video frames PP-OCR reads
lone dots and single glyphs out of noise far more often than it finds one-character signs.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import BackendMissingError
from vidagent.models.base import Adapter, BackendStatus, Capabilities, TextLine
from vidagent.models.registry import module_available

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
        self._engine: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> RapidOCRAdapter:
        return cls(model, options)

    def _load(self) -> Any:
        if self._engine is None:
            try:
                from rapidocr import RapidOCR
            except ImportError:
                raise BackendMissingError("rapidocr", "ocr") from None
            # By default RapidOCR scales every frame up until its short side is 736 px; capping
            # the long side at 960 instead read the same text 2-4x faster on video frames.
            # It also logs each model load and every frame without text: keep errors only.
            params = {
                "Global.log_level": "error",
                "Det.limit_type": "max",
                "Det.limit_side_len": int(self.options.get("max_side", 960)),
            }
            self._engine = RapidOCR(params=params)
        return self._engine

    def read_text(self, images: list[np.ndarray]) -> list[list[TextLine]]:
        min_score = float(self.options.get("min_score", 0.5))
        out = []
        with self._lock:
            engine = self._load()
            for rgb in images:  # each (H, W, 3) uint8 RGB
                result = engine(np.ascontiguousarray(rgb[:, :, ::-1]))  # RapidOCR expects BGR
                lines = []
                for box, text, score in zip(
                    result.boxes if result.boxes is not None else [],
                    result.txts or (),
                    result.scores or (),
                ):
                    if score < min_score or sum(ch.isalnum() for ch in text) < 2:
                        continue
                    pts = np.asarray(box, dtype=np.float32)  # (4, 2) corners
                    x0, y0 = pts.min(axis=0)
                    x1, y1 = pts.max(axis=0)
                    lines.append(
                        TextLine(
                            text.strip(), (float(x0), float(y0), float(x1), float(y1)), float(score)
                        )
                    )
                out.append(lines)
        return out
