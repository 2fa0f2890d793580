"""LongVideoBench (Wu et al., NeurIPS 2024): interleaved video and subtitles up to an hour.

Data (HF ``longvideobench/LongVideoBench``): ``lvb_val.json`` (split ``val``, the default) and
``lvb_test_wo_gt.json`` (``test``, no public answers), lists of ``{id, video_id, video_path,
subtitle_path, question, candidates, correct_choice, duration_group, duration,
question_category, topic_category, level, starting_timestamp_for_subtitles}``. Videos are
``<root>/<video_path>``; the root defaults to ``data/videos``. The subtitle file
``data/subtitles/<subtitle_path>`` is in ``extras["subtitle"]``.

``subset="long"`` keeps duration group 3600 (videos of 900-3600 s), the "Long" column the DVD and
AVI papers report (their counts differ: 564 vs 566 questions; we keep what the file says).

Scoring follows lmms-eval's ``longvideobench_aggregate_results`` (the benchmark's own repository
ships no scorer): accuracy per duration group and per question category, overall over every
question. lmms-eval replaces an unparsable answer by a random option; we do not guess, so an
unanswered question is wrong ("all" rule) and the official and strict numbers agree.

Predictions: ``{id: "A" or int}`` (the leaderboard's submission form), or the runner's JSONL.
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
    section,
    tally,
    video_root,
)
from vidagent.bench.predictions import (
    read_id_mapping,
    read_json_rows,
)

NAME = "longvideobench"
TITLE = "LongVideoBench"
SPLITS = ("val", "test")
DEFAULT_SPLIT = "val"
FILES = {"val": "lvb_val.json", "test": "lvb_test_wo_gt.json"}
DURATION_GROUPS = ("15", "60", "600", "3600")
LONG_GROUP = "3600"
FORMATS = '{"<id>": "A" or int}, or runner JSONL'


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """LongVideoBench questions of ``split``; ``subset="long"`` keeps the 900-3600 s videos."""
    check_options(NAME, options, known=("subset",))
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    subset = options.get("subset")
    if subset not in (None, "long"):
        raise BenchmarkDataError(f"longvideobench has no subset {subset!r}; the subset is 'long'")
    path = require_file(data / FILES[split], f"LongVideoBench {FILES[split]}")
    try:
        rows = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise BenchmarkDataError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    finder = VideoRoot(video_root(data, videos, "videos"))
    samples = []
    for row in rows:
        if subset == "long" and str(row.get("duration_group")) != LONG_GROUP:
            continue
        samples.append(_sample(row, data, finder))
    name = f"{split}-long" if subset else split
    return LoadResult(NAME, name, tuple(samples), tuple(finder.missing))


def _sample(row: dict[str, Any], data: Path, finder: VideoRoot) -> Sample:
    sample_id = str(row["id"])
    answer = row.get("correct_choice")
    subtitle = row.get("subtitle_path")
    return Sample(
        id=sample_id,
        videos=(finder.resolve(sample_id, str(row.get("video_path") or row["video_id"])),),
        question=str(row["question"]),
        options=tuple(str(c) for c in row["candidates"]),
        answer=int(answer) if isinstance(answer, int) and answer >= 0 else None,
        categories=(str(row.get("question_category", "")),),
        extras={
            "duration_group": str(row.get("duration_group", "")),
            "duration": row.get("duration"),
            "topic_category": row.get("topic_category"),
            "level": row.get("level"),
            "subtitle": str(data / "subtitles" / subtitle) if subtitle else None,
            "subtitle_offset": row.get("starting_timestamp_for_subtitles", 0),
        },
    )


prompt = choice_prompt  # the question with its (A) ... option lines
score = score_choices  # 1 for the right option, else 0; none = unanswered


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Accuracy per duration group, per question category and overall."""
    groups = tally(samples, outcomes, lambda s: (s.extras["duration_group"],), DURATION_GROUPS)
    categories = tally(samples, outcomes, lambda s: s.categories)
    return Scores(
        benchmark=NAME,
        split=split,
        metric="accuracy",
        rule="all",
        overall=overall_tally(outcomes).result("all"),
        sections={
            "duration group": {k: g for k, g in section(groups, "all").items() if g.questions},
            "question category": dict(sorted(section(categories, "all").items())),
        },
        labels={"15": "8-15 s", "60": "15-60 s", "600": "180-600 s", "3600": "900-3600 s"},
        missing=sum(not o.answered for o in outcomes),
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """``{id: letter or index}`` or runner JSONL."""
    return read_id_mapping(path, read_json_rows(path), as_choice, FORMATS)
