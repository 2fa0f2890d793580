from __future__ import annotations

import cv2
import numpy as np

from vidagent.models.base import ChatRequest, Detection, ImagePart, Message, TextLine
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import LABEL, PerceptionDescriber, dominant_colours


def jpeg(rgb: np.ndarray) -> ImagePart:
    return ImagePart(cv2.imencode(".jpg", rgb[:, :, ::-1])[1].tobytes())


def frames() -> list[np.ndarray]:
    red = np.zeros((120, 160, 3), np.uint8)
    red[:] = (220, 20, 20)
    blue = np.zeros((120, 160, 3), np.uint8)
    blue[:] = (20, 40, 220)
    return [red, blue]


def test_colours_have_plain_names() -> None:
    red, blue = frames()
    assert dominant_colours(red)[0][0] == "red"
    assert dominant_colours(blue)[0][0] == "blue"


def test_a_grey_is_grey_wherever_it_falls_among_the_quantised_levels() -> None:
    # (93, 96, 92) lies in the level centred on (80, 112, 80): "mostly green" was every clip's
    # caption of a grey-walled room, (128, 127, 128) "purple"
    for grey in [(93, 96, 92), (128, 127, 128), (95, 96, 97), (160, 159, 161)]:
        assert dominant_colours(np.full((360, 640, 3), grey, np.uint8)) == [("gray", 1.0)]


def test_colour_shares_count_every_sampled_pixel_once() -> None:
    """Shares are the fraction of sampled pixels per named colour (each quantised level named by
    the mean of its pixels), ties kept in (r, g, b) order: checked against a count over the
    unique quantised pixels on noise and on a two-tone frame."""
    from vidagent.models.perception import colour_name

    def reference(rgb: np.ndarray) -> list[tuple[str, float]]:
        small = rgb[:: max(1, rgb.shape[0] // 48), :: max(1, rgb.shape[1] // 64)].reshape(-1, 3)
        _, inverse, counts = np.unique(small // 32, axis=0, return_inverse=True, return_counts=True)
        shares: dict[str, float] = {}
        for k, count in enumerate(counts):
            name = colour_name(np.round(small[inverse.ravel() == k].mean(axis=0)))
            shares[name] = shares.get(name, 0.0) + count / len(small)
        return sorted(shares.items(), key=lambda kv: -kv[1])[:3]

    rng = np.random.default_rng(7)
    two_tone = np.zeros((360, 640, 3), np.uint8)
    two_tone[:, 320:] = (250, 250, 250)  # half black, half white: a tie
    frames = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((90, 160), (360, 640))]
    for rgb in [*frames, two_tone]:
        assert dominant_colours(rgb) == reference(rgb)
    assert dominant_colours(two_tone) == [("black", 0.5), ("white", 0.5)]


def test_report_states_measured_facts_and_is_labelled() -> None:
    detector = FakeAdapter(detect_fn=lambda img: [Detection("person", (0, 0, 40, 100), 0.9)])
    ocr = FakeAdapter(read_text_fn=lambda img: [TextLine("EXIT", (0, 0, 10, 10), 0.99)])
    describer = PerceptionDescriber(detector=detector, ocr=ocr)
    out = describer.chat(
        ChatRequest(messages=(Message("user", ("Describe.", *map(jpeg, frames()))),))
    )
    lines = out.text.splitlines()
    assert lines[0] == LABEL
    assert "red" in lines[1] and "1 person (left)" in lines[1] and '"EXIT"' in lines[1]
    assert "blue" in lines[2] and "change from previous image" in lines[2]


def test_questions_are_answered_by_the_llm_from_the_report_only() -> None:
    llm = FakeAdapter.function(lambda req: "The first image is red.")
    describer = PerceptionDescriber(llm=llm)
    out = describer.chat(
        ChatRequest(
            messages=(Message("user", ("What colour is the first image?", *map(jpeg, frames()))),)
        )
    )
    assert out.text == "The first image is red."
    sent = llm.requests[0].messages[0].text
    assert "You cannot see the images" in sent and LABEL in sent and "What colour" in sent
    assert llm.requests[0].image_count() == 0
    assert out.model.startswith("perception:describer+")


def test_a_schema_reaches_the_answering_llm_when_it_follows_schemas() -> None:
    """The describer hands a JSON schema on, so a local llm's grammar constrains the reply."""
    from vidagent.models.client import Models

    llm = FakeAdapter.function(lambda request: '{"answer": "B"}')
    describer = PerceptionDescriber(llm=llm)
    assert describer.capabilities.supports_json_schema
    assert not PerceptionDescriber(llm=None).capabilities.supports_json_schema
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    hub = Models.from_adapters({"vlm": describer})
    reply = hub.client("vlm").structured([Message("user", "Which?")], schema)
    assert reply.text == '{"answer": "B"}'
    assert llm.requests[-1].response_schema == schema
