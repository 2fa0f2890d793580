"""The ``transformers:<dir>`` open-vocabulary detector, on tiny random models built here.

No weights exist offline, so each test model is built from a tiny config with a tokenizer made
from a tiny vocabulary, saved with ``save_pretrained`` and loaded back through the registry as a
user's directory would be. Random weights say nothing about accuracy; what is checked is what a
user would notice: boxes in pixels of each frame, labels that are the names asked for, scores
in [0, 1], the threshold honoured, frames of different sizes in one batch, clear errors.
"""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path

import numpy as np
import pytest

from vidagent.config import load_settings
from vidagent.exceptions import BackendMissingError, ConfigError
from vidagent.library import Library, VideoRecord, content_id
from vidagent.media import probe
from vidagent.models.base import Detection
from vidagent.models.client import Models
from vidagent.models.registry import backend_status, create_adapter
from vidagent.models.transformers_detect import COCO, TransformersDetector
from vidagent.tools import ToolContext
from vidagent.tools.perception import detect_objects, track_object

pytest.importorskip("torch")
pytest.importorskip("transformers")

GRID = 4  # patches a side of the tiny OWL-ViT: 32 px images, 8 px patches
FRAMES = [np.zeros((60, 80, 3), np.uint8), np.full((100, 50, 3), 200, np.uint8)]  # (H, W, 3)
NAMES = ["red mug", "cat"]


def build_owl(path: Path, version: int = 1) -> Path:
    """A random OWL-ViT (or OWLv2) whose boxes are its patch grid: box head zeroed, so each box
    is the prior the model adds, a patch-sized box centred on a corner of its patch."""
    import torch
    import transformers as hf

    name = "OwlViT" if version == 1 else "Owlv2"
    # OWL-ViT takes a query whose first token id is 0 for padding, so letters come first.
    vocab: dict[str, int] = {}
    for ch in string.ascii_lowercase:
        vocab[ch], vocab[ch + "</w>"] = len(vocab), len(vocab) + 1
    bos, eos = len(vocab), len(vocab) + 1
    vocab.update({"<|startoftext|>": bos, "<|endoftext|>": eos})
    tokenizer = hf.CLIPTokenizer(vocab=vocab, merges=[], model_max_length=16)
    side = {"height": 32, "width": 32}
    images = getattr(hf, f"{name}ImageProcessor")(size=side, crop_size=side)
    torch.manual_seed(0)
    config = getattr(hf, f"{name}Config")(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 16,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "pad_token_id": eos,
        },
        vision_config={
            "image_size": 32,
            "patch_size": 32 // GRID,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        },
        projection_dim=16,
    )
    model = getattr(hf, f"{name}ForObjectDetection")(config).eval()
    with torch.no_grad():
        model.box_head.dense2.weight.zero_()
        model.box_head.dense2.bias.zero_()
    model.save_pretrained(path)
    getattr(hf, f"{name}Processor")(image_processor=images, tokenizer=tokenizer).save_pretrained(
        path
    )
    return path


def build_grounding_dino(path: Path) -> Path:
    """A random Grounding DINO with a BERT word-piece tokenizer over a few whole words."""
    import torch
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SwinConfig,
    )

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "red", "mug", "cat", "dog"]
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    images = GroundingDinoImageProcessor(size={"shortest_edge": 64, "longest_edge": 64})
    torch.manual_seed(0)
    config = GroundingDinoConfig(
        backbone_config=SwinConfig(
            image_size=64,
            patch_size=4,
            embed_dim=8,
            depths=[1, 1, 1, 1],
            num_heads=[1, 1, 1, 1],
            window_size=2,
            out_features=["stage2", "stage3", "stage4"],
        ),
        text_config=BertConfig(
            vocab_size=len(words),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        ),
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=12,
        max_text_len=8,  # room for 2 names a prompt: three names take two passes
        encoder_n_points=1,
        decoder_n_points=1,
    )
    GroundingDinoForObjectDetection(config).eval().save_pretrained(path)
    GroundingDinoProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def owlvit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_owl(tmp_path_factory.mktemp("owlvit"))


@pytest.fixture(scope="module")
def owlv2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_owl(tmp_path_factory.mktemp("owlv2"), version=2)


@pytest.fixture(scope="module")
def grounding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_grounding_dino(tmp_path_factory.mktemp("grounding-dino"))


def detector(path: Path, **options: str) -> TransformersDetector:
    query = "&".join(f"{k}={v}" for k, v in options.items())
    settings = load_settings({"cache": "off"})
    adapter = create_adapter(f"transformers:{path}?{query}", settings, "detector")
    assert isinstance(adapter, TransformersDetector)
    return adapter


def in_frame(found: list[list[Detection]]) -> bool:
    return all(
        0 <= d.box[0] < d.box[2] <= rgb.shape[1] and 0 <= d.box[1] < d.box[3] <= rgb.shape[0]
        for ds, rgb in zip(found, FRAMES, strict=False)
        for d in ds
    )


# ---------------------------------------------------------------------------------------------
# OWL-ViT


def grid_boxes(width: int, height: int, square: bool = False) -> set[tuple[float, ...]]:
    """The tiny OWL model's boxes in pixels of a width x height frame, clipped to it; OWLv2
    (``square``) sees the frame padded to a square at the bottom or right."""
    cells = [((k + 1) / GRID - 0.5 / GRID, (k + 1) / GRID + 0.5 / GRID) for k in range(GRID)]
    sx, sy = (max(width, height),) * 2 if square else (width, height)
    boxes = {(x0 * sx, y0 * sy, x1 * sx, y1 * sy) for x0, x1 in cells for y0, y1 in cells}
    clipped = {(x0, y0, min(x1, width), min(y1, height)) for x0, y0, x1, y1 in boxes}
    return {b for b in clipped if b[2] - b[0] >= 1 and b[3] - b[1] >= 1}


def test_owlvit_boxes_are_in_pixels_of_each_frame_labelled_with_the_names_asked(
    owlvit: Path,
) -> None:
    found = detector(owlvit, threshold="0", nms="1").detect(FRAMES, NAMES)
    assert [len(ds) for ds in found] == [GRID * GRID, GRID * GRID]  # every patch, both frames
    for ds, rgb in zip(found, FRAMES, strict=False):
        expected = grid_boxes(rgb.shape[1], rgb.shape[0])
        for d in ds:
            assert min(np.abs(np.subtract(d.box, e)).max() for e in expected) < 0.05, d.box
    assert {d.label for ds in found for d in ds} <= set(NAMES)
    assert all(0.0 <= d.score <= 1.0 for ds in found for d in ds)


def test_owlv2_boxes_allow_for_its_padding_to_a_square(owlv2: Path) -> None:
    found = detector(owlv2, threshold="0", nms="1").detect(FRAMES, NAMES)
    for ds, rgb in zip(found, FRAMES, strict=False):
        expected = grid_boxes(rgb.shape[1], rgb.shape[0], square=True)
        assert len(ds) == len(expected) < GRID * GRID  # cells wholly in the padding are gone
        for d in ds:
            assert min(np.abs(np.subtract(d.box, e)).max() for e in expected) < 0.05, d.box


def test_owlvit_threshold_and_defaults(owlvit: Path) -> None:
    everything = detector(owlvit, threshold="0", nms="1").detect(FRAMES, NAMES)
    scores = sorted(d.score for ds in everything for d in ds)
    cut = scores[len(scores) // 2]
    kept = detector(owlvit, threshold=str(cut), nms="1").detect(FRAMES, NAMES)
    assert all(d.score >= cut for ds in kept for d in ds)
    assert 0 < sum(map(len, kept)) < len(scores)
    # Nothing asked (the detect stage, the describer): the spec's labels, else the COCO classes.
    own = detector(owlvit, labels="dog, teapot", threshold="0").detect(FRAMES)
    assert {d.label for ds in own for d in ds} <= {"dog", "teapot"} and in_frame(own)
    coco = detector(owlvit, threshold="0", max_detections="3").detect(FRAMES)
    assert [len(ds) for ds in coco] == [3, 3] and {d.label for d in coco[0]} <= set(COCO)


# ---------------------------------------------------------------------------------------------
# Grounding DINO


def test_grounding_dino_labels_are_the_names_asked_in_as_many_passes_as_needed(
    grounding: Path,
) -> None:
    names = ["red mug", "cat", "dog"]
    found = detector(grounding, threshold="0", nms="1").detect(FRAMES, names)
    labels = [d.label for ds in found for d in ds]
    assert set(labels) <= set(names) and "dog" in labels  # the second pass counted too
    assert in_frame(found) and all(0.0 <= d.score <= 1.0 for ds in found for d in ds)
    cut = sorted(d.score for ds in found for d in ds)[len(labels) // 2]
    kept = detector(grounding, threshold=str(cut), nms="1").detect(FRAMES, names)
    assert all(d.score >= cut for ds in kept for d in ds) and sum(map(len, kept)) < len(labels)


# ---------------------------------------------------------------------------------------------
# Specs and errors


def test_spec_errors_say_what_to_fix(tmp_path: Path, owlvit: Path) -> None:
    settings = load_settings({"cache": "off"})
    with pytest.raises(ConfigError, match="not a model directory .* --local-dir"):
        create_adapter(f"transformers:{tmp_path / 'nowhere'}", settings, "detector")
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ConfigError, match="'bert' model; zero-shot detectors supported: owlvit"):
        create_adapter(f"transformers:{tmp_path / 'bert'}", settings, "detector")
    with pytest.raises(ConfigError, match="cannot fill role 'llm'"):
        create_adapter(f"transformers:{owlvit}", settings, "llm")
    status = backend_status(f"transformers:{owlvit}", settings, "detector")
    assert status.usable and status.detail == "transformers zero-shot detection (owl), local"
    assert not backend_status(f"transformers:{tmp_path}", settings, "detector").usable


def test_missing_transformers_names_the_extra(
    owlvit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = detector(owlvit)  # built without importing transformers: weights load on use
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(BackendMissingError, match=r"pip install 'vidagent\[detect\]'"):
        adapter.detect(FRAMES, NAMES)


def test_a_directory_without_the_processor_is_a_config_error(tmp_path: Path, owlvit: Path) -> None:
    (tmp_path / "config.json").write_text((owlvit / "config.json").read_text())
    with pytest.raises(ConfigError, match="cannot load the model and its processor"):
        detector(tmp_path).detect(FRAMES, NAMES)


# ---------------------------------------------------------------------------------------------
# Through the tools: any object name


def test_the_tools_find_and_track_any_name_with_it(
    tmp_path: Path, owlvit: Path, counter_video: Path
) -> None:
    library = Library(tmp_path / "lib")
    info = probe(counter_video)
    video_id = content_id(counter_video)
    library.put_video(
        VideoRecord(
            video_id,
            str(counter_video),
            counter_video.name,
            info.size_bytes,
            info.duration,
            info.fps,
            info.width,
            info.height,
            info.rotation,
            info.codec,
            info.has_audio,
            "2026-01-01T00:00:00",
            {},
        )
    )
    settings = load_settings({"cache": "off", "detector": f"transformers:{owlvit}?threshold=0"})
    ctx = ToolContext(library, Models(settings), [video_id])
    obs = detect_objects(ctx, {"time": 6, "objects": ["the red mug", "a teapot"]})
    assert not obs.error, obs.text
    rows = [line for line in obs.text.splitlines() if line.startswith("- ")]
    assert rows and all(row.startswith(("- red mug ", "- teapot ")) for row in rows), rows
    obs = track_object(ctx, {"object_name": "teapot", "start": 2, "end": 4})
    assert not obs.error, obs.text
    assert obs.text.startswith("Track of teapot from 2.0s to 4.0s")
