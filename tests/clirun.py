"""Run the ``vidagent`` command as a user would, with its own home and environment.

:func:`vidagent` runs it in this process: ``vidagent.cli.main(args)`` returns the exit code,
with stdin, stdout, stderr, ``sys.argv``, ``os.environ`` and a stderr log handler swapped in for
the run and put back after. What it prints is what the ``vidagent`` console script prints to a
pipe (not a terminal: no colour, no progress bars unless asked for, ``\\r`` read as a newline as
``subprocess.run(text=True)`` reads it), without starting an interpreter per call.

:func:`vidagent_process` starts ``python -m vidagent`` instead. Use it only where a fresh
interpreter is the point (a plugin found on ``PYTHONPATH``, a crash log under ``TMPDIR``, a
process that joins a Ray cluster as its own driver) and say so at the call. Variables that a
running interpreter has already read (``PYTHONPATH``, ``TMPDIR``, thread-pool sizes) are refused
by :func:`vidagent`, so a test cannot pass them in-process and believe they took effect.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: Read once, when an interpreter or a native library starts: setting them in this process
#: would change nothing, so a test that needs them runs :func:`vidagent_process`.
FRESH_PROCESS_ONLY = frozenset(
    {
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "TMPDIR",  # tempfile caches its directory on first use
        "OMP_NUM_THREADS",  # OpenMP (torch, CTranslate2) sizes its pool on load
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
    }
)


def _environment(home: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    """The variables each run sets on top of this process's environment."""
    return {"VIDAGENT_HOME": str(home), "HF_HUB_OFFLINE": "1", **(env or {})}


def vidagent(
    *args: str, home: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``vidagent ARGS`` in this process with ``VIDAGENT_HOME=home`` and ``env`` set.

    Returns what :func:`vidagent_process` returns for the same call: the exit code and what
    the command wrote to stdout and stderr.
    """
    from vidagent.cli import main

    wanted = _environment(home, env)
    fresh = sorted(FRESH_PROCESS_ONLY & wanted.keys())
    if fresh:
        raise ValueError(
            f"{', '.join(fresh)} only take effect in a new interpreter: use vidagent_process"
        )
    with _environ(wanted), _streams() as captured, _stderr_logging(), _argv(args):
        code = main(list(args))
    return subprocess.CompletedProcess(
        ["vidagent", *args], code, captured["stdout"], captured["stderr"]
    )


def vidagent_process(
    *args: str, home: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m vidagent ARGS`` as a new process (a fresh interpreter)."""
    return subprocess.run(
        [sys.executable, "-m", "vidagent", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **_environment(home, env)},
        timeout=600,
        check=False,
    )


@contextmanager
def _environ(wanted: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``wanted`` set; afterwards exactly as before, whatever the run set."""
    saved = dict(os.environ)
    os.environ.update(wanted)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _streams() -> Iterator[dict[str, str]]:
    """stdin empty; stdout and stderr as UTF-8 text streams that are not a tty, read into the
    yielded dict (``"stdout"``, ``"stderr"``) when the run ends."""
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.BytesIO(), io.BytesIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    # Python's own stderr escapes what it cannot encode instead of raising.
    sys.stderr = io.TextIOWrapper(
        err, encoding="utf-8", errors="backslashreplace", write_through=True
    )
    captured: dict[str, str] = {}
    try:
        yield captured
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Read before the wrappers go: a collected TextIOWrapper closes its buffer.
        captured.update(stdout=_text(out.getvalue()), stderr=_text(err.getvalue()))
        sys.stdin, sys.stdout, sys.stderr = saved


@contextmanager
def _stderr_logging() -> Iterator[None]:
    """Warnings logged during the run go to its stderr, as in a process with no logging set up.

    There Python's last-resort handler prints WARNING and above as bare messages; here pytest's
    capture handler sits on the root logger, so the last resort would never be reached.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


@contextmanager
def _argv(args: tuple[str, ...]) -> Iterator[None]:
    """``sys.argv`` as the console script sees it (the crash log records it)."""
    saved = sys.argv
    sys.argv = ["vidagent", *args]
    try:
        yield
    finally:
        sys.argv = saved


def _text(data: bytes) -> str:
    """Bytes decoded as ``subprocess.run(text=True)`` decodes them (universal newlines)."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
