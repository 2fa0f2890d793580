"""Indexing and benchmark questions on a local Ray cluster started by this module, with a
worker killed in the middle of its task: Ray restarts it and retries, and the Library and the
run folder end with every clip and every question exactly once."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.benchkit import RUNNABLE, make_nextqa, rows_in, settings_with
from executorkit import CLIPS, clip_rows, make_videos
from factories import INDEX_SPECS

from vidagent.app import Session
from vidagent.app.benchmarks import RunConfig, run_benchmark
from vidagent.app.executors.gate import GATE_NAME, NAMESPACE, ray_gate_calls
from vidagent.app.executors.on_ray import LOCAL_CLUSTER, RayExecutor
from vidagent.config import load_settings
from vidagent.library import Library

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'vidagent[ray]')")


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    """One local two-CPU cluster for the module, started as the executor starts its own (its
    workers at the driver's priority), and shut down after it."""
    ray.init(
        **LOCAL_CLUSTER,
        num_cpus=2,
        namespace=NAMESPACE,
        log_to_driver=False,
        object_store_memory=100 * 1024**2,
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_videos(tmp_path_factory)


def kill_when(ready: Callable[[], bool], executor: RayExecutor, running: threading.Thread) -> None:
    """SIGKILL every worker of ``executor`` once ``ready()``, while its work is still running."""
    while not (executor.pids and ready()):
        assert running.is_alive(), "the work finished before a worker could be killed"
        time.sleep(0.02)
    for pid in executor.pids:
        # at the driver's priority, not Ray's default niceness of 15 (LOCAL_CLUSTER)
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0)
        os.kill(pid, signal.SIGKILL)


def test_videos_are_indexed_once_each_on_ray_with_a_worker_killed_mid_caption(
    videos: list[Path], tmp_path: Path
) -> None:
    log = tmp_path / "captions.jsonl"
    settings = load_settings(
        {**INDEX_SPECS, "vlm": f"fake:echo?reply=a red square moves&delay=0.4&log={log}"}
    )
    executor = RayExecutor()
    reports: list[Any] = []
    with Session(settings, library=tmp_path / "lib") as session:
        work = threading.Thread(
            target=lambda: reports.extend(session.index(videos, executor=executor))
        )
        work.start()
        # a caption came back: the workers are inside the caption stage of their videos
        kill_when(lambda: log.is_file() and log.stat().st_size > 0, executor, work)
        killed_before = len(reports)
        work.join()
    assert killed_before < len(videos)
    assert sorted(r.path.name for r in reports) == ["v0.mp4", "v1.mp4", "v2.mp4"]
    assert all(r.ok and r.clips == CLIPS for r in reports), [r.error for r in reports]

    library = Library(tmp_path / "lib")
    listed = library.list_videos()
    assert sorted(v.name for v in listed) == ["v0.mp4", "v1.mp4", "v2.mp4"]
    for video in listed:
        assert clip_rows(library, video.video_id, "clips") == list(range(CLIPS))  # once each
        assert clip_rows(library, video.video_id, "clip_vectors") == list(range(CLIPS))
        clips = library.clips(video.video_id)
        assert all("red square" in c.caption for c in clips)
        assert set(video.stages) == {
            "structure",
            "transcribe",
            "read_text",
            "detect",
            "speakers",
            "caption",
            "embed",
            "summarize",
        }
        assert library.artifact(video.video_id, "summary", "global") is not None


def test_ray_indexing_writes_what_sequential_indexing_writes(
    videos: list[Path], tmp_path: Path
) -> None:
    settings = load_settings(INDEX_SPECS)

    def contents(root: Path) -> dict[str, list[tuple[int, str, str]]]:
        library = Library(root)
        return {
            v.name: [(c.clip_index, c.caption, c.transcript) for c in library.clips(v.video_id)]
            for v in library.list_videos()
        }

    with Session(settings, library=tmp_path / "seq") as session:
        assert all(r.ok for r in session.index(videos))
    with Session(settings, library=tmp_path / "ray") as session, RayExecutor() as executor:
        assert all(r.ok for r in session.index(videos, executor=executor))
        assert executor.workers == 2
    assert contents(tmp_path / "ray") == contents(tmp_path / "seq")


def test_a_missing_file_is_one_videos_error_and_the_others_are_indexed(
    videos: list[Path], tmp_path: Path
) -> None:
    with Session(load_settings(INDEX_SPECS), library=tmp_path / "lib") as session:
        reports = list(session.index([tmp_path / "nope.mp4", videos[0]], executor=RayExecutor()))
    errors = [r.error for r in reports if not r.ok]
    assert len(errors) == 1 and "nope.mp4" in str(errors[0])
    assert [v.name for v in Library(tmp_path / "lib").list_videos()] == ["v0.mp4"]


def test_benchmark_questions_on_ray_survive_a_killed_worker_and_resume(tmp_path: Path) -> None:
    data = make_nextqa(tmp_path / "nextqa")
    settings = settings_with("fake:echo?reply=(B)&delay=1.5", home=tmp_path / "home")
    out, library = tmp_path / "run", tmp_path / "lib"
    config = RunConfig("nextqa", data, concurrency=2)
    executor = RayExecutor()
    summaries: list[Any] = []

    def run() -> None:
        found = run_benchmark(
            config, settings=settings, library=Library(library), out=out, executor=executor
        )
        summaries.append(found)

    def asking() -> bool:  # a question has begun (its trace) and has no row yet
        traces = {p.stem for p in (out / "traces").glob("*.jsonl")}
        done = (
            {r["id"] for r in rows_in(out / "predictions.jsonl")}
            if (out / "predictions.jsonl").is_file()
            else set()
        )
        return bool(traces - done)

    work = threading.Thread(target=run)
    work.start()
    kill_when(asking, executor, work)
    work.join()
    (summary,) = summaries
    assert (summary.ran, summary.errors, summary.missing, summary.concurrency) == (5, 0, 1, 2)
    rows = rows_in(out / "predictions.jsonl")
    assert sorted(r["id"] for r in rows) == sorted(RUNNABLE)  # each exactly once
    assert {r["id"] for r in rows if r["correct"]} == {"v1_0", "v1_1", "v2_0"}
    assert all(r["letter"] == "B" and r["trace"] for r in rows)

    again = run_benchmark(
        config, settings=settings, library=Library(library), out=out, executor=RayExecutor()
    )
    assert (again.done_before, again.ran) == (5, 0)
    assert len(rows_in(out / "predictions.jsonl")) == 5


def test_the_endpoint_gate_is_one_named_actor_shared_by_every_worker() -> None:
    executor = RayExecutor()
    executor.start()
    gate = ray.get_actor(GATE_NAME, namespace=NAMESPACE)
    acquire, release = ray_gate_calls(gate)

    @ray.remote(num_cpus=0)
    def ask(calls: Any) -> Any:  # another process, through its own handle
        return calls[0]("https://api.example/v1", 1, None, None)

    lease, _ = acquire("https://api.example/v1", 1, None, None)
    assert lease is not None
    assert ray.get(ask.remote((acquire, release)))[0] is None  # the one slot is taken
    release("https://api.example/v1", lease)
    time.sleep(0)  # release is fire-and-forget; the next call on the actor runs after it
    assert ray.get(ask.remote((acquire, release)))[0] is not None


def test_the_cli_joins_a_running_cluster_for_index_and_bench_run(
    videos: list[Path], tmp_path: Path, fake_env: dict[str, str]
) -> None:
    # New processes: this one is already a driver of the module's cluster; the command must
    # join it as a driver of its own (and shut its connection down) as a user's would.
    from clirun import vidagent_process as vidagent

    address = ray.get_runtime_context().gcs_address
    home, lib = tmp_path / "home", str(tmp_path / "lib")
    indexed = vidagent(
        "--library",
        lib,
        "index",
        *map(str, videos[:2]),
        "--executor",
        "ray",
        "--address",
        address,
        "--json",
        home=home,
        env=fake_env,
    )
    assert indexed.returncode == 0, indexed.stderr
    assert sorted(json.loads(x)["name"] for x in indexed.stdout.splitlines()) == [
        "v0.mp4",
        "v1.mp4",
    ]

    data = make_nextqa(tmp_path / "nextqa")
    env = {**fake_env, "VIDAGENT_LLM": "fake:echo?reply=(B)"}
    asked = vidagent(
        "--library",
        lib,
        "bench",
        "run",
        "nextqa",
        "--data",
        str(data),
        "--executor",
        "ray",
        "--address",
        address,
        "--concurrency",
        "2",
        "--out",
        str(tmp_path / "run"),
        "--json",
        "--quiet",
        home=home,
        env=env,
    )
    assert asked.returncode == 0, asked.stderr
    summary = json.loads(asked.stdout)
    assert (summary["ran"], summary["errors"], summary["concurrency"]) == (5, 0, 2)
    assert sorted(r["id"] for r in rows_in(tmp_path / "run" / "predictions.jsonl")) == sorted(
        RUNNABLE
    )


def test_an_unreachable_cluster_is_a_one_line_error(tmp_path: Path, videos: list[Path]) -> None:
    # A new process: in this one Ray is already initialised (the module's cluster), so the
    # command would never try the address.
    from clirun import vidagent_process as vidagent

    done = vidagent(
        "index",
        str(videos[0]),
        "--executor",
        "ray",
        "--address",
        "127.0.0.1:1",
        home=tmp_path / "home",
    )
    assert done.returncode == 1 and "cannot reach the Ray cluster at 127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr
