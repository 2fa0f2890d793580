from __future__ import annotations

import numpy as np
import pytest

from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.models.base import ChatRequest, Message, ToolCall
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter


def ask(models: Models, text: str):  # type: ignore[no-untyped-def]
    return models.client("llm").chat(ChatRequest(messages=(Message("user", text),)))


def test_scripted_replies_come_in_order_then_run_out() -> None:
    call = ToolCall("c1", "clip_search", '{"query": "red car"}')
    fake = FakeAdapter.scripted(["first", call])
    models = Models.from_adapters({"llm": fake}, load_settings({"cache": "off"}))
    assert ask(models, "hello there").text == "first"
    second = ask(models, "go on")
    assert second.tool_calls == (call,) and second.finish_reason == "tool_calls"
    assert second.tool_calls[0].parsed_arguments() == {"query": "red car"}
    with pytest.raises(ConfigError, match="no replies left"):
        ask(models, "more")
    assert [r.messages[-1].text for r in fake.requests] == ["hello there", "go on", "more"]


def test_function_model_sees_the_request_and_counts_words() -> None:
    fake = FakeAdapter.function(lambda req: req.messages[-1].text.upper())
    models = Models.from_adapters({"llm": fake}, load_settings({"cache": "off"}))
    out = ask(models, "three little words")
    assert out.text == "THREE LITTLE WORDS"
    assert (out.usage.input_tokens, out.usage.output_tokens) == (3, 3)


def test_hash_embeddings_are_deterministic_and_share_words() -> None:
    models = Models(load_settings({"embed": "fake:hash?dim=128", "cache": "off"}))
    v = models.client("embed").embed(["red car parked", "a red car", "blue sky"]).vectors
    assert v.shape == (3, 128)
    assert np.allclose(
        v, models.client("embed").embed(["red car parked", "a red car", "blue sky"]).vectors
    )
    assert v[0] @ v[1] > v[0] @ v[2]


def test_scripted_from_a_spec_string() -> None:
    models = Models(load_settings({"llm": 'fake:scripted?replies=["A","B"]', "cache": "off"}))
    assert [ask(models, "q").text for _ in range(2)] == ["A", "B"]
