"""Video-MME (Fu et al., CVPR 2025): short, medium and long videos, with or without subtitles.

Data (HF ``lmms-lab/Video-MME``): ``videomme/test-00000-of-00001.parquet`` (or any ``.parquet``
in ``data`` or ``data/videomme``; read with pyarrow, a core dependency), rows ``{video_id,
duration, domain, sub_category, url, videoID, question_id, task_type, question, options, answer}``
with options written ``"A. ..."`` and a letter answer. Videos are ``<root>/<videoID>.mp4`` (also
``.MP4``/``.mkv``); the root defaults to ``data/data`` (the dataset's own layout), else
``data/videos``.

Splits: ``all`` (default), ``short``, ``medium``, ``long``. ``subtitles=True`` is the "with
subtitles" setting: each sample carries ``extras["subtitle"]``, the path of
``data/subtitle/<videoID>.srt`` (``None`` where the video has none). The setting changes what a
system may read, not how it is scored, so the split is named ``<split>+subtitles``.

Scoring reproduces BradyFU/Video-MME ``evaluation/eval_your_results.py``: a question whose
response yields no letter is left out ("answered" rule); overall, per duration, per domain
("video category"), per sub-category and per task type. The strict number counts unanswered as
wrong.

Predictions: the official results file (a list of videos, each with ``questions`` holding
``question_id`` and a free-text ``response``), ``{question_id: "A"}``, or the runner's JSONL. The
official file's responses go through :func:`official_letter`, the official script's own letter
rule: reproducing its numbers from that file needs its rule, quirks included. Other files hold
already-parsed answers.
"""

from __future__ import annotations

import re
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
    letter_index,
    overall_tally,
    score_choices,
    section,
    strip_label,
    tally,
    video_root,
)
from vidagent.bench.predictions import (
    read_id_mapping,
    read_json_rows,
)

NAME = "videomme"
TITLE = "Video-MME"
SPLITS = ("all", "short", "medium", "long")
DEFAULT_SPLIT = "all"
DURATIONS = ("short", "medium", "long")
DOMAINS = (
    "Knowledge",
    "Film & Television",
    "Sports Competition",
    "Artistic Performance",
    "Life Record",
    "Multilingual",
)
TASK_TYPES = (
    "Temporal Perception",
    "Spatial Perception",
    "Attribute Perception",
    "Action Recognition",
    "Object Recognition",
    "OCR Problems",
    "Counting Problem",
    "Temporal Reasoning",
    "Spatial Reasoning",
    "Action Reasoning",
    "Object Reasoning",
    "Information Synopsis",
)
FORMATS = 'the official results list, {"<question_id>": "A"}, or runner JSONL'

# The official list, missing commas and all: two pairs of prefixes are glued into one string
# each, so "The best option is" and "Best answer:" are never removed on their own.
_OFFICIAL_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",
    "Best answer:Best option:",
)


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """Video-MME questions of ``split``; ``subtitles=True`` attaches each video's subtitles."""
    check_options(NAME, options, known=("subtitles",))
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    subtitles = bool(options.get("subtitles"))
    rows = _read_rows(data)
    finder = VideoRoot(video_root(data, videos, "data", "videos"))
    samples = []
    for row in rows:
        if split != "all" and row.get("duration") != split:
            continue
        samples.append(_sample(row, data, finder, subtitles))
    name = f"{split}+subtitles" if subtitles else split
    return LoadResult(NAME, name, tuple(samples), tuple(finder.missing))


def _read_rows(data: Path) -> list[dict[str, Any]]:
    files = sorted(data.glob("*.parquet")) + sorted((data / "videomme").glob("*.parquet"))
    if not files:
        raise BenchmarkDataError(f"no Video-MME .parquet file in {data} (nor in {data}/videomme)")
    import pyarrow.parquet as pq  # lazy: only the Video-MME loader needs it

    rows: list[dict[str, Any]] = []
    for path in files:
        try:
            rows += pq.read_table(path).to_pylist()
        except (OSError, ValueError) as e:  # pyarrow's ArrowIOError, ArrowInvalid
            raise BenchmarkDataError(f"{path}: not a readable parquet file ({e})") from None
    return rows


def _sample(row: dict[str, Any], data: Path, finder: VideoRoot, subtitles: bool) -> Sample:
    qid = str(row["question_id"])
    video = str(row["videoID"])
    extras: dict[str, Any] = {
        "duration": row.get("duration"),
        "domain": row.get("domain"),
        "sub_category": row.get("sub_category"),
        "video_id": row.get("video_id"),
        "url": row.get("url"),
    }
    if subtitles:
        srt = data / "subtitle" / f"{video}.srt"
        extras["subtitle"] = str(srt) if srt.is_file() else None
    return Sample(
        id=qid,
        videos=(finder.resolve(qid, video),),
        question=str(row["question"]),
        options=tuple(strip_label(str(o)) for o in row["options"]),
        answer=letter_index(str(row.get("answer", ""))),
        categories=(str(row.get("task_type", "")),),
        extras=extras,
    )


prompt = choice_prompt  # the question with its (A) ... option lines
score = score_choices  # 1 for the right option, else 0; none = unanswered


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Accuracy over answered questions: overall, per duration, domain, sub-category, task."""

    def by(field: str, order: Sequence[str] = ()) -> dict[str, Any]:
        groups = tally(samples, outcomes, lambda s: (str(s.extras.get(field)),), order)
        return {k: g for k, g in section(groups, "answered").items() if g.questions}

    tasks = tally(samples, outcomes, lambda s: s.categories, TASK_TYPES)
    return Scores(
        benchmark=NAME,
        split=split,
        metric="accuracy",
        rule="answered",
        overall=overall_tally(outcomes).result("answered"),
        sections={
            "duration": by("duration", DURATIONS),
            "domain": by("domain", DOMAINS),
            "sub-category": by("sub_category"),
            "task type": {k: g for k, g in section(tasks, "answered").items() if g.questions},
        },
        missing=sum(not o.answered for o in outcomes),
    )


def official_letter(response: str) -> str:
    """The letter ``eval_your_results.py`` reads from a response, ``""`` when none.

    Known prefixes are removed, then the first A, B, C or D anywhere in what remains is the
    answer, upper case only ("A man ..." answers A). The script's extra rule for responses of
    more than ten words without a letter cannot change the result, so it is not repeated.
    """
    s = response.strip()
    for prefix in _OFFICIAL_PREFIXES:
        s = s.replace(prefix, "")
    m = re.search("[ABCD]", s)
    return m.group(0) if m else ""


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """The official results file, ``{question_id: letter}``, or runner JSONL."""
    doc = read_json_rows(path)
    if isinstance(doc, list) and doc and all(isinstance(v, dict) and "questions" in v for v in doc):
        found: dict[str, Any] = {}
        for video in doc:
            for q in video["questions"]:
                letter = official_letter(str(q.get("response") or ""))
                found[str(q["question_id"])] = letter_index(letter) if letter else None
        return found
    return read_id_mapping(path, doc, as_choice, FORMATS)
