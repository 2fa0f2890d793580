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

Scoring reproduces ``eval_your_results.py`` as the Video-MME README links it today
(``thanku-all/parse_answer``; the 2024 copy in ``MME-Benchmarks/Video-MME/evaluation`` was
deleted on 2024-06-18 and the README points there since). It is the only official script that
reads a results file. lmms-eval's task is no reference for that: it reads no results file, counts
a response without a letter as wrong, its ``extract_characters_regex`` never stripped
``"Answer:"`` or ``"Option:"``, and since April 2026 it uses another extractor altogether.

The script's rules, all kept: each question entry of the file counts, a question listed twice
counts twice; an entry's letter is :func:`official_letter` of its ``response``; an entry without
a letter is left out ("answered" rule); the reference is the entry's own ``answer`` (the letter,
compared as a string), and the entry is grouped by the file's ``duration``, ``domain``,
``sub_category`` and ``task_type``: the script reads all of these from the file, not from the
dataset. The dataset's values stand in where the file lacks a field (the 2024 form names them
``duration_category``, ``video_category``, ``video_subcategory``). An entry whose ``duration`` is
not one of the split's (``all``: short, medium, long) is not counted, as the script filters on it.
Questions are matched to the dataset by ``question_id``; an id the split lacks is reported and
left out (the script, which reads no dataset, would count it). The script itself stops unless
each duration has exactly 300 videos; we score partial files by the same rules.

Sections: overall, per duration, per domain ("video category"), per sub-category and per task
type. The strict number counts every entry, an entry without a letter as wrong.

Predictions: the official results file (a list of videos, each with ``questions`` holding
``question_id`` and a free-text ``response``), ``{question_id: response}``, or the runner's
JSONL (its ``parsed`` option index). A text value of ``{question_id: response}`` goes through
the same letter rule (``"Answer: C"`` is C, ``"b"`` names no letter); an integer is an option
index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
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

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

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
FORMATS = 'the official results list, {"<question_id>": "<response>"}, or runner JSONL'

# The official list, missing commas and all: two pairs of prefixes are glued into one string
# each, so "The best option is" and "Best answer:" are never removed on their own. Order matters:
# each is removed everywhere in turn, so "The correct answer is" goes before "The correct answer".
_OFFICIAL_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",
    "Best answer:Best option:",
    "Answer:",
    "Option:",
    "The correct answer",
    "The correct option",
)
#: The file's own grouping fields, as the official script names them.
_GROUPS = ("duration", "domain", "sub_category", "task_type")


@dataclass(frozen=True)
class Entry:
    """One question entry of the official results file, as ``eval_your_results.py`` reads it.

    Attributes:
        letter: :func:`official_letter` of the response; ``""`` when it names none.
        answer: the entry's own ``answer``, the script's reference (``""`` when it is not text, so
            that no letter equals it); ``None`` when the entry has none.
        duration: the video's ``duration`` in the file (``None``: the dataset's stands in).
        domain: the video's ``domain`` in the file.
        sub_category: the video's ``sub_category`` in the file.
        task_type: the question's ``task_type`` in the file.
    """

    letter: str
    answer: str | None = None
    duration: str | None = None
    domain: str | None = None
    sub_category: str | None = None
    task_type: str | None = None


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


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """1 for the right option, else 0; no letter = unanswered. A question read from the official
    results file scores each of its entries (``detail["entries"]``, counted by :func:`aggregate`).
    """
    outcomes = score_choices(samples, {k: v for k, v in predictions.items() if not _listed(v)})
    return [
        _score_entries(s, predictions[s.id]) if _listed(predictions.get(s.id)) else o
        for s, o in zip(samples, outcomes, strict=True)
    ]


def _listed(value: Any) -> bool:
    return isinstance(value, tuple) and bool(value) and all(isinstance(e, Entry) for e in value)


def _score_entries(s: Sample, entries: Sequence[Entry]) -> Outcome:
    """The script's comparison per entry: its letter equals its own ``answer`` string."""
    default = LETTERS[s.answer] if isinstance(s.answer, int) else None
    rows = [
        {
            **{k: getattr(e, k) for k in _GROUPS},
            "letter": e.letter,
            "right": bool(e.letter) and e.letter == (default if e.answer is None else e.answer),
        }
        for e in entries
    ]
    answered = sum(bool(r["letter"]) for r in rows)
    right = sum(r["right"] for r in rows)
    detail = {"prediction": [r["letter"] for r in rows], "entries": rows}
    return Outcome(s.id, float(right), float(answered or 1), answered > 0, detail)


def _counted(
    samples: Sequence[Sample], outcomes: Sequence[Outcome], split: str
) -> Iterator[tuple[Sample, Outcome]]:
    """Each question as the official script counts it: once per entry of the results file, under
    the file's groups, and only the entries of the split's durations."""
    durations = DURATIONS if split.split("+")[0] in ("", "all") else (split.split("+")[0],)
    for s, o in zip(samples, outcomes, strict=True):
        if "entries" not in o.detail:
            yield s, o
            continue
        for row in o.detail["entries"]:
            groups = {k: row[k] for k in _GROUPS if row[k] is not None}
            if groups.get("duration", s.extras.get("duration")) not in durations:
                continue
            task = groups.pop("task_type", None)
            entry = replace(
                s,
                extras={**s.extras, **groups},
                categories=(task,) if task is not None else s.categories,
            )
            yield entry, Outcome(s.id, float(row["right"]), answered=bool(row["letter"]))


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Accuracy over answered entries: overall, per duration, domain, sub-category, task."""
    pairs = list(_counted(samples, outcomes, split))
    samples = [s for s, _ in pairs]
    outcomes = [o for _, o in pairs]

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

    Its prefixes are removed wherever they occur, then the first A, B, C or D anywhere in what
    remains is the answer, upper case only ("A man ..." answers A, "Answer: C" answers C). The
    script's extra rule for responses of more than ten words without a letter cannot change the
    result, so it is not repeated.
    """
    s = response.strip()
    for prefix in _OFFICIAL_PREFIXES:
        s = s.replace(prefix, "")
    m = re.search("[ABCD]", s)
    return m.group(0) if m else ""


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """The official results file (every entry kept), ``{question_id: response}``, or runner
    JSONL."""
    doc = read_json_rows(path)
    if isinstance(doc, list) and doc and all(isinstance(v, dict) and "questions" in v for v in doc):
        found: dict[str, tuple[Entry, ...]] = {}
        for video in doc:
            for q in video["questions"]:
                qid = str(q["question_id"])
                found[qid] = (*found.get(qid, ()), _entry(video, q))
        return found
    return read_id_mapping(path, doc, _choice, FORMATS)


def _entry(video: dict[str, Any], question: dict[str, Any]) -> Entry:
    fields = {**{k: video.get(k) for k in _GROUPS[:3]}, "task_type": question.get("task_type")}
    answer = question.get("answer")
    if "answer" in question and not isinstance(answer, str):
        answer = ""  # the script compares the letter to it as it is: never equal
    return Entry(
        official_letter(str(question.get("response") or "")),
        answer,
        **{k: None if v is None else str(v) for k, v in fields.items()},
    )


def _choice(value: Any) -> Any:
    """A ``{question_id: value}`` value: text through the official letter rule (``None`` when it
    names no letter), anything else as an option index."""
    if isinstance(value, str):
        letter = official_letter(value)
        return letter_index(letter) if letter else None
    return as_choice(value)
