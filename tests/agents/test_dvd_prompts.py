"""DVD's prompts and tool schemas are the paper's, verbatim; several videos extend them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from agentkit import build_library, call, hub

from vidagent.agents.base import Question
from vidagent.agents.dvd.agent import DVDAgent
from vidagent.exceptions import ConfigError
from vidagent.media.synth import make_video
from vidagent.models.fake import FakeAdapter
from vidagent.prompts import load_json, load_prompt
from vidagent.trace import Observed

# Snapshots of the package data: a change to any prompt file fails here and must be deliberate.
PROMPT_SHA256 = {
    "dvd_agent_system": "4d121c7635f9887e",
    "dvd_agent": "873a2c2c26aa077f",
    "dvd_frame_inspect_system": "3c3bba9d3bc2376c",
    "dvd_frame_inspect": "3cb2abee6b6e9e42",
    "dvd_global_browse": "b2d658704f6f9585",
}


@pytest.mark.parametrize("name", sorted(PROMPT_SHA256))
def test_prompt_files_are_unchanged(name: str) -> None:
    digest = hashlib.sha256(load_prompt(name).encode()).hexdigest()[:16]
    assert digest == PROMPT_SHA256[name]


def test_prompts_hold_the_papers_wording() -> None:
    system = load_prompt("dvd_agent_system")
    assert system.startswith("You are a helpful assistant who can answer multistep questions")
    assert "codebase structure" in system  # the paper's leftover sentence, kept
    assert system.rstrip().endswith("The timestamp can be formatted as 'HH:MM:SS' or 'MM:SS'.")
    user = load_prompt("dvd_agent")
    assert "prgressively" in user and "'unkown' name" in user  # the paper's typos, kept
    assert "Error: Cannot find corresponding result in the given time range." in load_prompt(
        "dvd_frame_inspect"
    )
    assert "returns 'Error: Cannot find corresponding result in sampled frames.'" in load_prompt(
        "dvd_global_browse"
    )


class _Agent(DVDAgent):
    def __init__(self, **options: Any) -> None:  # only what the prompt builders read
        from vidagent.agents.dvd.agent import DVDOptions

        self.options = DVDOptions(**options)


def test_tool_schemas_are_tables_13_and_14_without_database() -> None:
    shown = {s.name: s for s in _Agent().toolbox(several=False).specs()}
    assert list(shown) == ["global_browse", "clip_search", "frame_inspect", "answer"]
    for entry in load_json("dvd_tools"):
        paper = entry["function"]
        spec = shown[paper["name"]]
        assert spec.description == paper["description"]
        expected = {k: v for k, v in paper["parameters"]["properties"].items() if k != "database"}
        assert spec.parameters["properties"] == expected
        assert "database" not in spec.parameters["required"]
    assert shown["clip_search"].parameters["properties"]["top_k"]["default"] == 16


def test_ablations_and_options_change_the_toolbox() -> None:
    box = _Agent(tools=("clip_search", "frame_inspect"), clip_search_time_range=True).toolbox(True)
    assert box.names == ["clip_search", "frame_inspect", "answer"]
    props = box["clip_search"].spec().parameters["properties"]
    assert "time_range" in props and "video" in props
    with pytest.raises(ConfigError, match="dvd option tools: unknown"):
        DVDAgent(None, None, tools=("zoom",))  # type: ignore[arg-type]


def test_user_prompt_fills_the_placeholders() -> None:
    agent = _Agent()
    mcq = agent.user_prompt(Question("What happens at 01:05?", ("v",), ("a dog", "a cat")))
    assert (
        "Question: What happens at 01:05?\n(A) a dog\n(B) a cat\n\nAnswer with the option's" in mcq
    )
    assert "+ If the question mentions a specific time, use 'FrameInspect' directly" in mcq
    assert "CLIP_SEARCH_WITH_TIME_PLACEHOLDER" not in mcq and "[question]" not in mcq
    open_q = agent.user_prompt(Question("Who speaks first?", ("v",)))
    assert open_q.endswith("Question: Who speaks first?")
    assert "+  If you need to find details" in open_q  # no time in the question: empty hint
    renamed = _Agent(normalize_tool_names=True).user_prompt(Question("q", ("v",)))
    assert "'clip_search'" in renamed and "'ClipSearch'" not in renamed


def test_one_question_over_two_videos(small_video: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.mp4"
    make_video(other, duration=8, shots=2, text_overlays=[(1.0, 4.0, "SECOND CLIP")])
    library, ids, settings = build_library(tmp_path / "lib", small_video, other)
    llm = FakeAdapter.scripted(
        [
            call("clip_search", event_description="SECOND CLIP"),
            call("frame_inspect", question="q", time_ranges_hhmmss=[[1, 3]]),
            call("frame_inspect", question="q", time_ranges_hhmmss=[[1, 3]], video="other.mp4"),
            call("answer", answer="other.mp4"),
        ]
    )
    agent = DVDAgent(library, hub(settings, llm))
    answer = agent.run(Question("Which video shows SECOND CLIP?", tuple(ids)))
    search, ambiguous, inspect = answer.trace.of(Observed)[:3]
    assert {e[0] for e in search.evidence} == set(ids)
    assert "[small.mp4 " in search.text and "[other.mp4 " in search.text
    assert ambiguous.error and "several videos are in scope" in ambiguous.text
    assert inspect.evidence == [[ids[1], 1.0, 3.0]] and inspect.frames == 5
    first = llm.requests[0]
    assert "The question is about these videos:\n- small.mp4" in first.messages[1].text
    assert all("video" in t.parameters["properties"] for t in first.tools if t.name != "answer")
    assert answer.text == "other.mp4" and answer.parsed
