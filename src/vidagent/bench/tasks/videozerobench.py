"""VideoZeroBench (Meng et al., 2026): long-video questions answered with spatio-temporal evidence.

Data (HF ``marinero4972/VideoZeroBench``): ``VideoZeroBench_500_v0.tsv`` (VLMEvalKit's table) or
``VideoZeroBench_500_v0.json`` (a list of the same records) in ``data``, one question per row
with ``question_id`` (the TSV's ``index`` where it has no ``question_id``), ``video`` (a path
under the video root), ``question``, ``answer`` (a short free-text answer: a number, a word, a
phrase, or Chinese text), ``language`` (``en``/``cn``), ``category`` (one of 13 domains),
``evidence_windows`` (``[{"start": s, "end": e}, ...]`` in seconds) and ``evidence_boxes``
(``[{"time": t, "box": [x1, y1, x2, y2]}, ...]``, fractions of the frame). In the TSV the two
evidence columns are JSON text. Videos are ``<root>/<video>``; the root defaults to
``data/compressed`` (the unpacked ``compressed.zip``), else ``data/videos``.

Splits: ``all`` (the default) asks each question plainly (the Level-3 prompt, :func:`prompt`);
``level-2`` and ``level-1`` ask the same questions with the official hints in the prompt (the
gold windows; the gold windows and boxes), so that a run can answer Levels 1-2. A plain answer
(runner row, or ``{id: text}``) counts at its split's level.

Five levels, scored as the official ``VideoZeroBench.evaluate`` scores them
(``eval/VLMEvalKit-lite/vlmeval/dataset/VideoBench/videozerobench.py``):

- Level-1, Level-2, Level-3: answer accuracy when the question is asked with the gold temporal
  and spatial evidence given as hints (1), with the temporal hint only (2), and plain (3, the
  standard QA number). An answer is right by the official ``is_correct``: a ``<answer>`` tag's
  content if any, code fences and surrounding quotes/trailing periods stripped; a numeric
  reference must be equal as text (``"6"`` is not ``"six"``); a reference with Latin letters
  equal ignoring case; Chinese colours by containment of the answer in the reference.
- Level-4: the predicted evidence windows' temporal IoU with the gold windows (both merged,
  total overlap over total union); a question passes when Level-3 is right and tIoU > 0.3.
  Windows are read from the answer text as the official ``parse_pred_windows`` reads them
  (``From <a seconds> to <b seconds>``, ``a - b``, ``MM:SS``; pairs with ``b <= a`` dropped).
- Level-5: the predicted boxes' visual IoU at each gold key time (union areas, averaged over the
  key times); a question passes when Level-3 is right, tIoU > 0.3 and vIoU > 0.3.

Every number's denominator is as the official one: accuracies and Level-4/5 scores over every
scored row (a row whose prediction is empty counts wrong), mean tIoU over the rows that have gold
windows, mean vIoU over those with gold boxes. A question with no gold windows has tIoU 0, so it
can never pass Level-4 or 5 (the official rule, kept). The official rows are the questions in
the predictions file (rule ``"answered"``); the strict numbers count absent questions as wrong.

Predictions (``read_predictions``), by question id:

- The official result rows: a JSON list/JSONL of ``{"question_id" or "index", "prediction"}`` or
  a TSV/CSV with ``index`` and ``prediction`` columns (VLMEvalKit's result table exported), the
  ``prediction`` being the JSON the official ``inference`` writes:
  ``{"level-1": {"model_answer": text, ...}, ..., "level-5": {...}}``. Also ``{id: that}``.
- Ours: ``{id: {"answer": text, "windows": [[s, e], ...], "boxes": [{"time": t, "bbox_2d":
  [[x1, y1, x2, y2], ...]}], "level-1": text, "level-2": text}}``, boxes in fractions of the frame
  (every key but ``answer`` optional).
- The runner's JSONL: ``parsed`` is the answer at the split's level; in an ``all`` run,
  ``evidence`` (the answer's spans, ``[[video, t0, t1], ...]``) gives the Level-4 windows and
  ``boxes`` (in our form) the Level-5 boxes (a hinted run was given them, so they are not read).

Decisions where the official code is silent or depends on the model: an official level-5 answer
is read with the box convention its ``box_type`` key names (``normalized 0-1000``,
``normalized 0-1``, or ``absolute`` with the entry's ``resized_hw``), Qwen3-VL's ``normalized
0-1000`` when it names none (the official evaluator takes it from the model it ran). Our agents
are asked the Level-3 question once; their Level-4 windows are the spans their answer rests on,
not a second, grounding-only question as the official Level-4 prompt asks. No strategy gives
boxes, so Level-5 is 0 for every strategy's run (the report says so). A level no prediction
answers is not reported (a plain run has no Levels 1-2; a hinted run has only its level).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    section,
    tally,
    unanswered,
    video_root,
)
from vidagent.bench.predictions import check_predictions_file, read_json_rows
from vidagent.geometry import intervals_iou

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

NAME = "videozerobench"
TITLE = "VideoZeroBench"
#: ``all`` asks the plain (Level-3) question; ``level-1`` and ``level-2`` ask the same questions
#: with the official hints (gold temporal and spatial evidence, or temporal only) in the prompt.
SPLITS = ("all", "level-1", "level-2")
DEFAULT_SPLIT = "all"
LEVELS = ("level-1", "level-2", "level-3", "level-4", "level-5")
#: The box conventions of the official level-5 answers (``VideoZeroBench.box_type``).
BOX_TYPES = ("normalized 0-1000", "normalized 0-1", "absolute")
DEFAULT_BOX_TYPE = "normalized 0-1000"
#: A question passes Level-4 above this tIoU, Level-5 above it in tIoU and vIoU.
THRESHOLD = 0.3
FILES = ("VideoZeroBench_500_v0.tsv", "VideoZeroBench_500_v0.json")
FORMATS = (
    'official result rows [{"question_id"|"index": ..., "prediction": {"level-1": '
    '{"model_answer": ...}, ...}}] (JSON, JSONL, TSV), {"<id>": {"answer": ..., "windows": '
    '[[s, e]], "boxes": [...]}}, or runner JSONL'
)

#: The official Level-3 instruction after the question (``build_prompt``, no thinking).
ANSWER_DIRECTLY = {
    "en": "\nPlease directly output the final answer.",
    "cn": "\n请直接输出问题的最终答案。",
}

Window = tuple[float, float]
BoxMap = dict[float, list[list[float]]]


# ---------------------------------------------------------------------------------------------
# Loading


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """Every VideoZeroBench question, from the TSV or the JSON release."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    path = next((data / name for name in FILES if (data / name).is_file()), None)
    if path is None:
        raise BenchmarkDataError(f"{FILES[0]} (or {FILES[1]}) not found in {data}")
    records = _records(path)
    finder = VideoRoot(video_root(data, videos, "compressed", "videos"))
    samples = []
    for n, record in enumerate(records, 1):
        qid = record.get("question_id", record.get("index"))
        video, question = record.get("video"), record.get("question")
        if qid in (None, "") or not video or question is None:
            raise BenchmarkDataError(
                f"{path}, question {n}: needs question_id (or index), video and question"
            )
        sid = str(qid)
        samples.append(
            Sample(
                id=sid,
                videos=(finder.resolve(sid, str(video)),),
                question=str(question).strip(),
                answer=None if record.get("answer") is None else str(record["answer"]),
                categories=(str(record.get("category") or "unknown"),),
                task="open",
                extras={
                    "level": "level-3" if split == "all" else split,
                    "language": str(record.get("language") or "en"),
                    "hint_boxes": _box_list(record.get("evidence_boxes")),
                    "windows": gold_windows(record.get("evidence_windows")),
                    "boxes": gold_boxes(record.get("evidence_boxes")),
                    "capabilities": _json_field(record.get("annotation_capabilities"), []),
                },
            )
        )
    return LoadResult(NAME, split, tuple(samples), tuple(finder.missing))


def _records(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise BenchmarkDataError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
        if isinstance(doc, dict):  # {question_id: record}
            doc = [{"question_id": k, **v} for k, v in doc.items() if isinstance(v, dict)]
        if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
            raise BenchmarkDataError(f"{path}: expected a list of question records")
        return doc
    rows = list(csv.DictReader(text.splitlines(), delimiter="\t"))
    if not rows or "question" not in rows[0]:
        raise BenchmarkDataError(f"{path}: expected a tab-separated table with a question column")
    return rows


def _json_field(value: Any, default: Any) -> Any:
    """The official ``parse_json_field``: lists and dicts as they are, JSON text parsed."""
    if isinstance(value, (list, dict)):
        return value
    if isinstance(value, str) and value.strip():
        try:
            return json.loads(value.strip())
        except json.JSONDecodeError:
            return default
    return default


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def gold_windows(value: Any) -> tuple[Window, ...]:
    """The official ``extract_gt_windows``: ``{start, end}`` items with ``end > start``."""
    out = []
    items = _json_field(value, [])
    for w in items if isinstance(items, list) else []:
        if isinstance(w, dict):
            s, e = _float(w.get("start")), _float(w.get("end"))
            if s is not None and e is not None and e > s:
                out.append((s, e))
    return tuple(out)


def gold_boxes(value: Any) -> BoxMap:
    """The official ``extract_gt_boxes_by_time``: boxes by key time rounded to 0.01 s."""
    out: BoxMap = {}
    items = _json_field(value, [])
    for b in items if isinstance(items, list) else []:
        if not isinstance(b, dict):
            continue
        t, box = _float(b.get("time")), b.get("box")
        if t is None or not (isinstance(box, list) and len(box) == 4):
            continue
        try:
            coords = [float(v) for v in box]
        except (TypeError, ValueError):
            continue
        out.setdefault(round(t, 2), []).append(coords)
    return out


def _box_list(value: Any) -> tuple[tuple[float, tuple[float, ...]], ...]:
    """The gold boxes in file order, as the official hint lists them."""
    items = _json_field(value, [])
    out = []
    for b in items if isinstance(items, list) else []:
        t = _float(b.get("time")) if isinstance(b, dict) else None
        box = b.get("box") if isinstance(b, dict) else None
        if t is not None and isinstance(box, list) and len(box) == 4:
            try:
                out.append((t, tuple(float(v) for v in box)))
            except (TypeError, ValueError):
                continue
    return tuple(out)


def prompt(sample: Sample) -> str:
    """The official QA question of the sample's level (``build_user_prompt_qa``): ``Question:
    ...``, at Level-2 the gold windows and at Level-1 also the gold boxes as hints (boxes in
    the ``normalized 0-1`` convention, the fractions our tools use), then the answer-directly
    instruction."""
    level = sample.extras.get("level", "level-3")
    lines = [f"Question: {sample.question}"]
    windows = sample.extras.get("windows", ())
    if level in ("level-1", "level-2") and windows:
        parts = [f"From <{s:.2f} seconds> to <{e:.2f} seconds>" for s, e in windows]
        lines.append(
            "The temporal evidence for answering the question is: " + "; ".join(parts) + "."
        )
    boxes = sample.extras.get("hint_boxes", ())
    if level == "level-1" and boxes:
        parts = [
            f"Time=<{t:.2f} seconds>, Normalized Box=[{b[0]:.4f},{b[1]:.4f},{b[2]:.4f},{b[3]:.4f}]"
            for t, b in boxes
        ]
        lines.append(
            "The spatial evidence for answering the question is: " + "; ".join(parts) + "."
        )
    language = "cn" if sample.extras.get("language") == "cn" else "en"
    return "\n".join(lines) + ANSWER_DIRECTLY[language]


# ---------------------------------------------------------------------------------------------
# The official rules


def _strip_fence(s: Any) -> str:
    if s is None:
        return ""
    text = str(s)
    m = re.search(
        r"```(?:json|python|bash|text)?\s*\n(.*?)\n```", text, flags=re.IGNORECASE | re.DOTALL
    )
    return (m.group(1) if m else text).strip()


def _norm(s: Any) -> str:
    if s is None:
        return ""
    return re.sub(r'^[\s"\'“”‘’]+|[\s"\'“”‘’\.\。]+$', "", _strip_fence(s).strip())


def is_correct(gold: Any, pred: Any) -> bool:
    """The official ``is_correct`` (see the module docstring)."""
    if pred is None:
        return False
    m = re.search(r"<answer>\s*(.*?)\s*</answer>", str(pred), flags=re.IGNORECASE | re.DOTALL)
    if m:
        pred = m.group(1)
    g, p = _norm(gold), _norm(pred)
    if not g:
        return False
    if re.fullmatch(r"\d+", g) is not None:
        return p == g
    if re.search(r"[A-Za-z]", g):
        return g.lower() == p.lower()
    if "色" in g:
        return p in g
    if g == "车":
        return g in p
    return g == p


_TIME_TOKEN = r"(?:\d+:\d{2}(?:\.\d+)?|\d+(?:\.\d+)?)"
_FROM_TO = re.compile(
    rf"(?is)\b(?:from\s+)?({_TIME_TOKEN})\s*(?:[^\d:]+)?\s*to\s*({_TIME_TOKEN})\b"
)
_DASH = re.compile(rf"(?is)\b({_TIME_TOKEN})\s*[-–—~]\s*({_TIME_TOKEN})\b")


def _time_token(token: str) -> float | None:
    t = token.strip()
    if ":" in t:
        m = re.fullmatch(r"(\d+)\s*:\s*(\d{2})(?:\.(\d+))?", t)
        if not m or int(m.group(2)) >= 60:
            return None
        value = int(m.group(1)) * 60 + int(m.group(2))
        return float(value) + (float("0." + m.group(3)) if m.group(3) else 0.0)
    return float(t) if re.fullmatch(r"\d+(?:\.\d+)?", t) else None


def parse_windows(text: Any) -> list[Window] | None:
    """The official ``parse_pred_windows``: every ``from a to b`` pair, then every ``a - b``
    pair, with ``b > a``; ``None`` when there is none."""
    body = re.sub(r"[<>]", "", _strip_fence(text).strip()) if text is not None else ""
    if not body:
        return None
    out: list[Window] = []
    for pattern in (_FROM_TO, _DASH):
        for m in pattern.finditer(body):
            a, b = _time_token(m.group(1)), _time_token(m.group(2))
            if a is not None and b is not None and b > a:
                out.append((a, b))
    return out or None


def tiou(gold: Sequence[Window], pred: Sequence[Window]) -> float:
    """The official ``tiou_multi``: merged windows' total overlap over their total union."""
    return intervals_iou(gold, pred)


def parse_boxes(
    text: Any, box_type: str = DEFAULT_BOX_TYPE, frame_size: Sequence[Any] | None = None
) -> BoxMap | None:
    """The official ``parse_pred_spatial_json``: ``[{"time": t, "bbox_2d": [[...], ...]}]`` to
    boxes (fractions of the frame) by time rounded to 0.01 s; ``None`` when any item is
    malformed."""
    body = _strip_fence(text) if text is not None else ""
    if not body:
        return None
    if body[0] == "{" and body[-1] == "}":
        body = "[" + body + "]"
    try:
        items = json.loads(body)
    except json.JSONDecodeError:
        return None
    # The official answer names its boxes "bbox_2d" only; an item with "box" reads as nothing.
    if isinstance(items, list) and any(isinstance(i, dict) and "bbox_2d" not in i for i in items):
        return None
    return box_items(items, box_type, frame_size)


def box_items(
    items: Any, box_type: str = "normalized 0-1", frame_size: Sequence[Any] | None = None
) -> BoxMap | None:
    """Parsed ``{"time", "bbox_2d"}`` items to boxes by time, by the official rules."""
    if not isinstance(items, list):
        return None
    out: BoxMap = {}
    for item in items:
        if not isinstance(item, dict):
            return None
        t, boxes = _float(item.get("time")), item.get("bbox_2d", item.get("box"))
        if t is None or not isinstance(boxes, list) or not boxes:
            return None
        if isinstance(boxes[0], list):
            raw = boxes
        elif len(boxes) == 4:
            raw = [boxes]
        else:
            return None
        parsed = []
        for b in raw:
            if not (isinstance(b, list) and len(b) == 4):
                return None
            scaled = _scale(b, box_type, frame_size)
            if scaled is None:
                return None
            parsed.append(scaled)
        out[round(t, 2)] = parsed
    return out


def _scale(b: list[Any], box_type: str, frame_size: Sequence[Any] | None) -> list[float] | None:
    try:
        v = [float(x) for x in b]
        if box_type == "normalized 0-1":
            return v
        if box_type == "normalized 0-1000":
            return [x / 1000.0 for x in v]
        if box_type == "absolute" and frame_size is not None:
            h, w = float(frame_size[0]), float(frame_size[1])
            return [v[0] / w, v[1] / h, v[2] / w, v[3] / h]
    except (TypeError, ValueError, ZeroDivisionError, IndexError):
        return None
    return None


Rect = tuple[float, float, float, float]


def _rect(box: Sequence[float]) -> Rect | None:
    if len(box) != 4:
        return None
    x1, y1, x2, y2 = (max(0.0, min(1.0, float(v))) for v in box)
    return (x1, y1, x2, y2) if x2 > x1 and y2 > y1 else None


def union_area(rects: Sequence[Rect]) -> float:
    """The area covered by ``rects`` (the official sweep over x, merging y spans)."""
    xs = sorted({r[0] for r in rects} | {r[2] for r in rects})
    area = 0.0
    for left, right in itertools.pairwise(xs):
        spans = sorted((r[1], r[3]) for r in rects if r[0] < right and r[2] > left)
        if not spans:
            continue
        covered, (cs, ce) = 0.0, spans[0]
        for s, e in spans[1:]:
            if s <= ce:
                ce = max(ce, e)
            else:
                covered += ce - cs
                cs, ce = s, e
        area += (right - left) * (covered + ce - cs)
    return area


def viou_at(gold: Sequence[Sequence[float]], pred: Sequence[Sequence[float]]) -> float:
    """The official ``viou_for_time``: union-area IoU of one key time's boxes."""
    g = [r for r in map(_rect, gold) if r is not None]
    if not g:
        return 1.0
    p = [r for r in map(_rect, pred) if r is not None]
    if not p:
        return 0.0
    inter = []
    for a in g:
        for b in p:
            r = (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))
            if r[2] > r[0] and r[3] > r[1]:
                inter.append(r)
    i = union_area(inter)
    union = union_area(g) + union_area(p) - i
    return i / union if union > 0 else 0.0


def viou(gold: BoxMap, pred: BoxMap | None) -> float:
    """The official ``viou_avg``: the mean over the gold key times (a time with no predicted
    box scores 0)."""
    if not gold:
        return 1.0
    if pred is None:
        return 0.0
    return sum(viou_at(gold[t], pred[t]) if pred.get(t) else 0.0 for t in sorted(gold)) / len(gold)


# ---------------------------------------------------------------------------------------------
# Predictions and scores


@dataclass(frozen=True)
class Levels:
    """One question's prediction at every level.

    Attributes:
        answers: ``"level-1"``..``"level-3"`` -> the answer text as written (absent: not asked).
        windows: the Level-4 answer text, or windows already read as ``(start, end)`` pairs.
        boxes: the Level-5 answer text (read with ``box_type``), or boxes by time (fractions).
        box_type: the convention of a Level-5 answer text.
        frame_size: ``(height, width)`` for ``absolute`` boxes (the official ``resized_hw``).
    """

    answers: Mapping[str, Any] = field(default_factory=dict)
    windows: str | Sequence[Window] | None = None
    boxes: str | BoxMap | None = None
    box_type: str = DEFAULT_BOX_TYPE
    frame_size: Sequence[Any] | None = None

    def pred_windows(self) -> list[Window] | None:
        if isinstance(self.windows, str) or self.windows is None:
            return parse_windows(self.windows)
        return [w for w in self.windows if w[1] > w[0]] or None

    def pred_boxes(self) -> BoxMap | None:
        if isinstance(self.boxes, str) or self.boxes is None:
            return parse_boxes(self.boxes, self.box_type, self.frame_size)
        return self.boxes


def as_levels(value: Any, level: str = "level-3") -> Levels:
    """A prediction value as :class:`Levels`: text (or anything not a dict) is the answer at
    ``level`` (the sample's); an official ``{"level-N": {"model_answer": ...}}`` dict or our ``{"answer",
    "windows", "boxes"}`` dict gives each level it has."""
    if isinstance(value, Levels):
        return value
    if isinstance(value, str):
        value = value.strip()
        if value.startswith("{"):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                return Levels({level: value})
        else:
            return Levels({level: value})
    if not isinstance(value, dict):
        return Levels({level: value})
    if any(k in value for k in LEVELS):
        return _official(value)
    answers = {"level-3": value.get("answer")}
    answers |= {k: value[k] for k in ("level-1", "level-2") if k in value}
    windows = value.get("windows")
    boxes = value.get("boxes")
    return Levels(
        answers,
        None if windows is None else _pairs(windows),
        None if boxes is None else box_items(boxes, "normalized 0-1"),
        "normalized 0-1",
    )


def _official(value: Mapping[str, Any]) -> Levels:
    def answer(level: str) -> Any:
        entry = value.get(level)
        return entry.get("model_answer") if isinstance(entry, dict) else None

    entry = value.get("level-5")
    l5: Mapping[str, Any] = entry if isinstance(entry, dict) else {}
    box_type = str(l5.get("box_type") or value.get("box_type") or DEFAULT_BOX_TYPE)
    if box_type not in BOX_TYPES:
        raise BenchmarkDataError(f"unknown box_type {box_type!r}; one of: {', '.join(BOX_TYPES)}")
    answers = {k: answer(k) for k in ("level-1", "level-2", "level-3")}
    return Levels(answers, answer("level-4"), answer("level-5"), box_type, l5.get("resized_hw"))


def _pairs(windows: Any) -> list[Window]:
    out = []
    for w in windows if isinstance(windows, list) else []:
        if isinstance(w, (list, tuple)) and len(w) >= 2:
            s, e = _float(w[-2]), _float(w[-1])  # [s, e] or the runner's [video, t0, t1]
            if s is not None and e is not None:
                out.append((s, e))
    return out


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """Correctness at the sample's level (Level-3 for ``all``) as the points; every level's
    result in the outcome's detail."""
    outcomes = []
    for s in samples:
        if s.id not in predictions:
            outcomes.append(unanswered(s))
            continue
        level = s.extras.get("level", "level-3")
        p = as_levels(predictions[s.id], level)
        acc = {k: float(is_correct(s.answer, p.answers.get(k))) for k in ("level-1", "level-2")}
        acc["level-3"] = float(is_correct(s.answer, p.answers.get("level-3")))
        gold_w: tuple[Window, ...] = s.extras.get("windows", ())
        gold_b: BoxMap = s.extras.get("boxes", {})
        windows = p.pred_windows() if gold_w else None
        t = tiou(gold_w, windows) if gold_w and windows is not None else 0.0
        v = 0.0
        if gold_b:
            pred_b = p.pred_boxes()
            v = viou(gold_b, pred_b) if pred_b is not None else 0.0
        detail = {
            "acc": acc,
            "asked": tuple(k for k in LEVELS[:3] if k in p.answers),
            "tiou": t,
            "viou": v,
            "level-4": float(acc["level-3"] > 0 and t > THRESHOLD),
            "level-5": float(acc["level-3"] > 0 and t > THRESHOLD and v > THRESHOLD),
            "boxes_given": p.boxes is not None,
            "prediction": p.answers.get("level-3"),
        }
        outcomes.append(Outcome(s.id, acc[level], detail=detail))
    return outcomes


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """The asked level's accuracy as the headline (Level-3 for ``all``), each level's score, the
    official metrics by their official names, and the headline per domain. A level no
    prediction answers is not reported (Levels 4-5 need Level-3)."""
    scored = [(s, o) for s, o in zip(samples, outcomes, strict=True) if o.answered]
    n, total = len(scored), len(outcomes)
    asked = {k for _, o in scored for k in o.detail.get("asked", ())}
    headline = samples[0].extras.get("level", "level-3") if samples else "level-3"
    asked.add(headline)
    if "level-3" in asked:
        asked |= {"level-4", "level-5"}
    levels: dict[str, GroupScore] = {}
    for k in LEVELS:
        if k not in asked:
            continue
        got = sum(_level_points(o, k) for _, o in scored)
        levels[k.capitalize()] = GroupScore(
            100.0 * got / n if n else 0.0, 100.0 * got / total if total else 0.0, total, n
        )
    with_w = [o for s, o in scored if s.extras.get("windows")]
    with_b = [o for s, o in scored if s.extras.get("boxes")]
    official = {
        f"{k}_acc": levels[k].score for k in ("Level-1", "Level-2", "Level-3") if k in levels
    }
    if "level-3" in asked:
        official |= {
            "Level-4_mean_tIoU": 100.0 * sum(o.detail["tiou"] for o in with_w) / len(with_w)
            if with_w
            else 0.0,
            "Level-4_score": levels["Level-4"].score,
            "Level-5_mean_vIoU": 100.0 * sum(o.detail["viou"] for o in with_b) / len(with_b)
            if with_b
            else 0.0,
            "Level-5_score": levels["Level-5"].score,
        }
    notes = []
    missed = [k.capitalize() for k in LEVELS if k not in asked]
    if missed:
        notes.append(f"not asked, so not reported: {', '.join(missed)}")
    if "level-3" in asked and with_b and not any(o.detail["boxes_given"] for o in with_b):
        notes.append("no prediction gives evidence boxes, so Level-5 cannot be reached")
    categories = tally(samples, outcomes, lambda s: s.categories)
    return Scores(
        benchmark=NAME,
        split=split,
        metric=f"{headline.capitalize()} accuracy",
        rule="answered",
        overall=overall_tally(outcomes).result("answered"),
        sections={"level": levels, "category": section(categories, "answered")},
        extra=official,
        missing=total - n,
        notes=tuple(notes),
    )


def _level_points(o: Outcome, level: str) -> float:
    if level in ("level-4", "level-5"):
        return float(o.detail[level])
    return float(o.detail["acc"][level])


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """Official result rows (JSON, JSONL, TSV/CSV), ``{id: levels}``, or runner JSONL."""
    check_predictions_file(path)
    if path.suffix.lower() in (".tsv", ".csv"):
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        with path.open(newline="", encoding="utf-8-sig") as f:
            rows: Any = list(csv.DictReader(f, delimiter=delimiter))
    else:
        rows = read_json_rows(path)
    if isinstance(rows, dict) and ("parsed" in rows or "prediction" in rows):
        rows = [rows]  # a JSONL file of one row reads as one JSON object
    if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
        if all("id" in r and "parsed" in r for r in rows):
            return from_rows(rows, samples)
        if all("prediction" in r and _row_id(r) is not None for r in rows):
            return {str(_row_id(r)): _cell(r["prediction"]) for r in rows}
    if isinstance(rows, dict):
        return {str(k): None if v is None else as_levels(v) for k, v in rows.items()}
    raise BenchmarkDataError(f"{path}: not a predictions file; expected {FORMATS}")


def from_rows(rows: Sequence[Mapping[str, Any]], samples: Sequence[Sample]) -> dict[str, Any]:
    """Runner rows to predictions: the answer, and in a plain run the evidence spans and boxes
    (what :func:`vidagent.bench.report.score_rows` uses for a run's report)."""
    level = {s.id: s.extras.get("level", "level-3") for s in samples}
    return {str(r["id"]): _runner(r, level.get(str(r["id"]), "level-3")) for r in rows}


def _row_id(row: Mapping[str, Any]) -> Any:
    for key in ("question_id", "index"):
        if row.get(key) not in (None, ""):
            return row[key]
    return None


def _cell(value: Any) -> Levels:
    """An official ``prediction`` cell: the levels' JSON (an unreadable cell is no answer at
    any level, as the official ``json.loads`` failure gives ``{}``)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            value = {}
    return _official(value if isinstance(value, dict) else {})


def _runner(row: Mapping[str, Any], level: str) -> Levels:
    """A runner row: its answer at the run's level; its evidence spans and boxes are the
    Level-4/5 evidence of a plain run (a hinted run was given them, so they are not read)."""
    if level != "level-3":
        return Levels({level: row.get("parsed")})
    boxes = row.get("boxes")
    return Levels(
        {"level-3": row.get("parsed")},
        _pairs(row.get("evidence") or []),
        None if boxes is None else box_items(boxes, "normalized 0-1"),
        "normalized 0-1",
    )
