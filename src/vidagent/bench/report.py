"""Reports over run folders: the paper-style table, strict beside official, with 95% intervals.

:func:`load_run` scores one run folder again from its rows, with the benchmark's own scorer, over
exactly the questions the run was given (its manifest lists them: a question without a row, or
whose video was missing, counts as unanswered). Every number of the table, per category
included, gets an interval (:func:`intervals`): a number that is a share of right answers
(every question scores 0 or 1, and the number is the right ones over the questions, or over
the answered ones) gets the **Wilson score interval** of that count, which keeps its coverage
on small sets and at 0% or 100%, where a bootstrap's interval shrinks to nothing; any other
number (IoU, judge points, CrossVid's averages of task means) gets a **percentile bootstrap**
interval: :func:`bootstrap` resamples the questions with replacement (seeded,
:data:`RESAMPLES` times) and runs the benchmark's own ``aggregate`` on each resample, so the
interval follows the official aggregation.

The report has, for each benchmark and split, one table whose rows are the overall number and
every official breakdown and whose columns are, per run, the official number and the strict one
(unanswered = wrong), each with its 95% interval; then a table of per-question means over the
rows without an error (an answer that did not parse included: it cost what it cost): steps,
frames, tokens, cost and latency, and the risk-coverage pair of the
answers' citation checks (:mod:`vidagent.agents.citations`): **coverage**, the share of answered
questions that did not abstain, and **selective** accuracy, the benchmark's points earned over
those questions only (``–`` for a run whose rows predate the checks); and the area under the
whole risk–coverage curve, **AURC**, from each answer's support or confidence
(:mod:`vidagent.bench.selective`). The harness records
abstention without applying it, so the official and strict numbers are the paper's either way.
:func:`write_report` writes it as Markdown and JSON and draws the plots
(:mod:`vidagent.bench.plots`).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.bench.base import BenchmarkDataError, GroupScore, Outcome, Sample, Scores, load
from vidagent.bench.rundir import ROWS, RunFolderError, read_manifest, read_rows, unreadable_lines
from vidagent.bench.selective import RiskCoverage, risk_coverage

if TYPE_CHECKING:
    from vidagent.bench.base import Benchmark
    from vidagent.bench.judge import Judge

RESAMPLES = 1000
LEVEL = 0.95
#: Per-question means in the cost table: row field -> column title.
MEANS = {
    "steps": "steps",
    "frames": "frames",
    "tokens": "tokens",
    "cost_usd": "cost $",
    "latency_s": "latency s",
}
#: How each per-question mean is printed.
MEAN_FORMAT = {
    "steps": "{:.1f}",
    "frames": "{:.0f}",
    "tokens": "{:,.0f}",
    "cost_usd": "{:.4f}",
    "latency_s": "{:.2f}",
}


#: How an interval was computed (``Interval.methods``).
WILSON = "wilson"
BOOTSTRAP = "bootstrap"
#: an official number over no answered question (the rule leaves it undefined): ``(0, 100)``
NO_ANSWER = "no answered question"


@dataclass(frozen=True)
class Interval:
    """An interval of the official number and of the strict one, in the unit of the
    benchmark's scores, with the method of each (:data:`WILSON`, :data:`BOOTSTRAP` or
    :data:`NO_ANSWER`)."""

    score: tuple[float, float]
    strict: tuple[float, float]
    methods: tuple[str, str] = (BOOTSTRAP, BOOTSTRAP)


@dataclass
class RunReport:
    """One run folder, scored.

    Attributes:
        name: the folder's name (what tables and plots call the run).
        path: the run folder.
        manifest: its manifest.
        scores: the benchmark's report over the run's questions.
        intervals: per cell (``"overall"``, ``"<section>/<key>"``, ``"extra/<name>"``).
        counts: questions, answered, errors, missing videos, not run (no row yet), scored.
        means: per-question means over rows without an error (``None``: no such row).
        mean_intervals: each mean's percentile interval (seeded, as the scores' intervals).
        risk_coverage: the answers' risk–coverage curve and AURC
            (:mod:`vidagent.bench.selective`; ``None``: no row has a support or confidence).
        samples, outcomes, rows: the scored questions, their outcomes by id and the run's
            rows by id (what :mod:`vidagent.bench.compare` pairs; not in :meth:`to_dict`).
    """

    name: str
    path: Path
    manifest: dict[str, Any]
    scores: Scores
    intervals: dict[str, Interval] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    means: dict[str, float | None] = field(default_factory=dict)
    mean_intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    risk_coverage: RiskCoverage | None = None
    samples: list[Sample] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def group(self) -> tuple[str, str]:
        return self.scores.benchmark, self.scores.split

    def to_dict(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "name": self.name,
            "path": str(self.path),
            "benchmark": m["benchmark"],
            "split": m["split"],
            "strategy": m["strategy"],
            "strategy_options": m.get("strategy_options", {}),
            "models": m.get("models", {}),
            "counts": self.counts,
            "means": {k: None if v is None else round(v, 6) for k, v in self.means.items()},
            "mean_intervals": {k: [round(x, 6) for x in i] for k, i in self.mean_intervals.items()},
            "scores": self.scores.to_dict(),
            "risk_coverage": self.risk_coverage.to_dict() if self.risk_coverage else None,
            "intervals": {
                k: {
                    "score": [round(x, 4) for x in i.score],
                    "strict": [round(x, 4) for x in i.strict],
                    "methods": {"score": i.methods[0], "strict": i.methods[1]},
                }
                for k, i in self.intervals.items()
            },
        }


# ---------------------------------------------------------------------------------------------
# Scoring


def score_rows(
    bench: Benchmark,
    samples: Sequence[Sample],
    rows: Mapping[str, Mapping[str, Any]],
    *,
    split: str = "",
    judge: Judge | None = None,
) -> tuple[list[Sample], list[Outcome], Scores]:
    """Score runner rows ``{id: row}`` on ``samples``: the scored samples, outcomes and scores.

    Raises:
        BenchmarkDataError: none of the samples has a public answer.
        UserError: open-ended answers and no judge (CrossVid CCQA).
    """
    from vidagent.bench.predictions import runner_predictions

    scored = [s for s in samples if s.answer is not None]
    if not scored:
        raise BenchmarkDataError(
            f"{bench.NAME} {split}: no question of the run has a public answer to score against"
        )
    # A benchmark that scores more of a row than ``parsed`` (VideoZeroBench: the evidence
    # spans) reads the rows itself.
    from_rows = getattr(bench, "from_rows", None)
    listed = list(rows.values())
    predictions = from_rows(listed, scored) if from_rows else runner_predictions(listed)
    outcomes = bench.score(scored, predictions, judge=judge)
    return scored, outcomes, bench.aggregate(scored, outcomes, split=split)


def cells(scores: Scores) -> Iterator[tuple[str, GroupScore]]:
    """Every number of a report, keyed ``overall``, ``<section>/<key>`` or ``extra/<name>``."""
    yield "overall", scores.overall
    for name, groups in scores.sections.items():
        for key, g in groups.items():
            yield f"{name}/{key}", g
    for name, value in scores.extra.items():
        yield f"extra/{name}", GroupScore(value, value, scores.overall.questions, 0)


def bootstrap(
    bench: Benchmark,
    samples: Sequence[Sample],
    outcomes: Sequence[Outcome],
    *,
    split: str = "",
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> dict[str, Interval]:
    """Percentile intervals of every cell over ``resamples`` resamples of the questions.

    A cell absent from a resample (a category none of whose questions was drawn) takes its
    interval from the resamples that have it.
    """
    import numpy as np

    n = len(samples)
    if n == 0 or resamples < 1:
        return {}
    rng = np.random.default_rng(seed)
    draws: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for _ in range(resamples):
        pick = rng.integers(0, n, n)
        scores = bench.aggregate(
            [samples[i] for i in pick], [outcomes[i] for i in pick], split=split
        )
        for key, g in cells(scores):
            draws[key].append((g.score, g.strict))
    tail = 100 * (1 - level) / 2
    out = {}
    for key, values in draws.items():
        arr = np.asarray(values)  # (R, 2): official, strict
        lo, hi = np.percentile(arr, [tail, 100 - tail], axis=0)
        out[key] = Interval((float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1])))
    return out


def intervals(
    bench: Benchmark,
    samples: Sequence[Sample],
    outcomes: Sequence[Outcome],
    scores: Scores,
    *,
    split: str = "",
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> dict[str, Interval]:
    """Every cell's interval: Wilson's where the number is a share of right answers, else the
    percentile bootstrap's (module docstring). None at all with ``resamples`` 0.

    A cell is a share when every question scores 0 or 1 and its number is its own questions'
    right answers over them (strict), or over them or over the answered ones as the official
    rule says: counted from the outcomes of the questions in it, never inferred from the
    number (an average of task means can look like a share). An official number over no
    answered question gets the whole range, ``(0, 100)``, its method :data:`NO_ANSWER`.
    """
    if not samples or resamples < 1:
        return {}
    binary = all(o.possible == 1 and o.earned in (0.0, 1.0) for o in outcomes)
    shares = _shares(bench, samples, outcomes, scores, split) if binary else {}
    plain = [k for k, _ in cells(scores) if not k.startswith("extra/")]
    booted: dict[str, Interval] = {}
    if scores.extra or any(None in shares.get(k, (None, None)) for k in plain):
        booted = bootstrap(
            bench, samples, outcomes, split=split, resamples=resamples, seed=seed, level=level
        )
    out: dict[str, Interval] = {}
    for key in dict.fromkeys([*plain, *booted]):
        boot = booted.get(key)
        pairs: list[tuple[tuple[float, float], str]] = []
        for k, count in enumerate(shares.get(key, (None, None))):
            if count == NO_ANSWER:
                pairs.append(((0.0, 100.0), NO_ANSWER))
            elif isinstance(count, tuple):
                pairs.append((_wilson(*count, level), WILSON))
            elif boot is not None:
                pairs.append(((boot.score, boot.strict)[k], BOOTSTRAP))
        if len(pairs) == 2:
            out[key] = Interval(pairs[0][0], pairs[1][0], (pairs[0][1], pairs[1][1]))
    return out


_Share = tuple[int, int] | str | None


def _shares(
    bench: Benchmark,
    samples: Sequence[Sample],
    outcomes: Sequence[Outcome],
    scores: Scores,
    split: str,
) -> dict[str, tuple[_Share, _Share]]:
    """Per cell, ``(right, over)`` of the official number and of the strict one where each is a
    share of its questions' right answers (:func:`intervals`), else ``None``. A cell's
    questions are those whose own report (the benchmark's aggregate of that one question)
    holds the cell."""
    members: dict[str, list[int]] = defaultdict(list)
    for i, (s, o) in enumerate(zip(samples, outcomes, strict=True)):
        for key, g in cells(bench.aggregate([s], [o], split=split)):
            if g.questions > 0 and not key.startswith("extra/"):
                members[key].append(i)
    out: dict[str, tuple[_Share, _Share]] = {}
    for key, g in cells(scores):
        if key.startswith("extra/") or not members.get(key):
            continue
        mine = [outcomes[i] for i in members[key]]
        right = int(sum(o.earned for o in mine))
        asked, answered = len(mine), sum(o.answered for o in mine)
        strict = (right, asked) if abs(100.0 * right / asked - g.strict) < 1e-6 else None
        base = asked if scores.rule == "all" else answered
        official: _Share = None
        if base == 0:
            official = NO_ANSWER
        elif abs(100.0 * right / base - g.score) < 1e-6:
            official = (right, base)
        out[key] = (official, strict)
    return out


def _wilson(right: int, over: int, level: float) -> tuple[float, float]:
    """The Wilson score interval of ``right`` of ``over``, in percent (SciPy's)."""
    from scipy.stats import binomtest

    ci = binomtest(right, over).proportion_ci(confidence_level=level, method="wilson")
    return 100.0 * float(ci.low), 100.0 * float(ci.high)


def load_run(
    path: Path,
    *,
    judge: Judge | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> RunReport:
    """Score run folder ``path`` again from its rows, with intervals, counts and means.

    Raises:
        RunFolderError: not a run folder, or its benchmark's data folder is gone.
    """
    from vidagent.bench import get_benchmark

    path = Path(path)
    manifest = read_manifest(path)
    bench = get_benchmark(manifest["benchmark"])
    data = Path(manifest["data"])
    if not data.is_dir():
        raise RunFolderError(f"{path}: the benchmark's data folder {data} is not there any more")
    options: dict[str, Any] = {"subset": manifest["subset"]} if manifest.get("subset") else {}
    videos = Path(manifest["videos"]) if manifest.get("videos") else None
    loaded = load(bench, data, split=manifest["split"], videos=videos, **options)
    wanted = list(manifest.get("samples", []))
    by_id = {s.id: s for s in loaded.samples}
    samples = [by_id[i] for i in wanted if i in by_id]
    rows = {k: r for k, r in read_rows(path / ROWS).items() if k in set(wanted)}
    scored, outcomes, scores = score_rows(
        bench, samples, rows, split=manifest["split"], judge=judge
    )
    means = _means(rows)
    lost = len(wanted) - len(samples)
    notes = list(scores.notes)
    if lost:
        notes.append(f"{lost} questions of the run are not in the data any more")
    damaged = unreadable_lines(path / ROWS)
    if damaged:  # bench score refuses such a file; a run's own is read around them
        notes.append(
            f"{damaged} line(s) of {ROWS} could not be read (damaged) and were left out: their "
            "questions count as not run (the same bench run command asks them again)"
        )
    scores = dataclasses.replace(scores, notes=tuple(notes))
    return RunReport(
        name=path.resolve().name,
        path=path,
        manifest=manifest,
        scores=scores,
        intervals=intervals(
            bench,
            scored,
            outcomes,
            scores,
            split=manifest["split"],
            resamples=resamples,
            seed=seed,
        ),
        counts=_counts(manifest, wanted, rows, len(scored)),
        means=means | _selective(outcomes, rows),
        mean_intervals={
            key: mean_interval(values, resamples=resamples, seed=seed)
            for key, values in _mean_values(rows).items()
            # one value has no spread to say anything of: its mean stands without an interval
            if len(values) > 1 and means.get(key) is not None and resamples > 0
        },
        risk_coverage=risk_coverage(outcomes, rows),
        samples=list(scored),
        outcomes={o.id: o for o in outcomes},
        rows={k: dict(r) for k, r in rows.items()},
    )


def mean_interval(
    values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (:func:`scipy.stats.bootstrap`,
    seeded as the scores' intervals); equal values are their own interval (a report gives one
    value none)."""
    import numpy as np
    from scipy.stats import bootstrap

    data = np.asarray(values, dtype=float)  # (N,)
    if len(data) < 2 or np.all(data == data[0]):
        return float(data.mean()), float(data.mean())
    result = bootstrap(
        (data,),
        np.mean,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _selective(
    outcomes: Sequence[Outcome], rows: Mapping[str, Mapping[str, Any]]
) -> dict[str, float | None]:
    """Coverage (answered questions that did not abstain) and selective accuracy (points
    earned over those), as fractions; None where no row records abstention."""
    checked = {
        k: bool(r["abstained"])
        for k, r in rows.items()
        if r.get("error") is None and r.get("parsed") is not None and "abstained" in r
    }
    if not checked:
        return {"coverage": None, "selective": None}
    kept = [o for o in outcomes if o.id in checked and not checked[o.id]]
    possible = sum(o.possible for o in kept)
    return {
        "coverage": (len(checked) - sum(checked.values())) / len(checked),
        "selective": sum(o.earned for o in kept) / possible if possible else None,
    }


def _counts(
    manifest: Mapping[str, Any],
    wanted: Sequence[str],
    rows: Mapping[str, Mapping[str, Any]],
    scored: int,
) -> dict[str, int]:
    # A question answered before its video went has its row: it is not missing.
    missing = {m["id"] for m in manifest.get("missing_videos", [])} - set(rows)
    ok = [r for r in rows.values() if r.get("error") is None]
    return {
        "questions": len(wanted),
        "answered": sum(r.get("parsed") is not None for r in ok),
        "errors": len(rows) - len(ok),
        "missing_videos": len(missing),
        "not_run": sum(1 for i in wanted if i not in rows and i not in missing),
        "scored": scored,
    }


def _mean_values(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each mean's values: the rows without an error that record it."""
    ok = [r for r in rows.values() if r.get("error") is None]
    return {
        key: [float(r[key]) for r in ok if isinstance(r.get(key), (int, float))] for key in MEANS
    }


def _means(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    ok = [r for r in rows.values() if r.get("error") is None]
    out: dict[str, float | None] = {}
    for key, values in _mean_values(rows).items():
        out[key] = sum(values) / len(values) if values else None
    # A row whose cost is None called a model without a known price: a mean over the others
    # would understate the run's cost, so the run has none ("no price" in the table).
    if any("cost_usd" in r and r["cost_usd"] is None for r in ok):
        out["cost_usd"] = None
    return out


# ---------------------------------------------------------------------------------------------
# Tables


def _cell(value: float, interval: tuple[float, float] | None, digits: int = 1) -> str:
    if interval is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def _label(scores: Scores, key: str) -> str:
    label = scores.labels.get(key, "")
    return f"{key} ({label})" if label and label != key else key


def score_table(reports: Sequence[RunReport]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one benchmark's table; a row of one cell is a section heading."""
    head = [f"{reports[0].scores.metric}"]
    for r in reports:
        head += [f"{r.name} official", f"{r.name} strict"]
    keys: dict[str, str] = {}  # cell key -> row label, in first-seen order over the runs
    for r in reports:
        for key, _ in cells(r.scores):
            section, _, name = key.partition("/")
            keys.setdefault(key, "overall" if key == "overall" else _label(r.scores, name))
    # each section's rows together (a category only a later run has joins its section's rows)
    sections = list(dict.fromkeys(key.partition("/")[0] if "/" in key else "" for key in keys))
    keys = dict(
        sorted(
            keys.items(),
            key=lambda kv: sections.index(kv[0].partition("/")[0] if "/" in kv[0] else ""),
        )
    )
    rows: list[list[str]] = []
    section_now = ""
    for key, label in keys.items():
        section = key.partition("/")[0] if "/" in key else ""
        if section != section_now:
            rows.append([section])
            section_now = section
        row = [label]
        for r in reports:
            found = dict(cells(r.scores)).get(key)
            interval = r.intervals.get(key)
            if found is None:
                row += ["–", "–"]
                continue
            digits = r.scores.digits
            row.append(_cell(found.score, interval.score if interval else None, digits))
            row.append(_cell(found.strict, interval.strict if interval else None, digits))
        rows.append(row)
    return head, rows


def cost_table(reports: Sequence[RunReport]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-run counts and per-question means."""
    head = [
        "run",
        "benchmark",
        "strategy",
        "llm",
        "frames cap",
        "questions",
        "answered",
        "errors",
        "missing videos",
        "not run",
        *MEANS.values(),
        "coverage",
        "selective",
        "AURC",
    ]
    rows = []
    for r in reports:
        m, c = r.manifest, r.counts
        options = ", ".join(f"{k}={v}" for k, v in sorted(m.get("strategy_options", {}).items()))
        called = m.get("calls")  # the roles the strategy calls (not recorded before 2026-11-30)
        llm = m.get("models", {}).get("llm", "")
        row = [
            r.name,
            f"{m['benchmark']} {m['split']}",
            f"{m['strategy']} ({options})" if options else m["strategy"],
            llm if called is None or "llm" in called else "– (calls none)",
            str(frame_cap(r) or "–"),
            str(c["questions"]),
            str(c["answered"]),
            str(c["errors"]),
            str(c["missing_videos"]),
            str(c["not_run"]),
        ]
        for key in MEANS:
            value = r.means.get(key)
            if value is None:
                priced = key != "cost_usd" or not r.means.get("tokens")
                row.append("–" if priced else "no price")
            else:
                row.append(_mean_cell(key, value, r.mean_intervals.get(key)))
        for key in ("coverage", "selective"):
            value = r.means.get(key)
            row.append("–" if value is None else f"{value:.1%}")
        rc = r.risk_coverage
        row.append("–" if rc is None else f"{rc.aurc:.3f} ({rc.answers})")
        rows.append(row)
    return head, rows


def named_apart(reports: Sequence[RunReport]) -> list[RunReport]:
    """``reports``, each named by :func:`names_apart` of its path."""
    names = names_apart([r.path for r in reports])
    return [dataclasses.replace(r, name=n) for r, n in zip(reports, names, strict=True)]


def names_apart(paths: Sequence[Path]) -> list[str]:
    """Each run folder's name: as many of its path's last folders as tell it from the others
    (two ladders' rungs are both ``frames-32``: ``a/frames-32`` and ``b/frames-32``)."""
    parts = [Path(p).resolve().parts for p in paths]
    depth = 1
    while depth < max((len(p) for p in parts), default=1):
        if len({p[-depth:] for p in parts}) == len(parts):
            break
        depth += 1
    return ["/".join(p[-depth:]) for p in parts]


def coverage_note(runs: Sequence[RunReport]) -> str | None:
    """What differs in the questions of runs shown side by side (one benchmark and split), if
    anything: their numbers are then over different questions."""
    asked = [set(r.manifest.get("samples", [])) for r in runs]
    if len(runs) < 2 or all(a == asked[0] for a in asked):
        return None
    shared = set.intersection(*asked)
    each = ", ".join(f"{r.name} {len(a)}" for r, a in zip(runs, asked, strict=True))
    return (
        f"these runs are over different questions ({each}; {len(shared)} in all of them): "
        "compare two on their shared questions with `vidagent bench compare`"
    )


def frame_cap(report: RunReport) -> int | None:
    """The run's frame budget per question (``None``: no limit)."""
    cap = report.manifest.get("budget", {}).get("frames")
    return int(cap) if isinstance(cap, (int, float)) else None


def ladders(reports: Sequence[RunReport]) -> list[list[RunReport]]:
    """Runs of one benchmark, split and strategy at two or more frame budgets (a ladder), each
    ordered by budget: what the accuracy-against-frames plot draws."""
    found: dict[tuple[str, str, str], list[RunReport]] = {}
    for r in reports:
        found.setdefault((*r.group, r.manifest["strategy"]), []).append(r)
    return [
        sorted(runs, key=lambda r: frame_cap(r) or 0)
        for runs in found.values()
        if len({frame_cap(r) for r in runs}) > 1
    ]


def _mean_cell(key: str, value: float, interval: tuple[float, float] | None) -> str:
    shown = MEAN_FORMAT[key].format(value)
    if interval is None:
        return shown
    lo, hi = (MEAN_FORMAT[key].format(x) for x in interval)
    return f"{shown} [{lo}, {hi}]"


def groups(reports: Sequence[RunReport]) -> dict[tuple[str, str], list[RunReport]]:
    """Runs by (benchmark, split), in order of first appearance."""
    out: dict[tuple[str, str], list[RunReport]] = {}
    for r in reports:
        out.setdefault(r.group, []).append(r)
    return out


def _caption(runs: Sequence[RunReport], resamples: int, seed: int) -> str:
    m = runs[0].manifest
    s = runs[0].scores
    rule = "every question counts" if s.rule == "all" else "unanswered questions left out"
    intervals = (
        f"with {LEVEL:.0%} intervals (Wilson score where the number is a share of right "
        f"answers, else percentile bootstrap: {resamples} resamples, seed {seed})"
        if resamples
        else "without intervals (0 resamples)"
    )
    return (
        f"{m.get('title', m['benchmark'])} {m['split']}: {s.metric}; official ({rule}) and "
        f"strict (unanswered = wrong), {intervals}"
    )


def _of(resamples: int) -> str:
    return (
        f"{LEVEL:.0%} percentile bootstrap intervals" if resamples else "no intervals (0 resamples)"
    )


def render_text(reports: Sequence[RunReport], *, resamples: int = RESAMPLES, seed: int = 0) -> str:
    """The report as aligned plain text."""
    parts = []
    for runs in groups(reports).values():
        head, rows = score_table(runs)
        parts.append(_caption(runs, resamples, seed))
        parts.append(_aligned(head, rows, indent=True))
        parts += [f"note ({r.name}): {n}" for r in runs for n in r.scores.notes]
        parts += [f"note: {n}" for n in [coverage_note(runs)] if n]
        parts.append("")
    parts.append(
        f"per question (means over the rows without an error, {_of(resamples)}; AURC with "
        "the number of answers on its curve: areas over different numbers differ by that too)"
    )
    parts.append(_aligned(*cost_table(reports)))
    return "\n".join(parts)


def _aligned(head: list[str], rows: list[list[str]], *, indent: bool = False) -> str:
    """Columns padded to their widest cell; with ``indent``, a section's rows under its heading."""
    if indent:
        rows = [r if len(r) == 1 or r[0] == "overall" else ["  " + r[0], *r[1:]] for r in rows]
    full = [r for r in rows if len(r) == len(head)]
    widths = [max(len(x[i]) for x in [head, *full]) for i in range(len(head))]

    def line(cells_: list[str]) -> str:
        if len(cells_) == 1:
            return cells_[0]
        padded = [
            cells_[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(cells_[1:], widths[1:], strict=False)),
        ]
        return "  ".join(padded).rstrip()

    return "\n".join(line(r) for r in [head, *rows])


def render_markdown(
    reports: Sequence[RunReport], *, resamples: int = RESAMPLES, seed: int = 0
) -> str:
    """The report as Markdown: one table per benchmark and split, then the cost table."""
    parts = ["# Benchmark report", ""]
    for runs in groups(reports).values():
        head, rows = score_table(runs)
        parts += [f"## {_caption(runs, resamples, seed)}", "", _md(head, rows), ""]
        parts += [f"- note ({r.name}): {n}" for r in runs for n in r.scores.notes]
        parts += [f"- note: {n}" for n in [coverage_note(runs)] if n]
        parts.append("")
    parts += ["## Per question", ""]
    parts += [
        (
            f"Means over the rows without an error, {_of(resamples)}; AURC with the number of "
            "answers on its curve (areas over different numbers of answers differ by that too)."
        ),
        "",
    ]
    parts += [_md(*cost_table(reports)), ""]
    return "\n".join(parts)


def _md(head: list[str], rows: list[list[str]]) -> str:
    def line(cells_: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells_) + " |"

    out = [line(head), "|" + "---|" * len(head)]
    for r in rows:
        out.append(line([f"*{r[0]}*", *[""] * (len(head) - 1)]) if len(r) == 1 else line(r))
    return "\n".join(out)


def report_json(
    reports: Sequence[RunReport], *, resamples: int = RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    return {
        "level": LEVEL,
        "resamples": resamples,
        "seed": seed,
        "runs": [r.to_dict() for r in reports],
    }


def write_report(
    reports: Sequence[RunReport],
    out: Path,
    *,
    plots: bool = True,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[Path]:
    """Write ``report.md``, ``report.json`` and (with ``plots``) the PNG plots into ``out``.

    Raises:
        BackendMissingError: ``plots`` and matplotlib is not installed (the ``bench`` extra).
    """
    import json

    if plots:
        from vidagent.bench.plots import require_matplotlib

        require_matplotlib()  # before anything is written
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "report.md", out / "report.json"
    md.write_text(render_markdown(reports, resamples=resamples, seed=seed), encoding="utf-8")
    body = report_json(reports, resamples=resamples, seed=seed)
    js.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    written = [md, js]
    if plots:
        from vidagent.bench.plots import (
            plot_accuracy_vs_cost,
            plot_categories,
            plot_ladders,
            plot_risk_coverage,
        )

        written.append(plot_categories(reports, out / "accuracy_by_category.png"))
        written.append(plot_accuracy_vs_cost(reports, out / "accuracy_vs_cost.png"))
        if ladders(reports):
            written.append(plot_ladders(reports, out / "accuracy_vs_frames.png"))
        if any(r.risk_coverage is not None for r in reports):
            written.append(plot_risk_coverage(reports, out / "risk_coverage.png"))
    return written
