"""The benchmark runs saved under ``$VIDAGENT_HOME/runs`` (the HTTP API's ``/api/bench/runs``):
each run folder's name, manifest and rows so far."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidagent.app.core import SessionCore
from vidagent.bench.rundir import MANIFEST, ROWS, RunFolderError, read_manifest

#: What a run folder's name may look like: a folder of ``$VIDAGENT_HOME/runs``, never a path.
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: What a run folder's listing shows of its manifest.
MANIFEST_FIELDS = ("benchmark", "split", "strategy", "models", "version", "sessions")


@dataclass(frozen=True)
class RunInfo:
    """A run folder under ``$VIDAGENT_HOME/runs``: its name, manifest and rows so far."""

    name: str
    path: Path
    manifest: dict[str, Any]
    answered: int

    def to_json(self) -> dict[str, Any]:
        """The listing's form: the name, the manifest's main fields, the rows so far."""
        summary = {k: self.manifest.get(k) for k in MANIFEST_FIELDS}
        return {"name": self.name, **summary, "answered": self.answered}


def runs_folder(core: SessionCore) -> Path:
    """``$VIDAGENT_HOME/runs``: where benchmark runs go by default."""
    return core.settings.home / "runs"


def run_info(core: SessionCore, name: str) -> RunInfo | None:
    """The run folder ``name`` under the home, or None when there is none (a name that is not
    a plain folder name included: never a path outside the runs folder).

    Raises:
        RunFolderError: the folder's manifest does not parse.
    """
    path = runs_folder(core) / name
    if not RUN_NAME.fullmatch(name) or not (path / MANIFEST).is_file():
        return None
    manifest = read_manifest(path)
    answered = 0
    if (path / ROWS).is_file():
        with (path / ROWS).open(encoding="utf-8") as f:
            answered = sum(1 for _ in f)
    return RunInfo(name, path, manifest, answered)


def list_runs(core: SessionCore) -> list[RunInfo]:
    """The run folders under the home, by name; a folder whose manifest is missing or does not
    parse is left out."""
    folder = runs_folder(core)
    runs = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            found = run_info(core, path.name)
        except RunFolderError:
            continue
        if found is not None:
            runs.append(found)
    return runs
