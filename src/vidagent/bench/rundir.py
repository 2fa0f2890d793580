"""The folder a benchmark run writes, read back by resumes and reports.

Layout of a run folder (format :data:`FORMAT`)::

    <run>/
      manifest.json       what the run is: benchmark, split, data, strategy and its options,
                          budget, model spec per role, every setting (the API key left out),
                          prompt hashes, vidagent version, the question ids it answers, the
                          videos that were missing, and one entry per session (start or resume)
      predictions.jsonl   one row per finished question, appended as each one finishes
      traces/<id>.jsonl   the agent's trace of each question
      errors.log          tracebacks of questions that failed with an unexpected error
      .lock               held (``flock``) by the run writing here, with its process id

A frame-budget ladder (``bench run --frames 32,128,512``) is one folder holding one such run
folder per rung, ``frames-<N>/``, and ``ladder.json`` naming them; :func:`expand_runs` reads a
ladder as its rungs wherever run folders are expected.

Rows are appended with one ``write`` of a whole line on a file opened with ``O_APPEND``, then
``fsync``: a process killed at any moment leaves every finished row whole, and at worst a torn
last line after a power cut, which the next open cuts off (that question is redone). Readers take
the last row of an id.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from hashlib import sha256
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.exceptions import UserError

if TYPE_CHECKING:
    from typing_extensions import Self

FORMAT = 1
MANIFEST = "manifest.json"
ROWS = "predictions.jsonl"
TRACES = "traces"
ERRORS = "errors.log"
LADDER = "ladder.json"
LOCK = ".lock"


class RunFolderError(UserError):
    """A path given as a run folder is not one, or its files are damaged."""


#: Manifest fields that decide the answers; a resume must match them all.
IDENTITY = (
    "benchmark",
    "split",
    "data",
    "videos",
    "subset",
    "ids",
    "strategy",
    "strategy_settings",
    "budget",
    "models",
    "prompts",
    "index_settings",
)
#: Settings that change the index or the endpoint (the rest are operational: retries, cache).
INDEX_SETTINGS = ("clip_seconds", "sample_fps", "thumb_size", "openai_base_url")


def prompt_hashes() -> dict[str, str]:
    """First 8 hex digits of the SHA-256 of every packaged prompt and tool schema."""
    from vidagent.prompts import prompt_hash

    out = {}
    for entry in sorted(files("vidagent.prompts").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".txt"):
            out[entry.name] = prompt_hash(entry.name[:-4])
        elif entry.name.endswith(".json"):
            out[entry.name] = sha256(entry.read_bytes()).hexdigest()[:8]
    return out


def digest(data: Any) -> str:
    """8 hex digits of the SHA-256 of ``data`` as canonical JSON."""
    return sha256(json.dumps(data, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:8]


def _first_difference(old: Any, new: Any, where: str) -> str | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            found = _first_difference(old.get(key), new.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    return None if old == new else f"{where} (was {old!r}, now {new!r})"


def check_resume(old: Mapping[str, Any], new: Mapping[str, Any], out: Path) -> None:
    """Refuse to resume ``out`` with settings that would change the answers.

    Prompts are compared where both runs have them: a prompt file added or removed since (another
    strategy's) changes no text this run used, an edited one may.

    Raises:
        UserError: naming the first field that differs.
    """
    for key in IDENTITY:
        was, now = old.get(key), new.get(key)
        if key == "prompts" and isinstance(was, dict) and isinstance(now, dict):
            was = {k: v for k, v in was.items() if k in now}
            now = {k: v for k, v in now.items() if k in was}
        found = _first_difference(was, now, key)
        if found:
            raise UserError(
                f"{out} holds a run with another {found}; "
                "resume it with the same settings, or give another --out"
            )


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_manifest(run: Path) -> dict[str, Any]:
    """The manifest of run folder ``run``.

    Raises:
        RunFolderError: ``run`` has no manifest (not a run folder) or it does not parse.
    """
    path = Path(run) / MANIFEST
    if not path.is_file():
        raise RunFolderError(f"{run}: not a benchmark run folder (no {MANIFEST} in it)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RunFolderError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RunFolderError(f"{path}: not a run manifest of format {FORMAT}")
    lacking = [k for k in ("benchmark", "split", "data") if not isinstance(data.get(k), str)]
    if lacking or not isinstance(data.get("samples", []), list):
        field = lacking[0] if lacking else "samples"
        raise RunFolderError(f"{path}: a damaged run manifest (its {field!r} is missing or wrong)")
    return data


def trace_name(sample_id: str) -> str:
    """A file name for a question's trace; ids with other characters get a hash to stay unique."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", sample_id)[:80]
    if safe != sample_id:
        safe += "-" + sha256(sample_id.encode("utf-8")).hexdigest()[:8]
    return f"{safe}.jsonl"


def iter_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a predictions file in order; a line that does not parse (torn, or bytes
    that are not UTF-8) is skipped."""
    if not path.is_file():
        return
    with path.open("rb") as f:
        for line in f:
            try:
                row = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(row, dict) and "id" in row:
                yield row


def unreadable_lines(path: Path) -> int:
    """How many lines of a predictions file :func:`iter_rows` skips (torn, not JSON, not
    UTF-8, or not a row with an ``id``)."""
    if not path.is_file():
        return 0
    with path.open("rb") as f:
        lines = sum(1 for line in f if line.strip())
    return lines - sum(1 for _ in iter_rows(path))


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    """``{id: row}`` of a predictions file, the last row of an id winning."""
    return {str(row["id"]): row for row in iter_rows(path)}


def rewrite_rows(path: Path, keep: Callable[[Mapping[str, Any]], bool]) -> int:
    """Keep only the rows ``keep`` accepts (one per id, the last), atomically; returns how many
    rows were dropped (duplicates and torn lines included)."""
    if not path.is_file():
        return 0
    with path.open("rb") as f:  # a line of bytes that are not UTF-8 counts, as one dropped
        lines = sum(1 for _ in f)
    kept = [row for row in read_rows(path).values() if keep(row)]
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.writelines(_line(row) for row in kept)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return lines - len(kept)


def _line(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


class RowLog:
    """Append-only predictions file; :meth:`append` is safe from several threads.

    Args:
        path: the predictions file (created if missing). A last line without its newline (a
            write cut by a power loss) is cut off first, so the next row starts on a line of its
            own.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        _cut_torn_tail(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row as one line, durably."""
        data = _line(row).encode("utf-8")
        with self._lock:
            view = memoryview(data)
            while view:  # a regular file takes it in one write; loop only for the rare short one
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> None:
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)


def rung_name(frames: int) -> str:
    """The run folder of one rung of a frame-budget ladder."""
    return f"frames-{frames}"


def expand_runs(paths: Iterable[Path]) -> list[Path]:
    """``paths`` with each ladder folder replaced by its rungs' run folders, in ladder order."""
    out: list[Path] = []
    for path in map(Path, paths):
        ladder = path / LADDER
        if ladder.is_file() and not (path / MANIFEST).is_file():
            try:
                rungs = [rung_name(int(f)) for f in json.loads(ladder.read_bytes())["frames"]]
            except (ValueError, TypeError, KeyError) as e:  # JSON errors are ValueErrors
                raise RunFolderError(f"{ladder}: a damaged ladder file ({e})") from None
            out += [path / rung for rung in rungs]
        else:
            out.append(path)
    return out
