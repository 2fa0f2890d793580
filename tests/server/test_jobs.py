"""The job registry stays bounded on a long-running server: old jobs shed their events, and
past a cap the oldest are forgotten, files included; what a client reads of them stays whole."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from vidagent.server.jobs import Job, JobRegistry


def _work(n: int) -> Any:
    def work(job: Job) -> dict[str, Any]:
        for i in range(n):
            job.emit("step", {"i": i})
        return {"steps": n}

    return work


def _finish(registry: JobRegistry, jobs: list[Job]) -> None:
    """Wait until each job's thread has returned (its end recorded, the registry trimmed)."""
    for job in jobs:
        assert job._future is not None
        job._future.result(timeout=120)


def test_old_jobs_shed_their_events_and_the_oldest_are_forgotten(tmp_path: Path) -> None:
    registry = JobRegistry(tmp_path / "jobs", workers=1, keep_events=2, keep_jobs=3)
    jobs = []
    for kind in ("index", "ask", "ask", "index", "ask"):
        job = registry.submit(kind, {"n": len(jobs)}, _work(300))  # type: ignore[arg-type]
        _finish(registry, [job])
        jobs.append(job)
    registry.close()

    listed = registry.list()
    assert [j.params["n"] for j in listed] == [4, 3, 2]  # the newest three
    assert sorted(p.stem for p in (tmp_path / "jobs").glob("*.json")) == sorted(
        j.job_id for j in listed
    )
    assert registry.get(jobs[0].job_id) is None
    newest, second, third = listed
    # The newest two replay every event; the third keeps what its file keeps, and its end.
    assert [k for k, _ in newest.events].count("step") == 300
    assert [k for k, _ in second.events].count("step") == 300
    assert third.kind == "ask" and [k for k, _ in third.events] == ["end"]
    assert third.events[-1][1]["result"] == {"steps": 300}
    assert newest.events[-1][0] == second.events[-1][0] == "end"


def test_a_shed_index_job_keeps_its_last_progress(tmp_path: Path) -> None:
    registry = JobRegistry(tmp_path / "jobs", workers=1, keep_events=0, keep_jobs=10)
    job = registry.submit("index", {}, _work(500))
    _finish(registry, [job])
    registry.close()
    kinds = [k for k, _ in job.events]
    assert kinds[-1] == "end" and kinds.count("step") == 200  # PERSISTED_EVENTS
    assert job.events[-2][1] == {"i": 499}
    # A registry opened over the folder reads the same job back.
    again = JobRegistry(tmp_path / "jobs", workers=1)
    assert again.get(job.job_id) is not None
    again.close()


def test_a_second_server_on_one_home_is_refused_and_leaves_the_running_jobs_be(
    tmp_path: Path,
) -> None:
    # It marked the first's running jobs interrupted on disk as it started (and would resume
    # them beside it), even when its port was taken.
    from clirun import vidagent

    home = tmp_path / "home"
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    first = subprocess.Popen(
        [sys.executable, "-m", "vidagent", "serve", "--port", str(port)],
        env={**os.environ, "VIDAGENT_HOME": str(home), "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert first.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5):
                    break
            except OSError:
                time.sleep(0.2)
        running = {"job_id": "abc", "kind": "ask", "params": {}, "state": "running"}
        (home / "jobs" / "abc.json").write_text(json.dumps(running))  # the first's, say
        second = vidagent("serve", "--port", "0", home=home)
        assert second.returncode == 1
        refused = f"error: another vidagent server (process {first.pid}) serves {home}; stop it"
        assert second.stderr.strip().splitlines() == [f"{refused}, or serve another --home"]
        assert json.loads((home / "jobs" / "abc.json").read_text())["state"] == "running"
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(60)


def test_serve_refuses_a_port_in_use_before_it_starts(tmp_path: Path) -> None:
    from clirun import vidagent

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = vidagent("serve", "--port", str(port), home=tmp_path / "home")
    assert out.returncode == 1 and "serving on" not in out.stderr
    (line,) = out.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"error: cannot serve on 127.0.0.1:{port}: ")
    assert line.endswith("; give another --port")
    assert not (tmp_path / "home" / "jobs").exists()
    # a host that is no name here is the host's fault, not the port's
    out = vidagent("serve", "--host", "not a host", "--token", "t" * 32, home=tmp_path / "home")
    (line,) = out.stderr.strip().splitlines()[-1:]
    assert out.returncode == 1 and line.startswith("error: cannot serve on not a host: ")
    assert line.endswith("; give another --host")
