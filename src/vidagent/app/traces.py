"""Saved traces: the runs under ``$VIDAGENT_HOME/traces``, listed the same way for every front
end (the HTTP API's ``/api/traces``, the MCP server's ``vidagent://traces``).

Order: newest first, by the time the run last wrote its trace (the file's modification time: a
run that is still going comes first), then by name, newest stamp first
(:meth:`~vidagent.app.core.SessionCore.trace_path` names start with the start time).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from vidagent.app.core import SessionCore

#: What a trace id may look like: a file name in the traces folder, never a path.
TRACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class TraceSummary:
    """One saved trace: its id (the file name without ``.jsonl``), its file, and what its first
    ``run_started`` and last ``answer`` events say (``None`` where the file lacks them)."""

    id: str
    path: Path
    strategy: str | None = None
    question: str | None = None
    started_at: str | None = None
    answer: str | None = None


def _newest_first(paths: list[Path]) -> list[Path]:
    def key(path: Path) -> tuple[float, str]:
        try:
            return path.stat().st_mtime, path.name
        except OSError:  # removed while listing
            return 0.0, path.name

    return sorted(paths, key=key, reverse=True)


def read_summary(path: Path) -> TraceSummary:
    """A trace file's summary; a damaged file gives what could be read."""
    found: dict[str, str | None] = {}
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                event = json.loads(line) if line.strip() else {}
                if event.get("kind") == "run_started" and "question" not in found:
                    found |= {k: event.get(k) for k in ("strategy", "question", "started_at")}
                elif event.get("kind") == "answer":
                    found["answer"] = event.get("text")
    except (OSError, ValueError, UnicodeDecodeError):
        pass  # a damaged file is listed with what could be read
    return TraceSummary(path.stem, path, **found)


def list_traces(core: SessionCore, *, details: bool = True) -> list[TraceSummary]:
    """The saved traces, newest first (see the module docstring); with ``details`` each file
    is read for its strategy, question, start time and answer, else only id and path."""
    folder = core.traces_folder
    paths = _newest_first(list(folder.glob("*.jsonl"))) if folder.is_dir() else []
    if not details:
        return [TraceSummary(p.stem, p) for p in paths]
    return [read_summary(p) for p in paths]


def trace_file(core: SessionCore, trace_id: str) -> Path | None:
    """The file of the saved trace ``trace_id``, or None when there is none (or the id is not
    a plain name: never a path outside the traces folder)."""
    path = core.traces_folder / f"{trace_id}.jsonl"
    if not TRACE_ID.fullmatch(trace_id) or not path.is_file():
        return None
    return path
