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
