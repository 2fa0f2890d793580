"""The test command fails when any of its checks fails, and the suite's helpers import cleanly.

``scripts/test.sh`` runs in a copy of its folder in which every step it calls (setup, the clip
fetch, the bytecode compile, ruff, ``ruff format``, pytest, and beside it the wheel check, mypy
and mkdocs) is a stub that records its call and fails when told to: each failure must end the
command with a non-zero status, and nothing else may. What each real tool does on a real defect is shown in
docs/development.md; the docs build's own failure is tested on real pages in test_docs.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: a stub step: records ``NAME ARGS`` and exits with the status given for NAME in $FAIL_<NAME>
STUB = """#!/usr/bin/env bash
name={name}
[ "$name" = ruff ] && name=ruff-$1
[ "$name" = python ] && name=$2
echo "$name" >>"$STEPS"
{extra}
exit "$(printenv "FAIL_${{name//-/_}}" || echo 0)"
"""

# The wheel check runs in the background: it takes a while and leaves its pid, so a test can see
# that a failing step stops it.
WHEEL = 'sleep "${WHEEL_SECONDS:-0}" & echo $! >"$STEPS.sleep"; wait'
# With $WAIT_WHEEL, ruff starts only once the wheel check is sleeping: on a busy machine a step
# could otherwise fail before the background check had begun, and there would be nothing to stop.
WAIT = '[ -n "${WAIT_WHEEL:-}" ] && while [ ! -s "$STEPS.sleep" ]; do sleep 0.05; done'

# The clip fetch runs in the background while setup runs; with $WAIT_FETCH setup starts only
# once the fetch is sleeping, so a failing setup has a fetch to stop.
FETCH = 'sleep "${FETCH_SECONDS:-0}" & echo $! >"$STEPS.fetch"; wait'
SETUP = (
    '[ -n "${WAIT_FETCH:-}" ] && while [ ! -s "$STEPS.fetch" ]; do sleep 0.05; done\n'
    'echo "${PYTHONDONTWRITEBYTECODE-unset}" >"$STEPS.setup"'
)

STEPS = [
    "setup",
    "fetch-media",
    "compileall",
    "ruff-check",
    "ruff-format",
    "mypy",
    "mkdocs",
    "pytest",
    "wheel",
]
#: the steps that run beside the others, in the background; their names in the failure message
BESIDE = {"wheel": "wheel", "mypy": "mypy", "mkdocs": "docs"}
#: the clips are fetched while setup runs: the two in either order, both before the rest
WITH_SETUP = {"setup", "fetch-media"}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder holding the real scripts/test.sh and a stub for every step it runs."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test.sh", repo / "scripts" / "test.sh")
    stubs = {
        "scripts/setup.sh": ("setup", SETUP),
        "scripts/fetch-media.sh": ("fetch-media", FETCH),
        "scripts/check-wheel.sh": ("wheel", WHEEL),
        ".venv/bin/ruff": ("ruff", WAIT),
        ".venv/bin/mypy": ("mypy", ""),
        ".venv/bin/mkdocs": ("mkdocs", ""),
        ".venv/bin/python": ("python", ""),
    }
    for path, (name, extra) in stubs.items():
        (repo / path).write_text(STUB.format(name=name, extra=extra))
        (repo / path).chmod(0o755)
    return repo


def run(checkout: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    steps = checkout / "steps.log"
    steps.unlink(missing_ok=True)
    variables = {k: v for k, v in os.environ.items() if not k.startswith(("FAIL_", "TEST_"))}
    variables |= {"STEPS": str(steps), **env}
    done = subprocess.run(
        ["bash", str(checkout / "scripts" / "test.sh")],
        capture_output=True,
        text=True,
        env=variables,
        timeout=60,
        check=False,
    )
    return done, steps.read_text().split() if steps.exists() else []


def test_every_step_runs_and_the_command_passes_when_all_pass(checkout: Path) -> None:
    done, steps = run(checkout)
    assert done.returncode == 0, done.stderr
    assert sorted(steps) == sorted(STEPS)
    in_turn = [s for s in steps if s not in BESIDE]
    assert set(in_turn[:2]) == WITH_SETUP
    assert in_turn[2:] == [s for s in STEPS if s not in BESIDE and s not in WITH_SETUP]


@pytest.mark.parametrize("step", [s for s in STEPS if s != "fetch-media"])
def test_a_failing_step_fails_the_command(checkout: Path, step: str) -> None:
    done, steps = run(checkout, **{f"FAIL_{step.replace('-', '_')}": "1"})
    assert done.returncode != 0, f"scripts/test.sh passed with {step} failing"
    assert step in steps
    if step in BESIDE:
        assert f"the {BESIDE[step]} check failed" in done.stderr


def test_setup_and_the_tests_run_where_bytecode_is_written(checkout: Path) -> None:
    # where the machine turns bytecode off, setup would compile the whole environment at
    # install (scripts/setup.sh): the test command turns it back on first, so each module is
    # compiled once, by the first process that imports it
    done, _ = run(checkout, PYTHONDONTWRITEBYTECODE="1")
    assert done.returncode == 0, done.stderr
    assert (checkout / "steps.log.setup").read_text().strip() == "unset"


def test_pytest_collecting_no_test_fails_the_command(checkout: Path) -> None:
    done, _ = run(checkout, FAIL_pytest="5")  # pytest's status when it ran no test
    assert done.returncode == 5


def test_clips_that_cannot_be_fetched_are_said_and_fail_only_when_required(
    checkout: Path,
) -> None:
    done, steps = run(checkout, FAIL_fetch_media="1")
    assert done.returncode == 0 and "pytest" in steps
    assert "real clips unavailable: their tests will skip" in done.stderr
    required, steps = run(checkout, FAIL_fetch_media="1", TEST_REQUIRE_MEDIA="1")
    assert required.returncode == 1 and "pytest" not in steps


def test_a_failing_step_stops_the_wheel_check_in_the_background(checkout: Path) -> None:
    done, _ = run(checkout, FAIL_ruff_check="1", WHEEL_SECONDS="60", WAIT_WHEEL="1")
    assert done.returncode != 0
    pid = int((checkout / "steps.log.sleep").read_text())
    assert _ends(pid), "the wheel check's process was left running"


def test_a_failing_setup_stops_the_clip_fetch_beside_it(checkout: Path) -> None:
    done, steps = run(checkout, FAIL_setup="1", FETCH_SECONDS="60", WAIT_FETCH="1")
    assert done.returncode != 0 and "pytest" not in steps
    pid = int((checkout / "steps.log.fetch").read_text())
    assert _ends(pid), "the clip fetch's process was left running"


def test_the_clip_fetch_runs_before_setup_has_made_the_environment(tmp_path: Path) -> None:
    # the test command fetches while setup builds .venv: without it, the fetch runs on $PYTHON
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "fetch-media.sh", tmp_path / "scripts" / "fetch-media.sh")
    python = tmp_path / "python"
    python.write_text('#!/usr/bin/env bash\necho "$@" >"$0.called"\n')
    python.chmod(0o755)
    fetch = tmp_path / "scripts" / "fetch-media.sh"
    env = {**os.environ, "PYTHON": str(python)}
    done = subprocess.run(
        ["bash", str(fetch)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "python.called").read_text().split() == ["tests/realmedia.py"]


def _ends(pid: int, seconds: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``seconds``."""
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return re.search(r"^State:\s+Z", status, re.MULTILINE) is None  # a zombie has ended


def test_no_test_imports_a_conftest_module() -> None:
    """pytest imports every tests/*/conftest.py as the one module ``conftest``: ``from conftest
    import …`` gets whichever was imported last. Helpers live in modules of their own."""
    importing = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if re.search(
            r"^\s*(from\s+[\w.]*conftest\s+import|import\s+[\w.]*conftest)",
            path.read_text(),
            re.MULTILINE,
        )
    ]
    assert importing == []
