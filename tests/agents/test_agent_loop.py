"""The agent loop through DVD: every tool, every failure path, budgets and forced answers."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agentkit import JSON_ONLY, action, build_library, call, hub

from vidagent.agents.base import Question
from vidagent.agents.dvd.agent import FINISH_PROMPT, DVDAgent
from vidagent.budget import Budget
from vidagent.library.schema import ClipHit, ClipRow
from vidagent.models.base import ChatResponse, Message
from vidagent.models.context import ELIDED, fit_messages
from vidagent.models.fake import FakeAdapter
from vidagent.prompts import load_prompt
from vidagent.tools.retrieval import clip_text
from vidagent.trace import (
    AgentTurn,
    Answered,
    BudgetExhausted,
    FormatError,
    ModelCall,
    Observed,
    RunFinished,
    RunStarted,
    ToolCalled,
    Trace,
)

OPTIONS = ("GOODBYE", "HELLO VIDAGENT", "No text")


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_library(tmp_path_factory.mktemp("lib") / "lib", small_video)


def run(indexed: Any, llm: FakeAdapter, vlm: FakeAdapter | None = None, **kwargs: Any) -> Any:
    library, ids, settings = indexed
    agent = DVDAgent(library, hub(settings, llm, vlm), **kwargs)
    return agent.run(Question("What text appears on screen?", tuple(ids), OPTIONS))


def kinds(answer: Any) -> list[str]:
    return [e.kind for e in answer.trace.events if not isinstance(e, ModelCall)]


def observations(answer: Any) -> list[Observed]:
    return answer.trace.of(Observed)


def test_native_trajectory_through_every_tool(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            call("global_browse", query="what text is shown?"),
            call("clip_search", event_description="hello there", top_k=2),
            call(
                "frame_inspect",
                question="What text?",
                time_ranges_hhmmss=[["00:00:05", "00:00:08"]],
            ),
            call("answer", answer="(B) HELLO VIDAGENT"),
        ]
    )
    vlm = FakeAdapter.function(lambda req: f"saw {req.image_count()} images")
    answer = run(indexed, llm, vlm)

    assert (answer.choice, answer.letter, answer.parsed, answer.forced) == (1, "B", True, False)
    assert [(e.t0, e.t1) for e in answer.evidence] == [(5.0, 8.0)]
    assert kinds(answer) == ["run_started"] + ["agent_turn", "tool_called", "observed"] * 4 + [
        "answer",
        "run_finished",
    ]
    browse, search, inspect = observations(answer)[:3]
    # 250 frames, 5 to an image as the paper sends them (50 of the fake VLM's 64); memoised
    assert browse.frames == 250 and "saw 50 images" in browse.text and not browse.adjusted
    assert (
        browse.text.startswith("Subjects Information :\n")
        and "Event Information :\n" in browse.text
    )
    assert search.text.startswith("Searched Video Clip Scripts :\n")
    assert search.text.count("\n[") == 2 and len(search.evidence) == 2
    # frame_inspect: 5 s to 8 s at 2 fps = 7 frames, each labelled, with Table 11 verbatim
    assert inspect.frames == 7 and inspect.text == "saw 7 images"
    inspect_request = vlm.requests[-1]
    labels = [p for p in inspect_request.messages[1].content if isinstance(p, str)]
    assert labels[:-1] == [f"t=00:00:0{s}" for s in ("5", "5.5", "6", "6.5", "7", "7.5", "8")]
    assert labels[-1] == load_prompt("dvd_frame_inspect").strip().replace(
        "[question]", "What text?"
    )
    assert inspect_request.messages[0].text == "You are a helpful assistant to answer questions."
    totals = answer.trace.totals
    assert totals.steps == 4 and totals.frames == 257 and totals.model_calls == 8  # + citations


def test_global_browse_is_cached_per_query(indexed: Any) -> None:
    script = [
        call("global_browse", query="a query only this test asks"),
        call("answer", answer="A"),
    ]
    vlm = FakeAdapter.function(lambda req: "events")
    first = run(indexed, FakeAdapter.scripted(list(script)), vlm)
    second = run(indexed, FakeAdapter.scripted(list(script)), vlm)
    assert observations(first)[0].frames == 250 and observations(second)[0].frames == 0
    assert observations(second)[0].text == observations(first)[0].text
    assert len(vlm.requests) == 1


def test_json_actions_with_a_schema_for_models_without_tools(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            action("clip_search", "search first", event_description="hello"),
            action("answer", answer="B"),
        ],
        capabilities=JSON_ONLY,
    )
    answer = run(indexed, llm)
    assert answer.letter == "B" and not answer.forced
    first = llm.requests[0]
    assert not first.tools and first.response_schema is not None
    names = [
        c["properties"]["name"]["const"]
        for c in first.response_schema["properties"]["action"]["anyOf"]
    ]
    assert names == ["global_browse", "clip_search", "frame_inspect", "answer"]
    assert "Reply with exactly one JSON object" in first.messages[0].text
    # the observation comes back as text the model reads
    assert llm.requests[1].messages[-1].text.startswith("Observation from clip_search:\n")
    assert answer.trace.of(AgentTurn)[0].thought == "search first"


def test_malformed_json_is_retried_with_a_reminder(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        ["Sure! I will search.", '{"thought": "x"}', action("answer", answer="(B)")],
        capabilities=JSON_ONLY,
    )
    answer = run(indexed, llm)
    errors = answer.trace.of(FormatError)
    assert [e.attempt for e in errors] == [1, 2]
    assert "not valid JSON" in errors[0].problem and '"action"' in errors[1].problem
    retry = llm.requests[1].messages
    assert retry[-2].text == "Sure! I will search." and "not a valid action" in retry[-1].text
    assert answer.letter == "B" and answer.reason == "answered"


def test_a_reply_cut_at_its_token_limit_is_not_sent_back(indexed: Any) -> None:
    cut = '{"thought": "' + "the clip shows " * 40
    llm = FakeAdapter.scripted(
        [
            ChatResponse(cut, finish_reason="length"),
            ChatResponse(cut, finish_reason="repetition"),
            action("answer", answer="(B)"),
        ],
        capabilities=JSON_ONLY,
    )
    answer = run(indexed, llm, max_tokens=64)
    errors = answer.trace.of(FormatError)
    assert [e.problem for e in errors] == ["the reply was cut off at the 64-token limit"] * 2
    assert errors[0].reply == cut  # the trace keeps what was cut
    first, *retries = (r.messages for r in llm.requests)
    for retry in retries:  # the question as first asked, and a request for a brief reply
        assert retry[:-1] == first and cut not in retry[-1].text
        assert retry[-1].role == "user" and "Reply again, briefly," in retry[-1].text
    assert answer.letter == "B" and answer.reason == "answered"


def test_format_retries_run_out_then_a_final_answer_is_forced(indexed: Any) -> None:
    llm = FakeAdapter.scripted(["nope"] * 4 + ['{"answer": "C"}'], capabilities=JSON_ONLY)
    answer = run(indexed, llm)
    assert len(answer.trace.of(FormatError)) == 4  # first try + 3 retries
    assert (answer.letter, answer.forced, answer.reason) == ("C", True, "format_errors")
    assert llm.requests[-1].messages[-1].text == "Answer now with the option letter only."


@pytest.mark.parametrize("schema", [True, False])
def test_a_forced_answer_keeps_the_last_turn_s_prompt_for_a_schema_bound_model(
    indexed: Any, schema: bool
) -> None:
    """A model whose reply the answer's schema binds (a local model's grammar) gets the last
    turn's messages unchanged, protocol included, with the final prompt after them: a local
    model evaluates only what followed its turn. One that takes no schema gets the history
    without the protocol, whose form of reply (an action) the answer does not take."""
    caps = dataclasses.replace(JSON_ONLY, supports_json_schema=schema)
    search = action("clip_search", event_description="text")
    llm = FakeAdapter.scripted([search, search, '{"answer": "B"}'], capabilities=caps)
    answer = run(indexed, llm, budget=Budget(steps=2))
    assert (answer.letter, answer.forced, answer.reason) == ("B", True, "max_steps")
    turn, final = llm.requests[1].messages, llm.requests[2].messages
    assert "You can call these functions:" in turn[0].text
    assert final[-1].text == "Answer now with the option letter only."
    if schema:
        assert final[: len(turn)] == turn  # the same prefix, token for token
    else:
        assert "You can call these functions:" not in final[0].text
        assert final[1 : len(turn)] == turn[1:]


def test_unknown_tool_and_bad_arguments_come_back_as_observations(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            call("zoom_in", box=[0, 0, 1, 1]),
            call("frame_inspect", question="x", time_ranges_hhmmss="soon"),
            call("frame_inspect", question="x", time_ranges_hhmmss=[["00:10:00", "00:11:00"]]),
            call("frame_inspect", question="x", time_ranges_hhmmss=[["00:00:10", "00:05:00"]]),
            call("answer"),
            call("answer", answer="B"),
        ]
    )
    answer = run(indexed, llm)
    unknown, bad, late, clamped, no_answer = observations(answer)[:5]
    assert (
        unknown.error
        and "Unknown tool 'zoom_in'" in unknown.text
        and "frame_inspect" in unknown.text
    )
    assert bad.error and "time_ranges_hhmmss" in bad.text and "Expected: frame_inspect(" in bad.text
    assert late.error and "begins after the video ends" in late.text
    assert not clamped.error and clamped.evidence == [[answer.evidence[0].video_id, 10.0, 12.0]]
    assert no_answer.error and "'answer' is required" in no_answer.text
    assert answer.letter == "B" and answer.trace.totals.steps == 6
    # each error went back to the model as the tool's result
    assert llm.requests[1].messages[-1].role == "tool"
    assert "Unknown tool" in llm.requests[1].messages[-1].text


def test_max_steps_adds_the_finish_prompt_then_forces_an_answer(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [call("clip_search", event_description="text")] * 3 + ["(A) GOODBYE"]
    )
    answer = run(indexed, llm, budget=Budget(steps=3))
    assert (answer.letter, answer.forced, answer.reason) == ("A", True, "max_steps")
    assert llm.requests[2].messages[-1].text == FINISH_PROMPT  # step 3 of 3
    assert llm.requests[2].tools  # still offered the answer tool
    final = llm.requests[3]
    assert not final.tools and final.messages[-1].text == "Answer now with the option letter only."
    assert answer.trace.totals.steps == 3


def test_frame_budget_exhaustion_forces_an_answer(indexed: Any) -> None:
    llm = FakeAdapter.scripted([call("global_browse", query="q frames budget"), "B"])
    answer = run(indexed, llm, budget=Budget(frames=100))
    (exhausted,) = answer.trace.of(BudgetExhausted)
    assert (exhausted.budget, exhausted.used, exhausted.limit) == ("frames", 250, 100)
    assert (answer.letter, answer.forced, answer.reason) == ("B", True, "budget:frames")
    assert len(llm.requests) == 2 and not llm.requests[1].tools


def test_every_native_tool_call_has_a_reply_in_what_is_sent() -> None:
    from vidagent.agents.run import NOT_RUN, answer_tool_calls
    from vidagent.models.base import ToolCall

    first, second = ToolCall("a", "clip_search", "{}"), ToolCall("b", "frame_inspect", "{}")
    history = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=(first, second)),
        Message("tool", "found", tool_call_id="a", name="clip_search"),  # b never ran
        Message("user", "Answer now."),
    ]
    sent = answer_tool_calls(history)
    assert sent[:3] == history[:3] and sent[4:] == history[3:]
    assert (sent[3].role, sent[3].tool_call_id, sent[3].text) == ("tool", "b", NOT_RUN)
    assert answer_tool_calls(sent) == sent  # a history with every reply is sent as it is


def test_a_call_allowed_past_the_budgets_is_not_cut_by_time_and_the_allowance_ends() -> None:
    from vidagent.budget import BudgetExceeded, Meter

    meter = Meter(Budget(seconds=0.01))
    time.sleep(0.02)
    with meter.past_budgets():
        meter.interrupt()  # a final answer runs on
        with meter.past_budgets():
            meter.interrupt()
        meter.interrupt()  # still inside the outer one
    with pytest.raises(BudgetExceeded, match=r"seconds budget exhausted \(\d+\.\d of 0\.01\)"):
        meter.interrupt()  # the critic's calls after it can be cut again


def slow_first(first: str = "B", then: Any = "B", slow: int = 1, start: Any = None) -> FakeAdapter:
    """A model whose call number ``slow`` calls ``start`` (if given), then works (units of
    10 ms) until its run's check ends it, for at most 30 s, and then answers ``first``; other
    calls answer ``then`` at once."""
    from vidagent.models.interrupt import check_call

    calls = 0

    def reply(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls != slow:
            return then
        if start is not None:
            start()  # the caller stops the run, or its time runs out, while the call runs
        end = time.monotonic() + 30
        while time.monotonic() < end:
            check_call()
            time.sleep(0.01)
        return first

    return FakeAdapter.function(reply)


def spend_the_time() -> None:
    """The running question's time budget spent, as if its minute had passed."""
    from vidagent.agents.run import ACTIVE

    running = ACTIVE.get()
    assert running is not None
    running.meter.started -= 61


def test_a_call_under_way_when_the_time_budget_runs_out_is_ended_and_answered_after(
    indexed: Any,
) -> None:
    answer = run(indexed, slow_first(then="C", start=spend_the_time), budget=Budget(seconds=60))
    first, final = [e for e in answer.trace.of(ModelCall) if e.role == "llm"]
    assert first.error.startswith("interrupted: seconds budget exhausted (61.")
    (exhausted,) = answer.trace.of(BudgetExhausted)
    assert exhausted.budget == "seconds" and exhausted.used < 90  # not the 30 s call's end
    # the one last call may go over the budget: it is not cut, and it answers
    assert final.error is None and (answer.letter, answer.reason) == ("C", "budget:seconds")


def test_a_tool_whose_model_call_the_time_budget_ends_leaves_a_reply_for_the_answer(
    indexed: Any,
) -> None:
    from vidagent.agents.run import NOT_RUN

    inspect = call(
        "frame_inspect", question="What text?", time_ranges_hhmmss=[["00:00:05", "00:00:08"]]
    )
    llm = FakeAdapter.scripted([inspect, "B"])
    vlm = slow_first(start=spend_the_time)  # its minute passes while the VLM looks
    answer = run(indexed, llm, vlm, budget=Budget(seconds=60))
    assert (answer.letter, answer.reason) == ("B", "budget:seconds")
    assert [e.tool for e in answer.trace.of(ToolCalled)] == ["frame_inspect"]
    # the call the budget ended has a reply in the forced answer's history: an endpoint
    # refuses a tool call without one (400), and the question went unanswered
    sent = llm.requests[1].messages
    at = next(i for i, m in enumerate(sent) if m.tool_calls)
    assert (sent[at + 1].role, sent[at + 1].tool_call_id, sent[at + 1].text) == (
        "tool",
        inspect.id,
        NOT_RUN,
    )


def test_a_stopped_run_ends_the_call_under_way(indexed: Any) -> None:
    library, ids, settings = indexed
    stop = threading.Event()
    answer = DVDAgent(library, hub(settings, slow_first(start=stop.set))).run(
        Question("What text appears on screen?", tuple(ids), OPTIONS), should_stop=stop.is_set
    )
    (call,) = [e for e in answer.trace.of(ModelCall) if e.role == "llm"]  # no final call
    assert call.error == "interrupted: stopped by the caller"
    assert (answer.reason, answer.text) == ("stopped", "")
    from vidagent.cli.render import render

    shown = [line for line in render(answer.trace.events, calls=True) if "model llm" in line]
    assert shown[0].endswith("(interrupted: stopped by the caller)")


def test_a_stop_during_the_forced_answer_ends_the_run_stopped(indexed: Any) -> None:
    # the forced answer asks no budget before its call; a cancel reached it inside the call
    # (raised out of the run before the stop was handled)
    library, ids, settings = indexed
    stop = threading.Event()
    llm = slow_first(then=call("clip_search", event_description="hello"), slow=2, start=stop.set)
    answer = DVDAgent(library, hub(settings, llm), budget=Budget(steps=1)).run(
        Question("What text appears on screen?", tuple(ids), OPTIONS), should_stop=stop.is_set
    )
    first, final = [e for e in answer.trace.of(ModelCall) if e.role == "llm"]
    assert first.error is None and final.error == "interrupted: stopped by the caller"
    assert (answer.reason, answer.text, answer.forced) == ("stopped", "", True)


def test_token_budget_counts_every_model_call(indexed: Any) -> None:
    # Fake tokens are words: the prompts alone are ~420, so step 2 passes 500 and step 3 never starts.
    llm = FakeAdapter.scripted([call("clip_search", event_description="text")] * 2 + ["C"])
    answer = run(indexed, llm, budget=Budget(tokens=500))
    assert answer.reason == "budget:tokens" and answer.letter == "C"
    spent = answer.trace.totals
    assert spent.input_tokens + spent.output_tokens >= 500
    assert spent.steps == 2 and spent.model_calls == 6  # 3 llm + 2 embed + the citations' check


def test_an_unparsable_answer_is_recorded_not_guessed(indexed: Any) -> None:
    answer = run(indexed, FakeAdapter.scripted([call("answer", answer="I am not sure.")]))
    assert (answer.choice, answer.parsed, answer.text) == (None, False, "I am not sure.")
    assert answer.trace.answer.parsed is False


def test_text_reply_without_a_tool_call_is_the_answer(indexed: Any) -> None:
    answer = run(indexed, FakeAdapter.scripted(["The text says HELLO VIDAGENT, so (B)."]))
    assert answer.letter == "B" and answer.trace.totals.steps == 1


def test_trace_file_round_trips(indexed: Any, tmp_path: Path) -> None:
    library, ids, settings = indexed
    llm = FakeAdapter.scripted(
        [call("clip_search", event_description="hello"), call("answer", answer="B")]
    )
    path = tmp_path / "run.jsonl"
    seen: list[Any] = []
    answer = DVDAgent(library, hub(settings, llm)).run(
        Question("What text appears on screen?", tuple(ids), OPTIONS), Trace(path, [seen.append])
    )
    loaded = Trace.load(path)
    assert loaded.events == answer.trace.events == seen
    started = loaded.of(RunStarted)[0]
    assert started.strategy == "dvd" and started.budget["steps"] == 15
    assert (
        started.models["embed"] == "fake:hash?dim=32"
        and started.models["llm"] == "fake:scripted"
        and started.videos[0]["name"] == "small.mp4"
    )
    assert started.settings["browse_frames"] == 250
    assert loaded.of(ToolCalled)[0].arguments == {"event_description": "hello"}
    assert isinstance(loaded.events[-2], Answered) and isinstance(loaded.events[-1], RunFinished)


def test_fit_context_elides_oldest_observations_first() -> None:
    messages = [
        Message("system", "s"),
        Message("user", "question"),
        Message("assistant", "a1"),
        Message("user", "Observation from clip_search:\n" + "x" * 3000),
        Message("assistant", "a2"),
        Message("user", "Observation from frame_inspect:\n" + "y" * 3000),
        Message("assistant", "a3"),
    ]
    fitted, note = fit_messages(messages, limit=1200)
    assert fitted[3].text == f"Observation from clip_search:\n{ELIDED}"
    assert fitted[5].text.endswith("y" * 100)  # the newer one still fits
    assert note == "1 earlier message elided to fit 1200 tokens"
    assert fit_messages(messages, limit=10_000) == (messages, "")


def test_local_models_get_shorter_clip_texts(indexed: Any) -> None:
    script = [action("answer", answer="B")]
    local = DVDAgent(
        indexed[0], hub(indexed[2], FakeAdapter.scripted(script, capabilities=JSON_ONLY))
    )
    question = Question("q", tuple(indexed[1]), OPTIONS)
    local.run(question)
    endpoint = dataclasses.replace(FakeAdapter.capabilities, local=False)
    scripted = FakeAdapter.scripted([call("answer", answer="B")], capabilities=endpoint)
    remote = DVDAgent(indexed[0], hub(indexed[2], scripted))
    remote.run(question)
    assert local.tool_options(question).retrieval.caption_words == 120
    assert remote.tool_options(question).retrieval.caption_words is None


def test_clip_text_is_cut_to_the_word_limit() -> None:
    clip = ClipRow("v", 0, 0.0, 5.0, caption="one two three four five six", transcript="hi there")
    assert clip_text(ClipHit(clip, 0.9)) == 'one two three four five six Speech: "hi there"'
    assert clip_text(ClipHit(clip, 0.9), words=4) == "one two three four …"


def test_a_describer_caption_is_not_followed_by_its_own_speech_and_text_again() -> None:
    from vidagent.ingest.describe import describe

    clip = ClipRow(
        "v", 0, 0.0, 5.0, transcript="lift off", ocr_text="T-MINUS 1\nx7#q", ocr_model="ocr"
    )
    caption, facts = describe(clip, [], [], [])
    described = dataclasses.replace(clip, caption=caption, facts=facts.to_json())
    text = clip_text(ClipHit(described, 0.9))
    assert text == caption and text.count("lift off") == 1 and '"T-MINUS 1"' in text
    # a vision-language model's caption (no describer facts) still gets them appended
    captioned = dataclasses.replace(clip, caption="A rocket on its pad.")
    assert clip_text(ClipHit(captioned, 0.9)) == (
        'A rocket on its pad. Speech: "lift off" On-screen text: "T-MINUS 1\nx7#q"'
    )


def test_a_reply_that_is_not_json_says_where_in_words_that_read() -> None:
    from vidagent.agents.actions import parse_action

    # json's own message ends "starting at", so "... at character 13" read "at at"
    assert parse_action('{"answer": "B') == (
        "the reply is not valid JSON (Unterminated string starting at, character 11)"
    )
