"""No question ends in a traceback: DVD and VideoAgent2 against a model that overflows its
context, a model that repeats a failing call, and an OpenAI-compatible server that answers 400."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentkit import INDEX_SPECS, JSON_ONLY, action, build_library, call, hub
from faultserver import Behaviour, FaultServer, completion, rejected

from vidagent.agents.base import Answer, Question
from vidagent.agents.dvd.agent import DVDAgent
from vidagent.agents.videoagent2.agent import VideoAgent2Agent
from vidagent.app import Session
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ContextOverflowError
from vidagent.library import Library
from vidagent.models.base import ChatRequest, ToolCall
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.trace import ModelCall, Observed

OPTIONS = ("BYE", "HELLO VIDAGENT")
CONTEXT = 1500  # tokens of the small model below
Indexed = tuple[Library, str, Settings]


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    library, ids, settings = build_library(tmp_path_factory.mktemp("robust") / "lib", small_video)
    return library, ids[0], settings


@pytest.fixture
def server() -> Iterator[FaultServer]:
    s = FaultServer().start()
    yield s
    s.stop()


class SmallModel:
    """A reasoning model with a small window that refuses, as llama.cpp does, any request whose
    text holds more tokens than the window (four characters a token, as real tokenizers go)."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies, self.largest = list(replies), 0

    def __call__(self, request: ChatRequest) -> Any:
        tokens = sum(len(m.text) for m in request.messages) // 4 + (request.max_tokens or 0)
        self.largest = max(self.largest, tokens)
        if tokens > CONTEXT:
            raise ContextOverflowError(f"Requested tokens ({tokens}) exceed context window")
        return self.replies.pop(0)


def small(replies: list[Any], capabilities: Any = JSON_ONLY) -> tuple[FakeAdapter, SmallModel]:
    model = SmallModel(replies)
    caps = dataclasses.replace(capabilities, context_tokens=CONTEXT)
    return FakeAdapter.function(model, capabilities=caps), model


def fitted(answer: Answer) -> list[str]:
    assert answer.trace is not None
    return [e.fitted for e in answer.trace.of(ModelCall) if e.fitted]


# ---------------------------------------------------------------------------------------------
# A model whose context overflows


def test_dvd_fits_a_long_observation_into_a_small_context(indexed: Indexed) -> None:
    library, video_id, settings = indexed
    script = [
        action("global_browse", query="what is shown"),
        action("clip_search", event_description="text on screen", top_k=3),
        action("answer", answer="B"),
    ]
    llm, model = small(script)
    vlm = FakeAdapter.function(lambda req: "The frames show a wall. " * 1500)  # ~9,000 tokens
    answer = DVDAgent(library, hub(settings, llm, vlm)).run(
        Question("What text?", (video_id,), OPTIONS)
    )
    assert (answer.letter, answer.reason, answer.forced) == ("B", "answered", False)
    assert model.largest <= CONTEXT  # the model never saw a request it had to refuse
    assert any("cut in the middle" in note or "elided" in note for note in fitted(answer))


def test_videoagent2_fits_a_long_summary_into_a_small_context(indexed: Indexed) -> None:
    library, video_id, settings = indexed
    long_summary = FakeAdapter.function(lambda req: "The video shows a wall. " * 2000)
    with Session(settings, library=library, models=hub(settings, long_summary)) as session:
        prepared = session.agent("videoagent2", options={"cache_context": False})
        session.prepare(prepared, [video_id])
    llm, model = small(["Yes, the answer is B, (confidence score = 5)"])
    agent = VideoAgent2Agent(library, hub(settings, llm), tool_mode="native")
    answer = agent.run(Question("What text?", (video_id,), OPTIONS))
    assert (answer.letter, answer.reason, answer.confidence) == ("B", "answered", 1.0)
    assert model.largest <= CONTEXT
    assert fitted(answer) and "cut in the middle" in fitted(answer)[0]


# ---------------------------------------------------------------------------------------------
# A model that repeats a failing call


def test_dvd_ends_a_repeated_failing_call_with_a_forced_answer(indexed: Indexed) -> None:
    library, video_id, settings = indexed
    late = call("frame_inspect", question="what?", time_ranges_hhmmss=[["00:05:00", "00:06:00"]])
    llm = FakeAdapter.scripted([late] * 3 + ["(A) BYE"])
    answer = DVDAgent(library, hub(settings, llm)).run(Question("What text?", (video_id,), OPTIONS))
    assert (answer.letter, answer.forced, answer.reason) == ("A", True, "repeated_failures")
    assert answer.trace is not None
    failures = answer.trace.of(Observed)
    assert len(failures) == 3 and all(o.error for o in failures)
    assert "begins after the video ends" in failures[0].text
    assert "has now failed 3 times" in failures[-1].text
    assert len(llm.requests) == 4  # three turns, then the answer without tools


def test_videoagent2_ends_a_repeated_invalid_plan_with_a_forced_answer(indexed: Indexed) -> None:
    library, video_id, settings = indexed
    teleport = str({"Action": {"tool_name": "Teleport Tool", "frame_range": "3"}})

    def reply(request: ChatRequest) -> str:
        last = request.messages[-1].text
        if "You must choose" in last:
            return "Yes, the answer is B, (confidence score = 2)"
        if last.startswith(("To assist you", "Your answer is not")):
            return teleport
        return "Yes, the answer is A, (confidence score = 1)"

    hub_ = hub(settings, FakeAdapter.function(reply))
    with Session(settings, library=library, models=hub_) as session:
        result = session.ask(
            video_id,
            "What text?",
            options=OPTIONS,
            strategy="videoagent2",
            trace=False,
            strategy_options={"context": "index"},
        )
    answer = result.answer
    assert answer is not None
    assert (answer.letter, answer.forced, answer.reason) == ("B", True, "repeated_failures")
    invalid = result.trace.of(Observed)
    assert len(invalid) == 3 and "unknown tool 'Teleport Tool'" in invalid[0].text


def test_clamped_arguments_are_used_and_reported(indexed: Indexed) -> None:
    library, video_id, settings = indexed
    llm = FakeAdapter.scripted(
        [call("clip_search", event_description="text", top_k=2e15), call("answer", answer="B")]
    )
    answer = DVDAgent(library, hub(settings, llm)).run(Question("What text?", (video_id,), OPTIONS))
    assert answer.trace is not None
    search, _ = answer.trace.of(Observed)  # clip_search, then the answer tool
    assert not search.error and search.adjusted == ["top_k = 2e+15 is out of range; 200 was used"]
    assert search.text.startswith("(note: top_k = 2e+15 is out of range; 200 was used)")


# ---------------------------------------------------------------------------------------------
# A server that answers 400


def _tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    import json

    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _remote(server: FaultServer) -> Settings:
    return load_settings(
        {
            **INDEX_SPECS,
            "llm": "openai:agent",
            "vlm": "openai:vision",
            "openai_base_url": server.base_url,
            "openai_api_key": "sk-test",
            "max_retries": 0,
        }
    )


def test_dvd_a_vlm_refusal_is_an_observation_the_agent_reacts_to(
    indexed: Indexed, server: FaultServer
) -> None:
    library, video_id, _ = indexed
    inspect = {"question": "What text?", "time_ranges_hhmmss": [["00:00:05", "00:00:07"]]}
    server.script(
        Behaviour(body=completion("", tool_calls=[_tool_call("frame_inspect", **inspect)])),
        rejected("The response was filtered due to the prompt triggering content management"),
        Behaviour(body=completion("", tool_calls=[_tool_call("answer", answer="A")])),
    )
    with Models(_remote(server)) as models:
        answer = DVDAgent(library, models).run(Question("What text?", (video_id,), OPTIONS))
    assert (answer.letter, answer.reason) == ("A", "answered")
    assert answer.trace is not None
    refused, _ = answer.trace.of(Observed)
    assert refused.error and "RequestRejectedError" in refused.text and "filtered" in refused.text


def test_dvd_a_reasoning_model_refusal_forces_a_recorded_answer(
    indexed: Indexed, server: FaultServer
) -> None:
    library, video_id, _ = indexed
    server.script(
        Behaviour(
            body=completion("", tool_calls=[_tool_call("clip_search", event_description="x")])
        ),
        rejected("content filter"),
        Behaviour(body=completion("B")),
    )
    with Models(_remote(server)) as models:
        answer = DVDAgent(library, models).run(Question("What text?", (video_id,), OPTIONS))
    assert (answer.letter, answer.forced, answer.reason) == ("B", True, "model_error")
    assert answer.note.startswith("RequestRejectedError") and "content filter" in answer.note
    assert answer.trace is not None and answer.trace.answer is not None
    assert answer.trace.answer.note == answer.note


def test_videoagent2_a_refusal_twice_gives_an_empty_answer_saying_why(
    indexed: Indexed, server: FaultServer
) -> None:
    library, video_id, settings = indexed
    with Session(settings, library=library, models=hub(settings, FakeAdapter("echo"))) as session:
        session.prepare(session.agent("videoagent2", options={"context": "index"}), [video_id])
    server.script(rejected("content filter"), rejected("content filter"))
    with Models(_remote(server)) as models:
        agent = VideoAgent2Agent(library, models, context="index")
        answer = agent.run(Question("What text?", (video_id,), OPTIONS))
    assert (answer.text, answer.parsed, answer.forced, answer.reason) == (
        "",
        False,
        True,
        "model_error",
    )
    assert "the final answer call failed too" in answer.note
    assert answer.trace is not None and answer.trace.totals is not None  # the run finished


def test_an_unreachable_endpoint_is_not_asked_again_for_a_final_answer(indexed: Indexed) -> None:
    # A wrong base URL: the forced final answer went to the same dead endpoint, and a user
    # waited through its retries twice (37 s against 12 s with the default retries).
    import socket

    library, video_id, _ = indexed
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    settings = load_settings(
        {
            **INDEX_SPECS,
            "llm": "openai:agent",
            "openai_base_url": f"http://127.0.0.1:{port}/v1",
            "openai_api_key": "sk-test",
            "max_retries": 0,
        }
    )
    with Models(settings) as models:
        answer = DVDAgent(library, models).run(Question("What text?", (video_id,), OPTIONS))
    assert (answer.text, answer.forced, answer.reason) == ("", True, "model_error")
    assert answer.note.startswith("EndpointUnreachable") and "no final answer asked" in answer.note
    assert answer.trace is not None
    assert [e.role for e in answer.trace.of(ModelCall)] == ["llm"]  # one call, not two
    totals = answer.trace.totals
    assert totals is not None and totals.seconds == round(totals.seconds, 3)  # no binary noise


def test_tool_calls_carry_their_span_on_the_model_calls_inside(indexed: Indexed) -> None:
    """A model call made by a tool is stamped with that tool call's id (trace tree)."""
    library, video_id, settings = indexed
    inspect = call("frame_inspect", question="q", time_ranges_hhmmss=[["00:00:05", "00:00:06"]])
    llm = FakeAdapter.scripted([inspect, call("answer", answer="B")])
    answer = DVDAgent(library, hub(settings, llm)).run(Question("What text?", (video_id,), OPTIONS))
    assert answer.trace is not None
    vision = [e for e in answer.trace.of(ModelCall) if e.role == "tool_vlm"]
    assert [e.span for e in vision] == [ToolCall("call_frame_inspect", "", "").id]
    assert len({e.run for e in answer.trace.events}) == 1
