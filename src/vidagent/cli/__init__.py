"""The ``vidagent`` command: a thin noun-verb shell over the application layer.

Each command asks a :class:`~vidagent.app.session.Session` for a typed result and prints it,
as text or as the result's own JSON (``--json``): no command reads the Library for display or
builds a JSON shape of its own. Errors print as one line on stderr with a non-zero exit.
A write the system refused (a full disk, a denied permission, a read-only filesystem) is
operational, not a bug: it prints as a :class:`~vidagent.exceptions.StorageError`, one line
naming the folder and what to do. Any other exception that is not a vidagent error is a bug
(in vidagent, a plugin or a library): it too prints one line, naming the exception and a file with its traceback for a report
(``VIDAGENT_DEBUG=1`` shows the traceback instead). Heavy modules are imported inside the
commands that need them so ``--help`` and ``info`` stay fast and never import torch. One
module per family of commands:

- :mod:`.base`: the ``vidagent`` group, its global options and what commands share
- :mod:`.info`: ``info``, ``probe``
- :mod:`.index`: ``index`` (with ``--dry-run``)
- :mod:`.watch`: ``watch`` (a live or growing source, window by window)
- :mod:`.library`: ``list``, ``show`` (``--srt``/``--vtt``: the transcript as subtitles), ``search``, ``remove``
- :mod:`.ask`: ``ask``, ``replay``
- :mod:`.export`: ``export``, ``sheet``
- :mod:`.bench`: ``bench score``
- :mod:`.bench_run`: ``bench run``, ``bench report``
- :mod:`.mcp`: ``mcp`` (the MCP server)
- :mod:`.serve`: ``serve`` (the HTTP API, :mod:`vidagent.server`)
- :mod:`.render`: trace events as lines (the live display and ``replay``)
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback

import click

from vidagent._version import __version__
from vidagent.cli.base import (
    abort_note,
    cli,
    echo_json,
    hms,
    parse_sets,
    parse_time,
    session_of,
    settings_of,
)
from vidagent.exceptions import VidagentError, describe, storage_error


def main(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: the process's arguments) and return its exit code.

    Any error becomes one line on stderr and code 1 (2 for a usage error, 130 for an abort).
    Returning the code instead of exiting lets tests run the command in-process; the console
    script (``sys.exit(main())``) and ``python -m vidagent`` exit with it.
    """
    abort_note()  # a note left by a command run before in this process
    try:
        # Without standalone mode click returns ctx.exit()'s code instead of exiting.
        code = cli.main(args=argv, prog_name="vidagent", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.Abort:
        note = abort_note()
        click.echo(f"aborted: {note}" if note else "aborted", err=True)
        return 130
    except VidagentError as e:
        click.echo(f"error: {e}", err=True)
        return 1
    except SystemExit as e:  # a command that ended with sys.exit(code)
        return _exit_code(e.code)
    except Exception as e:  # a bug: one line here, the traceback in a file
        refused = storage_error(e)  # ...unless the system refused a write
        if refused is not None:
            click.echo(f"error: {refused}", err=True)
            return 1
        if os.environ.get("VIDAGENT_DEBUG"):
            raise
        click.echo(
            f"error: unexpected {describe(e)} (a bug; {_crash_log(e)}, "
            "VIDAGENT_DEBUG=1 shows it here)",
            err=True,
        )
        return 1
    return code if isinstance(code, int) else 0


def _exit_code(code: object) -> int:
    """The process exit code that ``sys.exit(code)`` gives: a message (printed) means 1."""
    if code is None or isinstance(code, int):
        return code or 0
    click.echo(str(code), err=True)
    return 1


def _crash_log(e: BaseException) -> str:
    """Write the traceback of ``e`` to a new file in the temporary directory; where it is."""
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        with tempfile.NamedTemporaryFile(
            "w", prefix="vidagent-crash-", suffix=".log", delete=False
        ) as f:
            f.write(f"vidagent {__version__}: {' '.join(sys.argv)}\n{text}")
    except OSError as why:  # no writable temporary directory
        return f"its traceback could not be written to a file: {why.strerror or why}"
    return f"its traceback is in {f.name}"


__all__ = [
    "cli",
    "echo_json",
    "hms",
    "main",
    "parse_sets",
    "parse_time",
    "session_of",
    "settings_of",
]

# Register the commands (imported for their side effect on ``cli``).
from vidagent.cli import (  # noqa: E402, F401
    ask,
    bench,
    bench_run,
    export,
    index,
    info,
    library,
    mcp,
    serve,
    train,
    watch,
)
