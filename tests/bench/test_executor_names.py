"""``--executor`` takes the same names in ``vidagent index`` and ``vidagent bench run``: local,
pool and ray, with ``sequential`` (index's old name) and ``threads`` (bench run's old name)
still accepted by both as names of local."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchkit import SPECS, make_nextqa
from click.testing import CliRunner

from vidagent.app.executors import executor_kind, make_executor
from vidagent.cli import cli
from vidagent.exceptions import ConfigError


def test_the_old_names_stand_for_local() -> None:
    names = ("local", "sequential", "threads", "pool", "ray")
    assert [executor_kind(n) for n in names] == ["local", "local", "local", "pool", "ray"]
    assert all(make_executor(n) is None for n in ("local", "sequential", "threads"))
    with pytest.raises(ConfigError, match="cannot be --executor threads"):
        make_executor("threads", jobs=2)
    with pytest.raises(ConfigError, match="unknown executor 'fibers'"):
        executor_kind("fibers")


@pytest.mark.parametrize("name", ["local", "sequential", "threads"])
def test_index_and_bench_run_both_take_each_name(name: str, tmp_path: Path) -> None:
    data = make_nextqa(tmp_path / "data")
    env = {f"VIDAGENT_{k.upper()}": v for k, v in SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:echo?reply=B"
    runner = CliRunner()
    video = data / "videos" / "v1.mp4"
    indexed = runner.invoke(cli, ["index", str(video), "--executor", name, "--json"], env=env)
    assert indexed.exit_code == 0, indexed.output
    assert json.loads(indexed.stdout.splitlines()[-1])["name"] == "v1.mp4"

    args = ["bench", "run", "nextqa", "--data", str(data), "--out", str(tmp_path / "run")]
    ran = runner.invoke(cli, [*args, "--limit", "2", "--executor", name, "-q", "--json"], env=env)
    assert ran.exit_code == 0, ran.output
    summary = json.loads(ran.stdout)
    assert (summary["ran"], summary["errors"]) == (2, 0)

    many = runner.invoke(cli, ["index", str(video), "--executor", name, "--jobs", "2"], env=env)
    assert isinstance(many.exception, ConfigError)
    assert f"cannot be --executor {name}" in str(many.exception)  # the name the user gave
