"""MMBench-Video (Fang et al., NeurIPS 2024): free-form questions on short web videos, rated 0-3.

Data (HF ``opencompass/MMBench-Video``): ``MMBench-Video.tsv`` in ``data`` (the older upload's
``MMBench_VIDEO.tsv`` is read too), one tab-separated row per question with the columns
``index`` (the question id), ``video`` (the video's name), ``video_type``, ``question``,
``answer`` (the reference text), ``dimensions`` (a Python list literal of the question's
fine-grained capabilities, e.g. ``"['Counting', 'Causal Reasoning']"``) and ``video_path``
(``./video/<video>.mp4``). The videos ship pickled in ``video_pkl/``; VLMEvalKit unpacks them to
``data/video/<video>.mp4`` (``unwrap_hf_pkl``), which is the default root here (``data/videos``
is tried too). The questions have no options: answers are free text.

Scoring reproduces VLMEvalKit (``vlmeval/dataset/mmbench_video.py``, ``MMBenchVideo.evaluate``,
and ``vlmeval/dataset/utils/mmbench_video.py``):

- Each answer goes to an LLM judge with the official system prompt (:data:`JUDGE_SYSTEM`) and
  user prompt (:data:`JUDGE_TEMPLATE`), at temperature 0 (VLMEvalKit's default judge is
  ``gpt-4-turbo``; ``--judge SPEC`` picks ours, the ``llm`` role by default).
- The reply is the score only when it is an integer (``int(x) if istype(x, int) else -1``):
  ``"2"`` is 2, ``"Score: 2"`` or ``"2."`` is a failed judgement. A negative integer is a failure
  too (-1 is VLMEvalKit's failure mark). A score above 3 is kept as given, as VLMEvalKit keeps it,
  and a note counts such scores.
- A question with no prediction is not judged (``pd.isna(prediction)``: ``null``, absent, or an
  empty string, which pandas reads back as NaN); it scores -1 like a failed judgement.
- VLMEvalKit reports two ratings: ``valid`` (the mean over questions scored >= 0: unanswered
  questions and failed judgements left out) and ``all`` (the mean with those as 0). The
  official number here is ``valid`` (rule ``"answered"``), and ``all`` is the strict number beside
  it: exactly the two VLMEvalKit prints, which says failures "will be counted as 0 score in ALL
  rating, and will not be counted in VALID rating". A note counts judge failures.
- Means are over questions on the 0-3 scale (not percent). ``coarse`` is VLMEvalKit's coarse
  rating: a question counts in each coarse dimension (CP, FP-S, ..., TR) one of whose
  fine-grained dimensions it has, and in Perception (CP, FP-C, FP-S, HL) and Reasoning (LR, AR,
  RR, CSR, TR) likewise; ``fine`` is the rating per fine-grained dimension (a question counts in
  each of its own). Overall is every question once (VLMEvalKit's coarse ``Overall``, which is the
  same on the released file, where every question has a known dimension).

Predictions: ``{"<index>": "answer text"}`` (also ``{"<index>": {"prediction": ...}}``),
VLMEvalKit's result table saved as TSV (columns ``index`` and ``prediction``), or the runner's
JSONL (its ``parsed`` text; ``null`` is no answer).
"""

from __future__ import annotations

import ast
import csv
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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
    Tally,
    VideoRoot,
    check_options,
    check_split,
    overall_tally,
    tally,
    unanswered,
    video_root,
)
from vidagent.bench.predictions import read_id_mapping, read_json_rows
from vidagent.exceptions import ProviderError, UserError

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

NAME = "mmbench_video"
TITLE = "MMBench-Video"
SPLITS = ("all",)
DEFAULT_SPLIT = "all"
ANNOTATIONS = ("MMBench-Video.tsv", "MMBench_VIDEO.tsv")
COLUMNS = ("index", "video", "question", "answer", "dimensions")
#: The rating scale's top; every question is worth this many points.
SCALE = 3

#: The judge's system prompt, verbatim (``vlmeval/dataset/utils/mmbench_video.py``,
#: ``system_prompt``), its leading and trailing newlines included.
JUDGE_SYSTEM = """
As an AI assistant, your task is to evaluate a candidate answer in comparison to a given correct answer.
The question itself, the correct 'groundtruth' answer, and the candidate answer will be provided to you.
Your assessment should range from 0 to 3, \
based solely on the semantic similarity between the groundtruth and the candidate answer, \
disregarding any grammatical differences.
A rating of 0 suggests no similarity, implying the candidate answer is entirely incorrect.
A rating of 1 suggests low similarity, meaning the candidate answer is largely incorrect.
A rating of 2 suggests high similarity, meaning the candidate answer is largely correct.
Lastly, a rating of 3 indicates complete similarity, which means the candidate answer is entirely correct.
Your response should be a single integer from 0, 1, 2, or 3.
"""

#: The judge's user prompt (``build_prompt`` there), filled by plain replacement.
JUDGE_TEMPLATE = "Question: {Q}\nGroundtruth answer: {A}\nCandidate answer: {P}\nYour response: "

#: Coarse dimension -> its fine-grained dimensions (``MMV_DIMENSIONS``), in VLMEvalKit's order.
DIMENSIONS = {
    "CP": ("Video Topic", "Video Emotion", "Video Scene", "Video Style"),
    "FP-S": (
        "OCR",
        "Object Recognition",
        "Attribute Recognition",
        "Event Recognition",
        "Human Motion",
        "Counting",
    ),
    "FP-C": ("Spatial Relationship", "Human-object Interaction", "Human Interaction"),
    "HL": ("Hallucination",),
    "LR": ("Structuralized Image-Text Understanding", "Mathematical Calculation"),
    "AR": ("Physical Property", "Function Reasoning", "Identity Reasoning"),
    "RR": ("Natural Relation", "Physical Relation", "Social Relation"),
    "CSR": ("Common Sense Reasoning",),
    "TR": ("Counterfactual Reasoning", "Causal Reasoning", "Future Prediction"),
}
GROUPS = {"Perception": ("CP", "FP-C", "FP-S", "HL"), "Reasoning": ("LR", "AR", "RR", "CSR", "TR")}
FINE = tuple(d for dims in DIMENSIONS.values() for d in dims)
COARSE = (*DIMENSIONS, *GROUPS)
LABELS = {
    "CP": "Coarse Perception",
    "FP-S": "Fine-grained Perception, single instance",
    "FP-C": "Fine-grained Perception, cross instance",
    "HL": "Hallucination",
    "LR": "Logic Reasoning",
    "AR": "Attribute Reasoning",
    "RR": "Relation Reasoning",
    "CSR": "Commonsense Reasoning",
    "TR": "Temporal Reasoning",
}
FORMATS = '{"<index>": "answer text"}, a TSV with index and prediction columns, or runner JSONL'


def load(
    data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
) -> LoadResult:
    """Every MMBench-Video question, from ``MMBench-Video.tsv`` in ``data``."""
    check_options(NAME, options)
    split = check_split(NAME, split or DEFAULT_SPLIT, SPLITS)
    path = next((data / name for name in ANNOTATIONS if (data / name).is_file()), None)
    if path is None:
        raise BenchmarkDataError(f"{ANNOTATIONS[0]} not found in {data}")
    finder = VideoRoot(video_root(data, videos, "video", "videos"))
    samples = [_sample(row, n, path, finder) for n, row in enumerate(_rows(path), 2)]
    return LoadResult(NAME, split, tuple(samples), tuple(finder.missing))


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f, delimiter="\t")
        lacking = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if lacking:
            raise BenchmarkDataError(
                f"{path}: no {lacking[0]!r} column; expected tab-separated columns "
                f"{', '.join(COLUMNS)}"
            )
        return list(reader)


def _sample(row: dict[str, str], line: int, path: Path, finder: VideoRoot) -> Sample:
    sample_id = str(row["index"]).strip()
    video = str(row["video"]).strip()
    return Sample(
        id=sample_id,
        videos=(finder.resolve(sample_id, video),),
        question=str(row["question"]).strip(),
        answer=row["answer"] or None,
        categories=_dimensions(row["dimensions"], f"{path}, line {line}"),
        task="open",
        extras={"video": video, "video_type": row.get("video_type") or ""},
    )


def _dimensions(text: str, where: str) -> tuple[str, ...]:
    """``"['Counting', 'OCR']"`` (VLMEvalKit ``eval``s it) as a tuple; a bare name as one."""
    text = (text or "").strip()
    if not text.startswith("["):
        return (text,) if text else ()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise BenchmarkDataError(f"{where}: dimensions {text!r} is not a list") from None
    return tuple(str(v) for v in value)


def prompt(sample: Sample) -> str:
    """The question alone (free-form: no options)."""
    return sample.question


@dataclass(frozen=True)
class Rating:
    """The judge's score of one answer: ``None`` when the reply was not a score of 0 or more."""

    score: int | None
    reply: str = ""
    error: str = ""


def score(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """Each answered question rated 0-3 by ``judge``; no prediction is unanswered.

    Raises:
        UserError: there are answers to rate and no judge was given.
    """
    given = {s.id: _text(predictions.get(s.id)) for s in samples}
    todo = [s for s in samples if given[s.id] is not None]
    if todo and judge is None:
        raise UserError(
            "MMBench-Video's free-form answers need an LLM judge: pass judge= (CLI: --judge SPEC)"
        )
    ratings = (
        dict(zip((s.id for s in todo), rate(judge, todo, given), strict=True)) if judge else {}
    )
    outcomes = []
    for s in samples:
        r = ratings.get(s.id)
        if r is None:
            outcomes.append(unanswered(s, SCALE))
        elif r.score is None:
            detail = {
                "prediction": given[s.id],
                "judge_failed": 1,
                "judge_error": r.error,
                "judge_reply": r.reply,
            }
            outcomes.append(Outcome(s.id, 0.0, SCALE, answered=False, detail=detail))
        else:
            detail = {"prediction": given[s.id], "rating": r.score}
            outcomes.append(Outcome(s.id, float(r.score), SCALE, detail=detail))
    return outcomes


def _text(value: Any) -> str | None:
    """A prediction as the text the judge reads; ``None`` or ``""`` is no answer."""
    if isinstance(value, dict) and "prediction" in value:
        value = value["prediction"]
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def rate(judge: Judge, samples: Sequence[Sample], answers: Predictions) -> list[Rating]:
    """The judge's ratings of ``answers[s.id]``, in the order of ``samples``.

    The judge's model, role, temperature, reply cap and concurrency are the configured
    :class:`~vidagent.bench.judge.Judge`'s; the prompts are MMBench-Video's own (the judge's
    CrossVid template and system prompt do not apply).
    """

    def one(s: Sample) -> Rating:
        return _rate_one(judge, s, str(answers[s.id]))

    if judge.workers == 1 or len(samples) < 2:
        return [one(s) for s in samples]
    with ThreadPoolExecutor(max_workers=judge.workers) as pool:
        return list(pool.map(one, samples))


def judge_prompt(sample: Sample, answer: str) -> str:
    """The official user prompt for one answer (one pass: a field's own text is never filled)."""
    values = {"{Q}": sample.question, "{A}": str(sample.answer), "{P}": answer}
    return re.sub(r"\{[QAP]\}", lambda m: values[m[0]], JUDGE_TEMPLATE)


def _rate_one(judge: Judge, sample: Sample, answer: str) -> Rating:
    from vidagent.models.base import ChatRequest, Message

    request = ChatRequest(
        messages=(Message("system", JUDGE_SYSTEM), Message("user", judge_prompt(sample, answer))),
        temperature=judge.temperature,
        max_tokens=judge.max_tokens,
    )
    try:
        reply = judge.models.client(judge.role).chat(request).text
    except ProviderError as e:
        return Rating(None, error=f"{type(e).__name__}: {e}")
    return parse_rating(reply)


def parse_rating(reply: str) -> Rating:
    """VLMEvalKit's reading of a reply: the score when the reply is an integer, and 0 or more."""
    text = reply.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):
        return Rating(None, reply, "the reply is not an integer")
    value = int(text)
    if value < 0:
        return Rating(None, reply, f"a negative score ({value})")
    return Rating(value, reply)


def aggregate(samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = "") -> Scores:
    """The overall mean score, per coarse and per fine-grained dimension, valid beside all."""
    fine = tally(samples, outcomes, lambda s: s.categories, FINE)
    coarse = tally(samples, outcomes, _coarse, COARSE)
    notes: tuple[str, ...] = ()
    failed = sum(o.detail.get("judge_failed", 0) for o in outcomes)
    if failed:
        why = (
            f"the judge gave no usable score for {failed} answers: left out of the official "
            "(valid) mean, 0 in the strict (all) one, as VLMEvalKit does"
        )
        notes += (why,)
    high = sum(o.detail.get("rating", 0) > SCALE for o in outcomes)
    if high:
        notes += (f"{high} judge scores above {SCALE} kept as given, as VLMEvalKit keeps them",)
    unknown = sorted({c for s in samples for c in s.categories if c not in FINE})
    if unknown:
        notes += (f"dimensions VLMEvalKit does not list: {', '.join(unknown)}",)
    return Scores(
        benchmark=NAME,
        split=split,
        metric=f"mean judge score (0-{SCALE})",
        rule="answered",
        overall=_mean(overall_tally(outcomes)),
        sections={
            "coarse": {k: _mean(t) for k, t in coarse.items() if t.questions},
            "fine": {k: _mean(t) for k, t in fine.items() if t.questions},
        },
        labels=LABELS,
        missing=sum(not o.answered and "judge_failed" not in o.detail for o in outcomes),
        notes=notes,
        digits=2,
    )


def _coarse(sample: Sample) -> list[str]:
    dims = [d for d, members in DIMENSIONS.items() if set(members) & set(sample.categories)]
    return dims + [g for g, members in GROUPS.items() if set(members) & set(dims)]


def _mean(t: Tally) -> GroupScore:
    """A tally as mean scores on the 0-3 scale: valid (official) and all (strict).

    Unanswered questions and failed judgements earn 0, so both means divide the same sum.
    """
    valid = t.earned / t.answered if t.answered else 0.0
    return GroupScore(
        valid, t.earned / t.questions if t.questions else 0.0, t.questions, t.answered
    )


def read_predictions(path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """``{index: text}``, VLMEvalKit's result table as TSV, or runner JSONL."""
    if path.is_file():
        with path.open(encoding="utf-8-sig", errors="replace") as f:
            header = f.readline().rstrip("\r\n").split("\t")
        if {"index", "prediction"} <= set(header):
            return _read_table(path)
    doc = read_json_rows(path)
    if doc == []:
        raise BenchmarkDataError(f"{path}: holds no predictions (an empty list)")
    return read_id_mapping(path, doc, _text, FORMATS)


def _read_table(path: Path) -> dict[str, Any]:
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = csv.DictReader(f, delimiter="\t")
        return {str(r["index"]).strip(): _text(r["prediction"]) for r in rows}
