"""Prediction files: the runner's JSONL rows and the benchmarks' usual forms, read to
``{question id: answer or None}``, and question-id lists (``--ids``).

Each benchmark's ``read_predictions`` picks the readers for its formats; these are the shared
pieces. Errors name the file and the forms that are accepted.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vidagent.bench.base import BenchmarkDataError


def check_predictions_file(path: Path) -> None:
    """A predictions file that can be read: present, not empty, UTF-8 text.

    Raises:
        BenchmarkDataError: one line saying which of these it is not.
    """
    if path.is_dir():
        raise BenchmarkDataError(f"{path} is a folder; give the predictions file in it")
    if not path.is_file():
        raise BenchmarkDataError(f"predictions file not found: {path}")
    data = path.read_bytes()
    if not data.strip():
        raise BenchmarkDataError(f"{path}: the predictions file is empty")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BenchmarkDataError(
            f"{path}: not UTF-8 text (byte {e.start}); save the predictions as UTF-8 JSON, JSONL "
            "or CSV"
        ) from None


def read_json_rows(path: Path) -> Any:
    """A JSON document, or the list of objects in a JSONL file.

    A runner file of one row is a JSONL file whose whole text is also one JSON object: it
    comes back as a list of that one row (:func:`is_runner_rows`), as a longer runner file
    does, not as an ``{id: answer}`` mapping whose "ids" would be the row's keys.

    Raises:
        BenchmarkDataError: the file is missing, empty, not UTF-8, or neither JSON nor JSONL.
    """
    check_predictions_file(path)
    text = path.read_text(encoding="utf-8-sig")
    if not text.strip():  # else it reads as JSONL without rows, and each reader guesses a form
        raise BenchmarkDataError(f"{path}: the predictions file is empty")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as whole:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise BenchmarkDataError(
                    f"{path}: neither JSON ({whole.msg}, line {whole.lineno}) "
                    f"nor JSONL (line {n} does not parse)"
                ) from None
        return rows
    return [doc] if is_runner_rows([doc]) else doc


def is_runner_rows(doc: Any) -> bool:
    """True for the runner's JSONL rows: objects with ``id`` and ``parsed``."""
    return (
        isinstance(doc, list)
        and bool(doc)
        and all(isinstance(r, dict) and "id" in r and "parsed" in r for r in doc)
    )


def runner_predictions(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{id: parsed}`` from runner rows; JSON lists become tuples (intervals, orders, sets)."""
    return {str(r["id"]): _tuples(r.get("parsed")) for r in rows}


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def read_id_mapping(
    path: Path, doc: Any, convert: Callable[[Any], Any], formats: str
) -> dict[str, Any]:
    """Runner rows or a JSON object ``{id: answer}``, each value through ``convert``.

    Raises:
        BenchmarkDataError: naming ``formats``, the forms the benchmark accepts.
    """
    if is_runner_rows(doc):
        return {k: None if v is None else convert(v) for k, v in runner_predictions(doc).items()}
    if isinstance(doc, dict):
        return {str(k): None if v is None else convert(v) for k, v in doc.items()}
    raise BenchmarkDataError(f"{path}: not a predictions file; expected {formats}")


def read_csv_mapping(path: Path, id_column: str, value_column: str) -> dict[str, str] | None:
    """``{id: value}`` from a CSV with those header columns, or ``None`` if it has not them."""
    with path.open(newline="", encoding="utf-8-sig") as f:  # "-sig": a BOM, as Excel saves
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        if id_column not in fields or value_column not in fields:
            return None
        return {row[id_column]: row[value_column] for row in reader}


def read_id_list(path: Path) -> list[str]:
    """Question ids from a file: one per line, a JSON list, or a CSV.

    A CSV needs an ``id`` column, or NExT-QA's ``video`` and ``qid`` columns (ids become
    ``<video>_<qid>``).

    Raises:
        BenchmarkDataError: the file is missing or holds no ids.
    """
    if not path.is_file():
        raise BenchmarkDataError(f"id list not found: {path}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise BenchmarkDataError(f"{path}: not UTF-8 text (byte {e.start})") from None
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if lines and lines[0].startswith("["):
        try:
            ids = [str(v) for v in json.loads("\n".join(lines))]
        except (json.JSONDecodeError, TypeError):
            raise BenchmarkDataError(f"{path}: not a JSON list of ids") from None
    elif lines and "," in lines[0]:
        rows = list(csv.DictReader(lines))
        header = set(rows[0]) if rows else set()
        if "id" in header:
            ids = [r["id"] for r in rows]
        elif {"video", "qid"} <= header:
            ids = [f"{r['video']}_{r['qid']}" for r in rows]
        else:
            raise BenchmarkDataError(f"{path}: a CSV id list needs an 'id' or 'video','qid' column")
    else:
        ids = lines
    if not ids:
        raise BenchmarkDataError(f"{path}: no question ids in it")
    return ids
