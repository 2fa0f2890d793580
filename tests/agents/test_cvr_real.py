"""A real AgentCVR run: the embedded SmolLM2 as master over two real clips, the perception
describer as the visual agent and faster-whisper tiny as the audio agent. SmolLM2-135M is weak;
what must hold is that the run completes with a well-formed answer, its sub-agents ran as child
runs with real models, and the trace replays."""

from __future__ import annotations

from pathlib import Path

import pytest
from realmedia import get_clip

from vidagent.app import ask
from vidagent.budget import Budget
from vidagent.cli.render import render
from vidagent.config import load_settings
from vidagent.trace import AgentTurn, ChildStarted, ModelCall, RunStarted, Trace

pytestmark = [pytest.mark.models, pytest.mark.realmedia]


def test_smollm2_masters_two_real_clips(tmp_path: Path) -> None:
    clips = [get_clip("vtest.avi"), get_clip("wannaworktogether.mp4")]
    settings = load_settings({"cache": "off"})  # the embedded offline defaults
    answer = ask(
        clips,
        "Which video has people walking?",
        options=["Video 1", "Video 2"],
        strategy="cvr",
        settings=settings,
        library=tmp_path / "lib",
        budget=Budget(steps=2),
        trace=tmp_path / "trace.jsonl",
    )
    trace = answer.trace
    assert trace is not None
    started = trace.of(RunStarted)[0]
    assert started.strategy == "cvr" and started.models["llm"] == "llamacpp:smollm2-135m"
    assert len(started.videos) == 2 and started.index["stages"] == []  # raw videos, no index
    assert started.settings["constrained"] is True  # a local master is held to the action JSON
    turns = trace.of(AgentTurn)
    assert 1 <= len(turns) <= 2 and all(t.mode == "json" for t in turns)
    assert {c["name"] for t in turns for c in t.tool_calls} <= {"observe", "get_caption", "answer"}
    llm_calls = [e for e in trace.of(ModelCall) if e.role == "llm" and e.output_tokens > 0]
    assert llm_calls
    children = {c.child: c.name for c in trace.of(ChildStarted)}
    tools = [c["name"] for t in turns for c in t.tool_calls if c["name"] != "answer"]
    assert sorted(children.values()) == sorted(
        {"observe": "visual_agent", "get_caption": "audio_agent"}[n] for n in tools
    )
    # each sub-agent's model calls are recorded under its child run
    for call in trace.of(ModelCall):
        if call.run in children:
            expected = "tool_vlm" if children[call.run] == "visual_agent" else "asr"
            assert call.role in (expected, "llm")  # the describer answers through the llm
    assert answer.parsed == (answer.choice is not None)
    assert answer.reason in ("answered", "max_steps", "format_errors")
    assert Trace.load(tmp_path / "trace.jsonl").events == trace.events
    assert list(render(trace.events))[-2].startswith("answer: ")
