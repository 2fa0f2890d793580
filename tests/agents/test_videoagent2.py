"""VideoAgent2: Algorithm 1's phases and branches on scripted models, the Table 4 ablations, the
paper's prompts verbatim, and ``vidagent ask --strategy videoagent2``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agentkit import INDEX_SPECS, JSON_ONLY, build_library
from clirun import vidagent
from faultserver import Behaviour, FaultServer, completion

from vidagent.agents.base import Answer, Question
from vidagent.agents.strategies import strategy_class
from vidagent.agents.videoagent2.agent import VideoAgent2Agent, video_names
from vidagent.agents.videoagent2.memory import (
    MemoryBank,
    ToolRecord,
    VideoContext,
    parse_assessment,
    parse_plan,
    strip_confidences,
)
from vidagent.app import Session, ask
from vidagent.budget import Budget
from vidagent.cli.render import render
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ConfigError
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.library.views import Line
from vidagent.models.base import Adapter, ChatRequest, Detection
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.registry import create_adapter
from vidagent.prompts import load_prompt
from vidagent.trace import Observed, PhaseChanged, RunStarted, ToolCalled, Trace

OPTIONS = ("BYE", "HELLO VIDAGENT")
QUESTION = "What text appears?"
SEGMENT_CAPTION = "#C C looks at a sign on the wall."
FRAME_CAPTION = "A sign reads HELLO VIDAGENT (confidence=0.90), on a white wall (confidence=0.60)."
NO = "No, I do not have enough information to answer the question. (confidence score = 0)"
FORMAT = "in the following JSON format: {’Action’: ’tool call command’}."


def says(letter: str, confidence: int) -> str:
    return f"Yes, the answer is {letter}, (confidence score = {confidence})"


def action(tool: str, frames: str, **more: str) -> str:
    """A Python-dict action as GPT-4o writes the paper's command format."""
    return str({"Action": {"tool_name": tool, "frame_range": frames, **more}})


CAPTION_5_7 = "Plan: look at the sign.\n" + action("Image Caption Tool", "5-7")


class Script:
    """An llm that answers each kind of prompt from its own queue and keeps every request."""

    def __init__(self, answers: Sequence[str], plans: Sequence[str] = ()) -> None:
        self.answers, self.plans = list(answers), list(plans)
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> str:
        self.requests.append(request)
        last = request.messages[-1].text
        if last.startswith("A long video is segmented"):
            return "S: a sign."
        return (self.answers if last.startswith("Now we have") else self.plans).pop(0)

    def prompts(self, start: str) -> list[str]:
        return [r.messages[-1].text for r in self.requests if r.messages[-1].text.startswith(start)]


def vlm_reply(request: ChatRequest) -> str:
    system = request.messages[0].text
    if system.startswith("You narrate short clips"):
        return SEGMENT_CAPTION
    assert system.startswith("You are an assistant that generates descriptive captions")
    return FRAME_CAPTION


def person(_rgb: Any) -> list[Detection]:
    return [Detection("person", (100.0, 50.0, 300.0, 350.0), 0.8)]


def models(settings: Settings, llm: Adapter, vlm: Adapter | None = None) -> Models:
    adapters = {
        "llm": llm,
        "vlm": vlm or FakeAdapter.function(vlm_reply),
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "detector": FakeAdapter(detect_fn=person),
        "ocr": FakeAdapter(),
        "asr": FakeAdapter("echo", {"text": "hello there"}),
    }
    return Models.from_adapters(adapters, settings)


Indexed = tuple[Library, str, Settings]


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    """small.mp4 indexed with the defaults: 5 s clips, so VideoAgent2 builds its 4 s context."""
    library, ids, settings = build_library(tmp_path_factory.mktemp("va2") / "lib", small_video)
    return library, ids[0], settings


def answer_with(agent: VideoAgent2Agent, question: Question) -> Answer:
    """The agent's answer after the application layer built its general context."""
    with Session(agent.models.settings, library=agent.library, models=agent.models) as session:
        session.prepare(agent, question.video_ids)
    return agent.run(question)


def run(indexed: Indexed, script: Script, capabilities: Any = None, **options: Any) -> Answer:
    library, video_id, settings = indexed
    llm = FakeAdapter.function(script, capabilities=capabilities)
    options.setdefault("cache_context", False)
    agent = VideoAgent2Agent(library, models(settings, llm), **options)
    return answer_with(agent, Question(QUESTION, (video_id,), OPTIONS))


def outcome(answer: Answer) -> tuple[Any, ...]:
    return answer.letter, answer.confidence, answer.reason, answer.forced


def phases(answer: Answer, name: str) -> list[dict[str, Any]]:
    assert answer.trace is not None
    return [e.data for e in answer.trace.of(PhaseChanged) if e.phase == name]


def tool_calls(answer: Answer) -> list[tuple[str, Any]]:
    assert answer.trace is not None
    return [(e.tool, e.arguments) for e in answer.trace.of(ToolCalled)]


def bank_of(prompt: str) -> Any:
    """The memory bank an answer prompt holds."""
    return json.loads(prompt[prompt.index("{\n") : prompt.index("\n}") + 2])


# ---------------------------------------------------------------------------------------------
# Algorithm 1


def test_confident_at_t1_answers_from_the_general_context(indexed: Indexed) -> None:
    script = Script(["The sign says hello. Yes, the  answer is B, (confidence  score = 5)"])
    answer = run(indexed, script)
    assert outcome(answer) == ("B", 1.0, "answered", False)
    assert [p["confidence"] for p in phases(answer, "assess")] == [5.0]
    assert phases(answer, "plan") == [] and tool_calls(answer) == []
    (context,) = phases(answer, "context")
    assert context["source"] == "built" and context["segments"] == 3  # 12 s in 4 s segments
    (prompt,) = script.prompts("Now we have a memory bank")
    bank = bank_of(prompt)
    assert list(bank) == ["Caption", "Summary", "Tools return value"]
    assert bank["Caption"] == {f"{a}s-{a + 4}s": SEGMENT_CAPTION for a in (0, 4, 8)}
    assert bank["Summary"] == "S: a sign." and bank["Tools return value"] == []
    assert f"the question {QUESTION}\n(A) BYE\n(B) HELLO VIDAGENT?If you don’t" in prompt


def test_plan_is_created_then_adjusted_and_returns_merge_with_confidence(indexed: Indexed) -> None:
    adjust = (
        "The caption is unsure about the wall; look for objects.\n```\n{’Action’: {’tool_name’: "
        "’Object Detection Tool’, ’frame_range’: ’6’ # or ’start frame-end frame’}}\n```"
    )
    answers = [NO, "I think the answer is A. " + says("B", 3), says("(B) HELLO VIDAGENT", 5)]
    script = Script(answers, [CAPTION_5_7, adjust])
    answer = run(indexed, script)
    assert outcome(answer) == ("B", 1.0, "answered", False)
    assessed = [(p["answer"], p["confidence"]) for p in phases(answer, "assess")]
    assert assessed == [(None, 0.0), ("B", 3.0), ("(B) HELLO VIDAGENT", 5.0)]
    plans = phases(answer, "plan")
    assert [(p["action"]["tool_name"], p["adjusted"]) for p in plans] == [
        ("Image Caption Tool", False),
        ("Object Detection Tool", True),
    ]
    assert plans[0]["plan"] == "Plan: look at the sign."
    assert tool_calls(answer) == [
        ("caption_frames", {"start": 5.0, "end": 7.0}),
        ("detect_objects", {"time": 6.0}),
    ]
    caption, detection = answer.trace.of(Observed)
    assert (
        caption.confidence == pytest.approx(0.75) and "VIDAGENT (confidence=0.90)" in caption.text
    )
    assert detection.confidence == pytest.approx(0.8) and "person 1" in detection.text

    create, adjusted = script.prompts("To assist you"), script.prompts("Your answer is not")
    assert create == [load_prompt("videoagent2_create_plan").strip()]
    assert adjusted == [load_prompt("videoagent2_adjust_plan").strip()]
    # one chat: every turn stays, the banks superseded by B_3 are elided
    chat = script.requests[-1].messages
    assert [m.role for m in chat] == ["user", "assistant"] * 4 + ["user"]
    assert "the latest one follows below" in chat[0].text and SEGMENT_CAPTION not in chat[0].text
    assert [chat[2].text, chat[3].text, chat[6].text, chat[7].text] == [
        create[0],
        CAPTION_5_7,
        adjusted[0],
        adjust,
    ]
    first, second = bank_of(chat[-1].text)["Tools return value"]
    assert first["call"] == {"tool_name": "Image Caption Tool", "frame_range": "5-7"}
    assert first["step"] == 1 and first["confidence"] == 0.75
    assert "(confidence=0.60)" in first["return"]
    assert second["call"]["frame_range"] == "6" and second["confidence"] == 0.8


def test_t_reached_returns_the_last_answer_without_a_plan(indexed: Indexed) -> None:
    script = Script([says("A", 2)] * 3, [CAPTION_5_7] * 2)
    answer = run(indexed, script, max_assessments=3)
    assert outcome(answer) == ("A", 0.4, "max_steps", False)
    assert len(script.prompts("Now we have")) == 3 and len(tool_calls(answer)) == 2  # T - 1
    started = answer.trace.of(RunStarted)[0]
    assert started.budget["steps"] == 3 and started.settings["max_assessments"] == 3
    assert answer.trace.totals.steps == 3


def test_no_answer_at_t_forces_one_more_choice(indexed: Indexed) -> None:
    script = Script([NO, NO, says("B", 2)], [CAPTION_5_7])
    answer = run(indexed, script, max_assessments=2)
    assert outcome(answer) == ("B", 0.4, "max_steps", True)
    final = script.requests[-1].messages[-1].text
    assert final.endswith("You must choose the single most likely option.")


def test_a_spent_budget_ends_in_a_forced_answer(indexed: Indexed) -> None:
    script = Script([says("A", 1)] * 2, [CAPTION_5_7])
    answer = run(indexed, script, budget=Budget(frames=2))
    assert outcome(answer) == ("A", 0.2, "budget:frames", True)
    assert len(tool_calls(answer)) == 1  # the caption of frames 5-7 spent it


def test_bad_tool_calls_become_error_records(indexed: Indexed) -> None:
    zoom = action("Image Zoom in and Caption Tool", "6", bbox="[320, 0, 640, 180]")
    script = Script([says("A", 1)] * 4, ["I will just think.", action("Teleport", "1"), zoom])
    answer = run(indexed, script, max_assessments=4)
    observed = answer.trace.of(Observed)
    assert [o.error for o in observed] == [True, True, False]
    assert "Invalid tool call: unknown tool ''" in observed[0].text
    assert "unknown tool 'Teleport'" in observed[1].text
    zoomed = {"time": 6.0, "box": [0.5, 0.0, 1.0, 0.5], "task": "caption"}  # pixels of 640x360
    assert tool_calls(answer)[-1] == ("zoom_in", zoomed)
    bank = script.prompts("Now we have")[-1]
    assert '"confidence": 0.0' in bank and "Teleport" in bank


def test_json_protocol_for_models_without_tool_calling(indexed: Indexed) -> None:
    track = {"tool_name": "Object Tracking Tool", "object_name": "person", "frame_range": "0-4"}
    script = Script(
        [
            json.dumps({"thought": "Not sure.", "answer": "none", "confidence": 0}),
            json.dumps({"thought": "The track shows a person.", "answer": "B", "confidence": 5}),
        ],
        [json.dumps({"plan": "Track the person.", "Action": track})],
    )
    answer = run(indexed, script, capabilities=JSON_ONLY)
    assert outcome(answer) == ("B", 1.0, "answered", False)
    assert answer.trace.of(RunStarted)[0].settings["protocol"] == "json"
    assert tool_calls(answer) == [
        ("track_object", {"object_name": "person", "start": 0.0, "end": 4.0})
    ]
    assess, plan = script.requests[1], script.requests[2]
    assert list(assess.response_schema["properties"]) == ["thought", "answer", "confidence"]
    assert assess.response_schema["properties"]["answer"]["enum"] == ["A", "B", "none"]
    assert assess.messages[-1].text.endswith("else your confidence score from 1 to 5.")
    choices = plan.response_schema["properties"]["Action"]["anyOf"]
    assert [c["properties"]["tool_name"]["enum"] for c in choices] == [
        ["Image Caption Tool"],
        ["Object Detection Tool"],
        ["Image Zoom in and Caption Tool"],
        ["Image Zoom in and Object Detection Tool"],
        ["Object Tracking Tool"],
    ]
    frames = choices[-1]["properties"]["frame_range"]
    assert frames["pattern"] == "^[0-9]{1,2}(-[0-9]{1,2})?$"  # frames 0 to 12
    assert plan.messages[-1].text.endswith('"Action" is the command to call a tool.')
    assert phases(answer, "plan")[0]["plan"] == "Track the person."


# ---------------------------------------------------------------------------------------------
# Table 4's ablations


def test_ablation_1_tools_give_no_confidence(indexed: Indexed) -> None:
    script = Script([says("A", 1), says("B", 5)], [CAPTION_5_7])
    answer = run(indexed, script, tool_confidence=False)
    assert answer.trace.of(RunStarted)[0].settings["tool_confidence"] is False
    assert answer.trace.of(Observed)[0].confidence == pytest.approx(0.75)  # the trace keeps it
    bank = script.prompts("Now we have")[-1]
    assert "HELLO VIDAGENT, on a white wall." in bank
    assert "confidence=" not in bank and '"confidence"' not in bank and "Mean clause" not in bank


def test_strip_confidences_covers_every_tool_format() -> None:
    text = (
        "Objects (detector d, tracker t, window ±5 frames):\n6.0s:\n- person 1: box [0.1, 0.2, "
        "0.3, 0.4], confidence 0.87 (best detection 0.91 at 3.0s, tracked to 6.0s)\n"
        "Track of person from 0.0s to 4.0s (mil at 5 fps, started from the detection at 1.0s "
        "scoring 0.80):\n- 1.0s: box [0.1, 0.2, 0.3, 0.4], confidence 0.78\n"
        '- "HELLO" (confidence=0.95)\nA dog [0.7] sits (Confidence: 85%).\n'
        "Mean clause confidence 0.82 over 2 clauses."
    )
    stripped = strip_confidences(text)
    assert not any(score in stripped for score in ("0.87", "0.91", "0.80", "0.78", "0.95", "85"))
    assert "(detected at 3.0s, tracked to 6.0s)" in stripped and '- "HELLO"' in stripped
    assert "A dog [0.7] sits." in stripped and "Mean clause" not in stripped


def test_ablation_2_plan_once_and_run_it_unchanged(indexed: Indexed) -> None:
    plan = "Caption, then detect.\n" + action("Image Caption Tool", "5")
    plan += "\n" + action("Object Detection Tool", "7")
    script = Script([says("A", 1)] * 4, [plan])
    answer = run(indexed, script, adjust_plan=False, max_assessments=4)
    (create,) = script.prompts("To assist you")
    assert create.endswith(f"Then please\noutput every action of the plan, in order, each {FORMAT}")
    assert script.prompts("Your answer is not") == []
    assert [tool for tool, _ in tool_calls(answer)] == ["caption_frames", "detect_objects"]
    assert outcome(answer) == ("A", 0.2, "plan_done", False)  # two actions, three assessments
    assert len(script.prompts("Now we have")) == 3
    assert phases(answer, "plan")[1]["plan"] == "(the plan of t = 1, unchanged)"


def test_ablation_2_asks_for_every_action_in_json(indexed: Indexed) -> None:
    actions = [{"tool_name": "Image Caption Tool", "frame_range": str(f)} for f in (2, 3, 4)]
    low = json.dumps({"thought": "?", "answer": "A", "confidence": 1})
    script = Script([low] * 3, [json.dumps({"plan": "Look thrice.", "Actions": actions})])
    answer = run(indexed, script, capabilities=JSON_ONLY, adjust_plan=False, max_assessments=3)
    schema = script.requests[2].response_schema["properties"]
    assert list(schema) == ["plan", "Actions"] and schema["Actions"]["maxItems"] == 2  # T - 1
    assert [args["start"] for _, args in tool_calls(answer)] == [2.0, 3.0]
    assert outcome(answer) == ("A", 0.2, "max_steps", False)


def test_ablation_3_no_chain_of_thought(indexed: Indexed) -> None:
    direct = action("Image Caption Tool", "5")
    script = Script([says("A", 1), says("A", 1), says("B", 5)], [direct, direct])
    answer = run(indexed, script, chain_of_thought=False)
    assert answer.letter == "B"
    assess = script.prompts("Now we have")[0]
    assert "step by step" not in assess
    assert "by some tools.\n\nAre you able to answer the question What text appears?" in assess
    (first,) = script.prompts("To assist you")
    assert "information retrieval plan" not in first
    assert first.endswith(
        f"only one tool can be called at a time. Please output the action directly {FORMAT}"
    )
    (second,) = script.prompts("Your answer is not")
    assert (
        second
        == f"Your answer is not confident enough. Please output the next action directly {FORMAT}"
    )
    assert [p["plan"] for p in phases(answer, "plan")] == ["", ""]


def test_ablation_4_no_tools_answers_from_b1(indexed: Indexed) -> None:
    script = Script([says("A", 2)])
    answer = run(indexed, script, tools=False)
    assert outcome(answer) == ("A", 0.4, "max_steps", False)
    assert script.prompts("To assist") == [] and tool_calls(answer) == []
    settings = answer.trace.of(RunStarted)[0].settings
    switches = ("tools", "tool_confidence", "adjust_plan", "chain_of_thought")
    assert [settings[k] for k in switches] == [False, True, True, True]


# ---------------------------------------------------------------------------------------------
# General context


def test_an_index_of_4s_clips_is_reused(small_video: Path, tmp_path: Path) -> None:
    settings = load_settings({**INDEX_SPECS, "clip_seconds": 4})
    library = Library(tmp_path / "lib")
    video = index_video(small_video, library=library, settings=settings).video
    assert video is not None
    script = Script([says("B", 5)])
    answer = run((library, video.video_id, settings), script)
    (context,) = phases(answer, "context")
    assert context == {"source": "index", "segments": 3, "summary": "A short test video."}
    assert script.prompts("A long video") == []  # the index's summary, not a new one
    captions = bank_of(script.prompts("Now we have")[0])["Caption"]
    assert all(c.startswith("[perception describer") for c in captions.values())


def test_a_built_context_is_cached_in_the_library(indexed: Indexed) -> None:
    library, video_id, _ = indexed
    scripts = [Script([says("B", 5)]), Script([says("B", 5)])]
    answers = [run(indexed, s, cache_context=True, segment_seconds=6) for s in scripts]
    assert [phases(a, "context")[0]["source"] for a in answers] == ["built", "built"]
    assert len(scripts[0].prompts("A long video")) == 1 and scripts[1].prompts("A long video") == []
    assert library.artifact(video_id, "context", "videoagent2:6s@1fps") is not None
    assert bank_of(scripts[1].prompts("Now we have")[0]) == bank_of(scripts[0].prompts("Now we")[0])


def test_the_describer_captions_segments_from_the_index_rows(indexed: Indexed) -> None:
    library, video_id, settings = indexed
    script = Script([says("B", 5)])
    describer = create_adapter("perception:describer", settings, "vlm")
    agent = VideoAgent2Agent(library, models(settings, FakeAdapter.function(script), describer))
    answer = answer_with(agent, Question(QUESTION, (video_id,), OPTIONS))
    captions = bank_of(script.prompts("Now we have")[0])["Caption"]
    assert answer.letter == "B" and list(captions) == ["0s-4s", "4s-8s", "8s-12s"]
    assert all(c.startswith("[perception describer") for c in captions.values())
    assert all('Speech: "hello there"' in c for c in captions.values())  # fake asr, all spans


# ---------------------------------------------------------------------------------------------
# Parsing and prompts


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (says("B", 4), ("B", 4.0)),
        (
            "the answer is A?\nYes, the  answer is (C) a dog,\n(confidence  score = 4.5)",
            ("(C) a dog", 4.5),
        ),
        ("No, I do not  have enough information. (confidence score = 0)", (None, 0.0)),
        (says("B", 0), (None, 0.0)),
        ("Yes, the answer is ’B’, (confidence score = 9)", ("B", 5.0)),
        ("I am not sure.", (None, 0.0)),
        ('{"thought": "t", "answer": "A", "confidence": 3}', ("A", 3.0)),
        ('{"thought": "t", "answer": "none", "confidence": 2}', (None, 0.0)),
    ],
)
def test_parse_assessment(reply: str, expected: tuple[str | None, float]) -> None:
    assert parse_assessment(reply) == expected


def test_parse_plan_reads_the_papers_command_format() -> None:
    text, commands = parse_plan(
        "1. Find the man.\n2. Zoom.\n{’Action’: {’tool_name’: ’Object Tracking Tool’, "
        "’object_name’: ’man’,\n’frame_range’: ’0-10’ # or ’start frame-end frame’}}"
    )
    assert text == "1. Find the man.\n2. Zoom."
    assert commands == [
        {"tool_name": "Object Tracking Tool", "object_name": "man", "frame_range": "0-10"}
    ]
    as_string = json.dumps({"Action": str({"tool_name": "Image Caption Tool", "frame_range": "3"})})
    assert parse_plan(as_string)[1] == [{"tool_name": "Image Caption Tool", "frame_range": "3"}]
    assert parse_plan("no action here") == ("no action here", [])


def test_the_memory_bank_renders_the_three_keys() -> None:
    record = ToolRecord(1, {"tool_name": "x"}, "seen (confidence=0.50)", 0.5)
    context = VideoContext("a.mp4", [Line(0, 4, "a"), Line(4, 6.5, "b c d")], "sum")
    bank = MemoryBank([context], [record])
    assert json.loads(bank.render()) == {
        "Caption": {"0s-4s": "a", "4s-6.5s": "b c d"},
        "Summary": "sum",
        "Tools return value": [
            {
                "step": 1,
                "call": {"tool_name": "x"},
                "return": "seen (confidence=0.50)",
                "confidence": 0.5,
            }
        ],
    }
    assert json.loads(bank.render(words=1))["Caption"]["4s-6.5s"] == "b …"
    returns = json.loads(bank.render(confidences=False))["Tools return value"]
    assert returns == [{"step": 1, "call": {"tool_name": "x"}, "return": "seen"}]
    # over several videos, C and S are keyed by video name; the returns stay one list
    two = MemoryBank([context, VideoContext("b.mp4", [Line(0, 4, "e")], "more")], [record])
    data = json.loads(two.render())
    assert data["Caption"] == {"a.mp4": {"0s-4s": "a", "4s-6.5s": "b c d"}, "b.mp4": {"0s-4s": "e"}}
    assert data["Summary"] == {"a.mp4": "sum", "b.mp4": "more"}
    assert len(data["Tools return value"]) == 1


# Snapshots of the package data: a change to any prompt file fails here and must be deliberate.
PROMPT_SHA256 = {
    "videoagent2_answer": "2c54382e15101e80",
    "videoagent2_create_plan": "d5bf453d5c96ab6f",
    "videoagent2_adjust_plan": "01741ba75382b10a",
    "videoagent2_segment_caption": "f6681a46c6f4b705",
}


@pytest.mark.parametrize("name", sorted(PROMPT_SHA256))
def test_prompt_files_are_unchanged(name: str) -> None:
    digest = hashlib.sha256(load_prompt(name).encode()).hexdigest()[:16]
    assert digest == PROMPT_SHA256[name]


def test_prompts_hold_the_papers_wording() -> None:
    answer = load_prompt("videoagent2_answer")
    assert answer.startswith("Now we have a memory bank {B} which stores all the information")
    assert "’Yes, the  answer is xx,\n(confidence  score = xx)’" in answer  # doubled spaces kept
    assert answer.rstrip().endswith("scaled from 1-5.")
    create = load_prompt("videoagent2_create_plan")
    assert create.count("The call command for the") == 5 and "plan  to help you" in create
    assert create.rstrip().endswith(f"output  the first action {FORMAT}")
    assert load_prompt("videoagent2_adjust_plan").startswith("Your answer is not confident enough.")


def test_options_are_checked_and_unknown_ones_named(indexed: Indexed) -> None:
    library, _, settings = indexed
    hub = models(settings, FakeAdapter.function(Script([])))
    with pytest.raises(ConfigError, match="videoagent2 has no option nope; its options: "):
        VideoAgent2Agent(library, hub, nope=1)
    with pytest.raises(ConfigError, match=r"confidence_threshold must be in \[0, 5\]"):
        VideoAgent2Agent(library, hub, confidence_threshold=7)
    assert strategy_class("videoagent2") is VideoAgent2Agent


# ---------------------------------------------------------------------------------------------
# Several videos


@pytest.fixture(scope="module")
def two(
    small_video: Path, counter_video: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Library, list[str], Settings]:
    return build_library(tmp_path_factory.mktemp("va2-two") / "lib", small_video, counter_video)


def ask_two(
    two: tuple[Library, list[str], Settings], script: Script, capabilities: Any = None
) -> Answer:
    library, ids, settings = two
    llm = FakeAdapter.function(script, capabilities=capabilities)
    agent = VideoAgent2Agent(library, models(settings, llm), cache_context=False)
    return answer_with(agent, Question(QUESTION, tuple(ids), OPTIONS))


def test_a_question_over_two_videos_spans_both_in_memory_and_plan(
    two: tuple[Library, list[str], Settings],
) -> None:
    _, (_, counter), _ = two
    nameless = action("Image Caption Tool", "5-7")
    on_counter = action("Image Caption Tool", "3-5", video="counter.mp4")
    script = Script([NO, says("A", 2), says("B", 5)], [nameless, on_counter])
    answer = ask_two(two, script)
    assert outcome(answer) == ("B", 1.0, "answered", False)
    # B_1 holds both videos' context, keyed by name
    contexts = phases(answer, "context")
    assert [(c["video"], c["segments"]) for c in contexts] == [("small.mp4", 3), ("counter.mp4", 3)]
    first = script.prompts("Now we have a memory bank")[0]
    assert first.startswith("Now we have a memory bank \n{") and "information of 2 videos." in first
    assert "- ’Caption’ is, for each video by name, the caption of all consecutive" in first
    bank = bank_of(first)
    assert list(bank["Caption"]) == ["small.mp4", "counter.mp4"]
    assert bank["Caption"]["counter.mp4"] == {f"{a}s-{a + 4}s": SEGMENT_CAPTION for a in (0, 4, 8)}
    assert bank["Summary"] == {"small.mp4": "S: a sign.", "counter.mp4": "S: a sign."}
    # the plan prompt is the paper's, then one paragraph that lists the videos
    (create,) = script.prompts("To assist you")
    paper = load_prompt("videoagent2_create_plan").strip()
    assert create.startswith(
        paper + "\n\nThe question is about 2 videos: ’small.mp4’ (frames 0-12)"
    )
    assert "’counter.mp4’ (frames 0-12)" in create and "must also name its video" in create
    # a command naming no video is an error record; one naming a video runs on it
    observed = answer.trace.of(Observed)
    assert (
        observed[0].error
        and "video must name one of the videos: small.mp4, counter.mp4" in observed[0].text
    )
    assert tool_calls(answer) == [
        ("Image Caption Tool", {"tool_name": "Image Caption Tool", "frame_range": "5-7"}),
        ("caption_frames", {"start": 3.0, "end": 5.0, "video": counter}),
    ]
    assert observed[1].evidence and {e[0] for e in observed[1].evidence} == {counter}
    returns = bank_of(script.prompts("Now we have")[-1])["Tools return value"]
    assert returns[1]["call"]["video"] == "counter.mp4" and returns[1]["confidence"] == 0.75


def test_two_videos_in_json_require_a_video_in_each_command(
    two: tuple[Library, list[str], Settings],
) -> None:
    _, (_, counter), _ = two
    track = {
        "tool_name": "Object Tracking Tool",
        "object_name": "person",
        "frame_range": "0-4",
        "video": "counter.mp4",
    }
    script = Script(
        [
            json.dumps({"thought": "Not sure.", "answer": "none", "confidence": 0}),
            json.dumps({"thought": "Seen.", "answer": "B", "confidence": 5}),
        ],
        [json.dumps({"plan": "Track the person.", "Action": track})],
    )
    answer = ask_two(two, script, capabilities=JSON_ONLY)
    assert outcome(answer) == ("B", 1.0, "answered", False)
    plan = next(r for r in script.requests if r.messages[-1].text.startswith("To assist you"))
    for choice in plan.response_schema["properties"]["Action"]["anyOf"]:
        assert choice["properties"]["video"] == {
            "type": "string",
            "enum": ["small.mp4", "counter.mp4"],
        }
        assert "video" in choice["required"]
    assert tool_calls(answer) == [
        ("track_object", {"object_name": "person", "start": 0.0, "end": 4.0, "video": counter})
    ]


# ---------------------------------------------------------------------------------------------
# End to end


def test_cli_ask_with_strategy_videoagent2(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    replies = [  # no summarize stage: the 5 s index's summary would go unread
        "S: a sign.",  # Phase 1: the summary of the 4 s segments
        says("A", 2),
        CAPTION_5_7,
        says("B", 5),
    ]
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=" + json.dumps(replies)
    trace = tmp_path / "run.jsonl"
    out = vidagent(
        "ask",
        str(small_video),
        QUESTION,
        "-o",
        OPTIONS[0],
        "-o",
        OPTIONS[1],
        "--strategy",
        "videoagent2",
        "--set",
        "max_assessments=3",
        "--trace",
        str(trace),
        home=_isolated_home,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    started = [line for line in lines if line.startswith("step ")]
    assert started[0].startswith('step 0 · context {"source": "built", "segments": 3')
    assert started[1:4] == [
        'step 1 · assess {"answer": "A", "confidence": 2.0}',
        (
            'step 1 · plan {"action": {"tool_name": "Image Caption Tool", "frame_range": "5-7"}, '
            '"plan": "Plan: look at the sign.", "adjusted": false}'
        ),
        'step 1 → caption_frames {"start": 5.0, "end": 7.0}',
    ]
    assert started[4].startswith("step 1 ← Captions of 3 frame(s)") and "[confidence " in started[4]
    assert started[5] == 'step 2 · assess {"answer": "B", "confidence": 5.0}'
    assert "answer: (B) HELLO VIDAGENT" in lines and "  confidence: 1" in lines  # cf 5 of 5
    settings = Trace.load(trace).of(RunStarted)[0].settings
    assert settings["max_assessments"] == 3 and settings["protocol"] == "text"
    again = vidagent("replay", str(trace), home=_isolated_home)
    assert again.stdout.splitlines() == lines[:-1]


def test_videos_sharing_a_file_name_are_told_apart_by_their_id() -> None:
    class Index:
        def video(self, video_id: str) -> Any:
            return SimpleNamespace(name="other.mp4" if video_id == "c" else "clip.mp4")

    names = video_names(Index(), ["aaaa1111ffff", "bbbb2222ffff", "c"])  # type: ignore[arg-type]
    assert names == {
        "aaaa1111ffff": "clip.mp4 (aaaa1111)",
        "bbbb2222ffff": "clip.mp4 (bbbb2222)",
        "c": "other.mp4",
    }


def test_cli_ask_over_two_videos(
    small_video: Path, counter_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    on_counter = action("Image Caption Tool", "3-5", video="counter.mp4")
    replies = ["S: a sign.", "S: a counter.", says("A", 2), on_counter, says("B", 5)]
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=" + json.dumps(replies)
    trace = tmp_path / "run.jsonl"
    videos = (str(small_video), str(counter_video))
    out = vidagent(
        "ask",
        *videos,
        QUESTION,
        "-o",
        OPTIONS[0],
        "-o",
        OPTIONS[1],
        "-s",
        "videoagent2",
        "--trace",
        str(trace),
        home=_isolated_home,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    contexts = [line for line in lines if line.startswith("step 0 · context ")]
    assert [json.loads(c.removeprefix("step 0 · context "))["summary"] for c in contexts] == [
        "S: a sign.",
        "S: a counter.",
    ]
    counter = Trace.load(trace).of(RunStarted)[0].videos[1]["video_id"]
    assert f'step 1 → caption_frames {{"start": 3.0, "end": 5.0, "video": "{counter}"}}' in lines
    assert "answer: (B) HELLO VIDAGENT" in lines and "  confidence: 1" in lines


@pytest.fixture
def server() -> Iterator[FaultServer]:
    s = FaultServer().start()
    yield s
    s.stop()


def test_over_an_openai_compatible_endpoint(indexed: Indexed, server: FaultServer) -> None:
    library, video_id, _ = indexed
    settings = load_settings(
        {
            **INDEX_SPECS,
            "llm": "openai:agent-model",
            "vlm": "openai:vision-model",
            "openai_base_url": server.base_url,
            "openai_api_key": "sk-test",
        }
    )
    plan = "Look closely.\n{’Action’: {’tool_name’: ’Image Caption Tool’, ’frame_range’: ’5-6’}}"
    replies = [says("A", 3), plan, FRAME_CAPTION, FRAME_CAPTION, says("B", 5)]
    server.script(*(Behaviour(body=completion(text)) for text in replies))
    with Models(settings) as hub:
        # critic off: the calls asserted below are the strategy's own (with a vision model the
        # critic and the citations' frame check add two)
        agent = VideoAgent2Agent(library, hub, context="index", options={"critic": "off"})
        answer = answer_with(agent, Question(QUESTION, (video_id,), OPTIONS))
    assert outcome(answer) == ("B", 1.0, "answered", False)
    first, planned, vision, _, last = server.bodies("/chat/completions")
    assert first["model"] == "agent-model" and "tools" not in first
    assert "response_format" not in first  # the paper's free text, parsed
    assert first["messages"][0]["content"].startswith("Now we have a memory bank")
    assert planned["messages"][-1]["content"] == load_prompt("videoagent2_create_plan").strip()
    assert vision["model"] == "vision-model"
    assert vision["messages"][0]["content"] == load_prompt("videoagent2_caption")
    assert '"confidence": 0.75' in last["messages"][-1]["content"]
    assert [m["role"] for m in last["messages"]] == ["user", "assistant"] * 2 + ["user"]


@pytest.mark.models
def test_smollm2_drives_videoagent2(indexed: Indexed, tmp_path: Path) -> None:
    library, video_id, _ = indexed
    settings = load_settings({**INDEX_SPECS, "llm": "llamacpp:smollm2-135m"})
    answer = ask(
        video_id,
        QUESTION,
        options=OPTIONS,
        strategy="videoagent2",
        settings=settings,
        library=library,
        trace=tmp_path / "trace.jsonl",
        # one plan and one assessment of it: each further round sends the history again with
        # the memory bank rewritten early in it (about 2,500 tokens evaluated anew, 20 s on a
        # core); the rounds' loop is tested with scripted models above
        max_assessments=1,
        context="index",
    )
    trace = answer.trace
    assert trace is not None and trace.of(RunStarted)[0].settings["protocol"] == "json"
    assessed = [p.data for p in trace.of(PhaseChanged) if p.phase == "assess"]
    assert len(assessed) == 1 and 0 <= assessed[0]["confidence"] <= 5
    # well formed: a parsed answer names one option; an unparsable one says so, never guesses
    assert answer.parsed == (answer.choice is not None)
    assert answer.confidence is not None and 0 <= answer.confidence <= 1
    assert Trace.load(tmp_path / "trace.jsonl").events == trace.events
    assert list(render(trace.events))[-2].startswith("answer: ")


@pytest.mark.parametrize(
    ("captioner", "clip_seconds", "built"),
    [
        # A vision model captions the 4 s segments from frames: nothing of the index is read.
        ("vlm", 5.0, set()),
        # The offline describer describes segments from the rows of the perception stages.
        ("describer", 5.0, {"transcribe", "read_text", "detect"}),
        # An index already cut into 4 s clips at 1 fps is C: its captions and summary are built.
        ("describer", 4.0, {"transcribe", "read_text", "detect", "caption", "summarize"}),
    ],
)
def test_ask_builds_only_what_the_general_context_reads(
    small_video: Path, tmp_path: Path, captioner: str, clip_seconds: float, built: set[str]
) -> None:
    settings = load_settings({**INDEX_SPECS, "clip_seconds": clip_seconds})
    vlm = (
        FakeAdapter.function(vlm_reply)
        if captioner == "vlm"
        else create_adapter("perception:describer", settings, "vlm")
    )
    hub = models(settings, FakeAdapter.function(Script([says("B", 5)])), vlm)
    with Session(settings, library=tmp_path / "lib", models=hub) as session:
        result = session.ask(
            small_video, QUESTION, options=OPTIONS, strategy="videoagent2", trace=False
        )
        (record,) = session.library.list_videos()
    assert result.answer is not None and result.answer.letter == "B"
    assert set(record.stages) - {"structure"} == built


def test_asking_about_the_same_file_again_reuses_its_built_context(
    small_video: Path, tmp_path: Path
) -> None:
    """Each ask of a file indexes it through the strategy's stages first; with nothing left
    to do they leave the video's record as it was, and B_1 is read back, not built again (it
    was keyed on the record's stage times, and built again for every question)."""
    settings = load_settings({**INDEX_SPECS})
    script = Script([says("B", 5), says("B", 5)])
    describer = create_adapter("perception:describer", settings, "vlm")
    hub = models(settings, FakeAdapter.function(script), describer)
    records = []
    with Session(settings, library=tmp_path / "lib", models=hub) as session:
        for _ in range(2):
            result = session.ask(
                small_video, QUESTION, options=OPTIONS, strategy="videoagent2", trace=False
            )
            assert result.answer is not None and result.answer.letter == "B"
            records += session.library.list_videos()
    assert records[0].stages == records[1].stages  # the stages' "at" times too
    assert len(script.prompts("A long video")) == 1  # B_1's summary, built once


def test_building_the_general_context_is_part_of_the_run(small_video: Path, tmp_path: Path) -> None:
    # B_1's summary is a model call of the question that builds it: in its trace and totals,
    # before the first step, under its budget (before, it ran before run_started, outside them;
    # with SmolLM2 on 2 cores that was over a minute neither --max-seconds nor the totals saw)
    from vidagent.trace import ModelCall, RunFinished

    settings = load_settings({**INDEX_SPECS})
    script = Script([says("B", 5)])
    describer = create_adapter("perception:describer", settings, "vlm")
    hub = models(settings, FakeAdapter.function(script), describer)
    with Session(settings, library=tmp_path / "lib", models=hub) as session:
        result = session.ask(small_video, QUESTION, options=OPTIONS, strategy="videoagent2")
    events = result.trace.events
    calls = [e for e in events if isinstance(e, ModelCall) and e.role == "llm"]
    first_phase = next(k for k, e in enumerate(events) if isinstance(e, PhaseChanged))
    assert len(script.prompts("A long video")) == 1 and len(calls) == 2
    assert events.index(calls[0]) < first_phase  # the summary, before the first step
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    assert finished.model_calls == sum(isinstance(e, ModelCall) for e in events)
    assert finished.input_tokens == sum(e.input_tokens for e in events if isinstance(e, ModelCall))
