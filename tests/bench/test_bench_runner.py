"""``vidagent bench run``: rows, manifest, traces, missing videos, errors, concurrency, resume
after a kill."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from benchkit import NEXTQA, RUNNABLE, SPECS, hub, make_nextqa, rows_in, settings_with
from clirun import vidagent

from vidagent import __version__
from vidagent.agents.base import Answer
from vidagent.app.benchmarks import RunConfig, run_benchmark
from vidagent.bench.answers import parse_prediction
from vidagent.bench.base import BenchmarkDataError, Sample
from vidagent.bench.report import load_run
from vidagent.bench.rundir import RowLog, check_resume, read_manifest, read_rows, rewrite_rows
from vidagent.exceptions import ConfigError, EndpointUnreachable, ServerError, UserError
from vidagent.models.base import Capabilities, ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import ALL_ROLES, FakeAdapter
from vidagent.prompts import prompt_hash
from vidagent.trace import Trace


@pytest.fixture(scope="module")
def nextqa(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_nextqa(tmp_path_factory.mktemp("nextqa") / "data")


def test_the_retrieval_baseline_is_capped_by_the_endpoint_it_calls(
    nextqa: Path, tmp_path: Path
) -> None:
    # the baseline asks no llm: a local one (one request at a time) must not make a remote
    # embedder's run serial
    settings = settings_with(default_concurrency=3)
    remote = dataclasses.replace(FakeAdapter.capabilities, local=False)
    models = Models.from_adapters(
        {
            "llm": FakeAdapter("echo", {"reply": "B"}),
            "vlm": FakeAdapter("echo", {"reply": "a frame"}),
            "embed": FakeAdapter("hash", {"dim": "32"}, capabilities=remote),
            "asr": FakeAdapter("echo", {"text": "hello there"}),
            "ocr": FakeAdapter(),
            "detector": FakeAdapter(),
        },
        settings,
    )
    config = RunConfig("nextqa", nextqa, strategy="retrieval", concurrency=4)
    summary = run_benchmark(config, settings=settings, models=models, out=tmp_path / "run")
    assert summary.concurrency == 3 and summary.requested_concurrency == 4
    assert any("(fake:hash?dim=32: 3)" in n for n in summary.notes)  # the llm is not named


def test_a_run_writes_one_row_per_question_a_manifest_and_traces(
    nextqa: Path, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    settings = settings_with(f"fake:echo?reply=(B)&log={log}")
    out = tmp_path / "run"
    summary = run_benchmark(RunConfig("nextqa", nextqa), settings=settings, out=out)

    assert (summary.questions, summary.ran, summary.missing, summary.errors) == (6, 5, 1, 0)
    assert summary.concurrency == 1 and summary.requested_concurrency == 4  # local fakes: 1
    assert any(n.startswith("concurrency capped at 1") for n in summary.notes)
    assert any("1 question lacks a video (e.g. " in n for n in summary.notes)
    assert summary.scores is not None  # B is right for v1_0, v1_1, v2_0; v3_0 has no video
    assert summary.scores.overall.score == 50.0 and summary.scores.overall.answered == 5
    assert summary.scores.split == "val" and summary.scores.sections["group"]["C"].score == 100.0

    rows = read_rows(out / "predictions.jsonl")
    assert set(rows) == RUNNABLE
    assert {i for i, r in rows.items() if r["correct"]} == {"v1_0", "v1_1", "v2_0"}
    row = rows["v1_2"]
    assert (row["prediction"], row["parsed"], row["letter"], row["correct"]) == (
        "(B)",
        1,
        "B",
        False,
    )
    assert row["steps"] == 1 and row["model_calls"] == 1 and row["error"] is None
    assert row["tokens"] == row["input_tokens"] + row["output_tokens"] > 0
    assert row["cost_usd"] == 0.0 and row["latency_s"] >= row["agent_seconds"] >= 0
    trace = Trace.load(out / row["trace"])
    assert trace.answer is not None and trace.answer.choice == 1
    assert "when does the light turn on" in trace.events[0].question

    manifest = read_manifest(out)
    assert manifest["benchmark"] == "nextqa" and manifest["split"] == "val"
    assert manifest["vidagent"] == __version__ and manifest["strategy"] == "dvd"
    assert manifest["models"]["llm"] == f"fake:echo?log={log}&reply=(B)"  # the serving spec
    assert manifest["models"]["embed"] == SPECS["embed"]
    assert manifest["prompts"]["dvd_agent.txt"] == prompt_hash("dvd_agent")
    assert manifest["budget"]["steps"] == 15 and manifest["strategy_settings"]["tools"]
    assert manifest["samples"] == [f"{v}_{q}" for v, q, *_ in NEXTQA]
    assert manifest["missing_videos"] == [{"id": "v3_0", "path": str(nextqa / "videos" / "v3.mp4")}]
    assert manifest["concurrency"] == {
        "requested": 4,
        "threads": 1,
        "endpoints": {f"fake:echo?log={log}&reply=(B)": 1, "perception:describer": 1},
    }
    assert manifest["settings"]["cache"] == "off" and manifest["settings"]["openai_api_key"] == ""

    calls = len(log.read_text().splitlines())
    again = run_benchmark(RunConfig("nextqa", nextqa), settings=settings, out=out)
    assert (again.done_before, again.ran) == (5, 0)
    assert len(log.read_text().splitlines()) == calls  # nothing was asked again
    assert len(rows_in(out / "predictions.jsonl")) == 5


def test_a_run_says_which_listed_ids_it_did_not_find(nextqa: Path, tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("v1_0\nv9_9\n")  # one question of the split, one not
    summary = run_benchmark(
        RunConfig("nextqa", nextqa, ids=ids), settings=settings_with(), out=tmp_path / "run"
    )
    assert summary.questions == 1 and "1 listed id is not a nextqa val question" in summary.notes


def test_questions_without_their_text_are_not_asked(tmp_path: Path) -> None:
    data = tmp_path / "egoschema"  # the subset's answers, without questions.json
    data.mkdir()
    (data / "subset_answers.json").write_text(json.dumps({"q1": 0, "q2": 3}))
    with pytest.raises(BenchmarkDataError) as raised:
        run_benchmark(RunConfig("egoschema", data), settings=settings_with(), out=tmp_path / "r")
    assert str(raised.value) == (
        "2 of the 2 egoschema subset questions have no question text to ask "
        "(questions.json not found: the subset has answers but no question text)"
    )
    assert not (tmp_path / "r").exists()


def test_an_answered_question_whose_video_went_is_not_counted_missing(tmp_path: Path) -> None:
    data, out = make_nextqa(tmp_path / "data"), tmp_path / "run"
    first = run_benchmark(RunConfig("nextqa", data), settings=settings_with(), out=out)
    assert first.missing == 1  # v3 was never there
    (data / "videos" / "v2.mp4").unlink()  # after v2's two questions were answered
    again = run_benchmark(RunConfig("nextqa", data), settings=settings_with(), out=out)
    assert (again.done_before, again.ran, again.missing) == (5, 0, 1)
    assert [n for n in again.notes if "a video (e.g." in n] == [
        f"1 question lacks a video (e.g. {data / 'videos' / 'v3.mp4'}); counted as unanswered"
    ]
    manifest = read_manifest(out)
    assert [m["id"] for m in manifest["missing_videos"]] == ["v3_0"]
    assert again.scores is not None and again.scores.overall.answered == 5
    # A run folder written before: its manifest still lists v2's questions as missing.
    stale = [{"id": i, "path": str(data / "videos" / "v2.mp4")} for i in ("v2_0", "v2_1")]
    manifest["missing_videos"] += stale
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert load_run(out).counts["missing_videos"] == 1


def test_a_smaller_limit_keeps_the_missing_videos_an_earlier_session_found(
    tmp_path: Path,
) -> None:
    data, out = make_nextqa(tmp_path / "data"), tmp_path / "run"
    run_benchmark(RunConfig("nextqa", data), settings=settings_with(), out=out)
    again = run_benchmark(RunConfig("nextqa", data, limit=1), settings=settings_with(), out=out)
    assert again.ran == 0
    assert [m["id"] for m in read_manifest(out)["missing_videos"]] == ["v3_0"]
    assert load_run(out).counts["missing_videos"] == 1  # not "not run"


def test_a_finished_run_whose_videos_all_went_is_reported_again(tmp_path: Path) -> None:
    data, out = make_nextqa(tmp_path / "data"), tmp_path / "run"
    run_benchmark(RunConfig("nextqa", data), settings=settings_with(), out=out)
    for video in (data / "videos").iterdir():
        video.unlink()  # the run is done: its videos may go
    again = run_benchmark(RunConfig("nextqa", data), settings=settings_with(), out=out)
    assert (again.done_before, again.ran, again.missing) == (5, 0, 1)
    assert again.scores is not None and again.scores.overall.answered == 5
    with pytest.raises(BenchmarkDataError, match="none of the 6 questions has its video"):
        run_benchmark(RunConfig("nextqa", data), settings=settings_with(), out=tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_videos_named_as_the_folder_the_loader_would_use_resume_a_run_without(
    nextqa: Path, _isolated_home: Path
) -> None:
    first = run_benchmark(
        RunConfig("nextqa", nextqa, limit=1, videos=nextqa / "videos"), settings=settings_with()
    )
    again = run_benchmark(RunConfig("nextqa", nextqa, limit=2), settings=settings_with())
    assert again.out == first.out and (again.done_before, again.ran) == (1, 1)


def test_the_default_run_folder_is_named_by_the_settings_so_the_same_command_resumes(
    nextqa: Path, _isolated_home: Path
) -> None:
    first = run_benchmark(RunConfig("nextqa", nextqa, limit=2), settings=settings_with())
    assert first.out.parent == _isolated_home / "runs"
    assert first.out.name.startswith("nextqa-val-dvd-")
    again = run_benchmark(RunConfig("nextqa", nextqa, limit=3), settings=settings_with())
    assert again.out == first.out and (again.done_before, again.ran) == (2, 1)
    other = run_benchmark(
        RunConfig("nextqa", nextqa, limit=1), settings=settings_with("fake:echo?reply=C")
    )
    assert other.out != first.out


def test_a_smaller_limit_into_a_run_keeps_the_questions_it_holds(
    nextqa: Path, _isolated_home: Path
) -> None:
    first = run_benchmark(RunConfig("nextqa", nextqa, limit=3), settings=settings_with())
    again = run_benchmark(RunConfig("nextqa", nextqa, limit=1), settings=settings_with())
    assert again.out == first.out and (again.done_before, again.ran) == (1, 0)
    manifest = json.loads((first.out / "manifest.json").read_text())
    assert len(manifest["samples"]) == 3 and manifest["limit"] == 3
    # the stages the answers read are part of what a resume must match
    assert manifest["index_settings"]["stages"] == [
        "transcribe",
        "read_text",
        "detect",
        "caption",
        "embed",
    ]
    reported = load_run(first.out)
    assert reported.scores.overall.questions == 3  # not the last session's one question


def test_resuming_with_another_model_is_refused_naming_it(nextqa: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_benchmark(RunConfig("nextqa", nextqa, limit=1), settings=settings_with(), out=out)
    with pytest.raises(
        UserError,
        match=r"holds a run with another models\.llm \(was 'fake:echo\?reply=B', now 'fake:echo\?reply=C'\)",
    ):
        run_benchmark(
            RunConfig("nextqa", nextqa, limit=1),
            settings=settings_with("fake:echo?reply=C"),
            out=out,
        )
    with pytest.raises(UserError, match=r"another budget\.steps \(was 15, now 3\)"):
        run_benchmark(
            RunConfig("nextqa", nextqa, limit=1, budget=_budget(steps=3)),
            settings=settings_with(),
            out=out,
        )


def test_resume_compares_the_prompts_both_runs_have() -> None:
    old = {"prompts": {"dvd_agent.txt": "aaaa", "old_strategy.txt": "bbbb"}}
    check_resume(old, {"prompts": {"dvd_agent.txt": "aaaa", "new_strategy.txt": "cccc"}}, Path("r"))
    with pytest.raises(
        UserError, match=r"another prompts\.dvd_agent\.txt \(was 'aaaa', now 'dddd'\)"
    ):
        check_resume(old, {"prompts": {"dvd_agent.txt": "dddd"}}, Path("r"))


def _budget(**limits: Any) -> Any:
    from vidagent.budget import Budget

    return Budget(**limits)


def test_an_endpoint_that_cannot_be_reached_stops_the_run_and_a_resume_goes_on(
    nextqa: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.app.benchmarks import runner

    monkeypatch.setattr(runner, "UNREACHABLE_STOP", 3)  # the nextqa sample has 5 questions
    settings = settings_with(max_retries=0)
    down = {"on": True}

    def reply(request: ChatRequest) -> str:
        if down["on"]:
            raise EndpointUnreachable("connection failed: ConnectError", endpoint="fake")
        return "B"

    out = tmp_path / "run"
    config = RunConfig("nextqa", nextqa, concurrency=1)
    with (
        hub(settings, FakeAdapter.function(reply)) as models,
        pytest.raises(
            EndpointUnreachable, match="3 questions in a row could not reach it, so the run stopped"
        ),
    ):
        run_benchmark(config, settings=settings, out=out, models=models)
    rows = read_rows(out / "predictions.jsonl")
    # stopped at the third, however late the thread that records rows is scheduled: the one
    # thread that answers does not begin the fourth
    assert len(rows) == 3
    assert all(r["error"].startswith(runner.UNREACHABLE) for r in rows.values())
    down["on"] = False
    with hub(settings, FakeAdapter.function(reply)) as models:
        again = run_benchmark(config, settings=settings, out=out, models=models)
    assert (again.ran, again.errors) == (5, 0)  # the 3 failed rows asked again, and the rest
    # a question that reaches its endpoint breaks the streak
    reach = runner.Unreachable()
    for error in [
        "model error: EndpointUnreachable: x",
        None,
        "model error: EndpointUnreachable: x",
    ]:
        reach.check({"error": error})
    assert reach.streak == 1


def test_an_interrupt_says_it_finishes_the_questions_in_flight_and_keeps_their_rows(
    nextqa: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from vidagent.app.benchmarks import runner

    asked = threading.Event()

    def reply(request: ChatRequest) -> str:
        asked.set()
        time.sleep(1.0)
        return "B"

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        assert asked.wait(60)
        raise KeyboardInterrupt  # Ctrl-C while the first questions run

    monkeypatch.setattr(runner, "wait", interrupted)
    out, settings = tmp_path / "run", settings_with()
    config = RunConfig("nextqa", nextqa, concurrency=1)
    with hub(settings, FakeAdapter.function(reply)) as models, pytest.raises(KeyboardInterrupt):
        run_benchmark(config, settings=settings, out=out, models=models)
    said = [r.getMessage() for r in caplog.records if "interrupted" in r.getMessage()]
    assert said == [
        (
            "interrupted: finishing the 1 question in flight, whose rows are kept; the "
            "questions not begun are asked when the same command runs again"
        )
    ]
    assert len(read_rows(out / "predictions.jsonl")) == 1  # finished, recorded; none begun after
    monkeypatch.undo()
    with hub(settings, FakeAdapter.function(reply)) as models:
        again = run_benchmark(config, settings=settings, out=out, models=models)
    assert (again.done_before, again.ran) == (1, 4)


def test_a_failed_question_is_recorded_and_asked_again_on_resume(
    nextqa: Path, tmp_path: Path
) -> None:
    settings = settings_with(max_retries=0)
    failing = {"on": True}

    def reply(request: ChatRequest) -> str:
        if failing["on"] and "why does the man wave" in request.messages[-1].text:
            raise ServerError("HTTP 503: overloaded", endpoint="fake", status=503)
        return "B"

    out = tmp_path / "run"
    with hub(settings, FakeAdapter.function(reply)) as models:
        first = run_benchmark(
            RunConfig("nextqa", nextqa), settings=settings, out=out, models=models
        )
    assert (first.ran, first.errors) == (5, 1)
    failed = read_rows(out / "predictions.jsonl")["v2_0"]
    # The outage ended the search with a forced answer; the row counts as failed, for a resume.
    assert failed["error"] == "model error: ServerError: fake: HTTP 503: overloaded"
    assert failed["forced"] is True and failed["reason"] == "model_error"
    assert "--- " in (out / "errors.log").read_text() and "v2_0" in (out / "errors.log").read_text()

    failing["on"] = False
    with hub(settings, FakeAdapter.function(reply)) as models:
        second = run_benchmark(
            RunConfig("nextqa", nextqa), settings=settings, out=out, models=models
        )
    assert (second.done_before, second.ran, second.errors) == (4, 1, 0)
    rows = rows_in(out / "predictions.jsonl")
    assert sorted(r["id"] for r in rows) == sorted(RUNNABLE)  # the failed row was replaced
    assert next(r for r in rows if r["id"] == "v2_0")["correct"] is True
    assert second.scores is not None and second.scores.overall.score == 50.0


def test_questions_run_concurrently_up_to_the_endpoint_limit(nextqa: Path, tmp_path: Path) -> None:
    settings = settings_with(default_concurrency=3)
    lock, state = threading.Lock(), {"now": 0, "most": 0}

    class Remote(FakeAdapter):
        """A remote-like endpoint that counts the requests it is serving at once."""

        capabilities = Capabilities(roles=ALL_ROLES, supports_tools=True, local=False)

        def chat(self, request: ChatRequest) -> Any:
            with lock:
                state["now"] += 1
                state["most"] = max(state["most"], state["now"])
            try:
                time.sleep(0.3)
                return super().chat(request)
            finally:
                with lock:
                    state["now"] -= 1

    with hub(settings, Remote("echo", {"reply": "B"})) as models:
        summary = run_benchmark(
            RunConfig("nextqa", nextqa, concurrency=8),
            settings=settings,
            out=tmp_path / "run",
            models=models,
        )
    assert (summary.concurrency, summary.requested_concurrency, summary.ran) == (3, 8, 5)
    assert state["most"] == 3


def test_a_killed_run_resumes_without_redoing_or_losing_a_question(
    nextqa: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    log, out = tmp_path / "calls.jsonl", tmp_path / "run"
    env = {f"VIDAGENT_{k.upper()}": v for k, v in SPECS.items()}
    env["VIDAGENT_LLM"] = f"fake:echo?reply=B&delay=0.5&log={log}"
    args = ["bench", "run", "nextqa", "--data", str(nextqa), "--out", str(out), "-q"]
    full_env = {**os.environ, "VIDAGENT_HOME": str(_isolated_home), **env}
    # A process, to be killed half-way; leaving the block closes its stderr pipe and reaps it.
    rows_file = out / "predictions.jsonl"
    with subprocess.Popen(
        [sys.executable, "-m", "vidagent", *args],
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as process:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if rows_file.is_file() and len(rows_file.read_text().splitlines()) >= 2:
                break
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finished = {r["id"] for r in rows_in(rows_file)}
    assert 2 <= len(finished) < len(RUNNABLE), "the run should be killed half-way"
    asked_before = len(log.read_text().splitlines())

    again = vidagent(*args, home=_isolated_home, env=env)
    assert again.returncode == 0, again.stderr
    assert f"{len(finished)} done before, {len(RUNNABLE) - len(finished)} asked now" in again.stdout
    ids = [r["id"] for r in rows_in(rows_file)]
    assert sorted(ids) == sorted(RUNNABLE)  # none lost, none twice
    asked_again = [json.loads(line)["text"] for line in log.read_text().splitlines()[asked_before:]]
    questions = {f"{v}_{q}": text for v, q, text, *_ in NEXTQA}
    redone = [i for i, text in questions.items() for said in asked_again if text in said]
    assert sorted(redone) == sorted(RUNNABLE - finished)  # each unfinished one once, no others
    sessions = read_manifest(out)["sessions"]
    assert len(sessions) == 2 and sessions[1]["rows_kept"] == len(finished)


def test_a_second_run_into_the_folder_a_run_writes_is_refused(nextqa: Path, tmp_path: Path) -> None:
    out, settings = tmp_path / "run", settings_with("fake:echo?reply=B&delay=0.3")
    ended: list[Any] = []

    def first() -> None:
        try:
            ended.append(run_benchmark(RunConfig("nextqa", nextqa), settings=settings, out=out))
        except Exception as e:  # noqa: BLE001 - handed to the test's thread
            ended.append(e)

    writer = threading.Thread(target=first)
    writer.start()
    deadline = time.monotonic() + 60
    lock = out / ".lock"  # its process id is written once it is held
    while not (lock.is_file() and lock.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    busy = rf"{out}: a bench run \(process {os.getpid()}\) is writing to it; let it end"
    with pytest.raises(ConfigError, match=busy):
        run_benchmark(RunConfig("nextqa", nextqa), settings=settings, out=out)
    writer.join()
    assert [type(e).__name__ for e in ended] == ["RunSummary"]
    assert sorted(r["id"] for r in rows_in(out / "predictions.jsonl")) == sorted(RUNNABLE)
    again = run_benchmark(RunConfig("nextqa", nextqa), settings=settings, out=out)
    assert (again.done_before, again.ran) == (5, 0)  # the lock went with the run that held it


def test_bench_run_errors_are_one_line(nextqa: Path, _isolated_home: Path) -> None:
    out = vidagent(
        "bench", "run", "nextqa", "--data", str(nextqa), "--set", "nope=1", home=_isolated_home
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith("error: dvd has no option nope; ")
    out = vidagent("bench", "run", "nextqa", "--data", str(nextqa / "absent"), home=_isolated_home)
    assert out.stderr.strip().splitlines()[-1] == f"error: no such data folder: {nextqa / 'absent'}"
    nowhere = nextqa / "nowhere"
    args = ("bench", "run", "nextqa", "--data", str(nextqa), "--videos", str(nowhere))
    out = vidagent(*args, home=_isolated_home)
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1] == (
        f"error: none of the 6 questions has its video (e.g. {nowhere / 'v1.mp4'}); "
        "give the folder that holds them with --videos"
    )
    assert not (_isolated_home / "runs").exists()  # no run folder of 0 answered


def test_a_run_whose_every_question_failed_exits_1(nextqa: Path, _isolated_home: Path) -> None:
    env = {f"VIDAGENT_{k.upper()}": v for k, v in SPECS.items()}
    env |= {  # a port nothing listens on
        "VIDAGENT_LLM": "openai:nobody",
        "VIDAGENT_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "VIDAGENT_OPENAI_API_KEY": "sk-test",
        "VIDAGENT_MAX_RETRIES": "0",
    }
    out = vidagent("bench", "run", "nextqa", "--data", str(nextqa), "--limit", "2", "-q",
                   home=_isolated_home, env=env)  # fmt: skip
    assert out.returncode == 1 and "2 asked now (2 failed)" in out.stdout
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith("error: every question asked now failed (2); see ")
    )


@pytest.mark.parametrize(
    ("task", "text", "parsed"),
    [
        ("multi", "(A) and (C)", (0, 2)),
        ("multi", "The answers are A, C", (0, 2)),
        ("multi", "B D", (1, 3)),
        ("multi", "A man is walking", None),
        ("order", "The order is 2->3->1.", (2, 3, 1)),
        ("interval", "from 00:01:05 to 70.5 seconds", (65.0, 70.5)),
        ("interval", "It ends at 12 s, starts at 4", (4.0, 12.0)),
        ("interval", "at 12", None),
        ("open", "  ", None),
        ("open", "**A red car**", "A red car"),
    ],
)
def test_answers_are_read_in_the_benchmarks_form(task: str, text: str, parsed: Any) -> None:
    sample = Sample("q", (), "?", options=("w", "x", "y", "z"), task=task)
    assert parse_prediction(sample, Answer(text)) == parsed


def test_a_torn_last_row_is_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": "a", "parsed": 1}\n{"id": "b", "par')
    with RowLog(path) as log:
        log.append({"id": "c", "parsed": 2})
    assert path.read_text() == '{"id": "a", "parsed": 1}\n{"id":"c","parsed":2}\n'


def test_a_line_of_bytes_that_are_not_utf8_is_dropped_on_resume(tmp_path: Path) -> None:
    rows = tmp_path / "predictions.jsonl"
    rows.write_bytes(b'{"id": "a", "error": null}\n\xff\xfe\n{"id": "b", "error": "x"}\n')
    assert rewrite_rows(rows, lambda row: row.get("error") is None) == 2  # was a traceback
    assert list(read_rows(rows)) == ["a"]
