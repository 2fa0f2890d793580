"""LVBench (Wang et al., 2024): hour-long videos, questions in several categories at once.

Data: ``video_info.meta.jsonl`` from THUDM/LVBench (in ``data`` or ``data/data``), one line per
video ``{key, type, ..., qa: [{uid, question, answer, question_type, time_reference}]}``. The
question text carries its options as ``(A) ...`` lines; the loader splits them off. ``answer`` is
a letter; ``question_type`` lists every category the question belongs to. Videos are
``<root>/<key>.mp4`` (or found by stem below the root); the root defaults to ``data/videos``.

Scoring reproduces ``lvbench/metrics/compute_accuracy.py``: every uid present in the answers
file counts (a ``null`` answer is present, so it counts wrong; only a uid missing from the file
leaves the denominator), an answer is right only when it equals the answer letter as a string
(``model_answer == qa["answer"]``: ``"(B)"``, ``"B."`` and ``"B "`` are wrong), a question
counts once in each of its categories, and overall accuracy counts each question once. The
strict number (a missing uid = wrong) is reported beside it. Categories are shown under the names the leaderboard uses
(``scripts/test_acc.py``): ER, EU, KIR, TG, Rea, Sum. A second breakdown by video type (the
line's ``type``) is added because papers report it (AVI, Table 4).

Predictions: ``{uid: "A"}`` (the official answers file), DVD's ``benchmark_results.json``
(``{uid: {"answer": "A", ...}}``, its ``answer`` compared as the official script compares), or
the runner's JSONL (its ``parsed`` option index; ``null`` is a row written, so it counts wrong).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.agents.answer import LETTERS
from vidagent.bench.base import (
    BenchmarkDataError,
    LoadResult,
    Outcome,
    Predictions,
    Sample,
    Scores,
    VideoRoot,
    check_options,
    check_split,
    choice_prompt,
    letter_index,
    overall_tally,
    section,
    tally,
    unanswered,
    video_root,
)
from vidagent.bench.predictions import (
    read_id_mapping,
    read_json_rows,
)

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

NAME = "lvbench"
TITLE = "LVBench"
SPLITS = ("all",)
DEFAULT_SPLIT = "all"

#: The leaderboard's short names (LVBench ``scripts/test_acc.py``).
CATEGORIES = {
    "entity recognition": "ER",
    "event understanding": "EU",
    "key information retrieval": "KIR",
    "temporal grounding": "TG",
    "reasoning": "Rea",
    "summarization": "Sum",
}
FORMATS = '{"<uid>": "A"}, {"<uid>": {"answer": "A", ...}}, or runner JSONL'
_OPTION = re.compile(r"^\s*\(([A-Z])\)\s*(.*)$")


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """Every LVBench question."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    candidates = (data / "video_info.meta.jsonl", data / "data" / "video_info.meta.jsonl")
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise BenchmarkDataError(f"video_info.meta.jsonl not found in {data} (nor in {data}/data)")
    finder = VideoRoot(video_root(data, videos, "videos", "all_videos"))
    samples = []
    for n, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            continue
        try:
            video = json.loads(line)
            qas, key = video["qa"], str(video["key"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise BenchmarkDataError(f"{path}, line {n}: expected {{key, qa: [...]}}") from None
        for qa in qas:
            samples.append(_sample(qa, key, str(video.get("type", "")), finder))
    return LoadResult(NAME, split, tuple(samples), tuple(finder.missing))


def _sample(qa: dict[str, Any], key: str, video_type: str, finder: VideoRoot) -> Sample:
    uid = str(qa["uid"])
    question, options = split_options(str(qa["question"]))
    answer = letter_index(str(qa.get("answer", "")))
    listed = qa.get("question_type", [])
    if not isinstance(listed, list):  # a string would be read as its letters
        raise BenchmarkDataError(f"question {uid}: question_type is not a list of categories")
    categories = tuple(CATEGORIES.get(str(c), str(c)) for c in listed)
    return Sample(
        id=uid,
        videos=(finder.resolve(uid, key),),
        question=question,
        options=options,
        answer=answer,
        categories=categories,
        extras={"key": key, "video_type": video_type, "time_reference": qa.get("time_reference")},
    )


def split_options(text: str) -> tuple[str, tuple[str, ...]]:
    """``"Q?\\n(A) x\\n(B) y"`` -> ``("Q?", ("x", "y"))``; lines after the first option are options."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _OPTION.match(line)), len(lines))
    options = []
    for line in lines[first:]:
        m = _OPTION.match(line)
        if m:
            options.append(m.group(2).strip())
        elif line.strip() and options:  # a wrapped option continues on the next line
            options[-1] += " " + line.strip()
    return "\n".join(lines[:first]).strip(), tuple(options)


prompt = choice_prompt  # the question with its (A) ... option lines


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """``compute_accuracy``'s rule: a present uid is answered; right only when the answer is the
    letter itself (an option index from the runner stands for its letter)."""
    outcomes = []
    for s in samples:
        if s.id not in predictions:
            outcomes.append(unanswered(s))
            continue
        p = predictions[s.id]
        if isinstance(p, str):
            right = isinstance(s.answer, int) and p == LETTERS[s.answer]
        else:
            right = isinstance(p, int) and not isinstance(p, bool) and p == s.answer
        outcomes.append(Outcome(s.id, float(right), detail={"prediction": p}))
    return outcomes


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Overall and per-category accuracy over answered questions, and the strict numbers."""
    categories = tally(samples, outcomes, lambda s: s.categories, tuple(CATEGORIES.values()))
    types = tally(samples, outcomes, lambda s: (s.extras.get("video_type") or "unknown",))
    return Scores(
        benchmark=NAME,
        split=split,
        metric="accuracy",
        rule="answered",
        overall=overall_tally(outcomes).result("answered"),
        sections={
            "category": {k: g for k, g in section(categories, "answered").items() if g.questions},
            "video type": section(types, "answered"),
        },
        labels={v: k for k, v in CATEGORIES.items()},
        missing=sum(not o.answered for o in outcomes),
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """The official answers file, DVD's results file, or runner JSONL."""

    def convert(value: Any) -> Any:
        # Kept as written: the official comparison is of strings.
        return value["answer"] if isinstance(value, dict) and "answer" in value else value

    return read_id_mapping(path, read_json_rows(path), convert, FORMATS)
