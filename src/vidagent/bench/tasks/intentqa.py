"""IntentQA (Li et al., ICCV 2023), scored as its ``eval_intentqa.py`` does.

Data: ``train.csv`` / ``val.csv`` / ``test.csv`` from JoseponLee/IntentQA
``datasets/IntentQA/`` (in ``data`` or ``data/intentqa``): NExT-QA's columns with ``video_id``
for ``video``, plus ``action, lemma, lemma_id``. Ids are ``<video_id>_<qid>``. Videos (NExT-QA's
VidOR clips) are ``<root>/<video_id>.mp4`` (or found by stem below the root); the root defaults
to ``data/videos``. The papers report the test split, so it is the default.

The official script is NExT-QA's ``eval_mc.py`` with groups that have no questions left out:
IntentQA has CW (why), CH (how) and TN (before/after, TP merged in), so groups C and T. Every
question counts; predictions take NExT-QA's forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidagent.bench.base import (
    LoadResult,
    Outcome,
    Sample,
    Scores,
    check_options,
    check_split,
    choice_prompt,
    video_root,
)
from vidagent.bench.tasks import nextqa

NAME = "intentqa"
TITLE = "IntentQA"
SPLITS = ("test", "val", "train")
DEFAULT_SPLIT = "test"


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """IntentQA questions of ``split``."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    return nextqa.load_csv(NAME, data, split, video_root(data, videos, "videos"))


prompt = choice_prompt  # the question with its (A) ... option lines
score = nextqa.score  # eval_mc.py's ``answer == pred``


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Accuracy per question type, per group and overall, every question counted."""
    return nextqa.aggregate_types(NAME, samples, outcomes, split)


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """NExT-QA's forms: result files, ``{id: index}``, or runner JSONL."""
    return nextqa.read_predictions(path, samples)
