"""The runtime's guards, for every strategy: evidence first (the index's evidence for the question
and options as one observation before the first step) and no identical failing call run twice."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from agentkit import INDEX_SPECS, JSON_ONLY, action, call, hub
from factories import video_record

from vidagent.agents.base import Question
from vidagent.agents.dvd.agent import DVDAgent
from vidagent.agents.eea.agent import EEAAgent
from vidagent.app import Session
from vidagent.budget import Budget
from vidagent.cli.render import render
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ConfigError
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.models.base import ChatRequest
from vidagent.models.fake import FakeAdapter
from vidagent.prompts import load_prompt
from vidagent.trace import Observed, ToolCalled

OPTIONS = ("BYE", "HELLO VIDAGENT")
Indexed = tuple[Library, str, Settings]


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    """The fakes with the real offline OCR: the burned-in "HELLO VIDAGENT" (5-8 s) is read."""
    settings = load_settings({**INDEX_SPECS, "ocr": "rapidocr:pp-ocr"})
    library = Library(tmp_path_factory.mktemp("guards") / "lib")
    result = index_video(small_video, library=library, settings=settings)
    assert result.video is not None
    return library, result.video.video_id, settings


#: A fake standing in for the embedded smoke-test llm: its capabilities say it is a weak reasoner.
WEAK = dataclasses.replace(JSON_ONLY, weak_reasoner=True)


def smoke(settings: Settings) -> Settings:
    """The same settings naming the embedded smoke-test llm (a fake stands in for it)."""
    return settings.model_copy(update={"llm": "llamacpp:smollm2-135m"})


# ---------------------------------------------------------------------------------------------
# Evidence first


def test_dvd_sees_the_evidence_before_its_first_step_with_the_prompts_unchanged(
    indexed: Indexed,
) -> None:
    library, vid, settings = indexed
    llm = FakeAdapter.scripted([action("answer", answer="B")], capabilities=WEAK)
    agent = DVDAgent(library, hub(smoke(settings), llm))  # auto: on for the smoke-test llm
    question = Question("What text appears?", (vid,), OPTIONS)
    answer = agent.run(question)
    first = llm.requests[0].messages
    assert first[1].text == agent.user_prompt(question)  # Table 10's prompt, as without
    assert first[0].text.startswith(load_prompt("dvd_agent_system").strip())
    evidence = first[2]
    assert evidence.role == "user" and evidence.text.startswith("Observation from retrieval:")
    # The option shown on screen is found, with the clip holding it (5-8 s: the 5-10 s clip)
    assert '(B) HELLO VIDAGENT: found "hello", "vidagent".' in evidence.text
    assert "[00:00:05, 00:00:10] On-screen text:" in evidence.text
    assert "Best supported by the evidence: (B) HELLO VIDAGENT." in evidence.text
    assert "(A) BYE: found none of its words." in evidence.text
    # recorded as a call and its observation before step 1, and the answer rests on its spans
    assert answer.trace is not None
    called, seen = answer.trace.of(ToolCalled)[0], answer.trace.of(Observed)[0]
    assert (called.tool, called.step, seen.step) == ("retrieval", 0, 0)
    assert called.arguments == {"question": "What text appears?", "options": list(OPTIONS)}
    assert answer.letter == "B" and answer.evidence[0].to_list() == [vid, 5.0, 10.0]
    shown = "\n".join(render(answer.trace.events))
    assert "retrieval" in shown and "HELLO VIDAGENT" in shown  # a replay shows it


def test_evidence_first_retrieves_from_the_one_video_a_question_names(
    indexed: Indexed, tmp_path: Path
) -> None:
    library, vid, settings = indexed
    shutil.copytree(library.uri, tmp_path / "lib")
    both = Library(tmp_path / "lib")
    both.put_video(video_record("e" * 16, name="empty.mp4"))  # nothing indexed of it

    def evidence(asked: str) -> str:
        llm = FakeAdapter.scripted([action("answer", answer="B")], capabilities=WEAK)
        question = Question(asked, (vid, "e" * 16), OPTIONS)
        DVDAgent(both, hub(smoke(settings), llm)).run(question)
        return llm.requests[0].messages[2].text

    assert "HELLO VIDAGENT: found" in evidence("What text appears in the first video?")
    assert "HELLO VIDAGENT: found none" in evidence("What text appears in empty.mp4?")


def test_evidence_first_follows_the_setting_and_the_option(indexed: Indexed) -> None:
    library, vid, settings = indexed
    question = Question("What text appears?", (vid,), OPTIONS)

    def first_request(s: Settings, **options: str) -> list[str]:
        llm = FakeAdapter.scripted([action("answer", answer="B")], capabilities=JSON_ONLY)
        DVDAgent(library, hub(s, llm), **options).run(question)
        return [m.text for m in llm.requests[0].messages]

    assert len(first_request(settings)) == 2  # auto: off for any other llm
    assert len(first_request(smoke(settings), evidence_first="off")) == 2
    assert len(first_request(settings, evidence_first="on")) == 3
    configured = settings.model_copy(update={"evidence_first": "on"})  # the setting itself
    assert "Observation from retrieval" in first_request(configured)[2]


def test_evidence_first_is_refused_where_it_does_not_fit_and_checked(indexed: Indexed) -> None:
    library, _, settings = indexed
    models = hub(settings, FakeAdapter.scripted([]))
    with pytest.raises(ConfigError, match="eea does not take evidence_first"):
        EEAAgent(library, models, options={"evidence_first": "on"})
    with pytest.raises(ConfigError, match="evidence_first: choose auto, on or off"):
        DVDAgent(library, models, options={"evidence_first": "maybe"})
    with pytest.raises(ConfigError, match="evidence_first"):
        load_settings({**INDEX_SPECS, "evidence_first": "sometimes"})


def test_videoagent2_and_avi_see_the_evidence_before_their_first_turn(indexed: Indexed) -> None:
    library, vid, settings = indexed

    def reply(request: ChatRequest) -> str:
        return '{"thought": "", "answer": "B", "confidence": 5}'

    llm = FakeAdapter.function(reply, capabilities=WEAK)
    with Session(smoke(settings), library=library, models=hub(smoke(settings), llm)) as session:
        result = session.ask(
            vid,
            "What text appears?",
            options=OPTIONS,
            strategy="videoagent2",
            trace=False,
            strategy_options={"context": "index"},
        )
    first = llm.requests[0].messages
    assert first[0].text.startswith("Observation from retrieval:")
    assert first[1].text.startswith("Now we have a memory bank")  # prompt_Answer, unchanged
    assert result.answer is not None and result.answer.letter == "B"

    avi = FakeAdapter.scripted(
        [
            action("stage_switch", stage="perceive"),
            action("stage_switch", stage="review"),
            action("answer", answer="**Answer:**B"),
        ],
        capabilities=WEAK,
    )
    with Session(smoke(settings), library=library, models=hub(smoke(settings), avi)) as session:
        session.ask(vid, "What text appears?", options=OPTIONS, strategy="avi", trace=False)
    sent = avi.requests[0].messages
    assert [m.role for m in sent] == ["system", "user", "user"]
    assert sent[2].text.startswith("Observation from retrieval:")


# ---------------------------------------------------------------------------------------------
# No identical failing call twice


def test_an_identical_failing_call_runs_once_then_refusals_then_the_forced_answer(
    indexed: Indexed,
) -> None:
    library, vid, settings = indexed
    late = action("frame_inspect", question="what?", time_ranges_hhmmss=[["00:05:00", "00:06:00"]])
    llm = FakeAdapter.scripted([late] * 3 + ['{"answer": "A"}'], capabilities=JSON_ONLY)
    answer = DVDAgent(library, hub(settings, llm)).run(Question("What text?", (vid,), OPTIONS))
    assert (answer.letter, answer.forced, answer.reason) == ("A", True, "repeated_failures")
    assert answer.trace is not None
    assert len(answer.trace.of(ToolCalled)) == 1  # the tool ran once
    seen = answer.trace.of(Observed)
    assert len(seen) == 3 and all(o.error for o in seen)
    assert "begins after the video ends" in seen[0].text
    assert all("already failed at step 1 and was not run again" in o.text for o in seen[1:])
    assert "begins after the video ends" in seen[1].text  # the refusal says why it failed
    assert "has now failed 3 times" in seen[-1].text
    assert len(llm.requests) == 4  # three turns, then the answer without tools


def test_an_identical_call_that_worked_runs_again_except_with_the_smoke_test_llm(
    indexed: Indexed,
) -> None:
    library, vid, settings = indexed
    search = call("clip_search", event_description="text", top_k=2)
    late = call("frame_inspect", question="what?", time_ranges_hhmmss=[["00:05:00", "00:06:00"]])
    fixed = call("frame_inspect", question="what?", time_ranges_hhmmss=[["00:00:05", "00:00:08"]])
    script = [search, search, late, fixed, call("answer", answer="B")]
    question = Question("What text?", (vid,), OPTIONS)
    answer = DVDAgent(library, hub(settings, FakeAdapter.scripted(script))).run(question)
    assert answer.letter == "B" and not answer.forced
    assert answer.trace is not None
    assert [c.tool for c in answer.trace.of(ToolCalled)] == [
        "clip_search",
        "clip_search",
        "frame_inspect",
        "frame_inspect",
        "answer",
    ]
    assert [o.error for o in answer.trace.of(Observed)] == [False, False, True, False, False]
    # The embedded SmolLM2 loops on one call: its repeats are refused even when they worked.
    weak = dataclasses.replace(FakeAdapter.capabilities, weak_reasoner=True)
    models = hub(smoke(settings), FakeAdapter.scripted(script, capabilities=weak))
    looped = DVDAgent(library, models, evidence_first="off").run(question)
    assert looped.letter == "B" and looped.trace is not None
    assert [c.tool for c in looped.trace.of(ToolCalled)] == [
        "clip_search",
        "frame_inspect",
        "frame_inspect",
        "answer",
    ]
    seen = looped.trace.of(Observed)
    assert "already made (step 1); its result is above and unchanged" in seen[1].text


def test_a_forced_multiple_choice_answer_is_constrained_to_the_option_letters(
    indexed: Indexed,
) -> None:
    library, vid, settings = indexed
    llm = FakeAdapter.scripted(
        [action("clip_search", event_description="text")] * 2 + ['{"answer": "B"}'],
        capabilities=JSON_ONLY,
    )
    agent = DVDAgent(library, hub(settings, llm), budget=Budget(steps=2))
    answer = agent.run(Question("What text?", (vid,), OPTIONS))
    assert (answer.letter, answer.forced, answer.reason) == ("B", True, "max_steps")
    final = llm.requests[-1]
    assert final.response_schema is not None
    assert final.response_schema["properties"]["answer"]["enum"] == ["A", "B"]


def test_a_span_a_call_names_twice_is_the_answers_evidence_once(indexed: Indexed) -> None:
    """SmolLM2 asked frame_inspect for ``[["3", "3"], ["3", "3"], ["3", "3"]]`` on the
    generated 10-minute clip, and the answer listed that span three times."""
    library, vid, settings = indexed
    span = ["00:00:05", "00:00:08"]
    inspect = call("frame_inspect", question="what?", time_ranges_hhmmss=[span, span, span])
    script = [inspect, call("answer", answer="B")]
    question = Question("What text?", (vid,), OPTIONS)
    answer = DVDAgent(library, hub(settings, FakeAdapter.scripted(script))).run(question)
    assert answer.letter == "B" and answer.trace is not None
    assert len(answer.trace.of(Observed)[0].evidence) == 3  # the tool reports each range
    assert [e.to_list() for e in answer.evidence] == [[vid, 5.0, 8.0]]


@pytest.mark.parametrize(
    "limit", [{"seconds": float("nan")}, {"cost_usd": float("inf")}, {"steps": 0}]
)
def test_a_budget_that_is_not_a_positive_number_is_refused(limit: dict[str, float]) -> None:
    # nan fails every comparison: "nan <= 0" is false, and a nan limit was never reached
    (name,) = limit
    with pytest.raises(ConfigError, match=f"^budget {name} must be a positive number"):
        Budget(**limit)  # type: ignore[arg-type]
