"""The commands that run for hours limit glibc's malloc arenas before they start their work.

glibc fixes its bound on arenas the first time a process needs more than eight, so a limit set
after the threads have started does nothing: ``vidagent serve``, ``vidagent mcp`` and
``vidagent bench run`` must apply it first (docs/configuration.md, "Memory of a long-running
process"). Each command runs in this process with its server or its run stubbed, and the order
of the two calls is what is checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clirun import vidagent

from vidagent.exceptions import VidagentError


class Stopped(VidagentError):
    """Raised by a stub in place of the work the command would do for hours: an error the CLI
    reports in one line (no crash log)."""


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What happened, in order: ``arenas`` when the limit was applied, then the stubbed work."""
    import uvicorn

    import vidagent.models.cpu
    import vidagent.server.mcp
    from vidagent.app.session import Session

    seen: list[str] = []

    def stub(name: str) -> Any:
        def work(*args: Any, **kwargs: Any) -> None:
            seen.append(name)
            raise Stopped(name)

        return work

    monkeypatch.setattr(vidagent.models.cpu, "limit_malloc_arenas", lambda: seen.append("arenas"))
    monkeypatch.setattr(uvicorn, "run", stub("serve"))
    monkeypatch.setattr(vidagent.server.mcp, "run", stub("mcp"))
    monkeypatch.setattr(Session, "bench_run", stub("bench"))
    return seen


@pytest.mark.parametrize(
    ("args", "work"),
    [
        (["serve", "--port", "0"], "serve"),
        (["mcp", "--transport", "http", "--port", "0"], "mcp"),
        (["bench", "run", "nextqa", "--data", "."], "bench"),
    ],
)
def test_long_running_commands_limit_malloc_arenas_first(
    args: list[str], work: str, calls: list[str], _isolated_home: Path
) -> None:
    out = vidagent(*args, home=_isolated_home)
    assert out.stderr.strip().endswith(f"error: {work}"), out.stderr
    assert calls == ["arenas", work]


def test_one_shot_commands_leave_the_allocator_alone(
    calls: list[str], _isolated_home: Path
) -> None:
    """A command that ends in seconds keeps glibc's defaults (ingest limits them itself)."""
    vidagent("info", home=_isolated_home)
    assert calls == []


#: A fresh interpreter (glibc's arena bound is per process and fixed when first needed): starts
#: threads that each allocate with ``malloc`` and hold it, limiting the arenas first (``first``),
#: after the first threads (``late``) or not at all (``never``); prints the limit and the arenas
#: in use, counted in ``malloc_info``'s report.
ARENAS_SCRIPT = """
import ctypes, os, sys, tempfile, threading
from vidagent.app.core import long_running
from vidagent.models.cpu import cpu_share

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
limit = max(2, cpu_share())
held, stop = [], threading.Event()

def hold(ready):
    held.append(libc.malloc(4096))
    ready.set()
    stop.wait()

def start(n):
    for _ in range(n):
        ready = threading.Event()
        threading.Thread(target=hold, args=(ready,), daemon=True).start()
        ready.wait()

when = sys.argv[1]
if when == "first":
    long_running()
start(limit + 6 if when != "late" else 9)
if when == "late":
    long_running()
    start(limit + 6)
with tempfile.NamedTemporaryFile(suffix=".xml") as f:
    out = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, out)
    libc.fclose(out)
    arenas = open(f.name).read().count("<heap nr=")
stop.set()
print(limit, arenas)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
@pytest.mark.parametrize(("when", "limited"), [("first", True), ("late", False), ("never", False)])
def test_the_arena_limit_holds_only_when_applied_before_the_threads(
    when: str, limited: bool
) -> None:
    """Each thread that allocates gets an arena of its own until glibc's bound (8 a core); the
    limit holds the process to one a core, but only when it comes first."""
    import vidagent

    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    env["PYTHONPATH"] = str(Path(vidagent.__file__).parents[1])
    # A fresh interpreter: glibc reads its arena bound once per process.
    command = [sys.executable, "-c", ARENAS_SCRIPT, when]
    run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if "malloc_info" in run.stderr or "libc.so.6" in run.stderr:
        pytest.skip(f"not glibc: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr
    limit, arenas = map(int, run.stdout.split())
    assert (arenas <= limit) is limited, (limit, arenas)
