"""The ingest speed levers (OCR's text-presence gate, two OCR engines on OpenVINO reading frames
at once, transcribe, read_text and detect running at the same time while the embedder loads,
OCR and detection taking their frames from the structure pass, the embedder on OpenVINO)
lose nothing a user would see: the same on-screen lines, the spoken words, the detections, the
search hits, on the real narrated clip and on a generated one. The end-to-end checks of each
stage alone are in test_end_to_end.py and test_perception_stages.py; these run them with the
levers on, as ``vidagent index`` does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from vidagent.app import search
from vidagent.config import load_settings
from vidagent.ingest import default_stages, index_video
from vidagent.ingest.pipeline import IndexResult, index_path
from vidagent.ingest.read_text import text_likely
from vidagent.library import Library
from vidagent.models.client import Models
from vidagent.models.registry import module_available

OFFLINE = pytest.mark.skipif(
    not (
        module_available("faster_whisper")
        and module_available("sentence_transformers")
        and module_available("rapidocr")
    ),
    reason="the offline extras (vidagent[offline]) are not installed",
)
STAGES = ("transcribe", "read_text", "detect", "caption", "embed")


def overlaps(t0: float, t1: float, a: float, b: float) -> bool:
    return t0 < b and a < t1


def test_the_gate_passes_small_text_and_stops_a_blank_frame() -> None:
    blank = np.full((360, 640, 3), 90, np.uint8)  # (H, W, 3) uint8
    assert not text_likely(blank)
    line = blank.copy()
    cv2.putText(line, "exit 4", (500, 330), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (230, 230, 230), 1)
    assert text_likely(line)
    edge = blank.copy()
    edge[:, 320:] = 200  # one hard vertical edge: a border, not text
    assert not text_likely(edge)


@pytest.fixture(scope="module")
def real(
    real_index: Path, real_results: dict[str, IndexResult], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Library, IndexResult, Path]:
    """The narrated clip as ``vidagent index`` indexes it (every default stage, the levers on),
    from the run's shared index (tests/conftest.py): this module's own copy of its Library."""
    home = tmp_path_factory.mktemp("home")
    shutil.copytree(real_index, home / "library")
    settings = load_settings({"home": home, "cache": "off"})
    return Library(settings.library_uri), real_results["wannaworktogether.mp4"], home


@OFFLINE
@pytest.mark.models
@pytest.mark.realmedia
def test_real_clip_keeps_every_stage_output_with_the_levers_on(
    real: tuple[Library, IndexResult, Path],
) -> None:
    lib, result, home = real
    vid = result.structure.video.video_id  # type: ignore[union-attr]
    # transcribe joined before caption
    assert [r.stage for r in result.stages] == list(default_stages(load_settings({})))
    assert set(result.video.stages) >= set(STAGES)  # type: ignore[union-attr]
    clips = lib.clips(vid)
    speech = " ".join(c.transcript for c in clips).lower()
    for word in ("teacher", "artist", "copyright", "website"):
        assert word in speech
    text = "\n".join(c.ocr_text for c in clips)
    for line in ("ALL RIGHTS RESERVED.", "VERY SPECIAL THANKS", "NARRATOR", "Sara Kraft"):
        assert line in text
    found = sum(len(json.loads(c.detections or "[]")) for c in clips)
    assert found >= 20  # 29 people and faces in 91 frames, with and without the levers
    with Models(load_settings({"home": home, "cache": "off"})) as models:
        hits = search(lib, "an artist who builds beauty out of bits and pieces", models=models)
    assert overlaps(hits[0].clip.t0, hits[0].clip.t1, 21.9, 26.3)


@OFFLINE
@pytest.mark.models
@pytest.mark.realmedia
def test_real_clip_reads_the_same_lines_without_the_gate(
    real: tuple[Library, IndexResult, Path], tmp_path: Path
) -> None:
    lib, result, _ = real
    gated = {c.clip_index: c.ocr_text for c in lib.clips(result.structure.video.video_id)}  # type: ignore[union-attr]
    # Every frame to OCR, on the same engines: the frames the gate skipped hold no line. (That
    # OpenVINO reads onnxruntime's lines is tested on this clip's hardest frames in
    # tests/models/test_local_models.py; reading all 91 frames again on onnxruntime here took
    # twice the CPU of OpenVINO for nothing more.)
    settings = load_settings({"home": tmp_path, "cache": "off"})
    plain_lib = Library(settings.library_uri)
    with Models(settings) as models:
        plain = index_path(
            result.path,
            library=plain_lib,
            settings=settings,
            models=models,
            stages=("read_text",),
            options={"read_text": {"gate": False}},
        )
    ungated = {c.clip_index: c.ocr_text for c in plain_lib.clips(plain.video.video_id)}  # type: ignore[union-attr]
    assert gated == ungated
    note = next(r.note for r in result.stages if r.stage == "read_text")
    assert "without text edges, skipped" in note


@OFFLINE
@pytest.mark.models
def test_generated_clip_keeps_its_burned_in_text_and_skips_frames_without_text(
    small_video: Path, tmp_path: Path
) -> None:
    settings = load_settings({"home": tmp_path, "cache": "off"})
    result = index_video(small_video, settings=settings, stages=STAGES)
    lib = Library(settings.library_uri)
    clips = lib.clips(result.structure.video.video_id)  # type: ignore[union-attr]
    assert "HELLO VIDAGENT" in clips[1].ocr_text.splitlines()  # on screen from 5 s to 8 s
    assert not clips[0].ocr_text and not clips[2].ocr_text
    read = next(r for r in result.stages if r.stage == "read_text")
    gated = int(read.note.split("; ")[1].split()[0])
    assert gated >= 3  # of 6 samples, the frames away from the title are not read
    with Models(settings) as models:
        hits = search(lib, "hello vidagent", models=models, top=1)
    assert hits[0].clip.clip_index == 1
