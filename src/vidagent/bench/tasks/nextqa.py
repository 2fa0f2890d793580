"""NExT-QA multiple choice (Xiao et al., CVPR 2021), scored as its ``eval_mc.py`` does.

Data: ``val.csv`` / ``test.csv`` from doc-doc/NExT-QA ``dataset/nextqa/`` (in ``data`` or
``data/nextqa``), columns ``video, frame_count, width, height, question, answer, qid, type,
a0..a4``. A question's id is ``<video>_<qid>``; ``answer`` is the index of the right option.
Videos come from VidOR: with ``map_vid_vidorID.json`` beside the CSV a video is
``<root>/<folder>/<vidor id>.mp4``, else ``<root>/<video>.mp4`` (either is also found by file stem
anywhere below the root). The root defaults to ``data/NExTVideo``, else ``data/videos``.

Scoring follows ``eval_mc.py``: question types CW (why), CH (how), TN (before/after, with TP
merged in), TC (when), DC (count), DL (location), DO (other); groups C, T, D (the type's first
letter); overall. Every question of the split is in the denominator, so a missing prediction is
wrong (the official script would stop with a KeyError). A prediction is right when it equals the
reference as Python compares them (``answer == pred``): an index is right, so is ``True`` for 1,
and a letter ``"B"`` is wrong. The reference is the ``answer`` a result file carries beside its
``prediction`` (the script reads it from there), else the CSV's.

ATP-hard (Buch et al., CVPR 2022) is a subset of val: pass its id list (``--ids FILE``: ids one
per line, a JSON list, or a CSV with ``id`` or ``video,qid`` columns) and the same scorer runs on
those questions only.

Predictions: ``{"<video>_<qid>": {"prediction": int, "answer": int}}`` (the official result
files), ``{"<video>_<qid>": int}``, or the runner's JSONL rows (its option index).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

NAME = "nextqa"
TITLE = "NExT-QA"
SPLITS = ("val", "test")
DEFAULT_SPLIT = "val"

#: Question types in ``eval_mc.py``'s order, with the names it prints.
TYPES = {"CW": "Why", "CH": "How", "TN": "Bef&Aft", "TC": "When", "DC": "Cnt", "DL": "Loc"}
TYPES["DO"] = "Other"
GROUPS = {"C": "Acc_C", "T": "Acc_T", "D": "Acc_D"}
FORMATS = '{"<video>_<qid>": {"prediction": int, ...}}, {"<video>_<qid>": int}, or runner JSONL'


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """NExT-QA questions of ``split`` (``val`` or ``test``)."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    return load_csv(NAME, data, split, video_root(data, videos, "NExTVideo", "videos"))


def load_csv(name: str, data: Path, split: str, root: Path) -> LoadResult:
    """Samples from a NExT-QA-style CSV (NExT-QA's ``video`` or IntentQA's ``video_id``)."""
    path = next(
        (p for p in (data / f"{split}.csv", data / name / f"{split}.csv") if p.is_file()), None
    )
    if path is None:
        raise BenchmarkDataError(f"{split}.csv not found in {data} (nor in {data / name})")
    mapping = _video_map(path.parent / "map_vid_vidorID.json")
    finder = VideoRoot(root)
    samples = []
    with path.open(newline="", encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            video = row.get("video") or row.get("video_id")
            if not video or "qid" not in row or "type" not in row:
                raise BenchmarkDataError(f"{path}: expected columns video, qid, type, a0..a4")
            qtype = row["type"]
            group_type = "TN" if qtype == "TP" else qtype  # eval_mc.py merges TP into TN
            sample_id = f"{video}_{row['qid']}"
            options = tuple(row[f"a{i}"] for i in range(5) if row.get(f"a{i}") is not None)
            answer = row.get("answer", "")
            samples.append(
                Sample(
                    id=sample_id,
                    videos=(finder.resolve(sample_id, mapping.get(video, video)),),
                    question=row["question"],
                    options=options,
                    answer=int(answer) if answer.strip() else None,
                    categories=(group_type, group_type[0]),
                    extras={"type": qtype, "video": video, "frame_count": row.get("frame_count")},
                )
            )
    return LoadResult(name, split, tuple(samples), tuple(finder.missing))


def _video_map(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    return {str(k): str(v) for k, v in json.loads(path.read_text(encoding="utf-8-sig")).items()}


prompt = choice_prompt  # the question with its (A) ... option lines


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """``eval_mc.py``'s comparison, ``answer == pred``; no prediction is unanswered (and counts
    wrong: every question is in the denominator)."""
    outcomes = []
    for s in samples:
        p = predictions.get(s.id)
        if p is None:
            outcomes.append(unanswered(s))
            continue
        pred, reference = (
            (p["prediction"], p.get("answer", s.answer)) if isinstance(p, dict) else (p, s.answer)
        )
        outcomes.append(Outcome(s.id, float(reference == pred), detail={"prediction": pred}))
    return outcomes


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Accuracy per type, per group and overall, every question counted (``eval_mc.py``)."""
    return aggregate_types(NAME, samples, outcomes, split)


def aggregate_types(
    name: str, samples: Sequence[Sample], outcomes: Sequence[Outcome], split: str
) -> Scores:
    """``eval_mc.py``'s report; types and groups without questions are left out."""
    types = tally(samples, outcomes, lambda s: s.categories[:1], tuple(TYPES))
    groups = tally(samples, outcomes, lambda s: s.categories[1:], tuple(GROUPS))
    return Scores(
        benchmark=name,
        split=split,
        metric="accuracy",
        rule="all",
        overall=overall_tally(outcomes).result("all"),
        sections={
            "type": {k: g for k, g in section(types, "all").items() if g.questions},
            "group": {k: g for k, g in section(groups, "all").items() if g.questions},
        },
        labels={**TYPES, **GROUPS},
        missing=sum(not o.answered for o in outcomes),
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """Official result files (kept whole: their ``answer`` is the reference), ``{id: value}``,
    or runner JSONL; values are kept as written, for ``eval_mc.py``'s comparison."""

    def keep(value: Any) -> Any:
        if isinstance(value, dict):  # eval_mc.py reads its "prediction"
            if "prediction" not in value:
                raise BenchmarkDataError(
                    f"{path}: a prediction object without 'prediction'; expected {FORMATS}"
                )
            return {k: value[k] for k in ("prediction", "answer") if k in value}
        return value

    return read_id_mapping(path, read_json_rows(path), keep, FORMATS)
