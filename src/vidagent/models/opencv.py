"""Embedded detector: OpenCV's HOG people detector and Haar frontal-face cascade.

``opencv:hog+haar`` finds ``person`` (HOG, Dalal-Triggs SVM) and ``face`` (Haar cascade);
``opencv:hog`` or ``opencv:haar`` run one of them. Frames wider than ``max_width`` (default 800)
are downscaled first for speed and boxes mapped back; ``workers`` (default: one per core this
process may use, :func:`~vidagent.models.registry.cpu_share`) frames are searched at once, each
thread with its own detectors: 60 generated 640x360 frames took 5.4 s and 10.7 CPU seconds
that way, 6.3 s and 12.3 CPU seconds one frame at a time on OpenCV's 2 threads (2 cores), with
the same detections. HOG finds people taller than ~128 px at
the working scale; small, distant people are missed, which is the price of running offline on a
CPU. Open-vocabulary detectors need weights this package cannot ship.

A frame smaller than HOG's 64x128 window (:data:`HOG_WINDOW`) is scaled up until the window
fits: OpenCV 4.14's ``detectMultiScale`` corrupts memory on a picture smaller than it (a
160x96 video killed the process with a segmentation fault), and could find no one there anyway.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import ConfigError
from vidagent.models.base import Adapter, BackendStatus, Box, Capabilities, Detection
from vidagent.models.registry import cpu_share

if TYPE_CHECKING:
    from vidagent.config import Settings

KINDS = {"hog": "person", "haar": "face"}
#: HOG's people window, width and height in pixels (module docstring).
HOG_WINDOW = (64, 128)


def _kinds(model: str) -> tuple[str, ...]:
    kinds = tuple(k for k in model.split("+") if k)
    bad = [k for k in kinds if k not in KINDS]
    if not kinds or bad:
        raise ConfigError(f"opencv detector {model!r}: use hog, haar or hog+haar")
    return kinds


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    try:
        _kinds(model)
    except ConfigError as e:
        return BackendStatus(model, False, str(e))
    return BackendStatus(
        model, True, "OpenCV " + " + ".join(f"{k} ({KINDS[k]})" for k in _kinds(model))
    )


class OpenCVDetector(Adapter):
    """People and faces on RGB frames."""

    provider = "opencv"
    capabilities = Capabilities(roles=frozenset({"detector"}), local=True)

    def __init__(self, model: str = "hog+haar", options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        self.kinds = _kinds(model)
        labels = frozenset(KINDS[k] for k in self.kinds)
        self.capabilities = dataclasses.replace(
            type(self).capabilities,
            vocabulary=labels,
            margin_labels=labels & {"person"},  # HOG margins; Haar faces come squashed already
        )
        self.max_width = self.number("max_width", 800, minimum=1)
        self.min_score = self.number("min_score", 0.3, minimum=float("-inf"), whole=False)
        self._local = threading.local()  # cv2 detectors are not safe to share across threads
        self.workers = self.number("workers", cpu_share(), minimum=1)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> OpenCVDetector:
        return cls(model, options)

    def _models(self) -> tuple[Any, Any]:
        if not hasattr(self._local, "hog"):
            import cv2

            # OpenCV's type stubs miss both names below; they exist at run time.
            people = cv2.HOGDescriptor_getDefaultPeopleDetector()  # type: ignore[attr-defined]
            cascades = cv2.data.haarcascades  # type: ignore[attr-defined]
            hog = cv2.HOGDescriptor()
            hog.setSVMDetector(people)
            haar = cv2.CascadeClassifier(cascades + "haarcascade_frontalface_default.xml")
            self._local.hog, self._local.haar = hog, haar
        return self._local.hog, self._local.haar

    def detect(
        self, images: list[np.ndarray], labels: Sequence[str] | None = None
    ) -> list[list[Detection]]:
        # A closed vocabulary: ``labels`` are not needed, callers keep the classes they want.
        if self.workers == 1 or len(images) < 2:
            return [self._detect_one(rgb) for rgb in images]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="detect")
            pool = self._pool
        return list(pool.map(self._detect_one, images))

    def close(self) -> None:
        """Stop the search threads (a later call starts them again)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _detect_one(self, rgb: np.ndarray) -> list[Detection]:
        import cv2

        height, width = rgb.shape[:2]
        scale = min(1.0, self.max_width / width)
        if height * scale < HOG_WINDOW[1] or width * scale < HOG_WINDOW[0]:
            # shrunk less, or grown: the window must fit (module docstring)
            scale = max(HOG_WINDOW[1] / height, HOG_WINDOW[0] / width)
        if scale != 1.0:
            # rounded sizes never below the window, whichever way the frame was scaled
            size = (
                max(HOG_WINDOW[0], round(width * scale)),
                max(HOG_WINDOW[1], round(height * scale)),
            )
            shrink = cv2.INTER_AREA if scale < 1.0 else cv2.INTER_LINEAR
            rgb = cv2.resize(rgb, size, interpolation=shrink)
        gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)  # (H, W) uint8
        hog, haar = self._models()
        found: list[Detection] = []
        if "hog" in self.kinds:
            found += self._people(hog, gray, scale)
        if "haar" in self.kinds:
            found += self._faces(haar, gray, scale)
        return found

    def _people(self, hog: Any, gray: np.ndarray, scale: float) -> list[Detection]:
        import cv2

        rects, weights = hog.detectMultiScale(gray, winStride=(8, 8), padding=(8, 8), scale=1.05)
        if len(rects) == 0:
            return []
        scores = np.asarray(weights, dtype=np.float32).reshape(-1)
        keep = cv2.dnn.NMSBoxes(
            [list(map(int, r)) for r in rects], scores.tolist(), self.min_score, 0.4
        )
        return [
            Detection("person", _box(rects[i], scale), float(scores[i]))
            for i in np.asarray(keep).reshape(-1)
        ]

    def _faces(self, haar: Any, gray: np.ndarray, scale: float) -> list[Detection]:
        rects, _, weights = haar.detectMultiScale3(
            gray, scaleFactor=1.1, minNeighbors=5, minSize=(24, 24), outputRejectLevels=True
        )
        # Haar level weights are unbounded margins; squash them to (0, 1) for a comparable score.
        return [
            Detection("face", _box(r, scale), float(1.0 / (1.0 + np.exp(-float(w)))))
            for r, w in zip(rects, np.asarray(weights).reshape(-1), strict=False)
        ]


def _box(rect: Any, scale: float) -> Box:
    x, y, w, h = (float(v) / scale for v in rect)
    return (x, y, x + w, y + h)
