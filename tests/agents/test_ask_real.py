"""Real runs: the embedded SmolLM2 drives DVD (and AVI) through JSON actions on real clips,
with the perception describer standing in for the VLM. SmolLM2-135M is weak; what must hold is
that the run completes with a well-formed answer and a trace that replays."""

from __future__ import annotations

from pathlib import Path

import pytest
from realmedia import get_clip

from vidagent.agents.dvd.agent import SEARCH_TOOLS
from vidagent.app import ask
from vidagent.budget import Budget
from vidagent.cli.render import render
from vidagent.config import load_settings
from vidagent.trace import AgentTurn, ModelCall, Observed, PhaseChanged, RunStarted, Trace

pytestmark = [pytest.mark.models, pytest.mark.realmedia]


def test_smollm2_answers_about_a_real_clip(real_library: Path, tmp_path: Path) -> None:
    clip = get_clip("wannaworktogether.mp4")
    settings = load_settings({"cache": "off"})  # the embedded offline defaults
    options = ["working together", "cooking dinner", "a football match"]
    answer = ask(
        clip,
        "What is the video about?",
        options=options,
        strategy="dvd",  # named: without an endpoint the default is the retrieval baseline
        settings=settings,
        library=real_library,  # the clip indexed once for the run (conftest)
        budget=Budget(steps=3),
        trace=tmp_path / "trace.jsonl",
    )
    trace = answer.trace
    assert trace is not None
    started = trace.of(RunStarted)[0]
    assert started.models["llm"] == "llamacpp:smollm2-135m" and started.videos[0]["duration"] > 170
    turns = trace.of(AgentTurn)
    assert turns and all(t.mode == "json" for t in turns)
    assert all(c["name"] in (*SEARCH_TOOLS, "answer") for t in turns for c in t.tool_calls)
    assert 1 <= trace.totals.steps <= 3
    assert any(e.role == "llm" and e.output_tokens > 0 for e in trace.of(ModelCall))
    assert all(o.text for o in trace.of(Observed))
    # well formed: a parsed answer names one option; an unparsable one says so, never guesses
    assert answer.parsed == (answer.choice is not None)
    assert answer.reason in ("answered", "max_steps", "format_errors")
    assert Trace.load(tmp_path / "trace.jsonl").events == trace.events
    assert list(render(trace.events))[-2].startswith("answer: ")


def test_smollm2_drives_avi_through_its_phases_on_a_real_clip(
    real_library: Path, tmp_path: Path
) -> None:
    clip = get_clip("vtest.avi")
    settings = load_settings({"cache": "off"})  # the embedded offline defaults
    answer = ask(
        clip,
        "How many people walk through the scene?",
        options=["one", "two", "more than three"],
        strategy="avi",
        settings=settings,
        library=real_library,  # the clip indexed once for the run (conftest)
        # one turn and the forced answer: each further turn re-evaluates a prompt of ~3,000
        # tokens (a phase's own system prompt comes first), over a minute on slow cores; the
        # phases' turns are tested with scripted models in test_avi.py
        budget=Budget(steps=1),
        trace=tmp_path / "trace.jsonl",
    )
    trace = answer.trace
    assert trace is not None
    started = trace.of(RunStarted)[0]
    assert started.strategy == "avi"  # the describer's inputs (no speech), captions, no graph
    assert started.index["stages"] == ["read_text", "detect", "caption", "embed"]
    phases = [e.phase for e in trace.of(PhaseChanged)]
    assert phases[0] == "retrieve" and set(phases) <= {"retrieve", "perceive", "review"}
    assert all(t.mode == "json" for t in trace.of(AgentTurn))
    assert trace.totals.steps <= 1
    assert answer.parsed == (answer.choice is not None) and answer.text
    assert Trace.load(tmp_path / "trace.jsonl").events == trace.events
    assert list(render(trace.events))[-2].startswith("answer: ")
