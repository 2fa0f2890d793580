"""CrossVid (Li et al., AAAI 2026): questions over several videos, ten tasks in four dimensions.

Data (HF ``Chuntianli/CrossVid``, laid out as its README shows): ``QA/<TASK>.json`` (or
``<TASK>.json`` in ``data``), videos under ``data/videos`` (names in the files include their
sub-folder, e.g. ``cook/x.mp4``) and the drone views as frame folders under
``data/uav/frames/<view>/<vid>-<view>``. Split ``all`` (default) loads every task file present;
a task code (``FSA``) or a comma list (``BU,NC``) loads those. A sample's id is
``<TASK>-<id>``.

Tasks, their fields (spec/agentcvr.md §1.3 and CrossVid's ``eval/*.py``) and answer forms:

| task | dimension | fields | answer | right when (the scripts' comparison) |
|---|---|---|---|---|
| BU | C | videos, question, options | letters (list) | ``answer == "".join(letters)`` |
| NC, CC, PEA | C | videos, begin/end, question, options | a letter | ``answer == letter`` |
| PI | T | video, beginning, ending, options | a letter | ``answer == letter`` |
| FSA | T | video A, video B, ref_segment | ``[start, end]`` of video 2 | IoU |
| PSS | T | video, segments | ``"3->5->4->2->1"`` | ``answer == order`` |
| MSR, MOC | M | vid, question with ``{A3}`` tags, objects, options | a letter | ``answer == letter`` |
| CCQA | open | video A, video B, question, scoring_points | text | LLM judge |

Scores follow CrossVid's scripts, which read a task's results file back and print the mean of
its rows' ``correct`` (FSA: ``iou``) over every row in it:

- a row counts as often as the file lists it, and a row whose ``answer`` is ``null`` counts: it is
  wrong (FSA: IoU 0; CCQA: the judge reads ``None`` and its verdict is summed like any other).
  Only a question without a row leaves the denominator (the "answered" rule), as does a CCQA row
  whose judgement failed.
- a row's own ``correct`` (FSA: ``iou``) is what the script sums, so where a row carries it, it
  is the row's score; a row without it is scored by the script's comparison above, of the answer
  exactly as written (``"(B)"``, ``"B."``, ``"CA"`` for AC and ``"2 -> 3 -> 1"`` are wrong). An
  FSA answer is a string split by its one comma into two numbers (else IoU 0), or the
  ``[start, end]`` list the script writes back. A note counts rows whose stored verdict differs
  from what their answer earns.
- CCQA: judge points over ``2 x`` the judge's list length, which is the number of scoring points
  when the judge follows the prompt (see :mod:`vidagent.bench.judge`).
- C.Avg, T.Avg and M.Avg are means of their tasks' scores and O.Avg the mean over all tasks (of
  those loaded). Each is also reported strict (a question without a row = wrong).

A row whose id is not a question of the loaded task file is reported and left out (the scripts,
which never check, would count it).

Predictions: CrossVid's per-task results (a list of ``{"id", "answer"}`` rows, when one task is
loaded), ``{"<TASK>": [such rows], ...}``, ``{"<TASK>-<id>": answer}`` (each value read as one
row's answer), or the runner's JSONL. The runner's parsed answers stand for the answer written in
the task's form (option 2 as ``"C"``, options 0 and 2 as ``"AC"``, an order as ``"2->3->1"``).
A runner row whose ``parsed`` is null — three format failures, a forced turn without an answer,
an errored question — is a row whose answer is null: wrong in the official number too, as
AgentCVR's released evaluation counts every question it ran (its accuracy divides by all of
them) and as CrossVid's scripts count a null answer; a CCQA one goes to the judge as ``None``.
Only a question the run has no row for (not run yet, or its videos missing) leaves the official
number; the strict one counts it wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
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
    as_interval,
    check_options,
    format_question,
    letter_index,
    mean_of,
    overall_tally,
    section,
    strip_label,
    tally,
    unanswered,
    video_root,
)
from vidagent.bench.predictions import (
    is_runner_rows,
    read_json_rows,
    runner_predictions,
)
from vidagent.bench.tasks.crossvid_cvr import strategy_question  # noqa: F401 - the runner asks for it
from vidagent.exceptions import UserError
from vidagent.geometry import interval_iou

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

NAME = "crossvid"
TITLE = "CrossVid"
DIMENSIONS = {
    "C": ("BU", "NC", "CC", "PEA"),
    "T": ("PI", "FSA", "PSS"),
    "M": ("MSR", "MOC"),
    "CCQA": ("CCQA",),
}
TASKS = tuple(t for tasks in DIMENSIONS.values() for t in tasks)
SPLITS = ("all", *TASKS)
DEFAULT_SPLIT = "all"
KINDS = {"BU": "multi", "FSA": "interval", "PSS": "order", "CCQA": "open"}
LABELS = {
    "BU": "Behavioral Understanding",
    "NC": "Narrative Comprehension",
    "CC": "Culinary Comparison",
    "PEA": "Procedural Error Analysis",
    "PI": "Plot Inference",
    "FSA": "Functional Step Alignment",
    "PSS": "Procedural Step Sequencing",
    "MSR": "Multi-view Spatial Reasoning",
    "MOC": "Multi-view Object Counting",
    "CCQA": "Comparative Culinary QA",
    "C.Avg": "Comparative Analysis",
    "T.Avg": "Temporal Understanding",
    "M.Avg": "Multi-view Reasoning",
}
# CrossVid's own question texts for the tasks whose files hold none (its eval/*.py prompts).
PI_QUESTION = (
    "Provide you the beginning and the ending of a movie clip, "
    "what is most likely to happen in the middle?"
)
FSA_QUESTION = (
    "Provide you two cooking videos, which step in Video 2 is functionally equivalent to the "
    "step shown between {BEGIN}s and {END}s in Video 1?"
)
PSS_QUESTION = "Provide you {N} shuffled segments of a cooking video, what's the correct order of these segments?"
FORMATS = (
    'CrossVid results [{"id", "answer"}] (one task), {"<TASK>": [...]}, '
    '{"<TASK>-<id>": answer}, or runner JSONL'
)


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """CrossVid questions of the tasks ``split`` names (``all``, a task, or a comma list)."""
    check_options(NAME, options)
    split = split or DEFAULT_SPLIT
    wanted = TASKS if split == "all" else tuple(t.strip().upper() for t in split.split(","))
    unknown = [t for t in wanted if t not in TASKS]
    if unknown:
        raise UserError(f"crossvid has no task {unknown[0]!r}; tasks: {', '.join(TASKS)} or all")
    finder = VideoRoot(video_root(data, videos, "videos"))
    frames = VideoRoot(data / "uav" / "frames")
    samples: list[Sample] = []
    absent = []
    for task in wanted:
        path = next(
            (p for p in (data / "QA" / f"{task}.json", data / f"{task}.json") if p.is_file()), None
        )
        if path is None:
            absent.append(task)
            continue
        rows = _read(path)
        for n, row in enumerate(rows):
            samples.append(_sample(task, row, n, finder, frames))
    if len(absent) == len(wanted):
        raise BenchmarkDataError(
            f"no CrossVid task file ({wanted[0]}.json, ...) in {data}/QA nor {data}"
        )
    notes = (f"no question file for {', '.join(absent)}",) if absent and split == "all" else ()
    if absent and split != "all":
        raise BenchmarkDataError(f"CrossVid {absent[0]}.json not found in {data}/QA nor {data}")
    missing = tuple(finder.missing) + tuple(frames.missing)
    return LoadResult(NAME, split, tuple(samples), missing, notes)


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise BenchmarkDataError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(rows, list):
        raise BenchmarkDataError(f"{path}: expected a list of questions")
    return rows


def _sample(task: str, row: dict[str, Any], n: int, finder: VideoRoot, frames: VideoRoot) -> Sample:
    sample_id = f"{task}-{row.get('id', n)}"
    kind = KINDS.get(task, "choice")
    extras: dict[str, Any] = {"task_id": row.get("id", n)}
    question = str(row.get("question", ""))
    if task in ("MSR", "MOC"):
        vid = str(row.get("vid") or row.get("class"))
        names = [f"{view}/{vid}-{view}" for view in (1, 2)]
        paths = tuple(frames.resolve(sample_id, name, folder=True) for name in names)
        tags = _object_names(question)
        question = _replace(question, tags)
        options = tuple(strip_label(_replace(str(o), tags)) for o in row.get("options", []))
        extras.update(vid=vid, objects=row.get("objects"), raw_question=row.get("question"))
        bbox = frames.root.parent / "bbox"
        extras.update(
            tags=tags, bbox_files=[str(bbox / str(view) / f"{vid}.json") for view in (1, 2)]
        )
    else:
        names = _video_names(task, row)
        paths = tuple(finder.resolve(sample_id, name) for name in names)
        options = tuple(strip_label(str(o)) for o in row.get("options", []))
    if task == "PI":
        question = question or PI_QUESTION
        extras.update(beginning=row.get("beginning"), ending=row.get("ending"))
    elif task == "FSA":
        begin, end = row["ref_segment"]
        question = question or FSA_QUESTION.replace("{BEGIN}", str(begin)).replace(
            "{END}", str(end)
        )
        extras["ref_segment"] = (begin, end)
    elif task == "PSS":
        segments = row.get("segments", {})
        question = question or PSS_QUESTION.replace("{N}", str(len(segments)))
        extras["segments"] = segments
    elif task == "CCQA":
        extras["scoring_points"] = _points(row.get("scoring_points", []))
    if "begin" in row or "end" in row:
        extras.update(begin=row.get("begin"), end=row.get("end"))
    raw = row.get("answer")
    # What the scripts compare an answer to: BU joins its letters ("".join(["A", "C"]) == "AC").
    extras["official_answer"] = (
        "".join(map(str, raw)) if kind == "multi" and isinstance(raw, list) else raw
    )
    return Sample(
        id=sample_id,
        videos=paths,
        question=question,
        options=options,
        answer=_answer(kind, row.get("answer")),
        categories=(task,),
        task=kind,
        extras=extras,
    )


def _video_names(task: str, row: dict[str, Any]) -> list[str]:
    if "videos" in row:
        return [str(v) for v in row["videos"]]
    if "video A" in row:
        return [str(row["video A"]), str(row["video B"])]
    if "video" in row:
        return [str(row["video"])]
    raise BenchmarkDataError(f"CrossVid {task} question {row.get('id')!r} names no video")


def _object_names(question: str) -> dict[str, str]:
    """``{A3}``-style tags named ``obj_1``, ``obj_2`` in order of appearance (as ``MSR.py`` does)."""
    tags: dict[str, str] = {}
    for tag in re.findall(r"\{(.*?)\}", question):
        tags.setdefault(tag, f"obj_{len(tags) + 1}")
    return tags


def _replace(text: str, tags: dict[str, str]) -> str:
    for tag, name in tags.items():
        text = text.replace("{" + tag + "}", name)
    return text


def _points(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(line.strip() for line in value.splitlines() if line.strip())
    return tuple(str(p) for p in value)


def _answer(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "open":
        return str(value)
    if kind == "interval":
        return as_interval(value)
    if kind == "order":
        return as_order(value)
    indices = as_letters(value)
    if kind == "multi" or (indices is not None and len(indices) > 1):
        return indices
    return indices[0] if indices else None


def as_letters(value: Any) -> tuple[int, ...] | None:
    """Option indices, sorted, from ``"AC"``, ``["A", "C"]``, ``[0, 2]`` or ``"A"``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, str):
        one = letter_index(value)
        if one is not None:
            return (one,)
        text = value.strip()
        if text and all(c in LETTERS for c in text):
            return tuple(sorted({LETTERS.index(c) for c in text}))
        return None
    if isinstance(value, (list, tuple)):
        found = [as_letters(v) for v in value]
        if all(f is not None and len(f) == 1 for f in found):
            return tuple(sorted({f[0] for f in found if f}))
    return None


def as_order(value: Any) -> tuple[int, ...] | None:
    """Item numbers from ``"3->5->4->2->1"`` or ``[3, 5, 4, 2, 1]``."""
    parts = value.split("->") if isinstance(value, str) else value
    if not isinstance(parts, (list, tuple)):
        return None
    try:
        return tuple(int(str(p).strip()) for p in parts)
    except ValueError:
        return None


def prompt(sample: Sample) -> str:
    """The question, with options as ``(A) ...`` lines where the task has options."""
    text = format_question(sample.question, sample.options)
    if sample.task == "multi":
        text += "\nOne to three options are right; give every right letter."
    elif sample.task == "order":
        segments = sample.extras.get("segments") or {}
        text += f'\nThe segments are numbered 1 to {len(segments)}; answer like "2->3->1".'
    elif sample.task == "interval":
        text += "\nAnswer with the start and end time in seconds of the step in Video 2."
    return text


@dataclass(frozen=True)
class Row:
    """One row of a CrossVid results file, as the task's script reads it back.

    Attributes:
        answer: the ``answer`` as written (``None`` too: the row still counts).
        stored: the row's own verdict, the number the script sums: ``correct`` as 1 or 0 (by
            Python truth) or FSA's ``iou``; ``None`` when the row has none.
    """

    answer: Any
    stored: float | None = None


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """Per-question outcomes, summed over the question's rows; open answers go to ``judge``.

    Raises:
        UserError: an open-ended question has a prediction and no judge was given.
    """
    given = {s.id: _given(s, predictions[s.id]) if s.id in predictions else () for s in samples}
    to_judge = [s for s in samples if s.task == "open" and given[s.id]]
    judged: dict[str, Outcome] = {}
    if to_judge:
        if judge is None:
            raise UserError(
                "CrossVid's open-ended task (CCQA) needs an LLM judge: pass judge= "
                "(CLI: --judge SPEC), or leave CCQA out with --split"
            )
        judged = _judge(judge, [(s, given[s.id]) for s in to_judge])
    outcomes = []
    for s in samples:
        if s.id in judged:
            outcomes.append(judged[s.id])
        elif not given[s.id]:
            outcomes.append(unanswered(s, _possible(s)))
        else:
            outcomes.append(_score_rows(s, given[s.id]))
    return outcomes


def _given(s: Sample, p: Any) -> tuple[Row, ...]:
    """The rows given for a question: a results file's rows, or a runner's parsed answer as one
    (``None``, no answer, as a row whose answer is null)."""
    if isinstance(p, tuple) and p and all(isinstance(r, Row) for r in p):
        return p
    return (Row(_written(s, p)),)


def _written(s: Sample, p: Any) -> Any:
    """A runner's parsed answer as the task's answers are written: option indices as their letters
    (``(0, 2)`` -> ``"AC"``), an order as ``"2->3->1"``; anything else as it is."""
    items = p if isinstance(p, tuple) else (p,)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        return p
    if s.task == "order":
        return "->".join(str(i) for i in items)
    if s.task in ("choice", "multi") and all(0 <= i < len(LETTERS) for i in items):
        return "".join(LETTERS[i] for i in items)
    return p


def _possible(s: Sample) -> float:
    """Points a row is worth: 1, or 2 per scoring point for an open question."""
    return 2.0 * len(s.extras.get("scoring_points", ())) if s.task == "open" else 1.0


def _earned(s: Sample, answer: Any) -> float:
    """What the script's comparison gives an answer: 1 or 0, or FSA's IoU."""
    if s.task == "interval":
        interval = as_interval(answer)
        return interval_iou(interval, s.answer) if interval and isinstance(s.answer, tuple) else 0.0
    return float(answer == s.extras.get("official_answer"))


def _score_rows(s: Sample, rows: Sequence[Row]) -> Outcome:
    """Every row's score, its stored verdict where it has one, summed over the question's rows."""
    earned = [_earned(s, r.answer) for r in rows]
    scores = [e if r.stored is None else r.stored for r, e in zip(rows, earned, strict=True)]
    differ = sum(abs(a - b) > 1e-9 for a, b in zip(scores, earned, strict=True))
    detail: dict[str, Any] = {"prediction": [r.answer for r in rows], "scores": scores}
    if differ:
        detail["stored_differs"] = differ
    return Outcome(s.id, sum(scores), float(len(rows)), detail=detail)


def _judge(judge: Judge, given: Sequence[tuple[Sample, tuple[Row, ...]]]) -> dict[str, Outcome]:
    """Each row judged on its own (``str`` of the answer, as the script formats it: ``None`` too),
    worth ``2 * len(coverage)`` of the judge's lists as the script counts it; a row whose
    judgement failed is left out of both sums."""
    from vidagent.bench.judge import Item

    items = [
        Item(
            s.question,
            str(s.answer or ""),
            tuple(s.extras.get("scoring_points", ())),
            str(r.answer),
        )
        for s, rows in given
        for r in rows
    ]
    verdicts = iter(judge.judge_many(items))
    outcomes = {}
    for s, rows in given:
        mine = [next(verdicts) for _ in rows]
        ok = [v for v in mine if v.ok]
        detail: dict[str, Any] = {
            "coverage": [v.coverage for v in ok],
            "correctness": [v.correctness for v in ok],
        }
        if len(ok) < len(mine):
            detail.update(
                judge_failed=len(mine) - len(ok),
                judge_error=next(v.error for v in mine if not v.ok),
            )
        if any(v.wrong_length for v in ok):
            detail["judge_length"] = sum(v.wrong_length for v in ok)
        possible = sum(v.weight for v in ok) if ok else _possible(s)
        outcomes[s.id] = Outcome(s.id, float(sum(v.points for v in ok)), possible, bool(ok), detail)
    return outcomes


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Per-task scores, dimension averages and O.Avg, official and strict."""
    groups = tally(samples, outcomes, lambda s: s.categories, TASKS)
    tasks = {k: g for k, g in section(groups, "answered").items() if g.questions}
    dims = {}
    for dim, members in DIMENSIONS.items():
        present = [tasks[t] for t in members if t in tasks]
        if present and dim != "CCQA":
            dims[f"{dim}.Avg"] = mean_of(present)
    failed = sum(o.detail.get("judge_failed", 0) for o in outcomes)
    notes: tuple[str, ...] = (
        (f"the judge could not score {failed} answers (left out, as CrossVid does)",)
        if failed
        else ()
    )
    length = sum(o.detail.get("judge_length", 0) for o in outcomes)
    if length:
        lengths = (
            f"{length} judge verdicts do not have one entry per scoring point; each counts "
            "2 x its own length, as CrossVid's score_CCQA.py counts it"
        )
        notes += (lengths,)
    differ = sum(o.detail.get("stored_differs", 0) for o in outcomes)
    if differ:
        stored = (
            f"{differ} result rows carry a correct/iou their answer does not earn against the QA "
            "file; the official number sums the stored value, as CrossVid's scripts do"
        )
        notes += (stored,)
    partial = [
        d
        for d, members in DIMENSIONS.items()
        if d != "CCQA" and 0 < sum(t in tasks for t in members) < len(members)
    ]
    if partial:
        notes += (f"averages over the loaded tasks only for {', '.join(partial)}",)
    overall = mean_of(list(tasks.values())) if tasks else overall_tally(outcomes).result("answered")
    return Scores(
        benchmark=NAME,
        split=split,
        metric="accuracy (FSA: mean IoU, CCQA: judge score)",
        rule="answered",
        overall=overall,
        sections={"task": tasks, "dimension": dims},
        labels=LABELS,
        missing=sum(not o.answered and "judge_failed" not in o.detail for o in outcomes),
        notes=notes,
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """CrossVid results, per-task results by task, ``{id: answer}``, or runner JSONL; every row of
    a results file is kept (``{id: (Row, ...)}``)."""
    doc = read_json_rows(path)
    if is_runner_rows(doc):
        return runner_predictions(doc)
    if doc == []:
        raise BenchmarkDataError(f"{path}: holds no predictions (an empty list)")
    tasks = sorted({s.categories[0] for s in samples})
    if isinstance(doc, list) and all(isinstance(r, dict) and "id" in r for r in doc):
        if len(tasks) != 1:
            raise BenchmarkDataError(
                f"{path}: CrossVid results of one task; name that task with --split "
                f"(e.g. --split {tasks[0] if tasks else 'FSA'})"
            )
        return _rows(tasks[0], doc)
    if (
        isinstance(doc, dict)
        and doc
        and all(k in TASKS and isinstance(v, list) for k, v in doc.items())
    ):
        found: dict[str, Any] = {}
        for task, rows in doc.items():
            found.update(_rows(task, rows))
        return found
    if isinstance(doc, dict):
        return {str(k): (Row(v),) for k, v in doc.items()}
    raise BenchmarkDataError(f"{path}: not a predictions file; expected {FORMATS}")


def _rows(task: str, rows: list[Any]) -> dict[str, tuple[Row, ...]]:
    if not all(isinstance(r, dict) and "id" in r for r in rows):
        raise BenchmarkDataError(f"CrossVid {task} results: every row needs an 'id'")
    found: dict[str, tuple[Row, ...]] = {}
    for r in rows:
        key = f"{task}-{r['id']}"
        found[key] = (*found.get(key, ()), Row(r.get("answer"), _stored(task, r)))
    return found


def _stored(task: str, row: dict[str, Any]) -> float | None:
    """The verdict the task's script sums for a row it reads back, if the row has one."""
    if task == "FSA":
        iou = row.get("iou")
        return float(iou) if isinstance(iou, (int, float)) else None
    if task == "CCQA" or "correct" not in row:
        return None  # score_CCQA.py judges every row again
    return float(bool(row["correct"]))
