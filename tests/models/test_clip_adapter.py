"""The ``clip:<dir>`` image-text embedder (the ``image_embed`` role), on tiny random models.

Built by :func:`clipkit.build_clip` and loaded back through the registry as a user's directory
would be. What is checked is what a user (and EEA's frame retriever) would notice: texts and
frames come out as unit float32 rows of one length, the same input always gives the same
vector whatever else is in its batch, different inputs differ, and errors say what to fix.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from clipkit import build_clip

from vidagent.config import load_settings
from vidagent.exceptions import BackendMissingError, ConfigError
from vidagent.models.base import EmbedRequest
from vidagent.models.client import Models
from vidagent.models.clip import ClipEmbedder
from vidagent.models.registry import backend_status, create_adapter

pytest.importorskip("torch")
pytest.importorskip("transformers")

RNG = np.random.default_rng(0)
NOISE = RNG.integers(0, 256, (90, 160, 3), dtype=np.uint8)  # (H, W, 3): any size goes in
GRADIENT = np.broadcast_to(np.linspace(0, 255, 64, dtype=np.uint8)[None, :, None], (48, 64, 3))
TEXTS = ["a red mug", "a cat", "a dog asleep on a long striped mat"]


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_clip(tmp_path_factory.mktemp("clip"))


@pytest.fixture(scope="module")
def tiny_siglip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_clip(tmp_path_factory.mktemp("siglip"), kind="siglip", dim=12)


def embedder(path: Path | str, **options: str) -> ClipEmbedder:
    query = "&".join(f"{k}={v}" for k, v in options.items())
    adapter = create_adapter(f"clip:{path}?{query}", load_settings({"cache": "off"}), "image_embed")
    assert isinstance(adapter, ClipEmbedder)
    return adapter


def unit_rows(vectors: np.ndarray) -> bool:
    return vectors.dtype == np.float32 and np.allclose(
        np.linalg.norm(vectors, axis=1), 1, atol=1e-5
    )


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_texts_and_frames_are_unit_rows_of_one_length(
    kind: str, tiny_clip: Path, tiny_siglip: Path
) -> None:
    model = embedder(tiny_clip if kind == "clip" else tiny_siglip)
    texts = model.embed(EmbedRequest(tuple(TEXTS))).vectors
    frames = model.embed_images([NOISE, GRADIENT])
    dim = 8 if kind == "clip" else 12
    assert texts.shape == (3, dim) and frames.shape == (2, dim)
    assert unit_rows(texts) and unit_rows(frames)
    assert model.dimension == dim
    assert model.embed(EmbedRequest(())).vectors.shape == (0, dim)
    assert model.embed_images([]).shape == (0, dim)


def test_the_same_input_gives_the_same_vector_and_different_ones_differ(tiny_clip: Path) -> None:
    model = embedder(tiny_clip)
    frames = model.embed_images([NOISE, GRADIENT, NOISE])
    assert np.allclose(frames[0], frames[2], atol=1e-6)  # twice in one batch
    assert np.allclose(model.embed_images([NOISE])[0], frames[0], atol=1e-5)  # alone, later
    assert float(frames[0] @ frames[1]) < 0.999
    texts = model.embed(EmbedRequest(tuple(TEXTS))).vectors
    for i, text in enumerate(TEXTS):  # padding to the batch's longest text changes nothing
        assert np.allclose(model.embed(EmbedRequest((text,))).vectors[0], texts[i], atol=1e-5)
    assert float(texts[0] @ texts[1]) < 0.999 and float(texts[1] @ texts[2]) < 0.999


def test_batch_size_changes_only_the_passes(tiny_clip: Path) -> None:
    one = embedder(tiny_clip, batch_size="1")
    default = embedder(tiny_clip)
    assert np.allclose(
        one.embed_images([NOISE, GRADIENT]), default.embed_images([NOISE, GRADIENT]), atol=1e-5
    )
    texts = EmbedRequest(tuple(TEXTS))
    assert np.allclose(one.embed(texts).vectors, default.embed(texts).vectors, atol=1e-5)
    assert one.embed(texts).usage.input_tokens == default.embed(texts).usage.input_tokens > 0


def test_the_role_through_the_model_hub(tiny_clip: Path) -> None:
    settings = load_settings({"cache": "off", "image_embed": f"clip:{tiny_clip}"})
    client = Models(settings).client("image_embed")
    assert client.spec == f"clip:{tiny_clip}"
    query = client.embed(["a cat"]).vectors  # (1, D)
    frames = client.embed_images([NOISE, GRADIENT])  # (2, D)
    assert query.shape[1] == frames.shape[1] and (frames @ query[0]).shape == (2,)


# ---------------------------------------------------------------------------------------------
# Specs and errors


def test_spec_errors_say_what_to_fix(tmp_path: Path, tiny_clip: Path) -> None:
    settings = load_settings({"cache": "off"})
    with pytest.raises(ConfigError, match="no such directory; .*--local-dir DIR"):
        create_adapter(f"clip:{tmp_path / 'nowhere'}", settings, "image_embed")
    with pytest.raises(ConfigError, match=r"not a model directory \(no config.json\)"):
        create_adapter(f"clip:{tmp_path}", settings, "image_embed")
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(
        ConfigError, match="'bert' model; image-text models supported: clip, siglip"
    ):
        create_adapter(f"clip:{tmp_path / 'bert'}", settings, "image_embed")
    with pytest.raises(ConfigError, match="cannot fill role 'embed'"):
        create_adapter(f"clip:{tiny_clip}", settings, "embed")
    with pytest.raises(ConfigError, match="option batch_size must be a whole number"):
        embedder(tiny_clip, batch_size="many")


def test_status_says_local_or_hub(tmp_path: Path, tiny_clip: Path) -> None:
    settings = load_settings({"cache": "off"})
    local = backend_status(f"clip:{tiny_clip}", settings, "image_embed")
    assert local.usable and local.detail == "transformers image-text embeddings (clip), local"
    hub = backend_status("clip:openai/clip-vit-base-patch32", settings, "image_embed")
    assert hub.usable and "hub name" in hub.detail
    missing = backend_status(f"clip:{tmp_path / 'nowhere'}", settings, "image_embed")
    assert not missing.usable and "no such directory" in missing.detail


def test_a_hub_name_offline_is_a_config_error_on_first_use() -> None:
    model = embedder("vidagent-tests/no-such-clip")  # a hub name builds: it may be downloadable
    with pytest.raises(ConfigError, match="cannot load the model and its processor.*--local-dir"):
        model.embed_images([NOISE])


def test_missing_transformers_names_the_extra(
    tiny_clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = embedder(tiny_clip)  # built without importing transformers: weights load on use
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(BackendMissingError, match=r"pip install 'vidagent\[image-embed\]'"):
        model.embed_images([NOISE])


def test_a_directory_without_the_processor_is_a_config_error(
    tmp_path: Path, tiny_clip: Path
) -> None:
    (tmp_path / "config.json").write_text((tiny_clip / "config.json").read_text())
    with pytest.raises(ConfigError, match="cannot load the model and its processor"):
        embedder(tmp_path).embed(EmbedRequest(("a cat",)))
