"""Chat replies read as Server-Sent Events (``stream=1``): assembled as the server would have
answered at once, and cut where a reply turns degenerate; the same loop in a reply cut by its
cap is labelled without streaming."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from vidagent.exceptions import ServerError
from vidagent.models.base import ChatRequest, Message
from vidagent.models.openai import OpenAIAdapter
from vidagent.models.repetition import FINISH_REASON

REQUEST = ChatRequest(messages=(Message("user", "Make a plan."),), max_tokens=512)


def _event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    chunk = {"model": "m", "choices": [{"delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(chunk)}\n\n".encode()


class Stream:
    """A server streaming ``events``; counts how many it had to produce."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events
        self.sent = 0
        self.bodies: list[dict[str, Any]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))

        def produce() -> Iterator[bytes]:
            for event in self.events:
                self.sent += 1
                yield event

        return httpx.Response(200, content=produce())

    def adapter(self, **options: str) -> OpenAIAdapter:
        return OpenAIAdapter(
            "m",
            {"stream": "1", **options},
            base_url="http://server/v1",
            transport=httpx.MockTransport(self.handler),
        )


def test_a_streamed_reply_reads_as_the_whole_answer_with_its_usage() -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3}
    stream = Stream(
        [
            b": keep-alive\n\n",
            _event({"role": "assistant", "content": ""}),
            _event({"content": '{"plan": '}),
            _event({"content": '"look"}'}, "stop"),
            f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode(),
            b"data: [DONE]\n\n",
        ]
    )
    reply = stream.adapter().chat(REQUEST)
    assert reply.text == '{"plan": "look"}'
    assert reply.finish_reason == "stop"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (12, 3)
    (body,) = stream.bodies
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_a_degenerate_stream_is_cut_and_the_server_asked_for_no_more() -> None:
    events = [_event({"content": '{"plan": "'}), *[_event({"content": "1. "})] * 1000]
    stream = Stream([*events, _event({}, "length"), b"data: [DONE]\n\n"])
    reply = stream.adapter().chat(REQUEST)
    assert reply.finish_reason == FINISH_REASON
    assert reply.text.startswith('{"plan": "1. 1. ') and reply.text.endswith("1. ")
    assert stream.sent < 50  # about 128 characters of "1. ", not the 1,000 pieces
    assert reply.usage.output_tokens == stream.sent  # no usage chunk came: the pieces count


def test_streamed_tool_calls_are_assembled_from_their_pieces() -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "clip_search", "arguments": '{"q'}}
    rest = {"index": 0, "function": {"arguments": '": "door"}'}}
    stream = Stream([_event({"tool_calls": [call]}), _event({"tool_calls": [rest]}, "tool_calls")])
    reply = stream.adapter().chat(REQUEST)
    (tool,) = reply.tool_calls
    assert (tool.id, tool.name, json.loads(tool.arguments)) == ("c1", "clip_search", {"q": "door"})
    assert reply.finish_reason == "tool_calls"


def test_a_server_error_on_a_stream_is_a_server_error() -> None:
    adapter = OpenAIAdapter(
        "m",
        {"stream": "1"},
        base_url="http://server/v1",
        transport=httpx.MockTransport(lambda r: httpx.Response(503, json={"error": "busy"})),
    )
    with pytest.raises(ServerError, match="HTTP 503"):
        adapter.chat(REQUEST)


@pytest.mark.parametrize(
    ("text", "finish", "labelled"),
    [
        ('{"plan": "' + "1. " * 170, "length", FINISH_REASON),  # generated to the cap
        ("The man opens the door. " * 3 + "He walks in and sits down by the", "length", "length"),
        ("1. " * 170, "stop", "stop"),  # it ended by itself: left as it is
    ],
)
def test_without_streaming_a_capped_reply_ending_in_a_loop_is_labelled(
    text: str, finish: str, labelled: str
) -> None:
    body = {
        "model": "m",
        "choices": [{"message": {"content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 512},
    }
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=body)

    adapter = OpenAIAdapter("m", base_url="http://server/v1", transport=httpx.MockTransport(answer))
    reply = adapter.chat(REQUEST)
    assert reply.finish_reason == labelled and reply.text == text
    assert "stream" not in sent[0]  # streaming is asked for only with stream=1


def test_a_stopped_run_leaves_the_stream_and_the_server_writes_no_more() -> None:
    from vidagent.models.interrupt import CallInterrupted, checked_calls

    stream = Stream([_event({"content": "word "})] * 1000 + [b"data: [DONE]\n\n"])
    asked = 0

    def check() -> None:
        nonlocal asked
        asked += 1
        if asked > 20:
            raise RuntimeError("stopped by the caller")

    with checked_calls(check), pytest.raises(CallInterrupted, match="stopped by the caller"):
        stream.adapter().chat(REQUEST)
    assert stream.sent <= 21  # not the 1,000 pieces
