"""The "vlm" object detector: boxes asked of a vision model, read leniently, through the tools.

Replies come from the fake provider (scripted or function-driven) and from a loopback
OpenAI-compatible server, so the request a real endpoint receives is checked too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from faultserver import Behaviour, FaultServer, completion

from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.library import Library, VideoRecord, content_id
from vidagent.media import probe
from vidagent.models.base import Adapter, Capabilities, ChatRequest, Detection
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import PerceptionDescriber
from vidagent.tools import ToolContext
from vidagent.tools.detectors import (
    DETECTORS,
    UNSCORED,
    RoleDetector,
    VLMDetector,
    backends,
    boxes_schema,
    read_boxes,
)
from vidagent.tools.options import PerceptionOptions, ToolOptions
from vidagent.tools.perception import detect_objects, track_object, zoom_in

FRAME = np.zeros((180, 320, 3), np.uint8)  # (H, W, 3): what a tool hands a detector


def reply(*objects: dict[str, Any]) -> str:
    return json.dumps({"objects": list(objects)})


MUG = {"label": "red mug", "box": [0.5, 0.2, 0.6, 0.6], "confidence": 0.8}

# ---------------------------------------------------------------------------------------------
# Reading replies


def test_boxes_are_fractions_of_the_image_returned_in_its_pixels() -> None:
    found, problem = read_boxes(reply(MUG), 320, 180)
    assert problem == ""
    assert found == [Detection("red mug", (160.0, 36.0, 192.0, 108.0), 0.8)]


@pytest.mark.parametrize(
    "text",
    [
        "```json\n" + reply(MUG) + "\n```",
        "Here are the boxes: " + reply(MUG) + " Hope this helps.",
        json.dumps([MUG]),  # a bare list
    ],
)
def test_json_wrapped_in_prose_or_fences_is_still_read(text: str) -> None:
    found, problem = read_boxes(text, 320, 180)
    assert [d.box for d in found] == [(160.0, 36.0, 192.0, 108.0)] and problem == ""


def test_a_reply_that_is_not_json_gives_no_detections_and_says_why() -> None:
    assert read_boxes("I see a red mug on the left.", 320, 180) == (
        [],
        "the reply was not JSON: 'I see a red mug on the left.'",
    )
    assert read_boxes('{"boxes": 3}', 320, 180) == ([], 'the reply had no "objects" list')


def test_bad_boxes_are_dropped_and_counted_good_ones_kept() -> None:
    text = reply(
        MUG,
        {"label": "cat", "box": [10, 20, 200, 150], "confidence": 0.9},  # pixels, not fractions
        {"label": "dog", "box": [0.1, 0.2, 0.3], "confidence": 0.9},
        {"label": "cup", "box": [0.6, 0.2, 0.5, 0.4], "confidence": 0.9},  # x0 > x1
        {"label": "", "box": [0.1, 0.1, 0.2, 0.2], "confidence": 0.9},
        "a plate",
    )
    found, problem = read_boxes(text, 320, 180)
    assert [d.label for d in found] == ["red mug"]
    assert problem.startswith("5 of 6 boxes unusable (the box of 'cat', [10, 20, 200, 150], is not")


def test_confidences_percent_missing_and_edges_overshot_by_rounding() -> None:
    text = reply(
        {"label": "cup", "box": [-0.004, 0.0, 1.003, 0.5], "confidence": 85},
        {"label": "pen", "box": [0.1, 0.1, 0.2, 0.2]},
    )
    found, problem = read_boxes(text, 100, 100)
    assert problem == ""
    assert found == [
        Detection("cup", (0.0, 0.0, 100.0, 50.0), 0.85),
        Detection("pen", (pytest.approx(10.0), 10.0, 20.0, 20.0), UNSCORED),
    ]


# ---------------------------------------------------------------------------------------------
# The detector against the fake provider


@pytest.fixture
def context(tmp_path: Path) -> Callable[..., ToolContext]:
    """A context over given adapters (no videos): ``context(adapters, **perception)``."""

    def make(adapters: dict[str, Adapter], **perception: Any) -> ToolContext:
        options = ToolOptions(perception=PerceptionOptions(**perception))
        models = Models.from_adapters(adapters)
        return ToolContext(Library(tmp_path / "lib"), models, [], options=options)

    return make


def test_it_is_registered_open_and_asks_one_request_per_frame_for_the_targets(
    context: Callable[..., ToolContext],
) -> None:
    vlm = FakeAdapter.scripted([reply(MUG), reply()])
    detector, _ = backends(context({"vlm": vlm}, object_detector="vlm"))
    assert isinstance(detector, VLMDetector) and "vlm" in DETECTORS
    assert detector.vocabulary is None and detector.name == "fake:scripted (asked for boxes)"
    small = np.zeros((90, 160, 3), np.uint8)
    found = detector.detect([FRAME, small], ["red mug", "spoon"])
    assert found == [[Detection("red mug", (160.0, 36.0, 192.0, 108.0), 0.8)], []]
    assert detector.calls == 2 and detector.notes == []
    first: ChatRequest = vlm.requests[0]
    assert first.response_schema == boxes_schema(["red mug", "spoon"])
    assert first.response_schema["properties"]["objects"]["items"]["properties"]["label"][
        "enum"
    ] == ["red mug", "spoon"]
    [image] = first.messages[1].images
    sent = cv2.imdecode(np.frombuffer(image.data, np.uint8), cv2.IMREAD_COLOR)
    assert sent.shape == (180, 320, 3)  # the frame itself: the boxes are of it
    assert "Find every red mug or spoon in this image" in first.messages[1].text
    assert "fractions of the image width and height" in first.messages[1].text


def test_unreadable_replies_become_notes_not_tracebacks(
    context: Callable[..., ToolContext],
) -> None:
    vlm = FakeAdapter.scripted(["Sorry, I can't help with that.", reply(MUG)])
    detector = VLMDetector(context({"vlm": vlm}))
    found = detector.detect([FRAME, FRAME], ["red mug"])
    assert found[0] == [] and len(found[1]) == 1
    note = "fake:scripted gave unusable boxes for 1 of 2 frame(s): the reply was not JSON: "
    assert detector.notes == [note + '"Sorry, I can\'t help with that."']


def test_the_role_must_see_pixels(context: Callable[..., ToolContext]) -> None:
    with pytest.raises(ConfigError, match="is the perception describer"):
        VLMDetector(context({"vlm": PerceptionDescriber()}))
    blind = FakeAdapter(capabilities=Capabilities(roles=frozenset({"vlm"})))
    with pytest.raises(ConfigError, match="takes no images"):
        VLMDetector(context({"vlm": blind}))


def test_the_role_detector_names_targets_only_to_open_vocabularies(
    context: Callable[..., ToolContext],
) -> None:
    open_ = FakeAdapter(detect_fn=lambda img: [Detection("kettle", (0, 0, 10, 10), 0.7)])
    detector = RoleDetector(context({"detector": open_}))
    assert detector.detect([FRAME], ["kettle"])[0][0].label == "kettle"
    detector.detect([FRAME], [])
    assert open_.detect_labels == [("kettle",), None]  # nothing asked: the model's own set
    closed = FakeAdapter(
        capabilities=Capabilities(roles=frozenset({"detector"}), vocabulary=frozenset({"face"}))
    )
    RoleDetector(context({"detector": closed})).detect([FRAME], ["face"])
    assert closed.detect_labels == [None]


# ---------------------------------------------------------------------------------------------
# A real HTTP endpoint


@pytest.fixture
def server() -> Iterator[FaultServer]:
    s = FaultServer().start()
    yield s
    s.stop()


def test_an_openai_compatible_endpoint_gets_the_image_and_the_schema(
    server: FaultServer, tmp_path: Path
) -> None:
    spec = f"openai:boxer?base_url={server.base_url}"
    settings = load_settings({"vlm": spec, "cache": "off", "max_retries": 0})
    ctx = ToolContext(Library(tmp_path / "lib"), Models(settings), [])
    server.script(
        Behaviour(body=completion("```json\n" + reply(MUG) + "\n```")),
        Behaviour(body=completion("<html>no</html>")),
    )
    detector = VLMDetector(ctx)
    assert detector.detect([FRAME], ["red mug"]) == [
        [Detection("red mug", (160.0, 36.0, 192.0, 108.0), 0.8)]
    ]
    assert detector.detect([FRAME], ["red mug"]) == [[]]
    assert "the reply was not JSON: '<html>no</html>'" in detector.notes[0]
    body = server.bodies("/chat/completions")[0]
    image, prompt = body["messages"][1]["content"]
    assert image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert prompt["text"].startswith("Find every red mug in this image.")
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["objects"]["items"]["properties"]["label"]["enum"] == ["red mug"]


# ---------------------------------------------------------------------------------------------
# Through the tools: any object name


def video_context(
    tmp_path: Path, video: Path, answer: Callable[[ChatRequest], str], **perception: Any
) -> tuple[ToolContext, FakeAdapter]:
    library = Library(tmp_path / "lib")
    info = probe(video)
    video_id = content_id(video)
    library.put_video(
        VideoRecord(
            video_id,
            str(video),
            video.name,
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
    vlm = FakeAdapter.function(answer)
    options = ToolOptions(perception=PerceptionOptions(object_detector="vlm", **perception))
    return ToolContext(
        library, Models.from_adapters({"vlm": vlm}), [video_id], options=options
    ), vlm


@pytest.mark.usefixtures("still_tracker")
def test_detect_zoom_and_track_accept_any_object_name(tmp_path: Path, counter_video: Path) -> None:
    ctx, vlm = video_context(tmp_path, counter_video, lambda r: reply(MUG), object_tracker="still")
    obs = detect_objects(ctx, {"time": 6, "objects": ["the red mug"]})
    assert not obs.error, obs.text
    assert "detector fake:function (asked for boxes)" in obs.text
    rows = [line for line in obs.text.splitlines() if line.startswith("- ")]
    assert rows == [
        "- red mug 1: box [0.500, 0.200, 0.600, 0.600], confidence 0.80 (detected at 6.0s)"
    ]
    # One request per frame of the ±5 window; every frame scored the same, so the one asked
    # about wins and nothing is tracked.
    assert obs.model_calls == 11 and obs.frames == 11

    obs = zoom_in(
        ctx, {"time": 5, "box": [0.5, 0.5, 1.0, 1.0], "task": "detect", "objects": ["red mug"]}
    )
    assert not obs.error, obs.text
    assert "red mug 1: box [0.750, 0.600, 0.800, 0.800]" in obs.text  # in the whole frame

    obs = track_object(ctx, {"object_name": "red mug", "start": 2, "end": 4})
    assert not obs.error, obs.text
    assert obs.text.splitlines()[1:] == [
        f"- {t}s: box [0.500, 0.200, 0.600, 0.600], confidence 0.72" for t in ("2.0", "3.0", "4.0")
    ]
    assert "Find every red mug in this image" in vlm.requests[-1].messages[1].text


def test_a_vlm_that_answers_in_prose_is_reported_in_the_observation(
    tmp_path: Path, counter_video: Path
) -> None:
    ctx, _ = video_context(tmp_path, counter_video, lambda r: "There is a mug, top right.")
    obs = detect_objects(ctx, {"time": 6, "objects": ["mug"]})
    assert not obs.error and obs.confidence == 0.0
    assert (
        "Note: fake:function gave unusable boxes for 11 of 11 frame(s): the reply was not JSON"
        in obs.text
    )
    assert "- nothing found above the detection threshold" in obs.text
    obs = track_object(ctx, {"object_name": "mug", "start": 2, "end": 4})
    assert "found no mug scoring 0.5 or more. Note: fake:function gave unusable boxes" in obs.text


def test_the_offline_default_says_what_it_can_detect_when_zooming_too(
    tmp_path: Path, counter_video: Path
) -> None:
    ctx, _ = video_context(tmp_path, counter_video, lambda r: reply())
    ctx.options = ToolOptions()  # object_detector "role": the detector role, opencv:hog+haar
    ctx.models = Models(load_settings({"cache": "off"}))
    obs = zoom_in(ctx, {"time": 1, "box": [0, 0, 0.5, 0.5], "task": "detect", "objects": ["dog"]})
    assert obs.error
    assert "opencv:hog+haar cannot detect 'dog'; it detects only: face, person" in obs.text
