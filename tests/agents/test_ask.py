"""``vidagent ask`` and ``replay`` as a user runs them, ``vidagent.ask``, and a run over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentkit import INDEX_SPECS, action, build_library
from clirun import vidagent
from faultserver import Behaviour, FaultServer, completion

import vidagent as va
from vidagent.agents.base import Question
from vidagent.agents.dvd.agent import DVDAgent
from vidagent.cli.render import render
from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.models.client import Models
from vidagent.trace import Observed, RunStarted, Trace


def fake_env(*replies: str) -> dict[str, str]:
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=" + json.dumps(list(replies))
    return env


SCRIPT = (
    action("clip_search", "look for the text", event_description="HELLO"),
    action("answer", "found it", answer="(B)"),
)


def test_ask_shows_steps_live_and_replay_renders_the_same(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "run.jsonl"
    args = ["ask", str(small_video), "What text appears?", "-o", "BYE", "-o", "HELLO VIDAGENT"]
    out = vidagent(
        *args,
        "--tool-mode",
        "json",
        "--trace",
        str(trace),
        home=_isolated_home,
        env=fake_env(*SCRIPT),
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "step 1 · thought: look for the text" in lines
    assert any(
        line.startswith('step 1 → clip_search {"event_description": "HELLO"}') for line in lines
    )
    assert "answer: (B) HELLO VIDAGENT" in lines and lines[-1] == f"trace: {trace}"
    assert any(line.startswith("  evidence: small.mp4 00:00:") for line in lines)

    # replay: no model is reachable (an empty script fails on any call), same lines come back
    again = vidagent("replay", str(trace), home=_isolated_home, env=fake_env())
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == lines[:-1]
    summary = json.loads(vidagent("replay", str(trace), "--json", home=_isolated_home).stdout)
    assert summary["letter"] == "B" and summary["totals"]["steps"] == 2


def test_replay_reads_a_trace_cut_off_as_it_was_written(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "run.jsonl"
    args = ["ask", str(small_video), "What text appears?", "-o", "BYE", "-o", "HELLO VIDAGENT"]
    fake = fake_env(*SCRIPT)
    out = vidagent(
        *args, "--tool-mode", "json", "--trace", str(trace), home=_isolated_home, env=fake
    )
    assert out.returncode == 0, out.stderr
    whole = trace.read_text()
    lines = whole.splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"  # the process died writing its last event (run_finished)
    cut.write_text("".join(lines[:-1]) + lines[-1][:40])
    again = vidagent("replay", str(cut), home=_isolated_home)
    assert again.returncode == 0, again.stderr
    assert "answer: (B) HELLO VIDAGENT" in again.stdout.splitlines()
    assert again.stderr.strip() == "note: the trace's last line was cut off as it was written"
    cut.write_text("".join(lines[:2]) + lines[2][:40])  # and before its answer
    early = vidagent("replay", str(cut), home=_isolated_home)
    assert early.returncode == 0 and "the run did not finish" in early.stderr
    # ... which --json says too: the notes went to stderr only
    read = json.loads(vidagent("replay", str(cut), "--json", home=_isolated_home).stdout)
    assert (read["finished"], read["cut"], read["answer"]) == (False, True, None)
    cut.write_text("".join(lines[:2]) + lines[2][:40] + "\n" + "".join(lines[3:]))
    torn = vidagent("replay", str(cut), home=_isolated_home)  # a bad line inside: not a cut
    assert torn.returncode == 1 and f"{cut}:3: not a vidagent trace event" in torn.stderr
    cut.write_text("".join(lines[:2]) + "[1, 2]\n" + "".join(lines[3:]))  # JSON, no event
    listed = vidagent("replay", str(cut), home=_isolated_home)
    assert listed.returncode == 1 and listed.stderr.strip().splitlines() == [
        f"error: {cut}:3: not a vidagent trace event (a JSON list, not an event object)"
    ]
    cut.write_text("".join(lines[:2]) + '{"kind": "answer", "text": 5}\n')  # an event, half
    half = vidagent("replay", str(cut), home=_isolated_home)
    said = "bad answer event: lacks t, choice, parsed, forced, reason, confidence, evidence"
    assert half.returncode == 1 and half.stderr.strip().splitlines() == [
        f"error: {cut}:3: not a vidagent trace event ({said})"  # not Python's __init__()
    ]


def test_ask_json_output(small_video: Path, _isolated_home: Path) -> None:
    out = vidagent(
        "ask",
        str(small_video),
        "What text appears?",
        "-o",
        "BYE",
        "-o",
        "HELLO",
        "--json",
        "--tool-mode",
        "json",
        home=_isolated_home,
        env=fake_env(*SCRIPT),
    )
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["letter"] == "B" and body["answer"]["parsed"] is True
    assert body["totals"]["steps"] == 2 and Path(body["trace"]).is_file()
    assert Path(body["trace"]).parent == _isolated_home / "traces"
    assert "step 1 → clip_search" in out.stderr  # live steps go to stderr with --json


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "missing.mp4", "q"], "missing.mp4: not a video file and not a video in"),
        (
            ["ask", "{video}", "q", "--strategy", "nope"],
            "unknown strategy 'nope'; choose one of: dvd",
        ),
        (["ask", "{video}", "q", "--max-steps", "0"], "'--max-steps': 0 is not in the range x>=1"),
        (["ask", "{video}", "q", "--max-cost", "0"], "'--max-cost': 0.0 is not in the range x>0"),
        (["ask", "{video}", "q", "--max-seconds", "nan"], "'nan' is not a finite number"),
        (["ask", "{video}", "q", "--set", "nonsense"], "'nonsense' is not KEY=VALUE"),
        (["ask", "q"], "give at least one VIDEO and a QUESTION"),
        (["replay", "{video}"], "not a vidagent trace event"),
        (["replay", "missing.jsonl"], "missing.jsonl: no such trace file"),
    ],
)
def test_bad_input_is_one_line_and_exit_code(
    args: list[str], message: str, small_video: Path, _isolated_home: Path
) -> None:
    out = vidagent(
        *(a.replace("{video}", str(small_video)) for a in args), home=_isolated_home, env=fake_env()
    )
    assert out.returncode != 0
    assert message in out.stderr.strip().splitlines()[-1]  # the error itself is one line


def test_python_ask_indexes_then_answers(small_video: Path, tmp_path: Path) -> None:
    settings = load_settings(
        {**INDEX_SPECS, "llm": "fake:scripted?replies=" + json.dumps(list(SCRIPT))}
    )
    events: list[Any] = []
    answer = va.ask(
        small_video,
        "What text appears?",
        options=["BYE", "HELLO"],
        settings=settings,
        library=tmp_path / "lib",
        trace=tmp_path / "t.jsonl",
        on_event=events.append,
        tool_mode="json",
    )
    assert isinstance(answer, va.Answer) and answer.letter == "B"
    assert answer.trace is not None and answer.trace.events == events
    assert Trace.load(tmp_path / "t.jsonl").events == events
    record = va.Library(tmp_path / "lib").list_videos()[0]
    assert "embed" in record.stages and "summarize" not in record.stages  # DVD reads no summary


@pytest.fixture
def server() -> Iterator[FaultServer]:
    s = FaultServer().start()
    yield s
    s.stop()


def _tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def test_native_tool_calling_over_an_openai_compatible_server(
    small_video: Path, tmp_path: Path, server: FaultServer
) -> None:
    library, ids, _ = build_library(tmp_path / "lib", small_video)
    settings = load_settings(
        {
            **INDEX_SPECS,
            "llm": "openai:agent-model",
            "vlm": "openai:vision-model",
            "openai_base_url": server.base_url,
            "openai_api_key": "sk-test",
        }
    )
    inspect = {
        "question": "What does the text say?",
        "time_ranges_hhmmss": [["00:00:05", "00:00:07"]],
    }
    server.script(
        Behaviour(
            body=completion(
                "I should look at the frames.", tool_calls=[_tool_call("frame_inspect", **inspect)]
            )
        ),
        Behaviour(body=completion("The text reads HELLO VIDAGENT.")),
        Behaviour(body=completion("", tool_calls=[_tool_call("answer", answer="B")])),
    )
    with Models(settings) as models:
        # critic off: this test is about the agent's own calls (with a vision model the critic
        # and the citations' frame check would be two more)
        agent = DVDAgent(library, models, options={"critic": "off"})
        answer = agent.run(Question("What text?", tuple(ids), ("BYE", "HELLO")))
    assert answer.letter == "B" and answer.trace.totals.model_calls == 4  # + citations' embed
    first, vision, last = server.bodies("/chat/completions")
    assert first["model"] == "agent-model"
    assert [t["function"]["name"] for t in first["tools"]] == [
        "global_browse",
        "clip_search",
        "frame_inspect",
        "answer",
    ]
    images = [p for p in vision["messages"][1]["content"] if p["type"] == "image_url"]
    assert vision["model"] == "vision-model" and len(images) == 5  # 5, 5.5, 6, 6.5, 7 s
    assert images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    tool_message = last["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_frame_inspect"
    assert tool_message["content"] == "The text reads HELLO VIDAGENT."
    assert last["messages"][-2]["tool_calls"][0]["function"]["name"] == "frame_inspect"
    (observed,) = answer.trace.of(Observed)[:1]
    assert observed.frames == 5 and observed.evidence == [[ids[0], 5.0, 7.0]]
    assert list(render(answer.trace.events))[-2].startswith("answer: (B) HELLO\n")


def test_a_tool_model_given_at_ask_time_does_not_recaption(
    small_video: Path, tmp_path: Path
) -> None:
    """The papers caption the database with one model and search it with another (DVD: GPT-4.1
    and o3): ``captioner`` and ``tool_vlm`` are separate roles, so naming a tool model at ask
    time leaves the captions as indexed and the tools ask the model named."""
    captioned, looked = tmp_path / "captioner.jsonl", tmp_path / "tool.jsonl"
    base = {**INDEX_SPECS, "vlm": f"fake:echo?reply=not json&log={captioned}"}
    va.Session(load_settings(base), library=tmp_path / "lib").index_file(small_video)
    calls = len(captioned.read_text().splitlines())
    assert calls >= 3  # one request per clip at least (the echo's reply is asked again)
    before = [c.caption_model for c in va.Library(tmp_path / "lib").clips(_only_video(tmp_path))]

    inspect = action(
        "frame_inspect",
        "look",
        question="what colour?",
        time_ranges_hhmmss=[["00:00:01", "00:00:02"]],
    )
    settings = load_settings(
        {
            **base,
            "tool_vlm": f"fake:echo?reply=a red square&log={looked}",
            "llm": "fake:scripted?replies="
            + json.dumps([inspect, action("answer", "ok", answer="A")]),
        }
    )
    with va.Session(settings, library=tmp_path / "lib") as session:
        answer = session.ask(small_video, "What colour?", trace=False, tool_mode="json").answer
    assert len(captioned.read_text().splitlines()) == calls  # nothing captioned again
    assert [
        c.caption_model for c in va.Library(tmp_path / "lib").clips(_only_video(tmp_path))
    ] == before
    assert len(looked.read_text().splitlines()) == 1  # frame_inspect asked the tool model
    assert answer.trace is not None
    observed = [e for e in answer.trace.of(Observed) if e.tool == "frame_inspect"]
    assert "a red square" in observed[0].text


def _only_video(tmp_path: Path) -> str:
    (record,) = va.Library(tmp_path / "lib").list_videos()
    return record.video_id


def test_dvd_as_published_captions_without_transcripts_and_embeds_the_caption_alone(
    small_video: Path, tmp_path: Path
) -> None:
    """DVD's 74.2 on LVBench: captions built without transcripts, vectors of the caption
    alone, search results showing the caption alone; a richly indexed file is brought to it."""
    from vidagent.ingest.base import text_hash

    session = va.Session(load_settings(INDEX_SPECS), library=tmp_path / "lib")
    session.index_file(small_video)  # the rich default
    video_id = _only_video(tmp_path)
    # The fake ASR gives no word times, so clips get no speech of their own: give the first some.
    said = {"clip_index": 0, "transcript": "hello there", "ocr_text": "HELLO VIDAGENT"}
    session.library.update_clips(video_id, [said])

    script = [
        action("clip_search", "search", event_description="hello"),
        action("answer", "ok", answer="A"),
    ]
    settings = load_settings({**INDEX_SPECS, "llm": "fake:scripted?replies=" + json.dumps(script)})
    with va.Session(settings, library=tmp_path / "lib") as paper:
        result = paper.ask(
            small_video,
            "What is said?",
            trace=False,
            tool_mode="json",
            strategy_options={"index": "paper"},
        )
        clips = paper.library.clips(video_id)
        hashes = paper.library.clip_vector_hashes(video_id)
    assert clips and all(c.caption.endswith("Speech was not transcribed.") for c in clips)
    assert "hello there" not in clips[0].caption
    assert clips[0].transcript == "hello there"  # kept in the index, unseen by the captions
    # the describer read no transcript: its fingerprint says so, and so do the facts it read
    assert all("|no-transcripts|" in c.caption_model for c in clips)
    assert not any("transcribe" in c.caption_model.rpartition("|facts=")[2] for c in clips)
    assert hashes == {c.clip_index: text_hash(c.caption.strip()) for c in clips}
    trace = result.answer.trace if result.answer else None
    assert trace is not None
    (searched,) = [e for e in trace.of(Observed) if e.tool == "clip_search"]
    assert 'Speech: "hello there"' not in searched.text  # rich results append each clip's speech
    (started,) = trace.of(RunStarted)
    assert started.index == {
        # the describer's inputs but the transcript, which its captions do not see here
        "stages": ["read_text", "detect", "caption", "embed"],
        "caption_transcripts": False,
        "caption_style": "registry",
        "embed_text": "caption",
    }


def offline_env() -> dict[str, str]:
    """Fake roles for indexing, but the llm is the embedded SmolLM2: no model endpoint."""
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "llamacpp:smollm2-135m"
    return env


def test_without_an_endpoint_ask_answers_with_retrieval_and_says_how_to_point_at_one(
    small_video: Path, _isolated_home: Path
) -> None:
    args = ["ask", str(small_video), "What text appears?", "-o", "BYE", "-o", "HELLO VIDAGENT"]
    out = vidagent(*args, home=_isolated_home, env=offline_env())
    assert out.returncode == 0, out.stderr
    (note,) = [line for line in out.stderr.splitlines() if line.startswith("note: ")]
    assert note.startswith(
        "note: no model endpoint is configured: questions are answered from the index by"
    )
    assert "VIDAGENT_LLM=openai:MODEL" in note
    lines = out.stdout.splitlines()
    assert lines[0] == "[retrieval] What text appears?"
    assert "answer: (B) HELLO VIDAGENT" in lines


def test_without_an_endpoint_ground_answers_from_the_index(
    small_video: Path, _isolated_home: Path
) -> None:
    env = offline_env() | {"VIDAGENT_OCR": "rapidocr:pp-ocr"}  # reads the burned-in text
    out = vidagent("ground", str(small_video), "HELLO VIDAGENT shown", home=_isolated_home, env=env)
    assert out.returncode == 0, out.stderr
    assert "note: no model endpoint is configured" in out.stderr
    assert "interval: [5.0s, 10.0s]" in out.stdout.splitlines()  # the clip showing the text


def test_the_default_strategy_follows_the_llm_and_a_named_agent_states_its_accuracy() -> None:
    offline = load_settings({"llm": "llamacpp:smollm2-135m"}, env={})
    endpoint = load_settings({"llm": "openai:gpt-4o-mini"}, env={})
    with va.Session(offline) as s:
        assert s.pick_strategy()[0] == "retrieval"
        assert s.pick_strategy(None, "ground")[0] == "retrieval"
        assert s.pick_strategy("retrieval") == ("retrieval", "")
        dvd, line = s.pick_strategy("dvd")
        assert (
            dvd == "dvd" and "5 of 13 right (38%, chance 33%; (A) in 10 of 13), median 32 s" in line
        )
        assert "with SmolLM2 on llama.cpp" in line
    # the same model on the quick install's runtime quotes what was measured on that runtime
    with va.Session(load_settings({"llm": "transformers:smollm2-135m"}, env={})) as s:
        assert s.pick_strategy()[0] == "retrieval"
        line = s.pick_strategy("dvd")[1]
        assert "7 of 13 right" in line and "with SmolLM2 on transformers" in line
    with va.Session(offline) as s:
        assert "not measured" in s.pick_strategy("eea")[1]
        with pytest.raises(ConfigError, match="unknown strategy 'nope'"):
            s.pick_strategy("nope")
    with va.Session(endpoint) as s:
        assert s.pick_strategy() == ("dvd", "")
        assert s.pick_strategy(None, "ground") == ("avi", "")
        assert s.pick_strategy("videoagent2") == ("videoagent2", "")


@pytest.mark.parametrize("strategy", ["dvd", "videoagent2", "eea", "avi", "cvr"])
def test_a_model_that_never_answers_exits_3_for_every_strategy(
    strategy: str, small_video: Path, _isolated_home: Path, server: FaultServer
) -> None:
    # Indexed first with a working (fake) llm, so only answering meets the failing endpoint;
    # VideoAgent2 then summarises segments and AVI re-extracts its graph with the new llm,
    # before any run starts: those failures are "never answered" too.
    question = ("ask", str(small_video), "What text?", "-o", "BYE", "-o", "HELLO", "-q")
    working = fake_env() | {"VIDAGENT_LLM": "fake:echo?reply=(B)"}
    ready = vidagent(*question, "--strategy", strategy, home=_isolated_home, env=working)
    assert ready.returncode == 0, ready.stderr

    def refuse(path: str, body: Any) -> Behaviour | None:
        return Behaviour(status=500, body={"error": "boom"}) if "/chat/" in path else None

    server.gate = refuse
    env = fake_env() | {
        "VIDAGENT_LLM": "openai:agent-model",
        "VIDAGENT_OPENAI_BASE_URL": server.base_url,
        "VIDAGENT_OPENAI_API_KEY": "sk-test",
        "VIDAGENT_MAX_RETRIES": "0",
    }
    out = vidagent(*question, "--strategy", strategy, home=_isolated_home, env=env)
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "a bug" not in out.stderr
    shown = out.stdout + out.stderr
    assert "HTTP 500: boom" in shown  # why, either as the error line or the forced answer's note
    if out.stderr.strip():
        assert out.stderr.strip().splitlines()[-1].startswith("error: no answer: the model never")


def test_ask_about_a_folder_asks_about_every_video_in_it(
    small_video: Path, counter_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    # `index FOLDER` reads every video file inside; `ask FOLDER` once said "not a video file"
    folder = tmp_path / "clips"
    (folder / "day2").mkdir(parents=True)
    (folder / "notes.txt").write_text("not a video")
    (folder / "a.mp4").write_bytes(small_video.read_bytes())
    (folder / "day2" / "b.mp4").write_bytes(counter_video.read_bytes())
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    out = vidagent("ask", str(folder), "What text appears?", "--json", home=_isolated_home, env=env)
    assert out.returncode == 0, out.stderr
    trace = Trace.load(Path(json.loads(out.stdout)["trace"]))
    assert sorted(v["name"] for v in trace.of(RunStarted)[0].videos) == ["a.mp4", "b.mp4"]

    quoted = vidagent("ask", f"{folder}/**/*.mp4", "What?", home=_isolated_home, env=env)
    assert quoted.returncode == 0, quoted.stderr  # a quoted glob, as `index` takes one
    empty = tmp_path / "empty"
    empty.mkdir()
    done = vidagent("ask", str(empty), "What?", home=_isolated_home, env=env)
    assert done.returncode == 2 and "a folder with no video files in it" in done.stderr


@pytest.mark.parametrize(
    ("strategy", "said"), [("dvd", "; llm llamacpp:smollm2-135m"), ("retrieval", "; no llm")]
)
def test_the_run_header_names_the_llm_only_for_a_strategy_that_calls_one(
    strategy: str, said: str
) -> None:
    from vidagent.agents.strategies import STRATEGIES

    started = RunStarted(
        0.0,
        calls=list(STRATEGIES.load(strategy).calls),
        strategy=strategy,
        question="What is said?",
        options=[],
        videos=[{"video_id": "v" * 16, "name": "talk.mp4", "duration": 9.0}],
        models={"llm": "llamacpp:smollm2-135m"},
        budget={},
    )
    (header,) = render([started])
    assert header.splitlines()[1] == f"  videos: talk.mp4{said}"


def test_a_video_named_whose_index_stopped_part_way_is_indexed_on_before_its_question(
    small_video: Path, slide_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    # `vidagent index` stopped after transcription (Ctrl-C, or fewer --stages), then a question
    # by the video's name: it was answered from an index with no vectors or text, in silence
    env = fake_env()
    files = {name: tmp_path / name / "x.mp4" for name in ("a", "b", "gone")}
    for (name, path), video in zip(
        files.items(), (small_video, slide_video, small_video), strict=True
    ):
        path.parent.mkdir()
        path.write_bytes(video.read_bytes() + (b"\0" * 16 if name == "gone" else b""))
        out = vidagent("index", str(path), "--stages", "transcribe", home=_isolated_home, env=env)
        assert out.returncode == 0, out.stderr
    library = va.Library(_isolated_home / "library")
    a, b, gone = (library.get_video(str(path)) for path in files.values())
    assert "embed" not in library.get_video(a.video_id).stages

    asked = ["What text appears?", "-o", "BYE", "-o", "HELLO VIDAGENT", "-s", "retrieval"]
    out = vidagent("ask", a.video_id[:8], *asked, home=_isolated_home, env=env)
    assert out.returncode == 0, out.stderr
    assert {"read_text", "embed"} <= library.get_video(a.video_id).stages.keys()
    assert "answer: (B) HELLO VIDAGENT" in out.stdout.splitlines()

    # its file gone: one line saying what the index lacks, not an answer from nothing
    files["gone"].unlink()
    out = vidagent("ask", gone.video_id, *asked, home=_isolated_home, env=env)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("error: x.mp4: its index has no read_text,") and (
        f"{files['gone']} is gone: index the video again from its file" in out.stderr
    )
    # a name that is two videos' is said to be so (it was "not a video file")
    out = vidagent("ask", "x", *asked, home=_isolated_home, env=env)
    assert out.returncode == 1 and "'x' matches several videos" in out.stderr
    assert b.video_id != a.video_id
