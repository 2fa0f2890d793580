"""NExT-GQA (Xiao et al., CVPR 2024): NExT-QA questions whose answer must also be grounded in
time — the answer right *and* the evidence span right.

Data (doc-doc/NExT-GQA ``datasets/nextgqa/``, MIT licence), in ``data`` or ``data/nextgqa``:
``val.csv`` / ``test.csv`` (columns ``video_id, frame_count, width, height, question, answer,
qid, type, a0..a4``; ``answer`` is the right option's *text*) and ``gsub_val.json`` /
``gsub_test.json`` (``{video: {"duration": d, "location": {qid: [[s, e], ...]}, "fps": f}}``:
one or more gold spans per question). A question's id is ``<video>_<qid>``; a question without
gold spans is left out (the official evaluation iterates the spans file). Videos are found as for
NExT-QA (``map_vid_vidorID.json``; root ``data/NExTVideo``, else ``data/videos``).

Scoring reproduces ``code/TempGQA/eval_ground.py``'s ``eval_ground``: the predicted span against
each gold span of the question by ``get_tIoU`` — IoU over the span from the earlier start to the
later end, IoP (intersection over the *prediction*), and for a point prediction ``[t, t]`` IoU 0
and IoP 1 when ``t`` lies in the gold span (ends included) — keeping the best IoU and the best IoP
over the gold spans (each on its own). Then, over the questions that have a predicted span (a
question without one leaves the official denominator: rule ``"answered"``; the strict numbers
count it as 0): **Acc@GQA**, the share answered right with IoP ≥ 0.5; mIoP, IoP@0.3, IoP@0.5,
mIoU, IoU@0.3, IoU@0.5, in percent; and Acc@QA, the plain answer accuracy on the same questions.
A span with IoP ≥ 0.5 and no answer counts as a wrong answer (where the official script stops
with a KeyError). The official ``gs`` mode (spans as fractions of the duration) is not read:
spans are seconds.

Predictions: ``{"<video>_<qid>": {"prediction": option, "location": [s, e]}}`` (``answer`` beside
``prediction``, as the official QA result files carry it, is the reference when given; an option
is its index or its text); the official pair of files — a ground file ``{"<video>_<qid>": [s, e]}``
passed as the predictions, with the QA results ``<split>-res.json`` (``{id: {"answer",
"prediction"}}``) beside it, as ``eval_ground.py``'s ``main`` finds them; or the runner's JSONL
(its option index, and the answer's first evidence span as the location).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
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
from vidagent.bench.predictions import check_predictions_file, is_runner_rows, read_json_rows
from vidagent.geometry import interval_iop, interval_iou

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

NAME = "nextgqa"
TITLE = "NExT-GQA"
SPLITS = ("val", "test")
DEFAULT_SPLIT = "test"
THRESHOLDS = (0.3, 0.5)
#: The question types of NExT-GQA (NExT-QA's causal and temporal ones).
TYPES = {"CW": "Why", "CH": "How", "TN": "Bef&Aft", "TC": "When", "TP": "Present"}
FORMATS = (
    '{"<video>_<qid>": {"prediction": option, "location": [s, e]}}, a ground file '
    '{"<video>_<qid>": [s, e]} with <split>-res.json beside it, or runner JSONL'
)


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """NExT-GQA questions of ``split`` with their gold spans."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    folder = next((d for d in (data, data / NAME) if (d / f"{split}.csv").is_file()), None)
    if folder is None:
        raise BenchmarkDataError(f"{split}.csv not found in {data} (nor in {data / NAME})")
    spans_file = folder / f"gsub_{split}.json"
    if not spans_file.is_file():
        raise BenchmarkDataError(f"{spans_file.name} not found beside {split}.csv in {folder}")
    try:
        spans = json.loads(spans_file.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise BenchmarkDataError(f"{spans_file}: not JSON ({e.msg}, line {e.lineno})") from None
    mapping = _video_map(folder / "map_vid_vidorID.json")
    finder = VideoRoot(video_root(data, videos, "NExTVideo", "videos"))
    samples = []
    with (folder / f"{split}.csv").open(newline="", encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            sample = _sample(row, spans, mapping, finder, split)
            if sample is not None:
                samples.append(sample)
    return LoadResult(NAME, split, tuple(samples), tuple(finder.missing))


def _sample(
    row: Mapping[str, str],
    spans: Any,
    mapping: Mapping[str, str],
    finder: VideoRoot,
    split: str,
) -> Sample | None:
    video, qid = row.get("video_id") or row.get("video"), row.get("qid")
    if not video or qid is None or "type" not in row:
        raise BenchmarkDataError("expected columns video_id, qid, type, answer, a0..a4")
    entry = spans.get(video) if isinstance(spans, dict) else None
    if not isinstance(entry, dict):
        return None  # no gold span: not a NExT-GQA question
    locations = entry.get("location", {}).get(qid)
    if not locations:
        return None  # no gold span: not a NExT-GQA question
    options = tuple(row[f"a{i}"] for i in range(5) if row.get(f"a{i}") is not None)
    answer = row.get("answer", "")
    index = options.index(answer) if answer in options else None
    sample_id = f"{video}_{qid}"
    return Sample(
        id=sample_id,
        videos=(finder.resolve(sample_id, mapping.get(video, video)),),
        question=row["question"],
        options=options,
        answer=index,
        categories=(row["type"],),
        extras={
            "type": row["type"],
            "video": video,
            "split": split,
            "duration": entry.get("duration"),
            "locations": [(float(s), float(e)) for s, e in locations],
        },
    )


def _video_map(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    return {str(k): str(v) for k, v in json.loads(path.read_text(encoding="utf-8-sig")).items()}


prompt = choice_prompt  # the question with its (A) ... option lines


def ground(location: Sequence[float], span: Sequence[float]) -> tuple[float, float]:
    """``get_tIoU(loc, span)``: IoU and IoP of the predicted ``span`` against one gold
    ``location``; a point prediction has IoU 0 and IoP 1 inside the gold span (ends included)."""
    if span[0] == span[-1]:
        return 0.0, 1.0 if location[0] <= span[0] <= location[1] else 0.0
    return interval_iou(location, (span[0], span[-1])), interval_iop((span[0], span[-1]), location)


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """Each question's best IoU and IoP over its gold spans and whether its answer is right;
    one point when it is, with IoP >= 0.5. A question without a predicted span is unanswered."""
    outcomes = []
    for s in samples:
        p = predictions.get(s.id)
        span = _span(p.get("location") if isinstance(p, dict) else p)
        right = _right(s, p)
        if span is None:
            outcomes.append(unanswered(s) if right is None else _qa_only(s, right))
            continue
        pairs = [ground(loc, span) for loc in s.extras["locations"]]
        iou = max([0.0, *(u for u, _ in pairs)])
        iop = max([0.0, *(p_ for _, p_ in pairs)])
        earned = float(bool(right) and iop >= 0.5)
        detail = {"iou": iou, "iop": iop, "qa": bool(right), "location": span}
        outcomes.append(Outcome(s.id, earned, detail=detail))
    return outcomes


def _qa_only(s: Sample, right: bool) -> Outcome:
    return Outcome(s.id, 0.0, answered=False, detail={"qa": right})


def _span(value: Any) -> tuple[float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        try:
            return float(value[0]), float(value[1])
        except (TypeError, ValueError):
            return None
    return None


def _right(s: Sample, p: Any) -> bool | None:
    """Whether the answer is right (``None``: no answer): ``answer == prediction`` as the
    official QA results compare them, an option's text read as its index."""
    if not isinstance(p, dict) or p.get("prediction") is None:
        return None
    reference, pred = p.get("answer", s.answer), p["prediction"]
    return bool(_index(s, reference) == _index(s, pred))


def _index(s: Sample, value: Any) -> Any:
    if isinstance(value, str) and value in s.options:
        return s.options.index(value)
    return value


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """Acc@GQA per type and overall over the questions with a span, and ``eval_ground``'s
    grounding numbers with Acc@QA beside them."""
    answered = [o for o in outcomes if o.answered]
    n = len(answered)

    def share(values: Sequence[float]) -> float:
        return 100.0 * sum(values) / n if n else 0.0

    iou = [float(o.detail["iou"]) for o in answered]
    iop = [float(o.detail["iop"]) for o in answered]
    extra = {
        "mIoP": share(iop),
        **{f"IoP@{m}": share([float(x >= m) for x in iop]) for m in THRESHOLDS},
        "mIoU": share(iou),
        **{f"IoU@{m}": share([float(x >= m) for x in iou]) for m in THRESHOLDS},
        "Acc@QA": share([float(o.detail["qa"]) for o in answered]),
    }
    types = tally(samples, outcomes, lambda s: s.categories, tuple(TYPES))
    return Scores(
        benchmark=NAME,
        split=split,
        metric="Acc@GQA",
        rule="answered",
        overall=overall_tally(outcomes).result("answered"),
        sections={"type": {k: g for k, g in section(types, "answered").items() if g.questions}},
        labels=TYPES,
        extra=extra,
        missing=len(outcomes) - n,
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """Combined results, the official ground file (with ``<split>-res.json`` beside it), or
    runner JSONL."""
    check_predictions_file(path)
    doc = read_json_rows(path)
    if isinstance(doc, dict) and "id" in doc and "parsed" in doc:
        doc = [doc]
    if is_runner_rows(doc):
        return from_rows(doc, samples)
    if not isinstance(doc, dict):
        raise BenchmarkDataError(f"{path}: not a predictions file; expected {FORMATS}")
    if all(not isinstance(v, dict) for v in doc.values()):  # the official ground file
        split = str(samples[0].extras.get("split", "")) if samples else ""
        qa = _qa_file(path, split)
        return {str(k): {**qa.get(str(k), {}), "location": v} for k, v in doc.items()} | {
            k: v for k, v in qa.items() if k not in doc
        }
    return {str(k): v for k, v in doc.items()}


def _qa_file(path: Path, split: str) -> dict[str, Any]:
    """``<split>-res.json`` beside a ground file (either split's when ``split`` is unknown)."""
    names = [f"{split}-res.json"] if split else [f"{s}-res.json" for s in SPLITS]
    for name in names:
        found = path.parent / name
        if found.is_file():
            doc = json.loads(found.read_text(encoding="utf-8-sig"))
            return {str(k): v for k, v in doc.items() if isinstance(v, dict)}
    return {}


def from_rows(rows: Sequence[Mapping[str, Any]], samples: Sequence[Sample]) -> dict[str, Any]:
    """Runner rows to predictions: the option index, and the answer's first evidence span
    (``[video_id, t0, t1]``) as its location."""
    out: dict[str, Any] = {}
    for r in rows:
        evidence = r.get("evidence") or []
        first = evidence[0] if evidence and isinstance(evidence[0], list) else None
        out[str(r["id"])] = {
            "prediction": r.get("parsed"),
            "location": first[1:3] if first is not None and len(first) >= 3 else None,
        }
    return out
