"""The embedded offline defaults, loaded for real from the packages that bundle them."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from vidagent.config import load_settings
from vidagent.models.base import ChatRequest, Message
from vidagent.models.client import Models
from vidagent.models.registry import module_available

needs = {
    "llm": pytest.mark.skipif(
        not module_available("llama_cpp"), reason="vidagent[llm] not installed"
    ),
    "embed": pytest.mark.skipif(
        not module_available("sentence_transformers"), reason="vidagent[embed] not installed"
    ),
    "ocr": pytest.mark.skipif(
        not module_available("rapidocr"), reason="vidagent[ocr] not installed"
    ),
}


@pytest.fixture(scope="module")
def models() -> Models:
    hub = Models(load_settings({"cache": "off"}))
    yield hub
    hub.close()


@needs["llm"]
def test_bundled_llm_follows_a_json_schema(models: Models) -> None:
    schema = {
        "type": "object",
        "properties": {
            "tool": {"enum": ["clip_search", "frame_inspect", "finish"]},
            "query": {"type": "string"},
        },
        "required": ["tool", "query"],
    }
    response = models.client("llm").chat(
        ChatRequest(
            messages=(
                Message("user", "Find the moment the man opens the door. Reply with an action."),
            ),
            response_schema=schema,
            max_tokens=60,
        )
    )
    action = json.loads(response.text)
    assert action["tool"] in {"clip_search", "frame_inspect", "finish"}
    assert isinstance(action["query"], str)
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert models.ledger.totals()["llamacpp:smollm2-135m"].calls == 1


@needs["embed"]
def test_bundled_minilm_ranks_related_text_first(models: Models) -> None:
    vectors = (
        models.client("embed")
        .embed(
            [
                "a man walks his dog in the park",
                "a person strolling with a puppy",
                "quarterly revenue fell sharply",
            ]
        )
        .vectors
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    sims = vectors @ vectors[0]
    assert sims[1] > sims[2] + 0.3


@needs["ocr"]
def test_rapidocr_reads_burned_in_text(models: Models) -> None:
    frame = np.full((360, 640, 3), 30, np.uint8)
    cv2.putText(frame, "EXIT 12B", (150, 200), cv2.FONT_HERSHEY_SIMPLEX, 2.5, (255, 255, 0), 6)
    lines = models.client("ocr").read_text([frame])[0]
    assert " ".join(line.text for line in lines) == "EXIT 12B"
    box = next(line.box for line in lines if "EXIT" in line.text)
    assert 100 < box[0] < 250 and 100 < box[1] < 200  # where it was drawn


@needs["ocr"]
def test_rapidocr_engines_reading_at_once_keep_each_frames_lines_in_order() -> None:
    from vidagent.models.rapidocr import RapidOCRAdapter

    frames = []
    for i, word in enumerate(["EXIT 12B", "GATE 72", "", "PLATFORM 9", "LOBBY 31"]):
        frame = np.full((360, 640, 3), 20 * i, np.uint8)
        cv2.putText(frame, word, (120, 200), cv2.FONT_HERSHEY_SIMPLEX, 2.2, (255, 255, 0), 6)
        frames.append(frame)
    read = {}
    for workers in (1, 3):
        adapter = RapidOCRAdapter("pp-ocr", {"workers": str(workers)})
        read[workers] = [[line.text for line in lines] for lines in adapter.read_text(frames)]
        adapter.close()
    assert read[3] == read[1]
    assert read[3] == [["EXIT 12B"], ["GATE 72"], [], ["PLATFORM 9"], ["LOBBY 31"]]
    assert [line.text for line in adapter.read_text(frames[:1])[0]] == ["EXIT 12B"]  # reloads
    adapter.close()


@needs["ocr"]
@pytest.mark.skipif(not module_available("openvino"), reason="openvino (vidagent[ocr]) missing")
def test_openvino_engines_compile_once_and_each_has_its_own_requests() -> None:
    """The engines after the first run on its compiled models (compiling them again cost 1.35
    CPU seconds per engine), each with infer requests of its own, so frames read at once do not
    overwrite each other's tensors."""
    from vidagent.models.rapidocr import RapidOCRAdapter

    adapter = RapidOCRAdapter("pp-ocr", {"runtime": "openvino", "workers": "3"})
    engines, _ = adapter._load()
    found = [engines.get() for _ in range(3)]
    for part in ("text_det", "text_cls", "text_rec"):
        requests = [getattr(e, part).session.session for e in found]
        assert len({id(r) for r in requests}) == 3
        assert len({id(r.get_compiled_model()) for r in requests}) == 1
    for engine in found:
        engines.put(engine)
    frames = []
    for i in range(12):
        frame = np.full((360, 640, 3), 40 + 10 * (i % 3), np.uint8)
        cv2.putText(
            frame,
            f"ROOM {100 + 7 * i}",
            (60, 200),
            cv2.FONT_HERSHEY_SIMPLEX,
            2.4,
            (255, 255, 255),
            6,
        )
        frames.append(frame)
    read = [[line.text for line in lines] for lines in adapter.read_text(frames)]
    assert read == [[f"ROOM {100 + 7 * i}"] for i in range(12)]
    adapter.close()


@needs["ocr"]
@pytest.mark.realmedia
@pytest.mark.skipif(not module_available("openvino"), reason="openvino (vidagent[ocr]) missing")
def test_rapidocr_on_openvino_reads_what_onnxruntime_reads_on_real_frames() -> None:
    from realmedia import get_clip

    from vidagent.media import frames_at, probe
    from vidagent.models.rapidocr import RapidOCRAdapter

    # Frames of the narrated clip where OpenVINO's bfloat16 default read other lines ("CC" for
    # "cC", a lost line, other guesses at blurred text).
    frames = frames_at(probe(get_clip("wannaworktogether.mp4")), [2.0, 10.0, 12.0, 26.0, 30.0])
    read = {}
    for runtime in ("onnxruntime", "openvino"):
        adapter = RapidOCRAdapter("pp-ocr", {"runtime": runtime})
        read[runtime] = adapter.read_text(list(frames))
        adapter.close()
    texts = {r: [[line.text for line in f] for f in lines] for r, lines in read.items()}
    assert texts["openvino"] == texts["onnxruntime"]
    assert sum(len(f) for f in texts["openvino"]) >= 6
    for ours, theirs in zip(read["openvino"], read["onnxruntime"], strict=False):
        for a, b in zip(ours, theirs, strict=False):
            assert np.allclose(a.box, b.box, atol=1.0)


@pytest.mark.realmedia
def test_opencv_detector_searching_frames_at_once_finds_what_one_at_a_time_finds() -> None:
    from realmedia import get_clip

    from vidagent.media import frames_at, probe
    from vidagent.models.opencv import OpenCVDetector

    info = probe(get_clip("vtest.avi"))  # pedestrians
    frames = frames_at(info, [1.0, 3.0, 5.0, 7.0, 9.0], size=800)
    found = {}
    for workers in (1, 3):
        detector = OpenCVDetector("hog+haar", {"workers": str(workers)})
        found[workers] = [[(d.label, d.box) for d in f] for f in detector.detect(frames)]
        detector.close()
    assert found[3] == found[1]
    assert sum(label == "person" for f in found[3] for label, _ in f) >= 5


def test_opencv_detector_searches_frames_smaller_than_its_window() -> None:
    # OpenCV 4.14's HOG corrupts memory on a picture smaller than its 64x128 window: indexing
    # a 160x96 video ended in a segmentation fault. Such frames are scaled up to hold it.
    from vidagent.models.opencv import OpenCVDetector

    rng = np.random.default_rng(0)
    sizes = [(96, 160), (128, 47), (40, 40), (96, 2000), (151, 1000)]  # the last shrunk less
    frames = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]
    detector = OpenCVDetector("hog+haar", {"workers": "1"})
    for (h, w), found in zip(sizes, detector.detect(frames), strict=True):
        assert all(
            0 <= x0 <= x1 <= w + 1 and 0 <= y0 <= y1 <= h + 1
            for x0, y0, x1, y1 in (d.box for d in found)
        )


def test_opencv_detector_is_silent_on_a_blank_frame(models: Models) -> None:
    detector = models.client("detector")
    assert detector.detect([np.full((360, 640, 3), 128, np.uint8)]) == [[]]


def test_unconfigured_optional_role_says_so(models: Models) -> None:
    from vidagent.exceptions import ConfigError

    with pytest.raises(ConfigError, match="disabled"):
        models.client("image_embed")


@needs["ocr"]
@pytest.mark.skipif(not module_available("openvino"), reason="openvino (vidagent[ocr]) missing")
def test_an_ocr_runtime_that_cannot_load_is_a_one_line_error_naming_the_remedy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vidagent.exceptions import ProviderError
    from vidagent.models.rapidocr import RapidOCRAdapter
    from vidagent.models.registry import without_openvino_telemetry

    without_openvino_telemetry()  # before OpenVINO's first import in this process, as the adapter does
    from rapidocr.inference_engine.openvino import main

    class Broken(main.CPUConfig):  # type: ignore[name-defined,misc]
        float32 = True  # taken for the adapter's own options, which are then not added

        def get_config(self) -> dict[str, str]:
            return {"INFERENCE_PRECISION_HINT": "f99"}  # OpenVINO's CPU plugin refuses this

    monkeypatch.setattr(main, "CPUConfig", Broken)
    adapter = RapidOCRAdapter("pp-ocr", {"runtime": "openvino", "workers": "1"})
    with pytest.raises(ProviderError, match="runtime=onnxruntime") as caught:
        adapter.read_text([np.zeros((64, 64, 3), np.uint8)])
    assert "\n" not in str(caught.value) and "rapidocr:pp-ocr" in str(caught.value)


@needs["ocr"]
@pytest.mark.skipif(not module_available("openvino"), reason="openvino (vidagent[ocr]) missing")
def test_ocr_on_openvino_sends_no_telemetry_and_forks_nothing() -> None:
    # Importing OpenVINO sends a usage event from a forked process unless told not to; an
    # offline tool must not, and LanceDB warns when its process forks. A fresh interpreter
    # records every fork, reads a frame on OpenVINO and exits (OpenVINO's sender is joined at
    # exit, so a fork it made would be on record). OpenVINO stays quiet by itself on CI
    # machines, so the variables by which it knows one are left out.
    import os
    import subprocess
    import sys

    code = (
        "import os, sys, numpy as np\n"
        "os.register_at_fork(before=lambda: print('FORK', flush=True))\n"
        "from vidagent.models.rapidocr import RapidOCRAdapter\n"
        "a = RapidOCRAdapter('pp-ocr', {'runtime': 'openvino', 'workers': '1'})\n"
        "a.read_text([np.zeros((64, 64, 3), np.uint8)]); a.close()\n"
        "print('telemetry' if sys.modules.get('openvino_telemetry') else 'none')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "TF_BUILD", "JENKINS_URL"}}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["none"], out.stdout + out.stderr[-2000:]


@needs["ocr"]
def test_rapidocr_imports_with_its_model_table_once_and_whole_for_the_engines_it_runs() -> None:
    # A fresh interpreter: the import is process-wide. The table RapidOCR reads at import is
    # parsed once (both modules hold the same tree), holds every key of the file for the
    # engines the adapter runs, and OmegaConf's loader is put back as it was.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from omegaconf import OmegaConf\n"
        "from vidagent.models.rapidocr import RapidOCRAdapter\n"
        "before = OmegaConf.__dict__['load']\n"
        "RapidOCRAdapter('pp-ocr', {'runtime': 'onnxruntime', 'workers': '1'}).close()\n"
        "a = RapidOCRAdapter('pp-ocr', {'runtime': 'onnxruntime', 'workers': '1'})\n"
        "a._load(); a.close()\n"
        "import rapidocr.inference_engine.base as base, rapidocr.utils.model_resolver as res\n"
        "lean = base.InferSession.model_info\n"
        "full = OmegaConf.load(base.MODEL_URL_PATH)\n"
        "kept = [k for k in full if k not in ('mnn', 'paddle', 'torch')]\n"
        "print(lean is res._MODEL_CONFIG, OmegaConf.__dict__['load'] is before,\n"
        "      sorted(lean) == sorted(kept), all(lean[k] == full[k] for k in kept))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True"] * 4, out.stdout + out.stderr[-2000:]


def test_a_local_model_that_cannot_be_had_is_a_one_line_config_error(tmp_path: Path) -> None:
    """An OCR model name that is not the bundled one (it read the bundled models and stored
    their lines under the name given), and a Whisper folder without a model in it."""
    from vidagent.exceptions import ConfigError
    from vidagent.models.rapidocr import RapidOCRAdapter
    from vidagent.models.rapidocr import status as ocr_status
    from vidagent.models.whisper import FasterWhisperAdapter
    from vidagent.models.whisper import status as whisper_status

    with pytest.raises(ConfigError, match="^rapidocr model 'pp-ocr-v9': the bundled PP-OCR"):
        RapidOCRAdapter("pp-ocr-v9")
    assert not ocr_status("pp-ocr-v9", {}, load_settings(env={})).usable
    empty = FasterWhisperAdapter(str(tmp_path))
    with pytest.raises(ConfigError, match=f"^faster-whisper:{tmp_path}: cannot load it"):
        empty._load()
    assert not whisper_status(str(tmp_path), {}, load_settings(env={})).usable


def test_info_refuses_a_model_folder_that_is_not_there_and_a_thread_count_that_is_no_number(
    tmp_path: Path,
) -> None:
    # both were reported "ok" by `vidagent info` ("hub download"; the option unread)
    from vidagent.exceptions import ConfigError
    from vidagent.models.llamacpp import status as llamacpp_status
    from vidagent.models.sentence_transformers import _location
    from vidagent.models.sentence_transformers import status as st_status

    settings = load_settings(env={})
    gone = str(tmp_path / "no-such-model")
    said = st_status(gone, {}, settings)
    assert (said.usable, said.detail) == (False, f"no model folder at {gone}")
    with pytest.raises(ConfigError, match="no model folder there"):
        _location(gone)
    assert st_status("sentence-transformers/all-MiniLM-L6-v2", {}, settings).usable  # a hub name
    said = llamacpp_status("smollm2-135m", {"n_threads": "abc"}, settings)
    assert (
        not said.usable and "option n_threads must be a whole number >= 0, not 'abc'" in said.detail
    )
    assert llamacpp_status("smollm2-135m", {"n_threads": "2"}, settings).usable
