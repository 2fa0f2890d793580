"""What every benchmark shares: samples, load results, outcomes, scores, the protocol.

A benchmark is a module with four small functions (STYLE.md §11) plus a reader for its usual
prediction file:

- ``load(data, *, split=None, videos=None, **options) -> LoadResult`` reads the official
  annotation files under ``data`` and resolves each sample's videos under ``videos`` (a default
  folder under ``data`` when not given). A missing video is listed in
  :attr:`LoadResult.missing`, never raised.
- ``prompt(sample) -> str``: the question with its options as ``(A) ...`` lines.
- ``score(samples, predictions, *, judge=None) -> list[Outcome]``: one outcome per sample, from
  already-parsed predictions ``{sample id: answer or None}``. ``None`` (or an id absent from the
  mapping) means the system gave no answer; any other value is an answer, and one of the wrong
  type (a word where an option index was expected) is simply wrong.
- ``aggregate(samples, outcomes) -> Scores``: the official number beside the strict one, and the
  official per-category breakdowns.
- ``read_predictions(path, samples) -> dict``: the benchmark's usual prediction file, and the
  runner's JSONL rows (``{"id": ..., "parsed": ...}`` per line), to the mapping ``score`` takes
  (shared readers in :mod:`vidagent.bench.predictions`).

Two rules decide what an unanswered question counts for, and each benchmark names its official
one: ``"all"`` (every question is in the denominator, so unanswered = wrong: NExT-QA's
``eval_mc.py``, EgoSchema) or ``"answered"`` (unanswered questions leave the denominator: LVBench's
``compute_accuracy``, Video-MME's ``eval_your_results``, CrossVid's scripts). The strict number,
unanswered = wrong, is always reported beside it.

Nothing here does I/O at import time.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from vidagent.agents.answer import LETTERS, question_with_options
from vidagent.exceptions import UserError

if TYPE_CHECKING:
    from vidagent.bench.judge import Judge

#: A parsed answer: an option index, a set of indices (multi-select), an order of item numbers,
#: a ``(start, end)`` interval in seconds, or free text. Tuples for the sequence forms.
Answer = int | tuple[int, ...] | tuple[float, float] | str
Predictions = Mapping[str, Any]
Rule = Literal["all", "answered"]

VIDEO_SUFFIXES = (".mp4", ".MP4", ".mkv", ".webm", ".avi", ".mov")


class BenchmarkDataError(UserError):
    """An annotation or prediction file is missing or not in the expected format."""


# ---------------------------------------------------------------------------------------------
# Samples


@dataclass(frozen=True)
class Sample:
    """One benchmark question.

    Attributes:
        id: the benchmark's own question id (the key prediction files use).
        videos: every video the question is about, resolved under the video root. A video may be
            a folder of frames (CrossVid's drone views).
        question: the question text, without the options.
        options: the answer options without their letters; empty for open questions.
        answer: the reference: an option index (single choice), a tuple of indices
            (multi-select), a tuple of item numbers (ordering), a ``(start, end)`` interval in
            seconds, or text (open-ended); ``None`` where the split's answers are not public.
        categories: every category the question belongs to (LVBench questions have several).
        task: the answer form: ``"choice"``, ``"multi"``, ``"order"``, ``"interval"``, ``"open"``.
        extras: benchmark-specific fields (question type, duration group, clip bounds, ...).
    """

    id: str
    videos: tuple[Path, ...]
    question: str
    options: tuple[str, ...] = ()
    answer: Answer | None = None
    categories: tuple[str, ...] = ()
    task: str = "choice"
    extras: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class MissingVideo:
    """A video a sample needs that is not under the video root."""

    sample_id: str
    path: Path


@dataclass(frozen=True)
class LoadResult:
    """What a loader read: the samples, and the videos it could not find."""

    benchmark: str
    split: str
    samples: tuple[Sample, ...]
    missing: tuple[MissingVideo, ...] = ()
    notes: tuple[str, ...] = ()
    listed: bool = False  # restricted to a list of ids (:meth:`only`)

    @property
    def missing_samples(self) -> int:
        """How many samples lack at least one of their videos."""
        return len({m.sample_id for m in self.missing})

    def runnable(self) -> tuple[Sample, ...]:
        """The samples whose videos are all present."""
        lacking = {m.sample_id for m in self.missing}
        return tuple(s for s in self.samples if s.id not in lacking)

    def only(self, ids: Iterable[str]) -> LoadResult:
        """The same result restricted to ``ids`` (e.g. NExT-QA's ATP-hard list), in load order.

        Raises:
            BenchmarkDataError: when none of the ids is a question of this split.
        """
        wanted = set(ids)
        samples = tuple(s for s in self.samples if s.id in wanted)
        if wanted and not samples:
            raise BenchmarkDataError(
                f"none of the {len(wanted)} listed ids is a {self.benchmark} {self.split} question"
            )
        notes = self.notes
        unknown = len(wanted) - len(samples)
        if unknown:
            are = "ids are not" if unknown != 1 else "id is not a"
            notes += (
                f"{unknown} listed {are} {self.benchmark} {self.split} question{'s' * (unknown != 1)}",
            )
        kept = {s.id for s in samples}
        missing = tuple(m for m in self.missing if m.sample_id in kept)
        return LoadResult(self.benchmark, self.split, samples, missing, notes, listed=True)


class VideoRoot:
    """Finds videos under a root folder and records the ones that are not there.

    A name is tried as given, then with each common suffix, then (once the folder has been
    indexed, on the first miss) by file stem anywhere below the root, so a root laid out in
    sub-folders still resolves names given without their folder.
    """

    def __init__(self, root: Path, suffixes: Sequence[str] = VIDEO_SUFFIXES) -> None:
        self.root = root
        self.suffixes = tuple(suffixes)
        self._by_stem: dict[str, Path] | None = None
        self._found: dict[tuple[str, bool], tuple[Path, bool]] = {}
        self.missing: list[MissingVideo] = []

    def resolve(self, sample_id: str, name: str, *, folder: bool = False) -> Path:
        """The path of video ``name`` (a file, or a folder of frames when ``folder``); looked
        for once per name (a benchmark asks several questions of a video: NExT-QA's 4,996
        validation questions name 570 videos, each one looked for with up to seven stats)."""
        if (name, folder) not in self._found:
            self._found[name, folder] = self._look(name, folder)
        path, there = self._found[name, folder]
        if not there:
            self.missing.append(MissingVideo(sample_id, path))
        return path

    def _look(self, name: str, folder: bool) -> tuple[Path, bool]:
        """Where ``name`` is, and whether it is there."""
        path = self.root / name
        if path.exists():
            return path, True
        if not folder:
            for suffix in self.suffixes:
                candidate = path.with_name(path.name + suffix)
                if candidate.is_file():
                    return candidate, True
            found = self._stem_index().get(Path(name).stem)
            if found is not None:
                return found, True
            if not path.suffix:
                path = path.with_name(path.name + self.suffixes[0])
        return path, False

    def _stem_index(self) -> dict[str, Path]:
        if self._by_stem is None:
            self._by_stem = {}
            if self.root.is_dir():
                for p in sorted(self.root.rglob("*")):
                    if p.suffix in self.suffixes:
                        self._by_stem.setdefault(p.stem, p)
        return self._by_stem


def video_root(data: Path, videos: Path | None, *candidates: str) -> Path:
    """``videos`` when given, else the first of ``data/<candidate>`` that exists (or the first)."""
    if videos is not None:
        return Path(videos).expanduser()
    for name in candidates:
        if (data / name).is_dir():
            return data / name
    return data / candidates[0]


def check_options(benchmark: str, options: Mapping[str, Any], known: Iterable[str] = ()) -> None:
    """Refuse options a loader does not understand, naming the ones it does."""
    unknown = sorted(k for k, v in options.items() if v not in (None, False) and k not in known)
    if unknown:
        allowed = ", ".join(sorted(known)) or "none"
        raise UserError(f"{benchmark} has no option {unknown[0]!r} (its options: {allowed})")


def check_split(benchmark: str, split: str, splits: Sequence[str]) -> str:
    if split not in splits:
        raise UserError(f"{benchmark} has no split {split!r}; choose one of: {', '.join(splits)}")
    return split


def require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise BenchmarkDataError(f"{what} not found: {path}")
    return path


# ---------------------------------------------------------------------------------------------
# Prompts and letters


def letter_index(text: str) -> int | None:
    """The option index a lone letter names: ``"A"``, ``"(B)"``, ``"C."``, ``"D)"``; else ``None``.

    Letters only, upper case: free text is the answer parser's job, not the scorer's.
    """
    m = re.fullmatch(r"\s*\(?\s*([A-Z])\s*\)?\s*[.:]?\s*", text)
    return LETTERS.index(m.group(1)) if m else None


def strip_label(option: str) -> str:
    """An option without a leading ``"A. "``, ``"(A) "``, ``"A) "`` or ``"A: "`` label."""
    return re.sub(r"^\s*\(?[A-Z][.):]\s*", "", option, count=1).strip()


def format_question(question: str, options: Sequence[str]) -> str:
    """The question, then one ``(A) option`` line per option (as the agents' prompts show it)."""
    return question_with_options(question.strip(), options)


def as_choice(value: Any) -> Any:
    """A prediction value as an option index where it is one; other answers stay as they are.

    Ints stay; a lone letter becomes its index; ``{"prediction": x}`` (NExT-QA's result files)
    gives ``x``. Anything else is kept, so it counts as an answer that names no option.
    """
    if isinstance(value, dict) and "prediction" in value:
        value = value["prediction"]
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        index = letter_index(value)
        return value if index is None else index
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def as_interval(value: Any, *, strings: bool = True) -> tuple[float, float] | None:
    """A ``(start, end)`` pair from ``[s, e]`` or, with ``strings``, ``"s,e"`` (CrossVid's answer
    form), else ``None``.

    A string must split on its comma into exactly two numbers, as CrossVid's ``FSA.py`` reads it.
    A reversed pair stays reversed: the official IoUs (CrossVid's ``FSA.py``, the Charades-STA
    authors' ``calculate_IoU``) give it no overlap, and so does :func:`vidagent.geometry.interval_iou`.
    """
    parts = value.split(",") if isinstance(value, str) and strings else value
    if not isinstance(parts, (list, tuple)) or len(parts) != 2:
        return None
    try:
        start, end = (float(p) for p in parts)
    except (TypeError, ValueError):
        return None
    return start, end


# ---------------------------------------------------------------------------------------------
# Outcomes and scores


@dataclass(frozen=True)
class Outcome:
    """How one sample scored.

    ``earned`` out of ``possible`` points: 1 or 0 of 1 for a choice, the IoU of 1 for an
    interval, judge points of ``2 * scoring points`` for CrossVid's open questions.
    ``answered`` is False when there was no prediction (or the judge could not score it).
    """

    id: str
    earned: float
    possible: float = 1.0
    answered: bool = True
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False)


def unanswered(sample: Sample, possible: float = 1.0) -> Outcome:
    return Outcome(sample.id, 0.0, possible, answered=False)


def choice_prompt(sample: Sample) -> str:
    """A multiple-choice benchmark's prompt: the question with its ``(A) ...`` option lines."""
    return format_question(sample.question, sample.options)


def score_choices(
    samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
) -> list[Outcome]:
    """Single-choice outcomes: 1 when the predicted option index is the answer, else 0;
    no prediction counts as unanswered. ``judge`` is unused (the scorer protocol has it)."""
    outcomes = []
    for s in samples:
        p = predictions.get(s.id)
        if p is None:
            outcomes.append(unanswered(s))
            continue
        right = isinstance(p, int) and not isinstance(p, bool) and p == s.answer
        outcomes.append(Outcome(s.id, float(right), detail={"prediction": p}))
    return outcomes


@dataclass(frozen=True)
class GroupScore:
    """One line of a report: the official number and the strict one, in the benchmark's unit
    (percent, or MMBench-Video's 0-3 mean score)."""

    score: float
    strict: float
    questions: int
    answered: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 4),
            "strict": round(self.strict, 4),
            "questions": self.questions,
            "answered": self.answered,
        }


@dataclass
class Tally:
    """Running sums over outcomes, turned into a :class:`GroupScore` under a rule."""

    questions: int = 0
    answered: int = 0
    earned: float = 0.0
    possible: float = 0.0
    answered_possible: float = 0.0

    def add(self, o: Outcome) -> None:
        self.questions += 1
        self.earned += o.earned
        self.possible += o.possible
        if o.answered:
            self.answered += 1
            self.answered_possible += o.possible

    def result(self, rule: Rule) -> GroupScore:
        strict = 100.0 * self.earned / self.possible if self.possible else 0.0
        base = self.possible if rule == "all" else self.answered_possible
        score = 100.0 * self.earned / base if base else 0.0
        return GroupScore(score, strict, self.questions, self.answered)


def mean_of(groups: Sequence[GroupScore]) -> GroupScore:
    """The unweighted mean of several groups (CrossVid's dimension and overall averages)."""
    if not groups:
        return GroupScore(0.0, 0.0, 0, 0)
    return GroupScore(
        sum(g.score for g in groups) / len(groups),
        sum(g.strict for g in groups) / len(groups),
        sum(g.questions for g in groups),
        sum(g.answered for g in groups),
    )


@dataclass(frozen=True)
class Scores:
    """A benchmark's report.

    Attributes:
        benchmark: the benchmark's name.
        split: the split (and subset) scored.
        metric: what the numbers measure (``"accuracy"``, ``"mean IoU"``, ...).
        rule: the official rule for unanswered questions (see the module docstring).
        overall: the headline number.
        sections: named breakdowns, each an ordered mapping key -> :class:`GroupScore`.
        labels: display names for section keys (``"CW" -> "Why"``).
        extra: further official numbers, in percent (Charades-STA's R@1 at each IoU).
        missing: questions without a prediction.
        unknown: prediction ids that match no question of the split.
        notes: what the reader should know (judge failures, subsets left out).
        digits: decimals a table shows (1 for percent, 2 for MMBench-Video's 0-3 scale).
    """

    benchmark: str
    split: str
    metric: str
    rule: Rule
    overall: GroupScore
    sections: Mapping[str, Mapping[str, GroupScore]] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, float] = field(default_factory=dict)
    missing: int = 0
    unknown: int = 0
    notes: tuple[str, ...] = ()
    digits: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "split": self.split,
            "metric": self.metric,
            "rule": self.rule,
            "overall": self.overall.to_dict(),
            "sections": {
                name: {key: g.to_dict() for key, g in groups.items()}
                for name, groups in self.sections.items()
            },
            "labels": dict(self.labels),
            "extra": {k: round(v, 4) for k, v in self.extra.items()},
            "missing": self.missing,
            "unknown": self.unknown,
            "notes": list(self.notes),
        }


def tally(
    samples: Sequence[Sample],
    outcomes: Sequence[Outcome],
    key: Callable[[Sample], Iterable[str]],
    order: Sequence[str] = (),
) -> dict[str, Tally]:
    """Outcomes summed per key; a sample counts once in each of its keys.

    Keys listed in ``order`` come first in that order (present even when empty); others follow
    in order of first appearance.
    """
    groups: dict[str, Tally] = {k: Tally() for k in order}
    for sample, outcome in zip(samples, outcomes, strict=True):
        for k in key(sample):
            groups.setdefault(k, Tally()).add(outcome)
    return groups


def overall_tally(outcomes: Iterable[Outcome]) -> Tally:
    total = Tally()
    for o in outcomes:
        total.add(o)
    return total


def section(groups: Mapping[str, Tally], rule: Rule) -> dict[str, GroupScore]:
    return {k: t.result(rule) for k, t in groups.items()}


# ---------------------------------------------------------------------------------------------
# Benchmarks


class Benchmark(Protocol):
    """A benchmark module: data plus four small functions and a prediction-file reader."""

    # Read-only properties, because the modules' constants (e.g. a 2-tuple for SPLITS) are
    # narrower than the protocol's types and a plain protocol attribute would be invariant.
    @property
    def NAME(self) -> str: ...

    @property
    def TITLE(self) -> str: ...

    @property
    def SPLITS(self) -> tuple[str, ...]: ...

    @property
    def DEFAULT_SPLIT(self) -> str: ...

    def load(
        self, data: Path, *, split: str | None = None, videos: Path | None = None, **options: Any
    ) -> LoadResult: ...

    def prompt(self, sample: Sample) -> str: ...

    def score(
        self, samples: Sequence[Sample], predictions: Predictions, *, judge: Judge | None = None
    ) -> list[Outcome]: ...

    def aggregate(
        self, samples: Sequence[Sample], outcomes: Sequence[Outcome], *, split: str = ""
    ) -> Scores: ...

    def read_predictions(self, path: Path, samples: Sequence[Sample]) -> dict[str, Any]: ...


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """Say in one line that ``what`` (files a user gave) is not in the form it should be.

    The loaders and prediction readers index into the official files as their formats define
    them; a hand-edited or truncated file then fails there (a field missing, a value of another
    type, text that is not UTF-8), and this turns that failure into a
    :class:`BenchmarkDataError` naming the files and what was wrong, the original chained.
    """
    try:
        yield
    except UnicodeDecodeError as e:
        raise BenchmarkDataError(f"{what}: not UTF-8 text (byte {e.start})") from e
    except (KeyError, IndexError) as e:
        raise BenchmarkDataError(f"{what}: not in the benchmark's format (no {e})") from e
    except (ValueError, TypeError, AttributeError) as e:
        raise BenchmarkDataError(f"{what}: not in the benchmark's format ({e})") from e


def load(bench: Benchmark, data: Path, **kwargs: Any) -> LoadResult:
    """``bench.load(data, **kwargs)``, a file not in the benchmark's format said in one line,
    and its questions checked (:func:`check_samples`)."""
    what = f"the {bench.NAME} annotation files in {data}"
    with reading(what):
        loaded = bench.load(data, **kwargs)
    check_samples(loaded.samples, what)
    return loaded


def check_samples(samples: Sequence[Sample], what: str) -> None:
    """Refuse annotations no run can be scored on as asked: an id given twice (rows and
    traces are keyed by it: the second overwrote the first's trace, and the counts disagreed),
    a choice question whose options are missing or blank, or whose answer is no option's
    index (it was scored wrong whatever was answered).

    Raises:
        BenchmarkDataError: the first such question, named.
    """
    seen: set[str] = set()
    for s in samples:
        if s.id in seen:
            raise BenchmarkDataError(
                f"{what}: question id {s.id!r} is given twice; ids must be unique"
            )
        seen.add(s.id)
        if s.task not in ("choice", "multi") or not s.question.strip():
            continue  # (answers alone, without the questions: scorable, never asked)
        if not s.options:
            raise BenchmarkDataError(f"{what}: question {s.id!r} has no options to choose from")
        blank = [k for k, o in enumerate(s.options) if not (o or "").strip()]
        if blank:
            raise BenchmarkDataError(f"{what}: question {s.id!r}: option {blank[0]} is empty")
        picks = s.answer if isinstance(s.answer, tuple) else (s.answer,)
        for pick in picks:
            if isinstance(pick, int) and not 0 <= pick < len(s.options):
                raise BenchmarkDataError(
                    f"{what}: question {s.id!r}: answer {pick} is not one of its "
                    f"{len(s.options)} options (0 to {len(s.options) - 1})"
                )


def read_predictions(bench: Benchmark, path: Path, samples: Sequence[Sample]) -> dict[str, Any]:
    """``bench.read_predictions``, a file not in the expected form said in one line."""
    with reading(f"{path}"):
        return bench.read_predictions(path, samples)


def evaluate(
    bench: Benchmark,
    loaded: LoadResult,
    predictions: Predictions,
    *,
    judge: Judge | None = None,
) -> Scores:
    """Score ``predictions`` (``{id: parsed answer or None}``) on the loaded samples.

    Raises:
        BenchmarkDataError: the annotation files hold no question, or none with a public answer,
            or there are predictions but none matches a question.
    """
    if not loaded.samples:
        raise BenchmarkDataError(
            f"{bench.NAME} {loaded.split}: the annotation files hold no question"
        )
    samples = tuple(s for s in loaded.samples if s.answer is not None)
    if not samples:
        raise BenchmarkDataError(
            f"{bench.NAME} {loaded.split} has no public answers to score against; "
            "submit to the benchmark's own server"
        )
    ids = {s.id for s in loaded.samples}
    unknown = sum(1 for k in predictions if k not in ids)
    if predictions and unknown == len(predictions):
        example = next(iter(predictions))
        raise BenchmarkDataError(
            f"none of the {len(predictions)} predictions matches a {bench.NAME} {loaded.split} "
            f"question (e.g. id {example!r}); check the benchmark, --split and the id format"
        )
    outcomes = bench.score(samples, predictions, judge=judge)
    scores = bench.aggregate(samples, outcomes, split=loaded.split)
    notes = scores.notes + loaded.notes
    if len(samples) < len(loaded.samples):
        notes += (
            f"{len(loaded.samples) - len(samples)} questions without a public answer left out",
        )
    if unknown:
        which = "the listed ids of this split" if loaded.listed else "this split"
        notes += (f"{unknown} predictions match no question of {which} and were ignored",)
    notes += _no_option_note(samples, outcomes, getattr(bench, "CHOICES", 0))
    return replace(scores, unknown=unknown, notes=notes)


def _names_option(value: Any, n: int) -> bool:
    index = letter_index(value) if isinstance(value, str) else value
    return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < n


def _no_option_note(
    samples: Sequence[Sample], outcomes: Sequence[Outcome], choices: int
) -> tuple[str, ...]:
    """A note counting the single-choice predictions that name none of their question's
    options (``"Z"`` or ``7`` of five, free text): scored wrong, as the official scripts score
    them, but most often a parsing or id mix-up that the score alone would hide.

    The number of options is the sample's own, else the benchmark's fixed ``CHOICES`` (EgoSchema
    scored without its question text); without either nothing is counted.
    """
    by_id = {s.id: s for s in samples}
    off = []
    for o in outcomes:
        s = by_id.get(o.id)
        n = len(s.options) if s is not None and s.task == "choice" else 0
        n = n or (choices if s is not None and s.task == "choice" else 0)
        if not o.answered or o.earned > 0 or not n or "prediction" not in o.detail:
            continue
        p = o.detail["prediction"]
        # a list is one answer's letters (Video-MME's results file, CrossVid): each must name one
        if not all(_names_option(x, n) for x in (p if isinstance(p, (list, tuple)) else [p])):
            off.append(p)
    if not off:
        return ()
    shown = (f"{p} ({LETTERS[p]})" if isinstance(p, int) and 0 <= p < 26 else repr(p) for p in off)
    examples = ", ".join(list(dict.fromkeys(shown))[:3])
    counted = f"{len(off)} predictions name" if len(off) != 1 else "1 prediction names"
    return (f"{counted} none of the question's options (e.g. {examples}) and count wrong",)
