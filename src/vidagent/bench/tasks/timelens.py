"""TimeLens-Bench (Zhang et al., 2025): Charades-STA, ActivityNet Captions and QVHighlights
re-annotated by hand for temporal grounding.

Data (HF ``TencentARC/TimeLens-Bench``): ``<split>-timelens.json`` in ``data`` (or
``data/TimeLens-Bench``) for the splits ``charades`` (the default), ``activitynet`` and
``qvhighlights``; each is ``{video: {"duration": d, "spans": [[s, e], ...], "queries": [q, ...]}}``
with one span per query, as ``timelens/dataset/timelens_data.py`` reads it (a query is cleaned
by its ``parse_query``: runs of spaces collapsed, trailing periods dropped). Videos are
``<root>/<video>.mp4``; the root defaults to ``data/videos/<split>``.

A query's id is ``<video>_<n>``, ``n`` counting that video's queries from 0 in file order (as
for Charades-STA).

Scoring reproduces ``evaluation/compute_metrics.py``: each prediction's first ``(start, end)``
pair against the reference span by ``timelens.utils.iou`` (overlap over the span from the earlier
start to the later end; a reversed pair has none), R@1 at IoU 0.3, 0.5, 0.7 (``iou >= m``) and
mIoU, all over the entries of the predictions file (``num_annos = len(datas)``): a query the file
lacks leaves the official denominator (rule ``"answered"``), and the strict numbers count it as
IoU 0. An entry whose timestamps are empty, or whose answer text holds no time, has IoU 0 and
counts, as the official script's ``(-100, -100)`` does; a ``null`` entry (which the official
script refuses) is read the same way.

Charades beside the original: when ``charades_sta_test.txt`` (Charades-STA's own annotation,
:mod:`.charades_sta`) lies in ``data`` or ``data/Charades_anno``, the ``charades`` split's
queries whose video and cleaned sentence (ignoring case) match an original query carry its
original span, and the report adds the section ``original`` with mIoU and R@1 on those queries
both ways: against the TimeLens span and against the original one (same predictions, same
queries), so a grounding number can be read on either annotation. Re-worded queries have no
original and are left out of that section; a note says how many matched.

Several predicted spans per query, as TimeLens2 predicts them (``{"<video>_<n>": [[s, e], ...]}``
or ``{"<video>_<n>": {"spans": [[s, e], ...]}}``), score by TimeLens2's multi-span IoU
(``grpo/timelens/rewards/metrics.py``, ``iou_overlap_ratio``): the predicted spans merged, the
time they share with the gold span over the time either covers; a list of one span scores as
that span. The official files' ``timestamps`` keep ``compute_metrics.py``'s rule: the first pair.

Predictions: the official ``{"<video>.mp4>>><query>>>><span>": {"timestamps": [[s, e], ...],
"answers": text}}`` (JSON, or JSONL with one such object per line), ``{"<video>_<n>": [s, e]}``,
``{"<video>_<n>": [[s, e], ...]}`` (several spans), or the runner's JSONL with
``parsed: [s, e]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.agents.answer import GROUND_QUESTION
from vidagent.bench.base import (
    BenchmarkDataError,
    GroupScore,
    LoadResult,
    Outcome,
    Predictions,
    Sample,
    Scores,
    VideoRoot,
    check_options,
    check_split,
    overall_tally,
    unanswered,
)
from vidagent.bench.predictions import check_predictions_file, is_runner_rows, read_json_rows
from vidagent.geometry import interval_iou, intervals_iou

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

NAME = "timelens"
TITLE = "TimeLens-Bench"
SPLITS = ("charades", "activitynet", "qvhighlights")
DEFAULT_SPLIT = "charades"
THRESHOLDS = (0.3, 0.5, 0.7)
GROUNDING = True
ORIGINAL = "charades_sta_test.txt"
FORMATS = (
    '{"<video>.mp4>>><query>>>><span>": {"timestamps": [[s, e]], "answers": ...}} (JSON or '
    'JSONL), {"<video>_<n>": [start, end]}, or runner JSONL'
)


def parse_query(query: str) -> str:
    """The official ``parse_query``: spaces collapsed, surrounding spaces and periods dropped."""
    return re.sub(r"\s+", " ", query).strip().strip(".").strip()


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """The queries of one TimeLens-Bench split."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    name = f"{split}-timelens.json"
    path = next((p for p in (data / name, data / "TimeLens-Bench" / name) if p.is_file()), None)
    if path is None:
        raise BenchmarkDataError(f"{name} not found in {data} (nor in {data}/TimeLens-Bench)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        raise BenchmarkDataError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(doc, dict):
        raise BenchmarkDataError(f"{path}: expected {{video: {{duration, spans, queries}}}}")
    root = Path(videos).expanduser() if videos is not None else path.parent / "videos" / split
    finder = VideoRoot(root)
    original = _original(data) if split == "charades" else {}
    samples = []
    for video, entry in doc.items():
        try:
            pairs = list(zip(entry["spans"], entry["queries"], strict=True))
            duration = float(entry["duration"])
            spans = [(float(s[0]), float(s[1])) for s, _ in pairs]
        except (KeyError, TypeError, ValueError, IndexError):
            raise BenchmarkDataError(
                f"{path}, video {video}: expected duration, and spans and queries of equal length"
            ) from None
        for n, ((_, query), span) in enumerate(zip(pairs, spans, strict=True)):
            sid = f"{video}_{n}"
            text = parse_query(str(query))
            extras: dict[str, Any] = {"video": video, "duration": duration}
            if (video, text.casefold()) in original:
                extras["original_span"] = original[(video, text.casefold())]
            samples.append(
                Sample(
                    id=sid,
                    videos=(finder.resolve(sid, video),),
                    question=text,
                    answer=span,
                    task="interval",
                    extras=extras,
                )
            )
    notes: tuple[str, ...] = ()
    if original:
        matched = sum("original_span" in s.extras for s in samples)
        notes = (f"{matched} of {len(samples)} queries match a Charades-STA test query",)
    return LoadResult(NAME, split, tuple(samples), tuple(finder.missing), notes)


def _original(data: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """Charades-STA's test spans by (video, cleaned sentence in lower case), when the file is
    there; a sentence asked twice of a video keeps its first span."""
    path = next(
        (p for p in (data / ORIGINAL, data / "Charades_anno" / ORIGINAL) if p.is_file()), None
    )
    out: dict[tuple[str, str], tuple[float, float]] = {}
    if path is None:
        return out
    for n, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        head, sep, sentence = line.partition("##")
        fields = head.split()
        if not line.strip():
            continue
        try:
            key = (fields[0], parse_query(sentence).casefold())
            span = (float(fields[1]), float(fields[2]))
        except (IndexError, ValueError):
            raise BenchmarkDataError(
                f"{path}, line {n}: expected 'video start end##sentence'"
            ) from None
        if sep:
            out.setdefault(key, span)
    return out


def prompt(sample: Sample) -> str:
    """Ask for the moment the query describes, as start and end seconds."""
    return GROUND_QUESTION.format(event=sample.question)


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """Each entry's IoU with the reference span; an absent query is unanswered."""
    outcomes = []
    for s in samples:
        if s.id not in predictions:
            outcomes.append(unanswered(s))
            continue
        spans = predicted_spans(predictions[s.id])
        gold = s.answer if isinstance(s.answer, tuple) else None
        iou = spans_iou(spans, gold) if spans and gold else 0.0
        detail: dict[str, Any] = {"prediction": spans[0] if spans else None, "iou": iou}
        if spans and len(spans) > 1:
            detail["spans"] = spans
        original = s.extras.get("original_span")
        if original is not None:
            detail["original_iou"] = spans_iou(spans, original) if spans else 0.0
        outcomes.append(Outcome(s.id, iou, detail=detail))
    return outcomes


def predicted_spans(value: Any) -> list[tuple[float, float]] | None:
    """The spans a prediction names: several as TimeLens2 predicts them (``[[s, e], ...]``, or
    ``{"spans": [[s, e], ...]}``), else the one :func:`first_pair` reads; ``None``: none."""
    if isinstance(value, dict) and "spans" in value:
        value = value["spans"]
    if isinstance(value, (list, tuple)) and value and all(_is_pair(v) for v in value):
        return [(float(v[0]), float(v[1])) for v in value]
    pair = first_pair(value)
    return [pair] if pair is not None else None


def _is_pair(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
    )


def spans_iou(spans: Sequence[tuple[float, float]], gold: Sequence[float]) -> float:
    """One span: its IoU with the gold span (``compute_metrics.py``); several: TimeLens2's
    multi-span IoU (``grpo/timelens/rewards/metrics.py`` ``iou_overlap_ratio``): the predicted
    spans merged, the time they share with the gold span over the time either covers."""
    if len(spans) == 1:
        return interval_iou(spans[0], gold)
    return intervals_iou(spans, [gold])


def first_pair(value: Any) -> tuple[float, float] | None:
    """The pair the official script scores: the first of ``timestamps``, else the first read
    from ``answers`` by :func:`extract_time`; ``[s, e]`` as it is; ``None`` when there is none."""
    if isinstance(value, dict):
        if "timestamps" in value:
            pairs = value["timestamps"]
        elif "answers" in value:
            pairs = extract_time(str(value["answers"]))
        else:
            return None
        value = pairs[0] if isinstance(pairs, (list, tuple)) and pairs else None
    if isinstance(value, (list, tuple)) and len(value) == 2:
        try:
            return float(value[0]), float(value[1])
        except (TypeError, ValueError):
            return None
    return None


_CLOCK = re.compile(r"\b(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?|\d{1,2}:\d{2}(?:\.\d+)?)\b")
_RANGES = (
    re.compile(r"(\d+\.?\d*)\s*-\s*(\d+\.?\d*)"),
    re.compile(r"(\d+\.?\d*)\s+to\s+(\d+\.?\d*)"),
)
_NUMBER = re.compile(r"\b(\d+\.\d+|\d+)\b")


def extract_time(paragraph: str) -> list[tuple[float, float]]:
    """Time pairs in an answer, by the rules of ``timelens.utils.extract_time``: clock times
    (``MM:SS``, ``HH:MM:SS``) taken in pairs; else ``a - b`` or ``a to b``; else any numbers,
    taken in pairs."""
    text = paragraph.lower()
    clocks = _CLOCK.findall(text)
    clocks = clocks[: len(clocks) // 2 * 2]
    if clocks:
        secs = [_clock_seconds(t) for t in clocks]
        return [(secs[i], secs[i + 1]) for i in range(0, len(secs), 2)]
    for pattern in _RANGES:
        found = pattern.findall(text)
        if found:
            return [(float(a), float(b)) for a, b in found]
    numbers = _NUMBER.findall(text)
    numbers = numbers[: len(numbers) // 2 * 2]
    return [(float(numbers[i]), float(numbers[i + 1])) for i in range(0, len(numbers), 2)]


def _clock_seconds(t: str) -> float:
    parts = t.split(":")
    if len(parts) == 3:
        return int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])
    return int(parts[0]) * 60 + float(parts[1])


def _recalls(ious: Sequence[float], n: int, prefix: str = "") -> dict[str, float]:
    return {
        f"{prefix}R@1 IoU={m}": 100.0 * sum(i >= m for i in ious) / n if n else 0.0
        for m in THRESHOLDS
    }


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """mIoU and R@1 at IoU 0.3/0.5/0.7 over the file's entries (the strict mIoU over every
    query beside it), and the same queries on the original Charades-STA spans where known."""
    answered = [o for o in outcomes if o.answered]
    extra = _recalls([o.earned for o in answered], len(answered))
    sections: dict[str, dict[str, GroupScore]] = {}
    both = [(s, o) for s, o in zip(samples, outcomes, strict=True) if "original_span" in s.extras]
    if both:
        rows = {
            "TimeLens spans": [o.earned for _, o in both],
            "Charades-STA spans": [o.detail.get("original_iou", 0.0) for _, o in both],
        }
        got = sum(o.answered for _, o in both)
        sections["original"] = {}
        for name, ious in rows.items():
            answered_ious = [i for i, (_, o) in zip(ious, both, strict=True) if o.answered]
            sections["original"][name] = GroupScore(
                100.0 * sum(answered_ious) / got if got else 0.0,
                100.0 * sum(ious) / len(both),
                len(both),
                got,
            )
            label = "TimeLens" if name.startswith("TimeLens") else "Charades-STA"
            extra |= _recalls(answered_ious, got, f"{label} spans, same queries: ")
    return Scores(
        benchmark=NAME,
        split=split,
        metric="mIoU",
        rule="answered",
        overall=overall_tally(outcomes).result("answered"),
        sections=sections,
        extra=extra,
        missing=len(outcomes) - len(answered),
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """The official results (JSON or JSONL), ``{id: [s, e]}``, or runner JSONL."""
    check_predictions_file(path)
    doc = read_json_rows(path)
    if isinstance(doc, dict) and "id" in doc and "parsed" in doc:
        doc = [doc]  # a JSONL file of one row reads as one JSON object
    if is_runner_rows(doc):
        return {str(r["id"]): _listed(r["parsed"]) for r in doc}
    if isinstance(doc, list) and all(isinstance(r, dict) for r in doc):
        merged: dict[str, Any] = {}
        for r in doc:  # the official JSONL: one {key: entry} per line, merged
            merged.update(r)
        doc = merged
    if not isinstance(doc, dict):
        raise BenchmarkDataError(f"{path}: not a predictions file; expected {FORMATS}")
    if any(">>>" in str(k) for k in doc):
        return _official(path, doc, samples)
    return {str(k): _listed(v) for k, v in doc.items()}


def _listed(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _official(path: Path, doc: dict[str, Any], samples: Sequence[Sample]) -> dict[str, Any]:
    """Official keys ``<video>.mp4>>><query>>>><span>`` to query ids: by video, cleaned query
    and span (the key's span is the reference the official script scores against)."""
    by_key: dict[tuple[str, str], list[Sample]] = {}
    for s in samples:
        by_key.setdefault((str(s.extras.get("video")), s.question), []).append(s)
    out: dict[str, Any] = {}
    for key, entry in doc.items():
        parts = str(key).split(">>>")
        if len(parts) != 3:
            raise BenchmarkDataError(f"{path}: key {key!r} is not '<video>>>><query>>>><span>'")
        video, query, span_text = parts
        if entry is not None and not isinstance(entry, dict):
            raise BenchmarkDataError(f"{path}: entry {key!r} is not {{timestamps or answers}}")
        span = _span(span_text)
        candidates = by_key.get((Path(video).stem, parse_query(query)), [])
        match = next(
            (s for s in candidates if span is not None and _same(s.answer, span)),
            candidates[0] if len(candidates) == 1 else None,
        )
        # An unmatched key is kept under its own name: evaluate() counts it as unknown.
        out[match.id if match is not None else str(key)] = entry
    return out


def _span(text: str) -> tuple[float, float] | None:
    try:
        value = json.loads(text.strip().replace("(", "[").replace(")", "]"))
        return float(value[0]), float(value[1])
    except (json.JSONDecodeError, TypeError, ValueError, IndexError, KeyError):
        return None


def _same(a: Any, b: tuple[float, float]) -> bool:
    return isinstance(a, tuple) and abs(a[0] - b[0]) < 1e-6 and abs(a[1] - b[1]) < 1e-6
