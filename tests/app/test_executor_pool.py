"""``vidagent index --jobs N``: a local process pool, one Library written once per clip, a
killed worker's video finished by a fresh pool; and the executor options' one-line errors."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from clirun import vidagent
from executorkit import CLIPS, clip_rows, make_videos
from factories import INDEX_SPECS

from vidagent.app import Session
from vidagent.app.executors import make_executor
from vidagent.app.executors.pool import PoolExecutor
from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.library import Library


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_videos(tmp_path_factory)


def test_index_jobs_2_indexes_every_video_once(
    videos: list[Path], tmp_path: Path, fake_env: dict[str, str]
) -> None:
    lib = tmp_path / "lib"
    args = ("--library", str(lib), "index", *map(str, videos), "--jobs", "2", "--json")
    done = vidagent(*args, home=tmp_path / "home", env=fake_env)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(x["name"] for x in lines) == ["v0.mp4", "v1.mp4", "v2.mp4"]
    library = Library(lib)
    for video in library.list_videos():
        assert clip_rows(library, video.video_id, "clips") == list(range(CLIPS))
        assert clip_rows(library, video.video_id, "clip_vectors") == list(range(CLIPS))

    again = vidagent(*args, home=tmp_path / "home", env=fake_env)  # resumes: nothing to do
    assert again.returncode == 0
    assert all(
        s["clips"] == 0
        for x in map(json.loads, again.stdout.splitlines())
        for s in x["stages"].values()
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--jobs", "0"], "error: --jobs must be at least 1, not 0"),
        (["--executor", "pool", "--address", "auto"], "error: --address names a Ray cluster"),
        (["--rate-limit", "fast"], "give N or ENDPOINT=N requests per second"),
    ],
)
def test_bad_executor_options_are_one_line_errors(
    options: list[str], message: str, videos: list[Path], tmp_path: Path
) -> None:
    done = vidagent("index", str(videos[0]), *options, home=tmp_path / "home")
    assert done.returncode != 0 and message in done.stderr
    assert "Traceback" not in done.stderr


def test_make_executor_picks_the_pool_for_jobs_and_nothing_for_one() -> None:
    assert make_executor(jobs=1) is None and make_executor("sequential") is None
    pool = make_executor(jobs=3)
    assert isinstance(pool, PoolExecutor) and pool.workers == 3
    with pytest.raises(ConfigError, match="--jobs must be at least 1"):
        make_executor("pool", jobs=-1)
    with pytest.raises(ConfigError, match="cannot be --executor sequential"):
        make_executor("sequential", jobs=2)


def test_a_killed_pool_worker_is_replaced_and_its_video_finished_once(
    videos: list[Path], tmp_path: Path
) -> None:
    log = tmp_path / "captions.jsonl"
    settings = load_settings(
        {**INDEX_SPECS, "vlm": f"fake:echo?reply=a red square moves&delay=0.4&log={log}"}
    )
    reports: list[Any] = []
    with Session(settings, library=tmp_path / "lib") as session, PoolExecutor(2) as pool:
        work = threading.Thread(target=lambda: reports.extend(session.index(videos, executor=pool)))
        work.start()
        while not (pool.pids and log.is_file() and log.stat().st_size > 0):
            assert work.is_alive(), "indexing finished before a worker could be killed"
            time.sleep(0.02)
        os.kill(pool.pids[0], signal.SIGKILL)
        killed_before = len(reports)
        work.join()
    assert killed_before < len(videos)
    assert sorted(r.path.name for r in reports) == ["v0.mp4", "v1.mp4", "v2.mp4"]
    assert all(r.ok and r.clips == CLIPS for r in reports), [r.error for r in reports]
    library = Library(tmp_path / "lib")
    for video in library.list_videos():
        assert clip_rows(library, video.video_id, "clips") == list(range(CLIPS))
        assert all("red square" in c.caption for c in library.clips(video.video_id))


def test_ray_is_not_imported_unless_asked_for() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from vidagent.cli import cli\n"
        "from vidagent.app.executors import make_executor\n"
        "CliRunner().invoke(cli, ['index', '--help'])\n"
        "make_executor(jobs=2).start()\n"
        "print('ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_benchmark_questions_on_a_process_pool_get_one_row_each(tmp_path: Path) -> None:
    from bench.benchkit import RUNNABLE, make_nextqa, rows_in, settings_with

    from vidagent.app.benchmarks import RunConfig, run_benchmark

    data = make_nextqa(tmp_path / "nextqa")
    settings = settings_with("fake:echo?reply=(B)", home=tmp_path / "home")
    with PoolExecutor(2) as pool:
        summary = run_benchmark(
            RunConfig("nextqa", data, concurrency=2),
            settings=settings,
            library=Library(tmp_path / "lib"),
            out=tmp_path / "run",
            executor=pool,
        )
    assert (summary.ran, summary.errors, summary.concurrency) == (5, 0, 2)
    rows = rows_in(tmp_path / "run" / "predictions.jsonl")
    assert sorted(r["id"] for r in rows) == sorted(RUNNABLE)
    assert {r["id"] for r in rows if r["correct"]} == {"v1_0", "v1_1", "v2_0"}
