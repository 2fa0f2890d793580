"""The perception tools end to end: frames decoded from a Library video, confidences reported."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest
from realmedia import get_clip

from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.library import Library, VideoRecord, content_id
from vidagent.media import probe
from vidagent.media.synth import read_counter
from vidagent.models.base import Adapter, Box, Capabilities, Detection, TextLine
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import PerceptionDescriber
from vidagent.prompts import load_prompt
from vidagent.tools import Toolbox, ToolContext
from vidagent.tools.options import PerceptionOptions, ToolOptions
from vidagent.tools.perception import (
    PERCEPTION_TOOLS,
    caption_frames,
    detect_objects,
    track_object,
    zoom_in,
)

# ---------------------------------------------------------------------------------------------
# Helpers


def add_video(library: Library, path: Path) -> str:
    """Put a video row for ``path`` into ``library``, as the structure stage would."""
    info = probe(path)
    video_id = content_id(path)
    library.put_video(
        VideoRecord(
            video_id,
            str(path),
            path.name,
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
    return video_id


def fake_context(
    tmp_path: Path, videos: list[Path], adapters: dict[str, Adapter], **perception: Any
) -> ToolContext:
    library = Library(tmp_path / "lib")
    ids = [add_video(library, v) for v in videos]
    models = Models.from_adapters(adapters)
    options = ToolOptions(perception=PerceptionOptions(**perception))
    return ToolContext(library, models, ids, options=options)


def real_context(tmp_path: Path, video: Path) -> ToolContext:
    """The offline defaults: HOG + Haar detector, RapidOCR, perception describer."""
    library = Library(tmp_path / "lib")
    video_id = add_video(library, video)
    return ToolContext(library, Models(load_settings({"cache": "off"})), [video_id])


def by_time(per_second: dict[float, list[Detection]]) -> Callable[[np.ndarray], list[Detection]]:
    """A detect_fn answering by the time read off the frame counter (25 fps)."""
    return lambda img: per_second.get(round(read_counter(img) / 25, 1), [])


# ---------------------------------------------------------------------------------------------
# Captions

PAPER_REPLY = (
    "A person sews fabric (confidence=0.9), using a needle and thread [0.95]. "
    "A green cutting mat is on the table (confidence: 0.85)."
)


def test_caption_sends_the_papers_prompt_and_reads_clause_confidences(
    tmp_path: Path, counter_video: Path
) -> None:
    vlm = FakeAdapter.scripted([PAPER_REPLY])
    ctx = fake_context(tmp_path, [counter_video], {"vlm": vlm})
    obs = caption_frames(ctx, {"start": "00:00:03"})
    assert not obs.error, obs.text
    (request,) = vlm.requests
    system, user = request.messages
    assert system.role == "system" and system.text == load_prompt("videoagent2_caption")
    assert system.text.startswith("You are an assistant that generates descriptive captions")
    assert "in the format (confidence=0.xx) after the description." in system.text
    assert len(user.images) == 1 and user.text == ""
    assert PAPER_REPLY in obs.text and "3.0s" in obs.text
    assert obs.confidence == pytest.approx((0.9 + 0.95 + 0.85) / 3)
    assert obs.evidence[0].t0 == obs.evidence[0].t1 == 3.0
    assert (obs.frames, obs.model_calls) == (1, 1)


def test_caption_of_a_range_looks_at_eight_frames_at_most(
    tmp_path: Path, counter_video: Path
) -> None:
    vlm = FakeAdapter.function(lambda request: "a frame (confidence=0.5)")
    ctx = fake_context(tmp_path, [counter_video], {"vlm": vlm})
    obs = caption_frames(ctx, {"start": 0, "end": 30})  # clamped to the 12 s video
    assert not obs.error, obs.text
    assert len(vlm.requests) == 8 and obs.model_calls == 8
    assert "8 of 13 frames" in obs.text
    assert [e.t0 for e in obs.evidence][0::7] == [0.0, 12.0]


def test_the_perception_describer_takes_confidences_from_detector_and_ocr(
    tmp_path: Path, counter_video: Path
) -> None:
    adapters = {
        "vlm": PerceptionDescriber(),
        "detector": FakeAdapter(
            detect_fn=lambda img: [Detection("person", (10, 20, 60, 170), 0.8)]
        ),
        "ocr": FakeAdapter(read_text_fn=lambda img: [TextLine("EXIT", (0, 0, 40, 10), 0.9)]),
    }
    obs = caption_frames(fake_context(tmp_path, [counter_video], adapters), {"start": 2})
    assert not obs.error, obs.text
    assert "not a vision-language model" in obs.text
    assert "a person at left, large, box [0.031, 0.111, 0.188, 0.944] (confidence=0.80)" in obs.text
    assert '"EXIT" (confidence=0.90)' in obs.text
    assert obs.confidence == pytest.approx((0.8 + 0.9 + 1.0) / 3)
    assert obs.model_calls == 2


def test_the_describer_says_what_it_could_not_check(tmp_path: Path, counter_video: Path) -> None:
    adapters = {"vlm": PerceptionDescriber(), "detector": FakeAdapter()}  # no ocr role
    obs = caption_frames(fake_context(tmp_path, [counter_video], adapters), {"start": 2})
    assert not obs.error, obs.text
    assert "no object was detected (confidence=0.50)" in obs.text
    assert "(text not checked: no adapter given for role 'ocr'" in obs.text
    assert obs.confidence == pytest.approx((0.5 + 1.0) / 2) and obs.model_calls == 1


def test_zoom_caption_sends_the_enlarged_area(tmp_path: Path, counter_video: Path) -> None:
    vlm = FakeAdapter.scripted(["a bright disc (confidence=0.7)"])
    ctx = fake_context(tmp_path, [counter_video], {"vlm": vlm})
    obs = zoom_in(ctx, {"time": 4, "box": [0.25, 0.5, 0.5, 1.0]})
    assert not obs.error, obs.text
    (request,) = vlm.requests
    assert request.messages[0].text == load_prompt("videoagent2_caption")
    (image,) = request.messages[1].images
    crop = cv2.imdecode(np.frombuffer(image.data, np.uint8), cv2.IMREAD_COLOR)
    assert crop is not None and crop.shape[:2] == (
        1024,
        910,
    )  # 80x90 px of the 320x180 frame, long side 1024
    assert "box [0.250, 0.500, 0.500, 1.000] at 4.0s" in obs.text
    assert obs.confidence == pytest.approx(0.7)


def test_a_vlm_that_takes_no_images_is_the_users_to_fix(
    tmp_path: Path, counter_video: Path
) -> None:
    """A configuration problem is not the model's to fix: it stops with the one-line fix."""
    blind = FakeAdapter(capabilities=Capabilities(roles=frozenset({"vlm"})))
    with pytest.raises(ConfigError, match="takes no images; set it to a vision model"):
        caption_frames(fake_context(tmp_path, [counter_video], {"vlm": blind}), {"start": 1})


# ---------------------------------------------------------------------------------------------
# Detection


@pytest.mark.usefixtures("still_tracker")
def test_detection_keeps_the_most_confident_detection_in_the_window(
    tmp_path: Path, counter_video: Path
) -> None:
    a = (160.0, 36.0, 192.0, 108.0)  # (0.5, 0.2, 0.6, 0.6) of 320x180
    detector = FakeAdapter(
        detect_fn=by_time(
            {
                6.0: [Detection("person", (163.0, 38.0, 195.0, 110.0), 0.6)],
                8.0: [Detection("person", a, 0.95)],
                10.0: [Detection("person", (0.0, 0.0, 30.0, 90.0), 0.4)],  # under 0.5
            }
        )
    )
    ctx = fake_context(tmp_path, [counter_video], {"detector": detector}, object_tracker="still")
    obs = detect_objects(ctx, {"time": 6})
    assert not obs.error, obs.text
    rows = [line for line in obs.text.splitlines() if line.startswith("- ")]
    expected = "- person 1: box [0.500, 0.200, 0.600, 0.600], confidence 0.85 "
    assert rows == [expected + "(best detection 0.95 at 8.0s, tracked to 6.0s)"]
    assert obs.confidence == pytest.approx(0.95 * 0.9)
    assert [(e.t0, e.t1) for e in obs.evidence] == [(1.0, 11.0)]
    assert obs.frames == 11 + 11 and obs.model_calls == 2  # window, tracking frames; detect, track


@pytest.mark.usefixtures("still_tracker")
def test_zoomed_detection_reports_boxes_in_the_whole_frame(
    tmp_path: Path, counter_video: Path
) -> None:
    def top_left_quarter(img: np.ndarray) -> list[Detection]:
        h, w = img.shape[:2]
        return [Detection("cup", (0.0, 0.0, w / 2, h / 2), 0.7)]

    detector = FakeAdapter(detect_fn=top_left_quarter)
    ctx = fake_context(tmp_path, [counter_video], {"detector": detector}, object_tracker="still")
    obs = zoom_in(ctx, {"time": 5, "box": [0.5, 0.5, 1.0, 1.0], "task": "detect"})
    assert not obs.error, obs.text
    assert "cup 1: box [0.500, 0.500, 0.750, 0.750], confidence 0.70 (detected at 5.0s)" in obs.text


def test_an_object_the_default_detector_does_not_know(tmp_path: Path, counter_video: Path) -> None:
    ctx = real_context(tmp_path, counter_video)
    obs = detect_objects(ctx, {"time": 1, "objects": ["dog"]})
    assert obs.error
    assert "cannot detect 'dog'; it detects only: face, person" in obs.text
    obs = track_object(ctx, {"object_name": "unicorn", "start": 0, "end": 5})
    assert obs.error and "detects only: face, person" in obs.text


def test_tracking_what_is_not_there_has_confidence_zero(
    tmp_path: Path, counter_video: Path
) -> None:
    ctx = fake_context(tmp_path, [counter_video], {"detector": FakeAdapter()})
    obs = track_object(ctx, {"object_name": "person", "start": 2, "end": 4})
    assert not obs.error, obs.text
    assert "found no person" in obs.text and obs.confidence == 0.0
    assert [(e.t0, e.t1) for e in obs.evidence] == [(2.0, 4.0)]


# ---------------------------------------------------------------------------------------------
# Bad arguments come back as observations


@pytest.mark.parametrize(
    ("tool_name", "args", "message"),
    [
        ("zoom_in", {"time": 1, "box": [0.2, 0.2, 1.5, 0.9]}, "fractions of the frame in [0, 1]"),
        ("zoom_in", {"time": 1, "box": [-0.1, 0.2, 0.5, 0.9]}, "fractions of the frame in [0, 1]"),
        ("zoom_in", {"time": 1, "box": [0.6, 0.2, 0.5, 0.9]}, "needs x0 < x1 and y0 < y1"),
        ("zoom_in", {"time": 1, "box": [0.1, 0.5, 0.5, 0.5]}, "needs x0 < x1 and y0 < y1"),
        ("zoom_in", {"time": 1, "box": [0.1, 0.5, 0.5]}, "'box[3]' is required"),
        ("zoom_in", {"time": 99, "box": [0, 0, 1, 1]}, "99 s is outside the video (0 to 12.0 s)"),
        ("caption_frames", {"start": -3}, "-3 s is outside the video"),
        ("caption_frames", {"start": 20, "end": 30}, "20-30 s is outside the video"),
        ("detect_objects", {"time": "00:01:00"}, "60 s is outside the video"),
        ("track_object", {"object_name": "person", "start": 40, "end": 50}, "outside the video"),
        ("caption_frames", {"start": "soon"}, "'start'"),
    ],
)
def test_bad_arguments_are_error_observations(
    tmp_path: Path, counter_video: Path, tool_name: str, args: dict[str, Any], message: str
) -> None:
    ctx = fake_context(tmp_path, [counter_video], {"vlm": FakeAdapter(), "detector": FakeAdapter()})
    obs = Toolbox(PERCEPTION_TOOLS).call(ctx, tool_name, args)
    assert obs.error
    assert message in obs.text


def test_several_videos_in_scope(tmp_path: Path, counter_video: Path, small_video: Path) -> None:
    vlm = FakeAdapter.function(lambda request: "a frame (confidence=0.6)")
    ctx = fake_context(tmp_path, [counter_video, small_video], {"vlm": vlm})
    obs = caption_frames(ctx, {"start": 1})
    assert obs.error and "several videos are in scope" in obs.text
    second = ctx.video_ids[1]
    obs = caption_frames(ctx, {"start": 1, "video": second})
    assert not obs.error and f"in video {second}" in obs.text
    assert obs.evidence[0].video_id == second


# ---------------------------------------------------------------------------------------------
# Real models and real media


def _small_text_video(path: Path) -> Path:
    """2 s of 1280x720 at 10 fps: a blotchy background and "EXIT 42" about 7 px high, top left."""
    rng = np.random.default_rng(1)
    coarse = rng.integers(0, 256, (60, 107), dtype=np.uint8)
    value = cv2.resize(coarse, (1280, 720), interpolation=cv2.INTER_CUBIC)  # (720, 1280) uint8
    rgb = np.stack([value // 3 + 60, value // 3 + 80, value // 3 + 100], axis=-1).astype(np.uint8)
    cv2.putText(
        rgb, "EXIT 42", (40, 40), cv2.FONT_HERSHEY_SIMPLEX, 0.3, (255, 255, 255), 1, cv2.LINE_AA
    )
    codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=Fraction(10))
        assert isinstance(stream, av.video.stream.VideoStream)  # narrows the type for mypy
        stream.width, stream.height, stream.pix_fmt = 1280, 720, "yuv420p"
        for _ in range(20):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        container.mux(stream.encode(None))
    return path


@pytest.mark.models
def test_zoom_reads_text_ocr_misses_in_the_whole_frame(tmp_path: Path) -> None:
    ctx = real_context(tmp_path, _small_text_video(tmp_path / "sign.mp4"))
    whole = zoom_in(ctx, {"time": 1, "box": [0, 0, 1, 1], "task": "read_text"})
    assert not whole.error, whole.text
    assert "EXIT" not in whole.text and whole.confidence == 0.0
    zoomed = zoom_in(ctx, {"time": 1, "box": [0, 0, 0.1, 0.1], "task": "read_text"})
    assert not zoomed.error, zoomed.text
    assert '"EXIT 42"' in zoomed.text
    assert zoomed.confidence is not None and zoomed.confidence > 0.8
    assert (zoomed.frames, zoomed.model_calls) == (1, 1)


def _rows(text: str) -> list[tuple[float, Box | None, float]]:
    """``(t, box, confidence)`` per trajectory line; a lost step has no box and confidence 0."""
    out: list[tuple[float, Box | None, float]] = []
    for line in text.splitlines():
        if line.startswith("- ") and line.endswith("lost"):
            out.append((float(line[2:].split("s:")[0]), None, 0.0))
        elif line.startswith("- "):
            t, rest = line[2:].split("s: box [")
            numbers, confidence = rest.split("], confidence ")
            x0, y0, x1, y1 = (float(v) for v in numbers.split(", "))
            out.append((float(t), (x0, y0, x1, y1), float(confidence)))
    return out


@pytest.mark.realmedia
@pytest.mark.models
def test_tracking_a_pedestrian_in_the_opencv_clip(tmp_path: Path) -> None:
    ctx = real_context(tmp_path, get_clip("vtest.avi"))
    obs = track_object(ctx, {"object_name": "pedestrian", "start": 23, "end": 30})
    assert not obs.error, obs.text
    rows = _rows(obs.text)
    assert [t for t, _, _ in rows] == [float(t) for t in range(23, 31)]
    tracked = [(t, box, c) for t, box, c in rows if box is not None]
    boxes = [box for _, box, _ in tracked if box is not None]
    assert len(tracked) >= 5, obs.text
    assert all(0.2 <= c <= 1.0 for _, _, c in tracked)
    start = max(tracked, key=lambda row: row[2])
    assert start[2] > 0.9 and f"started from the detection at {start[0]:.1f}s" in obs.text
    # A pedestrian walks one way: the box centre moves steadily across the frame.
    centres = [(box[0] + box[2]) / 2 for box in boxes]
    steps = np.diff(centres)
    assert abs(centres[-1] - centres[0]) > 0.2, obs.text
    assert (steps < 0).all() or (steps > 0).all(), obs.text
    assert obs.confidence == pytest.approx(sum(c for _, _, c in rows) / len(rows), abs=0.005)
    assert obs.frames > len(rows) and obs.model_calls == 2
    assert (obs.evidence[0].t0, obs.evidence[0].t1) == (23.0, 30.0)


@pytest.mark.realmedia
@pytest.mark.models
def test_detection_window_on_the_opencv_clip(tmp_path: Path) -> None:
    ctx = real_context(tmp_path, get_clip("vtest.avi"))
    obs = detect_objects(ctx, {"time": 20, "objects": ["people"]})
    assert not obs.error, obs.text
    rows = [line for line in obs.text.splitlines() if line.startswith("- person")]
    assert rows, obs.text
    assert obs.confidence is not None and 0.2 < obs.confidence <= 1.0
    assert obs.frames >= 11 and obs.model_calls >= 1
