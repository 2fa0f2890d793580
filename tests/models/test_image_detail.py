"""OpenAI's image ``detail`` (spec option ``detail=low|high|auto``): sent on every image part,
and the estimate bills frames by OpenAI's documented rule at that detail."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image
from tokenserver import TokenServer

from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.ingest.caption import Caption
from vidagent.media import probe
from vidagent.models import load_model
from vidagent.models.base import ChatRequest, ImagePart, Message
from vidagent.models.openai import OpenAIAdapter, image_tokens


def jpeg(width: int = 64, height: int = 48) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, "JPEG")
    return out.getvalue()


def request() -> ChatRequest:
    image = ImagePart(jpeg(), "image/jpeg")
    return ChatRequest((Message("user", ("what is shown?", image)),), temperature=0.0)


def image_parts(body: dict) -> list[dict]:
    return [p for m in body["messages"] for p in m["content"] if p["type"] == "image_url"]


@pytest.mark.parametrize("detail", ["low", "high", "auto"])
def test_the_detail_option_is_sent_on_every_image_part(detail: str) -> None:
    adapter = OpenAIAdapter("gpt-4o", {"detail": detail}, base_url="http://127.0.0.1:9/v1")
    (part,) = image_parts(adapter.chat_body(request()))
    assert part["image_url"]["detail"] == detail
    assert part["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_without_the_option_no_detail_is_sent_and_a_bad_one_is_a_config_error() -> None:
    plain = OpenAIAdapter("gpt-4o", {}, base_url="http://127.0.0.1:9/v1")
    (part,) = image_parts(plain.chat_body(request()))
    assert "detail" not in part["image_url"]  # OpenAI's own default (auto) applies
    with pytest.raises(ConfigError, match="detail='medium' must be one of low, high, auto"):
        load_model("openai:gpt-4o?detail=medium", load_settings({}))


def test_the_detail_reaches_the_server_through_the_spec() -> None:
    with TokenServer() as server:
        settings = load_settings({"openai_base_url": server.base_url})
        load_model("openai:gpt-4o?detail=low", settings).chat(request())
        (part,) = image_parts(server.bodies()[0])
    assert part["image_url"]["detail"] == "low"


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),  # OpenAI's worked examples: 768 px, 4 tiles
        ((2048, 4096), "high", 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
        ((4096, 8192), "low", 85),
        ((1280, 720), None, 1105),  # a 720p frame, the DVD paper's: 3 x 2 tiles
        ((640, 360), "auto", 425),  # 2 x 1 tiles
    ],
)
def test_image_tokens_follow_openais_rule(size: tuple[int, int], detail: str, tokens: int) -> None:
    assert image_tokens(*size, detail) == tokens


def test_the_caption_estimate_honours_the_detail(small_video: Path) -> None:
    info = probe(small_video)  # 640 x 360, 12 s: 24 frames at 2 fps
    high = Caption().estimate(info, 3, load_settings({"vlm": "openai:gpt-4o"}))
    low = Caption().estimate(info, 3, load_settings({"vlm": "openai:gpt-4o?detail=low"}))
    assert high.input_tokens - low.input_tokens == 24 * (425 - 85)
    assert "85 tokens per frame (low detail)" in low.notes
    assert "425 tokens per frame (640x360 at OpenAI's high detail)" in high.notes
