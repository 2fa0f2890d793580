"""AVI: the phase machine (tools per phase, switch signals, review sending back to perceive,
one call per iteration, the forced answer at 10), the paper's prompts, grounding, several
videos, and the tools on a real clip."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentkit import JSON_ONLY, action, build_library, call
from clirun import vidagent

from vidagent.agents.avi.agent import FORCED, AVIAgent, tool_descriptions
from vidagent.agents.base import Question
from vidagent.agents.strategies import strategy_class
from vidagent.exceptions import ConfigError
from vidagent.ingest import index_video
from vidagent.library import ClipRow
from vidagent.models.base import Capabilities, ChatRequest, Detection
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.rapidocr import RapidOCRAdapter
from vidagent.prompts import load_prompt
from vidagent.tools.avi.perceive import object_detect_tool
from vidagent.tools.avi.retrieve import global_explore_tool, merge_clips
from vidagent.tools.base import ToolContext
from vidagent.trace import Observed, PhaseChanged, RunStarted

OPTIONS = ("GOODBYE", "HELLO VIDAGENT", "No text")
QUESTION = "What text appears on screen?"
RETRIEVE = {"clip_retrieve_tool", "clip_merge_tool", "global_explore_tool", "graph_retrieve_tool"}
PERCEIVE = {
    "object_detect_tool",
    "boundary_detect_tool",
    "text_extract_tool",
    "frame_analysis_tool",
}


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_library(tmp_path_factory.mktemp("lib") / "lib", small_video)


OCR = RapidOCRAdapter("pp-ocr")  # the real offline OCR: text_extract_tool reads real frames


def models(settings: Any, llm: FakeAdapter) -> Models:
    vlm = FakeAdapter.function(lambda req: f"saw {req.image_count()} images")
    adapters = {
        "llm": llm,
        "vlm": vlm,
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "ocr": OCR,
        "detector": FakeAdapter("echo"),
    }
    return Models.from_adapters(adapters, settings)


def agent(indexed: Any, llm: FakeAdapter, **options: Any) -> AVIAgent:
    library, _, settings = indexed
    return AVIAgent(library, models(settings, llm), **options)


def ask(indexed: Any, llm: FakeAdapter, question: Question | None = None, **options: Any) -> Any:
    _, ids, _ = indexed
    return agent(indexed, llm, **options).run(question or Question(QUESTION, tuple(ids), OPTIONS))


def offered(llm: FakeAdapter) -> list[set[str]]:
    """The tools each chat request offered."""
    return [{t.name for t in r.tools} for r in llm.requests if isinstance(r, ChatRequest)]


def stages(llm: FakeAdapter) -> list[str]:
    found = [re.search(r"\*\*Current Stage: (\w+)\*\*", r.messages[0].text) for r in llm.requests]
    return [m.group(1) if m else "" for m in found]


def phases(answer: Any) -> list[str]:
    return [e.phase for e in answer.trace.of(PhaseChanged)]


def test_retrieve_perceive_review_offers_only_each_phase_s_tools(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            call("clip_retrieve_tool", query="text on screen"),
            "The text is around 5-8 s. [STAGE_SWITCH: perceive]",
            call("text_extract_tool", time_ranges=[[5, 8]]),
            "Confirmed visually. [STAGE_SWITCH: review]",
            "The frames show HELLO VIDAGENT.\n**Answer:**B",
        ]
    )
    answer = ask(indexed, llm)
    assert answer.letter == "B" and not answer.forced and answer.reason == "answered"
    assert offered(llm) == [RETRIEVE, RETRIEVE, PERCEIVE, PERCEIVE, set()]
    assert stages(llm) == ["RETRIEVE", "RETRIEVE", "PERCEIVE", "PERCEIVE", "REVIEW"]
    assert phases(answer) == ["retrieve", "perceive", "review"]
    read = [o for o in answer.trace.of(Observed) if o.tool == "text_extract_tool"]
    assert read and "HELLO VIDAGENT" in read[0].text.upper()  # the real OCR path on real frames
    # The conversation carries over: the review turn sees both observations.
    last = llm.requests[-1].messages
    assert sum(m.role == "tool" for m in last) == 2


def test_review_sends_back_to_perceive_and_switch_beside_a_call_runs_the_call(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            (call("clip_retrieve_tool", query="text"),),
            "[STAGE_SWITCH: perceive]",
            "Nothing to check yet. [STAGE_SWITCH: review]",
            "Not conclusive. [STAGE_SWITCH: perceive]",  # review -> perceive
            (call("text_extract_tool", time_ranges=[[4, 9]]),),
            "[STAGE_SWITCH: review]",
            "**Answer:** (B)",
        ]
    )
    answer = ask(indexed, llm)
    assert answer.letter == "B"
    assert stages(llm) == [
        "RETRIEVE",
        "RETRIEVE",
        "PERCEIVE",
        "REVIEW",
        "PERCEIVE",
        "PERCEIVE",
        "REVIEW",
    ]
    assert phases(answer) == ["retrieve", "perceive", "review", "perceive", "review"]


def test_an_answer_while_perceiving_goes_to_review_first(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            "[STAGE_SWITCH: perceive]",
            "**Answer:**A",
            "On reflection **Answer:**B",
        ]
    )
    answer = ask(indexed, llm)
    assert answer.letter == "B" and stages(llm) == ["RETRIEVE", "PERCEIVE", "REVIEW"]


def test_one_tool_call_per_iteration_and_no_tool_of_another_phase(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            (call("clip_retrieve_tool", query="text"), call("global_explore_tool", query="text")),
            call("object_detect_tool", time_ranges=[[0, 2]], objects=["person"]),
            "[STAGE_SWITCH: perceive]",
            "[STAGE_SWITCH: review]",
            "**Answer:**B",
        ]
    )
    answer = ask(indexed, llm)
    seen = {(o.tool, o.error, o.text.split(":")[0]) for o in answer.trace.of(Observed)}
    assert ("global_explore_tool", False, "Skipped") in seen  # the second call is not run
    wrong = [o for o in answer.trace.of(Observed) if o.tool == "object_detect_tool"]
    assert wrong[0].error and "not available in retrieve stage" in wrong[0].text
    assert len(llm.requests) == 5  # no llm call was made by the skipped global_explore_tool


def test_a_forced_answer_after_a_stage_switch_is_not_sent_the_last_stage_s_tools(
    indexed: Any,
) -> None:
    """The forced answer keeps the last turn's system prompt and protocol for a schema-bound
    model (Run.final_messages), unless the strategy changed the system prompt since: a switch
    on the last turn gives the perceive stage's prompt, which the retrieve stage's tool list
    does not belong to."""
    llm = FakeAdapter.scripted(
        [action("stage_switch", "go", stage="perceive"), '{"answer": "B"}'],
        capabilities=JSON_ONLY,
    )
    answer = ask(indexed, llm, max_llm_calls=1)
    assert (answer.letter, answer.forced) == ("B", True)
    assert stages(llm) == ["RETRIEVE", "PERCEIVE"]
    final = llm.requests[-1].messages[0].text
    assert "You can call these functions:" not in final and "clip_retrieve_tool(" not in final
    # and the grammar allows one option's letter (a free string let SmolLM2 loop on "The
    # answer is: " and give none)
    letters = llm.requests[-1].response_schema["properties"]["answer"]["enum"]
    assert letters == ["A", "B", "C", "D"][: len(OPTIONS)]


def test_ten_iterations_then_a_forced_answer_without_tools(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [call("clip_retrieve_tool", query=f"text {i}") for i in range(10)] + ["**Answer:**B"]
    )
    answer = ask(indexed, llm)
    assert answer.forced and answer.reason == "max_steps" and answer.letter == "B"
    assert len(llm.requests) == 11
    final = llm.requests[-1]
    assert not final.tools and final.messages[-1].text == FORCED
    assert answer.trace.of(Observed)[-1].tool == "clip_retrieve_tool"


def test_the_turn_cap_ends_a_model_that_never_calls_tools(indexed: Any) -> None:
    # retrieve -> perceive -> review -> perceive ... with no tool ever run: 25 turns at most.
    llm = FakeAdapter.function(
        lambda req: (
            "Still thinking."
            if req.tools or "REVIEW" not in req.messages[0].text
            else "[STAGE_SWITCH: perceive]"
        )
    )
    answer = ask(indexed, llm, max_llm_calls=7)
    assert answer.forced and len(llm.requests) == 8


def test_system_prompt_is_fig5_with_the_paper_s_texts(indexed: Any) -> None:
    library, ids, _ = indexed
    a = agent(indexed, FakeAdapter.scripted([]))
    q = Question(QUESTION, tuple(ids), OPTIONS)
    text = a.system_prompt("perceive", q)
    assert text.startswith(
        "You are a Protocol-Driven Video Analysis Engine.\n**Current Stage: PERCEIVE**"
    )
    assert load_prompt("avi_core_protocol").strip() in text
    assert load_prompt("avi_perceive").strip() in text
    assert load_prompt("avi_retrieve").strip() not in text
    figure6 = tool_descriptions()
    assert len(figure6) == 7
    for name in PERCEIVE:
        assert figure6[name] in text
    assert figure6["clip_retrieve_tool"] not in text
    duration = library.get_video(ids[0]).duration
    assert text.endswith(f"Total video length: {duration:.1f} seconds.")
    assert a.user_prompt(q).endswith("(C) No text\nAnswer with the option letter.")


def test_ablations_change_what_the_agent_can_do(indexed: Any) -> None:
    llm = FakeAdapter.scripted([call("clip_retrieve_tool", query="text"), "**Answer:**B"])
    answer = ask(indexed, llm, phases=False, graph=False)
    assert offered(llm)[0] == (RETRIEVE | PERCEIVE) - {"graph_retrieve_tool"}
    assert answer.letter == "B" and stages(llm)[0] == "FREE"
    no_review = FakeAdapter.scripted(
        ["[STAGE_SWITCH: perceive]", "[STAGE_SWITCH: review]", "**Answer:**C"]
    )
    answer = ask(indexed, no_review, review=False)
    assert answer.letter == "C" and not answer.forced and "REVIEW" not in stages(no_review)
    with pytest.raises(ConfigError, match="max_llm_calls"):
        ask(indexed, FakeAdapter.scripted([]), max_llm_calls=0)
    plan = agent(indexed, FakeAdapter.scripted([]), graph=False, captions="avi").index_plan()
    assert "graph" not in plan.stages and plan.settings["caption_style"] == "avi"


def test_json_actions_switch_stages_and_answer(indexed: Any) -> None:
    llm = FakeAdapter.scripted(
        [
            action("clip_retrieve_tool", "find the text", query="text on screen"),
            action("stage_switch", "found 5-8 s", stage="perceive"),
            action("text_extract_tool", "read it", time_ranges=[[5, 8]]),
            action("stage_switch", "confirmed", stage="review"),
            action("answer", "conclusive", answer="B"),
        ],
        capabilities=JSON_ONLY,
    )
    answer = ask(indexed, llm)
    assert answer.letter == "B" and phases(answer) == ["retrieve", "perceive", "review"]
    assert "stage_switch" in llm.requests[0].messages[0].text  # the protocol lists it


def test_grounding_answers_an_interval_with_it_as_evidence(indexed: Any) -> None:
    _, ids, _ = indexed
    llm = FakeAdapter.scripted(
        [
            call("clip_retrieve_tool", query="text appears"),
            "[STAGE_SWITCH: perceive]",
            call("boundary_detect_tool", time_ranges=[[0, 12]], event="white text appears"),
            "[STAGE_SWITCH: review]",
            "**Answer:**[5.0s,8.5s]",
        ]
    )
    answer = ask(indexed, llm, Question("white text appears", tuple(ids), task="ground"))
    assert answer.text == "[5, 8.5]" and [e.to_list() for e in answer.evidence] == [
        [ids[0], 5.0, 8.5]
    ]
    assert (
        'Localize this event in the video: "white text appears"' in llm.requests[0].messages[1].text
    )
    boundary = next(o for o in answer.trace.of(Observed) if o.tool == "boundary_detect_tool")
    assert "coarse: caption similarity per clip" in boundary.text  # no image_embed configured


def test_several_videos_list_their_lengths_and_tools_take_a_video(
    indexed: Any, counter_video: Path
) -> None:
    library, ids, settings = indexed
    other = index_video(counter_video, library=library, settings=settings).video
    assert other is not None
    llm = FakeAdapter.scripted(
        [
            call("text_extract_tool", time_ranges=[[5, 8]]),  # wrong phase
            "[STAGE_SWITCH: perceive]",
            call("text_extract_tool", time_ranges=[[5, 8]]),  # no video named: the model must say
            call("text_extract_tool", time_ranges=[[5, 8]], video=ids[0]),
            "[STAGE_SWITCH: review]",
            "**Answer:**B",
        ]
    )
    answer = AVIAgent(library, models(settings, llm)).run(
        Question(QUESTION, (ids[0], other.video_id), OPTIONS)
    )
    assert answer.letter == "B"
    assert (
        "small.mp4" in llm.requests[0].messages[0].text
        and "counter.mp4" in llm.requests[0].messages[0].text
    )
    reads = [o for o in answer.trace.of(Observed) if o.tool == "text_extract_tool"]
    assert reads[1].error and "several videos" in reads[1].text
    assert not reads[2].error and "HELLO VIDAGENT" in reads[2].text.upper()


def test_registered_and_recorded_in_the_trace(indexed: Any) -> None:
    assert strategy_class("avi") is AVIAgent
    answer = ask(
        indexed,
        FakeAdapter.scripted(
            ["[STAGE_SWITCH: perceive]", "[STAGE_SWITCH: review]", "**Answer:**B"]
        ),
    )
    started = answer.trace.of(RunStarted)[0]
    assert started.strategy == "avi"
    # the offline describer captions here: the perception stages it reads run first (not
    # transcription: AVI's captions see no speech)
    perceived = ["read_text", "detect"]
    assert started.index["stages"] == [*perceived, "caption", "embed", "graph"]


def test_ground_command_prints_the_interval_and_bad_input_is_one_line(
    small_video: Path, tmp_path: Path, fake_env: dict[str, str]
) -> None:
    env = {**fake_env, "VIDAGENT_LLM": "fake:echo?reply=**Answer:**[5.0s,8.0s]"}
    done = vidagent(
        "ground", str(small_video), "white text appears", "--quiet", home=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "interval: [5.0s, 8.0s]"
    as_json = vidagent(
        "ground", "small.mp4", "white text appears", "--json", "-q", home=tmp_path, env=env
    )
    body = json.loads(as_json.stdout)
    assert body["interval"] == [5.0, 8.0] and body["answer"]["evidence"][0][1:] == [5.0, 8.0]
    empty = vidagent("ground", "small.mp4", " ", home=tmp_path, env=env)
    assert empty.returncode != 0 and "Traceback" not in empty.stderr
    assert empty.stderr.strip().splitlines()[-1].endswith("the event description is empty")

    def ground(event: str, **settings: str) -> Any:
        return vidagent("ground", "small.mp4", event, "-q", home=tmp_path, env=env | settings)

    none = ground("x", VIDAGENT_LLM="fake:echo?reply=no idea")
    assert none.returncode == 1 and "interval: none found" in none.stdout
    reply = "fake:echo?reply=**Answer:**[30.0s,40.0s]"  # of a 12 s clip; AVI would clamp it
    past = vidagent("ground", "small.mp4", "x", "-q", "-s", "dvd", home=tmp_path,
                    env=env | {"VIDAGENT_LLM": reply})  # fmt: skip
    assert past.returncode == 1 and past.stdout.splitlines()[0] == (
        "interval: none found (the answer's 30.0–40.0 s lie outside the video, 0.0–12.0 s)"
    )
    # an interval whose citation nothing in the index supports keeps its interval, marked
    checked = ground("white text appears", VIDAGENT_ABSTAIN="auto")
    assert checked.returncode == 0 and checked.stdout.splitlines()[0] == (
        "interval: [5.0s, 8.0s] (abstained: none of the answer's key words is said or shown "
        "where it cites)"
    )


def test_a_model_repeating_one_call_is_told_and_stopped(indexed: Any) -> None:
    llm = FakeAdapter.scripted([call("clip_retrieve_tool", query="text")] * 4 + ["**Answer:**B"])
    answer = ask(indexed, llm)
    seen = answer.trace.of(Observed)
    assert not seen[0].error and all("already made (step 1)" in o.text for o in seen[1:])
    assert answer.forced and answer.reason == "repeated_failures" and answer.letter == "B"
    assert len(llm.requests) == 5


def test_object_detect_suppresses_overlaps_at_iou_half_and_counts_per_frame(indexed: Any) -> None:
    library, ids, settings = indexed

    def boxes(_rgb: Any) -> list[Detection]:
        return [
            Detection("cat", (10, 10, 100, 100), 0.9),
            Detection("cat", (12, 12, 102, 102), 0.8),  # IoU ≈ 0.92 with the first: suppressed
            Detection("cat", (60, 10, 150, 100), 0.7),  # IoU ≈ 0.29: kept
            Detection("cat", (300, 10, 390, 100), 0.2),  # below 0.35: dropped
        ]

    hub = Models.from_adapters({"detector": FakeAdapter(detect_fn=boxes)}, settings)
    options = AVIAgent(library, hub).tool_options(Question(QUESTION, tuple(ids)))
    ctx = ToolContext(library, hub, list(ids), options=options)
    obs = object_detect_tool(ctx, {"time_ranges": [[0, 1.5]], "objects": ["cat"]})
    assert not obs.error and obs.frames == 4  # 2 fps over [0, 1.5]
    assert obs.text.count("cat (p=0.90)") == 4 and obs.text.count("cat (p=0.70)") == 4
    assert "p=0.80" not in obs.text and "p=0.20" not in obs.text
    assert "cat: max 2, median 2" in obs.text


def test_graph_retrieve_finds_the_interaction_the_graph_stage_extracted(
    small_video: Path, tmp_path: Path
) -> None:
    library, ids, settings = build_library(tmp_path / "lib", small_video)
    extraction = {
        "video_analysis": [
            {
                "subject_id": "Subject_1",
                "subject_name": "Man in red shirt",
                "appearance_timeline": [["00:00:00", "00:00:10"]],
                "attributes": ["red shirt"],
                "actions_events": [],
            },
            {
                "subject_id": "Subject_2",
                "subject_name": "Reader",
                "appearance_timeline": [["00:00:04", "00:00:12"]],
                "attributes": [],
                "actions_events": [],
            },
        ],
        "interactions": [
            {
                "subjects_involved": ["Subject_1", "Subject_2"],
                "interaction_description": "Subject_1 hands Subject_2 a book",
                "timestamp": ["00:00:05", "00:00:08"],
            },
        ],
    }
    extractor = FakeAdapter("fig8", {"reply": json.dumps(extraction)})
    graph_hub = Models.from_adapters(
        {"llm": extractor, "embed": FakeAdapter("hash", {"dim": "32"})}, settings
    )
    index_video(
        small_video, library=library, models=graph_hub, settings=settings, stages=("graph",)
    )
    llm = FakeAdapter.scripted(
        [
            call("graph_retrieve_tool", query="Subject_1 and Subject_2"),
            "[STAGE_SWITCH: perceive]",
            "[STAGE_SWITCH: review]",
            "**Answer:**B",
        ]
    )
    answer = AVIAgent(library, models(settings, llm)).run(Question(QUESTION, tuple(ids), OPTIONS))
    found = next(o for o in answer.trace.of(Observed) if o.tool == "graph_retrieve_tool")
    assert not found.error and "--[Subject_1 hands Subject_2 a book]-->" in found.text
    assert [ids[0], 5.0, 8.0] in found.evidence


def test_clip_merge_joins_close_coherent_clips_only() -> None:
    clips = [ClipRow("v", i, t0, t0 + 5) for i, t0 in ((0, 0), (1, 5), (2, 10), (4, 30))]
    same, other = [1.0, 0.0], [0.0, 1.0]
    groups = merge_clips(clips, np.array([same, same, other, same], np.float32))
    assert [[c.clip_index for c in g] for g in groups] == [
        [0, 1],
        [2],
        [4],
    ]  # 2 differs; 4 is 15 s on


def test_global_explore_reads_every_caption_in_windows_when_the_context_is_small(
    indexed: Any,
) -> None:
    library, ids, settings = indexed
    asked: list[str] = []

    def explore(request: ChatRequest) -> str:
        asked.append(request.messages[-1].text)
        return f"summary {len(asked)}\n[0-5]: relevant"

    small = Capabilities(roles=frozenset({"llm"}), context_tokens=2200, local=True)
    hub = Models.from_adapters(
        {
            "llm": FakeAdapter.function(explore, capabilities=small),
            "embed": FakeAdapter("hash", {"dim": "32"}),
        },
        settings,
    )
    ctx = ToolContext(library, hub, list(ids))
    obs = global_explore_tool(ctx, {"query": "what text appears"})
    captions = [c.caption.strip() for c in library.clips(ids[0])]
    assert not obs.error and obs.text.startswith("summary ")
    assert all(any(c in a for a in asked) for c in captions)  # every caption was read
    assert len(asked) == obs.model_calls > 2 and "Query: what text appears" in asked[0]
    assert asked[-1].count("Part ") == len(asked) - 1  # the windows, reduced in one more call
    again = global_explore_tool(ctx, {"query": "what text appears"})
    assert again.text == obs.text and again.model_calls == 0  # memoised in the Library


def test_a_forced_grounding_answer_is_read_without_brackets_and_clamped_to_the_video(
    indexed: Any,
) -> None:
    _, ids, _ = indexed
    llm = FakeAdapter.scripted(
        [call("clip_retrieve_tool", query=f"q{i}") for i in range(10)]
        + ["The answer is: 1.5s, 30s"]
    )
    answer = ask(indexed, llm, Question("white text appears", tuple(ids), task="ground"))
    assert answer.forced and answer.text == "[1.5, 12]"  # the 12 s clip ends at 12 s
    assert [e.to_list() for e in answer.evidence] == [[ids[0], 1.5, 12.0]]
