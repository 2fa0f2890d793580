"""Runs compared question by question: paired tests and paired intervals.

Two runs' separate intervals overlap long after a paired test tells them apart, because most of
the spread is between questions, not between systems. :func:`compare_runs` pairs the runs on the
questions both ran without an error and reports, for run B against run A (differences are B − A):

- **the 2×2 table of joint correctness** (both right, A only, B only, both wrong), each cell with
  its mean change in steps (tool calls), frames and tokens: whether a gain was bought with more
  looking;
- **an exact McNemar test** on the discordant cells (``statsmodels``'
  :func:`~statsmodels.stats.contingency_tables.mcnemar`, ``exact=True``: a two-sided binomial
  test of A-only against B-only);
- **intervals of the differences** in the official and strict numbers. Where the number is a
  share of right answers (every question scores 0 or 1 and the number is the share of right
  ones on the pairs), **Newcombe's square-and-add score interval for paired proportions**
  (Newcombe 1998, Statistics in Medicine 17:2635, from Wilson score intervals; it keeps its
  coverage where few pairs differ, where the bootstrap's falls short, and is not zero-wide at 0%
  or 100% or on one pair, where a bootstrap's is; near p = 0.05 it and the exact McNemar test
  can still disagree: 5 discordant pairs all one way give p = 0.0625 and an interval that
  just excludes 0, so read the test for significance); otherwise (IoU, judge points, an
  official rule over answered questions with some unanswered) a **paired percentile
  bootstrap** (the benchmark's own
  ``aggregate`` on each resample of the paired questions, so the official rule holds). Each
  difference names its method. The per-question means of steps, frames, tokens, cost and
  latency get paired percentile bootstrap intervals (:func:`scipy.stats.bootstrap`,
  ``paired=True``, seeded);
- the same per category (each category the loader tags a question with), with each category's
  McNemar p-value also adjusted by **Holm's method** over all the category tests (valid however
  the categories overlap): a category "significant" only unadjusted is one of many looks.

Several runs (:func:`compare_many`: five strategies, or one strategy's settings) are one family
of comparisons, on the questions every run ran without an error:

- **Cochran's Q test** of whether the runs' shares of right answers differ at all (Cochran 1950;
  statsmodels' :func:`~statsmodels.stats.contingency_tables.cochrans_q`, the χ² approximation
  with k − 1 degrees of freedom), beside its **permutation p-value** (SciPy's
  :func:`~scipy.stats.permutation_test` permuting the runs' right/wrong within each question,
  exact where the permutations are few; the χ² approximation wants many questions on which the
  runs disagree, and the permutation p does not);
- each pair of runs (or each run against the first) compared as two runs are, on those same
  questions, with each pair's McNemar p-value adjusted by **Holm's method** over the pairs: with
  ten pairs, one p of 0.03 is one of ten looks.

Which questions are paired. The run folders must be of one benchmark and split. A question is
left out, and counted under its reason, when it is not in every run's question list, has no
row in a run (not run yet, or its video was missing), or its row records an error (a failure of
the harness or the provider, not an answer). A row without a parsable answer is kept: it is
wrong.

Right or wrong. A question is right when it earns at least ``right_at`` of its points (default
0.5): for a multiple-choice benchmark that is the official correctness; for grounding it is the
usual R@1 at IoU 0.5; for a 0–3 judge score, 1.5 and up.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from vidagent.bench.report import LEVEL, MEAN_FORMAT, MEANS, RESAMPLES, load_run
from vidagent.exceptions import BackendMissingError, UserError

if TYPE_CHECKING:
    import numpy as np

    from vidagent.bench.base import Benchmark, Outcome, Sample
    from vidagent.bench.judge import Judge
    from vidagent.bench.report import RunReport

#: The 2×2 cells, A's correctness first.
CELLS = {
    (True, True): "both right",
    (True, False): "A only",
    (False, True): "B only",
    (False, False): "both wrong",
}
#: Per-question counts whose change (B − A) the 2×2 table shows.
CHANGES = ("steps", "frames", "tokens")


#: How a difference's interval was computed (``Difference.method``).
NEWCOMBE = "newcombe"  # Newcombe's square-and-add score interval for paired proportions
BOOTSTRAP = "bootstrap"  # paired percentile bootstrap


@dataclass(frozen=True)
class Difference:
    """A paired difference B − A with its interval.

    Attributes:
        a, b: each run's value on the paired questions.
        low, high: the interval of ``b - a``.
        questions: the pairs it is computed over.
        method: :data:`NEWCOMBE` or :data:`BOOTSTRAP`.
    """

    a: float
    b: float
    low: float
    high: float
    questions: int
    method: str = BOOTSTRAP

    @property
    def diff(self) -> float:
        return self.b - self.a

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": round(self.a, 6),
            "b": round(self.b, 6),
            "diff": round(self.diff, 6),
            "interval": [round(self.low, 6), round(self.high, 6)],
            "method": self.method,
            "questions": self.questions,
        }


@dataclass(frozen=True)
class McNemar:
    """The exact McNemar test: ``a_only`` and ``b_only`` discordant pairs, the two-sided p,
    and (a category's test) that p adjusted by Holm's method over all the category tests."""

    a_only: int
    b_only: int
    pvalue: float
    holm: float | None = None

    def to_dict(self) -> dict[str, Any]:
        body = {"a_only": self.a_only, "b_only": self.b_only, "pvalue": self.pvalue}
        return body if self.holm is None else body | {"holm_pvalue": self.holm}


@dataclass(frozen=True)
class Paired:
    """One set of paired questions (all of them, or one category) compared.

    Attributes:
        questions: the pairs.
        table: the 2×2 cells -> ``{"questions": n, "<change>": mean B − A or None}``.
        mcnemar: the exact test on the discordant cells.
        official, strict: the differences in the benchmark's official and strict numbers.
    """

    questions: int
    table: dict[str, dict[str, float | int | None]]
    mcnemar: McNemar
    official: Difference
    strict: Difference

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "table": self.table,
            "mcnemar": self.mcnemar.to_dict(),
            "official": self.official.to_dict(),
            "strict": self.strict.to_dict(),
        }


@dataclass(frozen=True)
class Comparison:
    """Run B against run A on the questions both ran without an error (module docstring).

    Attributes:
        a, b: the run folders' names.
        benchmark, split, metric: what was run.
        left_out: reason -> questions left out for it.
        overall: all the paired questions.
        means: per-question means (steps, frames, tokens, cost, latency) -> their difference,
            over the pairs where both rows have the number (``None``: no such pair).
        categories: category -> its paired questions compared.
        right_at, resamples, seed, level: how it was computed.
    """

    a: str
    b: str
    benchmark: str
    split: str
    metric: str
    left_out: dict[str, int]
    overall: Paired
    means: dict[str, Difference | None]
    categories: dict[str, Paired] = field(default_factory=dict)
    right_at: float = 0.5
    resamples: int = RESAMPLES
    seed: int = 0
    level: float = LEVEL

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "benchmark": self.benchmark,
            "split": self.split,
            "metric": self.metric,
            "right_at": self.right_at,
            "level": self.level,
            "resamples": self.resamples,
            "seed": self.seed,
            "left_out": self.left_out,
            "overall": self.overall.to_dict(),
            "means": {k: None if d is None else d.to_dict() for k, d in self.means.items()},
            "categories": {k: p.to_dict() for k, p in self.categories.items()},
        }


@dataclass(frozen=True)
class RunSummary:
    """One run's numbers on the questions every run of a family ran without an error.

    Attributes:
        name: the run folder's name.
        official, strict: the benchmark's numbers on those questions.
        right: how many it got right (at least ``right_at`` of the points).
        means: per-question means (steps, frames, tokens, cost, latency) over the rows that
            have the number (``None``: no row has it).
    """

    name: str
    official: float
    strict: float
    right: int
    means: dict[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "official": round(self.official, 6),
            "strict": round(self.strict, 6),
            "right": self.right,
            "means": {k: None if v is None else round(v, 6) for k, v in self.means.items()},
        }


@dataclass(frozen=True)
class CochranQ:
    """Cochran's Q test that k runs' shares of right answers are equal.

    Attributes:
        statistic: Q.
        df: k − 1.
        pvalue: from the χ² distribution with ``df`` degrees of freedom.
        permutation_pvalue: the share of permutations of the runs' right/wrong within each
            question whose Q is at least as large (exact where they are few enough to list).
        resamples: the permutations drawn (at most; fewer when all were listed).
        discordant: the questions on which the runs do not all agree (only they move Q).
    """

    statistic: float
    df: int
    pvalue: float
    permutation_pvalue: float
    resamples: int
    discordant: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "statistic": round(self.statistic, 6),
            "df": self.df,
            "pvalue": self.pvalue,
            "permutation_pvalue": self.permutation_pvalue,
            "resamples": self.resamples,
            "discordant": self.discordant,
        }


@dataclass(frozen=True)
class Comparisons:
    """Several runs compared as one family, on the questions every run ran without an error
    (module docstring).

    Attributes:
        runs: each run's numbers on those questions, in the order given.
        benchmark, split, metric: what was run.
        questions: how many every run ran without an error.
        left_out: reason -> questions left out for it.
        cochran: the omnibus test across all the runs.
        pairs: each pair compared (B the later run), its overall McNemar p adjusted by Holm's
            method over the pairs (``mcnemar.holm``); per category, Holm's adjustment is over
            that pair's categories.
        against_first: each run against the first only, rather than every pair.
        right_at, resamples, seed, level: how it was computed.
    """

    runs: list[RunSummary]
    benchmark: str
    split: str
    metric: str
    questions: int
    left_out: dict[str, int]
    cochran: CochranQ
    pairs: list[Comparison]
    against_first: bool = False
    right_at: float = 0.5
    resamples: int = RESAMPLES
    seed: int = 0
    level: float = LEVEL

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": [r.to_dict() for r in self.runs],
            "benchmark": self.benchmark,
            "split": self.split,
            "metric": self.metric,
            "questions": self.questions,
            "right_at": self.right_at,
            "level": self.level,
            "resamples": self.resamples,
            "seed": self.seed,
            "left_out": self.left_out,
            "cochran_q": self.cochran.to_dict(),
            "pairs_compared": "each against the first" if self.against_first else "every pair",
            "pairs": [c.to_dict() for c in self.pairs],
        }


# ---------------------------------------------------------------------------------------------
# Statistics (SciPy and statsmodels; nothing hand-written)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """The two-sided p-value of the exact McNemar test on the discordant counts.

    Raises:
        BackendMissingError: statsmodels is not installed (the ``bench`` extra).
    """
    try:
        from statsmodels.stats.contingency_tables import mcnemar
    except ImportError:
        raise BackendMissingError(
            "statsmodels (the McNemar test of bench compare)", "bench"
        ) from None
    if a_only + b_only == 0:
        return 1.0  # no discordant pair: nothing tells the runs apart
    result = mcnemar([[0, a_only], [b_only, 0]], exact=True)
    return float(result.pvalue)


def newcombe_paired(
    both: int, first_only: int, second_only: int, neither: int, *, level: float = LEVEL
) -> tuple[float, float]:
    """Newcombe's square-and-add interval for ``p_first - p_second`` from a paired 2×2 table
    (Newcombe 1998, Statistics in Medicine 17:2635; as in Fagerland, Lydersen and Laake,
    *Statistical Analysis of Contingency Tables*, ch. 8): each proportion's Wilson score
    interval, combined with the estimated correlation of the two proportions, which is taken
    as 0 where the cross-product difference is positive but under ``n / 2``. Proportions, not
    percentages.

    Raises:
        BackendMissingError: statsmodels is not installed (the ``bench`` extra).
    """
    try:
        from statsmodels.stats.proportion import proportion_confint
    except ImportError:
        raise BackendMissingError("statsmodels (the intervals of bench compare)", "bench") from None
    n = both + first_only + second_only + neither
    first, second = both + first_only, both + second_only
    p1, p2 = first / n, second / n
    l1, u1 = (float(x) for x in proportion_confint(first, n, 1 - level, method="wilson"))
    l2, u2 = (float(x) for x in proportion_confint(second, n, 1 - level, method="wilson"))
    margins = first * (n - first) * second * (n - second)
    cross = both * neither - first_only * second_only
    if margins == 0 or 0 <= cross <= n / 2:
        psi = 0.0
    else:
        psi = (cross - n / 2 if cross > n / 2 else cross) / margins**0.5
    d1, e2 = p1 - l1, u2 - p2
    d2, e1 = p2 - l2, u1 - p1
    low = p1 - p2 - (d1**2 + e2**2 - 2 * psi * d1 * e2) ** 0.5
    high = p1 - p2 + (d2**2 + e1**2 - 2 * psi * d2 * e1) ** 0.5
    return max(low, -1.0), min(high, 1.0)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``pvalues`` (statsmodels' ``multipletests``)."""
    if not pvalues:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(pvalues), method="holm")[1]]


#: Values of the permuted tables held at once by :func:`cochran_q` (float64: 16 MB): with 2,000
#: questions, 5 runs and 1,000 permutations it held about 600 MB.
PERMUTED_VALUES = 2_000_000


def cochran_q(
    right: Sequence[Sequence[bool]], *, resamples: int = RESAMPLES, seed: int = 0
) -> CochranQ:
    """Cochran's Q test on ``right`` (one row per question, one column per run): Q and its χ²
    p-value (statsmodels' ``cochrans_q``), and the p-value of Q under permutations of each
    question's row (SciPy's ``permutation_test``, ``permutation_type="samples"``: the runs'
    labels exchanged within each question, which is the null hypothesis; seeded, exact where
    ``(k!)^D`` is at most ``resamples``, D the questions on which the runs disagree).

    Raises:
        BackendMissingError: statsmodels is not installed (the ``bench`` extra).
    """
    try:
        from statsmodels.stats.contingency_tables import cochrans_q
    except ImportError:
        raise BackendMissingError("statsmodels (Cochran's Q of bench compare)", "bench") from None
    import numpy as np
    from scipy.stats import permutation_test

    x = np.asarray(right, dtype=float)  # (N, k)
    k = x.shape[1]
    # only the questions on which the runs disagree move Q (a row all right or all wrong adds
    # the same to both of its terms), and only they are permuted: exact more often, and less
    # memory
    x = x[x.min(axis=1) != x.max(axis=1)]  # (D, k)
    discordant = len(x)
    if discordant == 0:  # every question right in every run or wrong in every run: Q is 0/0
        return CochranQ(0.0, k - 1, 1.0, 1.0, 0, 0)
    result = cochrans_q(x)

    def q(*columns: np.ndarray, axis: int = -1) -> np.ndarray:
        m = np.stack(columns, axis=-1)  # (..., N, k)
        col, row = m.sum(axis=-2), m.sum(axis=-1)
        total = row.sum(axis=-1)
        return (  # type: ignore[no-any-return]
            (k - 1) * (k * (col**2).sum(axis=-1) - total**2) / (k * total - (row**2).sum(axis=-1))
        )

    permuted = permutation_test(
        tuple(x.T),
        q,
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        batch=max(1, PERMUTED_VALUES // x.size),
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    drawn = min(resamples, math.factorial(k) ** discordant)
    return CochranQ(
        float(result.statistic),
        int(result.df),
        float(result.pvalue),
        float(permuted.pvalue),
        drawn,
        discordant,
    )


def paired_interval(
    n: int,
    statistic: Callable[[np.ndarray], Any],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of ``statistic(indices)`` over resamples of ``n`` paired
    questions (:func:`scipy.stats.bootstrap` resampling the pairs' indices: both runs' values
    of a drawn question travel together). ``statistic`` may return several numbers; the bounds
    come back one per number."""
    import numpy as np
    from scipy.stats import bootstrap

    result = bootstrap(
        (np.arange(n),),
        statistic,
        vectorized=False,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return np.atleast_1d(ci.low), np.atleast_1d(ci.high)


def mean_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> Difference:
    """The paired difference of means ``mean(b) - mean(a)`` with its percentile interval."""
    import numpy as np
    from scipy.stats import bootstrap

    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)  # (N,), (N,)
    ma, mb = float(xa.mean()), float(xb.mean())
    if len(xa) < 2 or np.all(xb - xa == (xb - xa)[0]):
        # one pair, or the same difference on every pair: every resample gives it
        return Difference(ma, mb, mb - ma, mb - ma, len(xa))
    result = bootstrap(
        (xa, xb),
        lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return Difference(ma, mb, float(ci.low), float(ci.high), len(xa))


# ---------------------------------------------------------------------------------------------
# Pairing and comparing


def shared_questions(
    reports: Sequence[RunReport], labels: Sequence[str]
) -> tuple[list[str], dict[str, int]]:
    """The ids every run ran without an error (in the first run's order), and reason -> count
    of the rest; each run is named in the reasons by its label ("A" and "B" for two runs)."""
    asked = [set(r.manifest.get("samples", [])) for r in reports]
    reasons: dict[str, int] = {}

    def drop(reason: str) -> None:
        reasons[reason] = reasons.get(reason, 0) + 1

    kept = []
    for i in reports[0].manifest.get("samples", []):
        missing = [label for label, ids in zip(labels, asked, strict=True) if i not in ids]
        rows = [r.rows.get(i) for r in reports]
        erred = [
            label
            for label, row in zip(labels, rows, strict=True)
            if row is not None and row.get("error") is not None
        ]
        if missing:
            drop(f"not among the questions of run {_and(missing)}")
        elif None in rows:
            drop(f"no row in run {labels[rows.index(None)]} (not run, or its video missing)")
        elif erred:
            drop(f"an error in run {erred[0]}")
        elif any(i not in r.outcomes for r in reports):  # or not in the benchmark at all
            drop("not a question of the benchmark with a public answer")
        else:
            kept.append(i)
    elsewhere = len(set().union(*asked[1:]) - asked[0])
    if elsewhere:
        reasons[f"not among the questions of run {labels[0]}"] = elsewhere
    return kept, reasons


def _and(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _load(paths: Sequence[Path], judge: Judge | None) -> list[RunReport]:
    """The run folders' reports, each named apart from the others (``a/frames-32``).

    Raises:
        UserError: a folder given twice, or runs of different benchmarks or splits.
        RunFolderError: a path is not a run folder.
    """
    from vidagent.bench.report import names_apart
    from vidagent.bench.rundir import read_manifest

    resolved = [Path(p).resolve() for p in paths]
    for path, at in zip(paths, resolved, strict=True):
        if resolved.count(at) > 1:
            raise UserError(f"{path} is given twice: compare different runs")
    what = [(m["benchmark"], m["split"]) for m in map(read_manifest, paths)]
    names = names_apart(paths)
    for name, other in zip(names[1:], what[1:], strict=True):
        if other != what[0]:
            raise UserError(
                f"{names[0]} is a run of {' '.join(what[0])} and {name} of "
                f"{' '.join(other)}: compare runs of one benchmark and split"
            )
    reports = [load_run(p, judge=judge, resamples=0) for p in paths]
    return [replace(r, name=n) for r, n in zip(reports, names, strict=True)]


def _shared(
    reports: Sequence[RunReport], labels: Sequence[str]
) -> tuple[list[str], dict[str, int]]:
    """:func:`shared_questions`, refusing runs that share none."""
    ids, reasons = shared_questions(reports, labels)
    if ids:
        return ids, reasons
    names = _and([r.name for r in reports])
    asked = [set(r.manifest.get("samples", [])) for r in reports]
    if not set.intersection(*asked):  # not a matter of errors: other questions altogether
        raise UserError(
            f"{names} were asked different questions ({_and([str(len(a)) for a in asked])}, "
            "none in common): compare runs over the same questions"
        )
    every = "both" if len(reports) == 2 else "all"
    raise UserError(f"{names} share no question that {every} ran without an error")


def compare_runs(
    path_a: Path,
    path_b: Path,
    *,
    judge: Judge | None = None,
    right_at: float = 0.5,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> Comparison:
    """Run B against run A on the questions both ran without an error (module docstring).

    Raises:
        UserError: one folder given twice, runs of different benchmarks or splits, or no
            question both ran without an error.
        RunFolderError: a path is not a run folder.
    """
    a, b = _load([path_a, path_b], judge)
    ids, reasons = _shared([a, b], ("A", "B"))
    return _compare(a, b, ids, reasons, _Stats(right_at, resamples, seed, level))


def compare_many(
    paths: Sequence[Path],
    *,
    against_first: bool = False,
    judge: Judge | None = None,
    right_at: float = 0.5,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> Comparisons:
    """Several runs as one family on the questions every run ran without an error: each run's
    numbers, Cochran's Q across them, and every pair (or each run against the first) compared
    as :func:`compare_runs` compares two, with the pairs' McNemar p-values adjusted by Holm's
    method (module docstring).

    Raises:
        UserError: fewer than two runs, a path given twice, runs of different benchmarks or
            splits, or no question that every run ran without an error.
        RunFolderError: a path is not a run folder.
    """
    import numpy as np

    from vidagent.bench import get_benchmark

    if len(paths) < 2:
        raise UserError("compare needs at least two run folders")
    reports = _load(paths, judge)
    ids, reasons = _shared(reports, [r.name for r in reports])
    stats = _Stats(right_at, resamples, seed, level)
    bench = get_benchmark(reports[0].scores.benchmark)
    by_id = {s.id: s for s in reports[0].samples}
    samples = [by_id[i] for i in ids]
    split = reports[0].scores.split
    summaries = []
    for r in reports:
        outcomes = [r.outcomes[i] for i in ids]
        scores = bench.aggregate(samples, outcomes, split=split).overall
        means = {
            key: (float(np.mean(values)) if values else None)
            for key in MEANS
            for values in [[float(r.rows[i][key]) for i in ids if _number(r.rows[i].get(key))]]
        }
        right = sum(_right(o, right_at) for o in outcomes)
        summaries.append(RunSummary(r.name, scores.score, scores.strict, right, means))
    matrix = [[_right(r.outcomes[i], right_at) for r in reports] for i in ids]
    pairs = [
        (first, second)
        for first in range(len(reports))
        for second in range(first + 1, len(reports))
        if first == 0 or not against_first
    ]
    compared = [_compare(reports[x], reports[y], ids, reasons, stats) for x, y in pairs]
    adjusted = holm([c.overall.mcnemar.pvalue for c in compared])
    compared = [
        replace(c, overall=replace(c.overall, mcnemar=replace(c.overall.mcnemar, holm=h)))
        for c, h in zip(compared, adjusted, strict=True)
    ]
    return Comparisons(
        runs=summaries,
        benchmark=reports[0].scores.benchmark,
        split=split,
        metric=reports[0].scores.metric,
        questions=len(ids),
        left_out=reasons,
        cochran=cochran_q(matrix, resamples=resamples, seed=seed),
        pairs=compared,
        against_first=against_first,
        right_at=right_at,
        resamples=resamples,
        seed=seed,
        level=level,
    )


def _compare(
    a: RunReport, b: RunReport, ids: Sequence[str], reasons: dict[str, int], stats: _Stats
) -> Comparison:
    """Run B against run A on ``ids`` (questions both ran without an error)."""
    from vidagent.bench import get_benchmark

    right_at, resamples, seed, level = stats
    bench = get_benchmark(a.scores.benchmark)
    by_id = {s.id: s for s in a.samples}
    overall = _paired(bench, a, b, ids, by_id, a.scores.split, stats)
    categories: dict[str, list[str]] = {}
    for i in ids:
        for c in by_id[i].categories:
            categories.setdefault(c, []).append(i)
    means: dict[str, Difference | None] = {}
    for key in MEANS:
        pairs = [
            (float(a.rows[i][key]), float(b.rows[i][key]))
            for i in ids
            if _number(a.rows[i].get(key)) and _number(b.rows[i].get(key))
        ]
        means[key] = (
            mean_difference(
                [x for x, _ in pairs],
                [y for _, y in pairs],
                resamples=resamples,
                seed=seed,
                level=level,
            )
            if pairs
            else None
        )
    per_category = {
        c: _paired(bench, a, b, members, by_id, a.scores.split, stats)
        for c, members in categories.items()
    }
    adjusted = holm([p.mcnemar.pvalue for p in per_category.values()])
    per_category = {
        c: replace(p, mcnemar=replace(p.mcnemar, holm=h))
        for (c, p), h in zip(per_category.items(), adjusted, strict=True)
    }
    return Comparison(
        a=a.name,
        b=b.name,
        benchmark=a.scores.benchmark,
        split=a.scores.split,
        metric=a.scores.metric,
        left_out=reasons,
        overall=overall,
        means=means,
        categories=per_category,
        right_at=right_at,
        resamples=resamples,
        seed=seed,
        level=level,
    )


class _Stats(NamedTuple):
    right_at: float
    resamples: int
    seed: int
    level: float


def _right(o: Outcome, right_at: float) -> bool:
    """Whether ``o`` earned at least ``right_at`` of its points."""
    return o.possible > 0 and o.earned >= right_at * o.possible


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _paired(
    bench: Benchmark,
    a: RunReport,
    b: RunReport,
    ids: Sequence[str],
    by_id: Mapping[str, Sample],
    split: str,
    stats: _Stats,
) -> Paired:
    right_at, resamples, seed, level = stats
    samples = [by_id[i] for i in ids]
    oa, ob = [a.outcomes[i] for i in ids], [b.outcomes[i] for i in ids]

    table: dict[str, dict[str, float | int | None]] = {}
    for key, name in CELLS.items():
        members = [
            i
            for i, x, y in zip(ids, oa, ob, strict=True)
            if (_right(x, right_at), _right(y, right_at)) == key
        ]
        cell: dict[str, float | int | None] = {"questions": len(members)}
        for change in CHANGES:
            deltas = [
                float(b.rows[i][change]) - float(a.rows[i][change])
                for i in members
                if _number(a.rows[i].get(change)) and _number(b.rows[i].get(change))
            ]
            cell[change] = sum(deltas) / len(deltas) if deltas else None
        table[name] = cell
    a_only, b_only = int(table["A only"]["questions"] or 0), int(table["B only"]["questions"] or 0)

    def scores(pick: Iterable[int]) -> list[float]:
        sa = bench.aggregate([samples[i] for i in pick], [oa[i] for i in pick], split=split)
        sb = bench.aggregate([samples[i] for i in pick], [ob[i] for i in pick], split=split)
        return [sa.overall.score, sb.overall.score, sa.overall.strict, sb.overall.strict]

    full = scores(range(len(ids)))
    n = len(ids)
    # A share of right answers: every question scores 0 or 1 of 1 point, and the number is the
    # share of right ones on these pairs (not an official rule over answered questions only)
    binary = all(o.possible == 1 and o.earned in (0.0, 1.0) for o in (*oa, *ob))
    shares = [100.0 * sum(o.earned for o in oa) / n, 100.0 * sum(o.earned for o in ob) / n]
    is_share = [
        binary and all(abs(x - y) < 1e-9 for x, y in zip(pair, shares, strict=True))
        for pair in (full[:2], full[2:])
    ]
    # an official rule over the answered ones is a share of all the pairs only where all were
    # answered (at 0 right it matched all the same, and took all the pairs for its count)
    everyone = all(o.answered for o in (*oa, *ob))
    if not everyone and bench.aggregate(samples[:1], oa[:1], split=split).rule != "all":
        is_share[0] = False
    bounds: list[tuple[float, float]] = [(0.0, 0.0), (0.0, 0.0)]
    if is_share[0] or is_share[1]:
        joint = Counter((x.earned == 1, y.earned == 1) for x, y in zip(oa, ob, strict=True))
        low, high = newcombe_paired(
            joint[True, True],
            joint[False, True],
            joint[True, False],
            joint[False, False],
            level=level,
        )  # B − A: B's share first
        bounds = [(100.0 * low, 100.0 * high)] * 2
    if not all(is_share):
        if n > 1:

            def differences(pick: np.ndarray) -> list[float]:
                sa, sb, ta, tb = scores(pick)
                return [sb - sa, tb - ta]

            low_b, high_b = paired_interval(
                n, differences, resamples=resamples, seed=seed, level=level
            )
            booted = [(float(low_b[0]), float(high_b[0])), (float(low_b[1]), float(high_b[1]))]
        else:  # one pair: no spread to resample
            booted = [(full[1] - full[0],) * 2, (full[3] - full[2],) * 2]
        bounds = [bounds[k] if is_share[k] else booted[k] for k in (0, 1)]
    methods = [NEWCOMBE if share else BOOTSTRAP for share in is_share]
    return Paired(
        questions=n,
        table=table,
        mcnemar=McNemar(a_only, b_only, mcnemar_exact(a_only, b_only)),
        official=Difference(full[0], full[1], *bounds[0], n, methods[0]),
        strict=Difference(full[2], full[3], *bounds[1], n, methods[1]),
    )


# ---------------------------------------------------------------------------------------------
# Text and plot


def _signed(d: Difference, digits: int) -> str:
    return f"{d.diff:+.{digits}f} [{d.low:+.{digits}f}, {d.high:+.{digits}f}]"


def _significant(d: Difference) -> str:
    """A mean's difference to 3 significant digits (a cost of $0.00004 is not +0.0000)."""
    return f"{d.diff:+.3g} [{d.low:+.3g}, {d.high:+.3g}]"


def _p(value: float) -> str:
    """A p-value as printed: one too small for a float reads as a bound, not as 0."""
    return "< 1e-300" if value < 1e-300 else f"= {value:.3g}"


#: How each interval method reads in the text.
METHODS = {NEWCOMBE: "Newcombe", BOOTSTRAP: "bootstrap"}


def _change(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}"


def render_comparison(c: Comparison) -> str:
    """The comparison as plain text: what was paired, the 2×2 table, the tests, the means."""
    o = c.overall
    head = (
        f"{c.b} (B) against {c.a} (A), {c.benchmark} {c.split}: {o.questions} questions both "
        "ran without an error (a row without a parsable answer counts wrong); differences are "
        f"B − A with {c.level:.0%} intervals: "
        "Newcombe's paired score interval where the number is a share of right answers, else "
        f"a paired percentile bootstrap ({c.resamples} resamples, seed {c.seed})"
    )
    lines = [head]
    if c.left_out:
        shown = "; ".join(f"{n} {reason}" for reason, n in c.left_out.items())
        lines.append(f"left out: {sum(c.left_out.values())} ({shown})")
    lines += ["", f"joint correctness (right: at least {c.right_at:g} of a question's points)"]
    lines.append(f"  {'':<11} {'questions':>9}  " + "  ".join(f"Δ{k:>7}" for k in CHANGES))
    for name, cell in o.table.items():
        lines.append(
            f"  {name:<11} {cell['questions']:>9}  "
            + "  ".join(f"{_change(cell[k]):>8}" for k in CHANGES)
        )
    m = o.mcnemar
    lines.append(f"exact McNemar: A only {m.a_only}, B only {m.b_only}, two-sided p {_p(m.pvalue)}")
    lines.append("")
    for kind, d in (("official", o.official), ("strict", o.strict)):
        lines.append(
            f"{c.metric} {kind} on these {d.questions} questions: {c.a} {d.a:.1f}, "
            f"{c.b} {d.b:.1f}: {_signed(d, 1)} ({METHODS[d.method]})"
        )
    for key, mean in c.means.items():
        if mean is None:
            lines.append(f"{MEANS[key]}: –")
        else:
            lines.append(f"{MEANS[key]}: {mean.a:.4g} → {mean.b:.4g}, {_significant(mean)}")
    if c.categories:
        lines += [
            "",
            (
                "per category: questions, official B − A [interval], A only / B only, McNemar "
                f"p, and p adjusted by Holm's method over the {len(c.categories)} category tests"
            ),
        ]
        width = max(len(k) for k in c.categories)
        for key, p in c.categories.items():
            lines.append(
                f"  {key:<{width}}  {p.questions:>5}  {_signed(p.official, 1):>24} "
                f"({METHODS[p.official.method]})  {p.mcnemar.a_only}/{p.mcnemar.b_only}  "
                f"p {_p(p.mcnemar.pvalue)}, Holm p "
                f"{_p(p.mcnemar.pvalue if p.mcnemar.holm is None else p.mcnemar.holm)}"
            )
    return "\n".join(lines)


def render_comparisons(f: Comparisons) -> str:
    """Several runs as plain text: what was paired, each run's numbers, Cochran's Q, and one
    line per pair (each pair in full is in :meth:`Comparisons.to_dict`)."""
    q = f.cochran
    lines = [
        (
            f"{len(f.runs)} runs of {f.benchmark} {f.split} on the {f.questions} questions every "
            "run ran without an error (a row without a parsable answer counts wrong)"
        )
    ]
    if f.left_out:
        shown = "; ".join(f"{n} {reason}" for reason, n in f.left_out.items())
        lines.append(f"left out: {sum(f.left_out.values())} ({shown})")
    width = max(len(r.name) for r in f.runs)
    means = [k for k in MEANS if any(r.means[k] is not None for r in f.runs)]
    lines += [
        "",
        f"  {'run':<{width}}  {'official':>8}  {'strict':>8}  {'right':>7}  "
        + "  ".join(f"{MEANS[k]:>9}" for k in means),
    ]
    for r in f.runs:
        lines.append(
            f"  {r.name:<{width}}  {r.official:>8.1f}  {r.strict:>8.1f}  "
            f"{f'{r.right}/{f.questions}':>7}  "
            + "  ".join(
                f"{'–' if r.means[k] is None else MEAN_FORMAT[k].format(r.means[k]):>9}"
                for k in means
            )
        )
    permutations = (
        f"{q.resamples} drawn, seed {f.seed}" if q.resamples == f.resamples else "all of them"
    )
    lines += [
        "",
        (
            f"Cochran's Q (are the {len(f.runs)} runs' shares of right answers alike?): "
            f"Q = {q.statistic:.3g}, {q.df} df, p {_p(q.pvalue)} (χ²), "
            f"p {_p(q.permutation_pvalue)} (each question's results permuted: {permutations}); "
            f"the runs disagree on {q.discordant} questions"
        ),
        "",
        (
            f"{'each run against the first' if f.against_first else 'every pair'}, B − A: "
            f"{f.metric} official [{f.level:.0%} interval], A only / B only, exact McNemar p, "
            f"and p adjusted by Holm's method over the {len(f.pairs)} pairs"
        ),
    ]
    names = [f"{c.b} − {c.a}" for c in f.pairs]
    width = max(len(n) for n in names)
    for name, c in zip(names, f.pairs, strict=True):
        o, m = c.overall, c.overall.mcnemar
        lines.append(
            f"  {name:<{width}}  {_signed(o.official, 1):>24} ({METHODS[o.official.method]})  "
            f"{m.a_only}/{m.b_only}  p {_p(m.pvalue)}, Holm p "
            f"{_p(m.pvalue if m.holm is None else m.holm)}"
        )
    lines.append(
        "each pair's joint correctness, strict number, means and categories: --json, or "
        "compare.json with --out"
    )
    return "\n".join(lines)


def plot_comparison(c: Comparison, path: Path) -> Path:
    """Differences B − A with their intervals: official and strict overall and per category,
    and each per-question mean (as a share of A's mean, since their units differ)."""
    from vidagent.bench.plots import require_matplotlib

    figure = require_matplotlib()
    labels, values, lows, highs = [], [], [], []
    for key, p in {"overall": c.overall, **c.categories}.items():
        for kind, d in (("official", p.official), ("strict", p.strict)):
            if key != "overall" and kind == "strict":
                continue
            labels.append(f"{key} ({kind}, {METHODS[d.method]})")
            values.append(d.diff)
            lows.append(d.diff - d.low)
            highs.append(d.high - d.diff)
    fig = figure.Figure(figsize=(7.5, 1.2 + 0.3 * len(labels) + 0.3 * len(MEANS)))
    top, bottom = fig.subplots(2, 1, height_ratios=[max(len(labels), 1), len(MEANS)])
    ys = list(range(len(labels)))[::-1]
    top.errorbar(values, ys, xerr=[lows, highs], fmt="o", capsize=3)
    top.axvline(0.0, color="grey", linewidth=0.8)
    top.set_yticks(ys)
    top.set_yticklabels(labels, fontsize=8)
    top.set_xlabel(f"{c.metric}: {c.b} − {c.a}")
    top.set_title(
        f"{c.benchmark} {c.split}: {c.overall.questions} paired questions "
        f"({c.level:.0%} intervals)",
        fontsize=10,
    )
    shown = [(k, d) for k, d in c.means.items() if d is not None and d.a]
    ys = list(range(len(shown)))[::-1]
    bottom.errorbar(
        [100 * d.diff / d.a for _, d in shown],
        ys,
        xerr=[
            [100 * (d.diff - d.low) / abs(d.a) for _, d in shown],
            [100 * (d.high - d.diff) / abs(d.a) for _, d in shown],
        ],
        fmt="s",
        capsize=3,
    )
    bottom.axvline(0.0, color="grey", linewidth=0.8)
    bottom.set_yticks(ys)
    bottom.set_yticklabels([MEANS[k] for k, _ in shown], fontsize=8)
    bottom.set_xlabel(f"per-question mean, % change from {c.a}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_comparisons(f: Comparisons, path: Path) -> Path:
    """Each pair's difference in the official number with its interval, labelled with its
    Holm-adjusted McNemar p."""
    from vidagent.bench.plots import require_matplotlib

    figure = require_matplotlib()
    fig = figure.Figure(figsize=(7.5, 1.4 + 0.32 * len(f.pairs)))
    axes = fig.subplots()
    ys = list(range(len(f.pairs)))[::-1]
    diffs = [c.overall.official for c in f.pairs]
    axes.errorbar(
        [d.diff for d in diffs],
        ys,
        xerr=[[d.diff - d.low for d in diffs], [d.high - d.diff for d in diffs]],
        fmt="o",
        capsize=3,
    )
    axes.axvline(0.0, color="grey", linewidth=0.8)
    axes.set_yticks(ys)
    axes.set_yticklabels(
        [
            f"{c.b} − {c.a} (Holm p {_p(m.pvalue if m.holm is None else m.holm)})"
            for c in f.pairs
            for m in [c.overall.mcnemar]
        ],
        fontsize=8,
    )
    axes.set_xlabel(f"{f.metric} official: B − A ({f.level:.0%} intervals)")
    q = f.cochran
    axes.set_title(
        f"{f.benchmark} {f.split}: {len(f.runs)} runs on {f.questions} questions; "
        f"Cochran's Q p {_p(q.pvalue)}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
