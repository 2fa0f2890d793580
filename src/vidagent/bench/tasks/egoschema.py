"""EgoSchema (Mangalam et al., NeurIPS 2023): the full set and the 500-question subset.

Data (from egoschema/EgoSchema): ``questions.json``, a list of ``{q_uid, google_drive_id,
question, "option 0".."option 4"}``, and ``subset_answers.json``, ``{q_uid: right option}`` for
the 500-question subset, the only public answers. Videos are ``<root>/<q_uid>.mp4``; the root
defaults to ``data/videos``.

Splits: ``subset`` (default, the 500 questions with public answers) and ``full`` (every question;
only the subset's can be scored locally, the rest go to the official Kaggle server, and
:func:`vidagent.bench.base.evaluate` leaves them out with a note). Scoring the subset needs only
``subset_answers.json``: without ``questions.json`` the subset loads with answers and no
question text, enough to score a predictions file but not to run.

Score: accuracy over every scored question, an unanswered one counted wrong (as the papers and
LLoVi's evaluation count invalid answers).

Predictions: ``{q_uid: int or "A"}``, the Kaggle CSV ``q_uid,answer``, or the runner's JSONL;
JSON and CSV values are read the same way (an index, a digit string, or a lone letter).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidagent.bench.base import (
    BenchmarkDataError,
    LoadResult,
    Outcome,
    Sample,
    Scores,
    VideoRoot,
    as_choice,
    check_options,
    check_split,
    choice_prompt,
    overall_tally,
    require_file,
    score_choices,
    video_root,
)
from vidagent.bench.predictions import (
    read_csv_mapping,
    read_id_mapping,
    read_json_rows,
)

NAME = "egoschema"
TITLE = "EgoSchema"
SPLITS = ("subset", "full")
DEFAULT_SPLIT = "subset"
CHOICES = 5  # every question has options 0-4, known even when scored without their text
FORMATS = '{"<q_uid>": int or "A"}, a CSV with columns q_uid,answer, or runner JSONL'


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """EgoSchema questions of ``split`` (``subset`` or ``full``)."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    answers_path = data / "subset_answers.json"
    answers: dict[str, int] = {}
    if answers_path.is_file():
        answers = {str(k): int(v) for k, v in _read(answers_path).items()}
    questions_path = data / "questions.json"
    finder = VideoRoot(video_root(data, videos, "videos"))
    notes: tuple[str, ...] = ()
    if questions_path.is_file():
        rows = _read(questions_path)
        if split == "subset":
            require_file(answers_path, "EgoSchema subset_answers.json")
            rows = [r for r in rows if r["q_uid"] in answers]
    elif split == "subset":
        require_file(answers_path, "EgoSchema subset_answers.json")
        rows = [{"q_uid": uid} for uid in answers]
        notes = ("questions.json not found: the subset has answers but no question text",)
    else:
        raise BenchmarkDataError(f"EgoSchema questions.json not found in {data}")
    samples = tuple(_sample(row, answers, finder) for row in rows)
    return LoadResult(NAME, split, samples, tuple(finder.missing), notes)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise BenchmarkDataError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None


def _sample(row: dict[str, Any], answers: dict[str, int], finder: VideoRoot) -> Sample:
    uid = str(row["q_uid"])
    options = tuple(str(row[f"option {i}"]) for i in range(5) if f"option {i}" in row)
    return Sample(
        id=uid,
        videos=(finder.resolve(uid, uid),),
        question=str(row.get("question", "")),
        options=options,
        answer=answers.get(uid),
        extras={"google_drive_id": row.get("google_drive_id")},
    )


prompt = choice_prompt  # the question with its (A) ... option lines
score = score_choices  # 1 for the right option, else 0; none = unanswered


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Accuracy over every scored question."""
    return Scores(
        benchmark=NAME,
        split=split,
        metric="accuracy",
        rule="all",
        overall=overall_tally(outcomes).result("all"),
        missing=sum(not o.answered for o in outcomes),
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """``{q_uid: index or letter}`` JSON, the Kaggle CSV, or runner JSONL."""
    if path.suffix.lower() == ".csv" and path.is_file():
        rows = read_csv_mapping(path, "q_uid", "answer")
        if rows is None:
            raise BenchmarkDataError(f"{path}: expected CSV columns q_uid,answer")
        return {uid: _value(v) for uid, v in rows.items()}
    return read_id_mapping(path, read_json_rows(path), _value, FORMATS)


def _value(value: Any) -> Any:
    """One reading for JSON and CSV alike: an index, a digit string (the Kaggle CSV's answers
    are indices written out) or a lone letter; an empty string is no answer."""
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        if value.isdigit():
            return int(value)
    return as_choice(value)
