"""Embedded OCR: RapidOCR with the PP-OCR ONNX models it ships, on the CPU.

``rapidocr:pp-ocr`` is the only model name. Options: ``min_score`` (default 0.5) drops low
confidence lines; ``max_side`` (default 960) is the longest side text detection works at;
``workers`` (default: one per core this process may use, see
:func:`~vidagent.models.registry.cpu_share`) how many frames are read at once, each by its own
engine; ``threads`` (default 1; 0 leaves the runtime's choice, one per core) the threads of
each engine. A video frame is too small for an engine's threads to share well: on 2 idle
cores, 91 frames of the narrated 480x352 clip took 21.0 s with one onnxruntime engine of one
thread, 16.4 s with one engine of two (32 CPU seconds), and 11.2 s with two engines of one
thread each reading different frames (21 CPU seconds); beside the other ingest stages they
take whatever core those leave free. ``runtime`` (default ``auto``)
runs the same bundled ONNX models with OpenVINO where it is installed (it is part of
``vidagent[ocr]``), otherwise with onnxruntime; ``runtime=openvino`` or
``runtime=onnxruntime`` forces one. OpenVINO is made to compute in float32: on CPUs with
bfloat16 units it otherwise computes in bfloat16 and reads different lines (it lost a "Yes"
on the narrated clip). In float32 it read exactly onnxruntime's lines from all 91 frames in
11.5 CPU seconds against 23.7 (one engine of one thread each). On OpenVINO the engines after
the first share its compiled models, each with infer requests of its own (loading two engines:
1.9 CPU seconds instead of 3.1).
OpenVINO's Python package sends a usage event to Google Analytics from a forked process each
time it is imported, unless a consent file says no; the adapter makes its telemetry module
unimportable first, so that OpenVINO falls back to its own no-op stub: an offline tool sends
nothing, and no process is forked beside LanceDB's runtime (which warned about the fork).
Lines with fewer than two letters or digits are dropped: on textured video frames PP-OCR reads
lone dots and single glyphs out of noise far more often than it finds one-character signs.
"""

from __future__ import annotations

import copy
import queue
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import BackendMissingError, ConfigError, ProviderError, describe
from vidagent.models.base import Adapter, BackendStatus, Capabilities, TextLine
from vidagent.models.registry import cpu_share, module_available, without_openvino_telemetry

if TYPE_CHECKING:
    from vidagent.config import Settings


#: Where the ONNX models run: ``auto`` takes OpenVINO when it is installed.
RUNTIMES = ("auto", "openvino", "onnxruntime")
#: The one model name: the PP-OCR models the package ships
MODEL = "pp-ocr"


def _unknown(model: str) -> str:
    return f"rapidocr model {model!r}: the bundled PP-OCR models are rapidocr:{MODEL}"


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if model != MODEL:
        return BackendStatus(model, False, _unknown(model))
    if not module_available("rapidocr") or not module_available("onnxruntime"):
        return BackendStatus(model, False, "rapidocr missing: pip install 'vidagent[ocr]'")
    runtime = "openvino" if module_available("openvino") else "onnxruntime"
    return BackendStatus(model, True, f"rapidocr, bundled PP-OCR models on {runtime}")


class RapidOCRAdapter(Adapter):
    """Text lines with boxes from RGB frames."""

    provider = "rapidocr"
    #: Two reads at once share the engines: the frames of one start while the last of the
    #: other is still being read (read_text keeps a read ahead of the clips it stores).
    capabilities = Capabilities(roles=frozenset({"ocr"}), local=True, concurrency=2)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        if model != MODEL:  # any other name read the same models, stored under that name
            raise ConfigError(_unknown(model))
        self.max_side = self.number("max_side", 960, minimum=32)
        self.min_score = self.number("min_score", 0.5, whole=False)
        self.workers = self.number("workers", cpu_share(), minimum=1)
        self.threads = self.number("threads", 1)
        self.runtime = self.options.get("runtime", "auto")
        if self.runtime not in RUNTIMES:
            raise ConfigError(
                f"{self.spec}: runtime must be one of {', '.join(RUNTIMES)}, not {self.runtime!r}"
            )
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
                    with _lean_model_table():
                        from rapidocr import EngineType, RapidOCR
                except ImportError:
                    raise BackendMissingError("rapidocr", "ocr") from None
                # By default RapidOCR scales every frame up until its short side is 736 px;
                # capping the long side at 960 instead read the same text 2-4x faster on video
                # frames. It also logs each model load and every frame without text: errors only.
                params: dict[str, Any] = {
                    "Global.log_level": "error",
                    "Det.limit_type": "max",
                    "Det.limit_side_len": self.max_side,
                    "EngineConfig.onnxruntime.intra_op_num_threads": self.threads,
                }
                openvino = self._openvino()
                if openvino:
                    _openvino_in_float32()
                    params["EngineConfig.openvino.inference_num_threads"] = self.threads or -1
                    # OpenVINO pins its threads to cores by default: engines reading at once
                    # would all run on the first core.
                    params["EngineConfig.openvino.enable_cpu_pinning"] = False
                    for part in ("Det", "Cls", "Rec"):
                        params[f"{part}.engine_type"] = EngineType.OPENVINO
                engines: queue.SimpleQueue[Any] = queue.SimpleQueue()
                sample = _sample_line()
                first = None
                for _ in range(self.workers):
                    engine = RapidOCR(params=params) if first is None else _twin(first)
                    # Each engine loads its models and reads once here, one at a time, before
                    # frames are read in parallel: OpenVINO's Python binding initialises a
                    # static on its first read of a tensor, and two threads doing that at once
                    # under the GIL deadlock (a hung ingest; 1 of 6 fresh processes reading with
                    # four engines beside a busy Python thread hung without this, 0 of 6 with).
                    try:
                        engine(sample)
                    except RuntimeError as e:  # a runtime that cannot run on this machine
                        other = "onnxruntime" if openvino else "openvino"
                        raise ProviderError(
                            f"the OCR engine failed to load ({describe(e)}); try runtime={other}",
                            endpoint=self.spec,
                        ) from None
                    engines.put(engine)
                    if openvino and first is None:
                        first = engine
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="ocr")
                self._engines = engines
            return self._engines, self._pool

    def _openvino(self) -> bool:
        if self.runtime == "onnxruntime":
            return False
        without_openvino_telemetry()
        if module_available("openvino") and _float32_seam() is not None:
            return True
        if self.runtime == "openvino":
            raise BackendMissingError("openvino (with rapidocr>=3.10)", "ocr")
        return False

    def _read(self, bgr: np.ndarray) -> list[TextLine]:
        engines, _ = self._load()
        engine = engines.get()  # a free engine: each reads one frame at a time
        try:
            result = engine(bgr)
        finally:
            engines.put(engine)
        lines = []
        for box, text, score in zip(
            result.boxes if result.boxes is not None else [],
            result.txts or (),
            result.scores or (),
            strict=False,
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


def _twin(engine: Any) -> Any:
    """Another engine on ``engine``'s compiled OpenVINO models, with infer requests of its own
    (a request serves one read at a time; a compiled model serves several requests at once).

    Compiling PP-OCR's three models again for each engine cost 1.35 CPU seconds of a 2-core
    ingest. The twin shares the rest of ``engine`` too, all of it read-only while reading except
    the detector's per-frame preprocessing, which is set on each model object: those are copied.
    """
    twin = copy.copy(engine)
    for part in ("text_det", "text_cls", "text_rec"):
        model = getattr(engine, part, None)
        if model is None:  # not loaded yet: the twin loads its own
            continue
        model = copy.copy(model)
        model.session = copy.copy(model.session)
        model.session.session = model.session.session.get_compiled_model().create_infer_request()
        setattr(twin, part, model)
    return twin


def _sample_line() -> np.ndarray:
    """A small BGR image of one printed line, for the engines' first read."""
    import cv2

    image = np.full((64, 256, 3), 255, np.uint8)  # (H, W, 3) BGR
    cv2.putText(image, "OCR 42", (20, 45), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (0, 0, 0), 2)
    return image


#: Engines in RapidOCR's table of downloadable models that this adapter never runs.
_UNUSED_ENGINES = frozenset({"mnn", "paddle", "torch"})


@contextmanager
def _lean_model_table() -> Iterator[None]:
    """While RapidOCR is imported, parse its table of downloadable models once, without the
    engines this adapter never runs. Its import builds an OmegaConf tree of the whole table
    (``default_models.yaml``, 85 KB) twice, in two modules: 0.46 of the 0.75 CPU seconds the
    import took. Only that file is read differently; a process that imported RapidOCR already
    is left alone."""
    if "rapidocr.inference_engine.base" in sys.modules or not module_available("omegaconf"):
        yield
        return
    import yaml
    from omegaconf import OmegaConf

    original = OmegaConf.__dict__["load"]  # the staticmethod itself, to put back as it was
    parsed: dict[str, Any] = {}

    def load(file: Any) -> Any:
        if not isinstance(file, (str, Path)) or Path(file).name != "default_models.yaml":
            return original.__func__(file)
        if "table" not in parsed:
            table = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
            kept = {k: v for k, v in table.items() if k not in _UNUSED_ENGINES}
            parsed["table"] = OmegaConf.create(kept)
        return parsed["table"]

    OmegaConf.load = staticmethod(load)  # type: ignore[assignment,method-assign]
    try:
        yield
    finally:
        OmegaConf.load = original  # type: ignore[method-assign]


def _float32_seam() -> Any:
    """RapidOCR's module that builds OpenVINO sessions, where it takes their CPU options from
    ``CPUConfig``; None when this rapidocr has no such seam (then onnxruntime reads)."""
    try:
        from rapidocr.inference_engine.openvino import main
    except ImportError:
        return None
    return main if hasattr(getattr(main, "CPUConfig", None), "get_config") else None


def _openvino_in_float32() -> None:
    """Add ``INFERENCE_PRECISION_HINT=f32`` to the CPU options of every OpenVINO session
    RapidOCR builds from now on. Its options have no key for the precision, and OpenVINO's
    default on CPUs with bfloat16 units is bfloat16, which changes the lines read."""
    main = _float32_seam()
    if main is None or getattr(main.CPUConfig, "float32", False):
        return

    class Float32Config(main.CPUConfig):  # type: ignore[name-defined,misc]
        float32 = True

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "INFERENCE_PRECISION_HINT": "f32"}

    main.CPUConfig = Float32Config
