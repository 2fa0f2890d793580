"""Scoring and reporting benchmarks: a predictions file scored with the benchmark's official
rules (``vidagent bench score``), run folders scored again into tables and plots
(``vidagent bench report``), with a judge model for open-ended answers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidagent.app.core import SessionCore
from vidagent.app.results import CompareResult, ReportResult, ScoreResult
from vidagent.bench.base import BenchmarkDataError
from vidagent.bench.rundir import expand_runs, read_manifest
from vidagent.exceptions import BackendMissingError, UserError

#: Benchmarks whose answers are open-ended: scoring them needs a judge model.
JUDGED_BENCHMARKS = ("crossvid", "mmbench_video")


def benchmarks() -> list[dict[str, Any]]:
    """The benchmarks ``bench`` takes: ``{"name", "title", "splits" (the default first),
    "module"}`` each, in the registry's order (plugins' too; each module's docstring says where
    its files and videos are laid out)."""
    from vidagent.bench import BENCHMARKS

    rows = []
    for name in BENCHMARKS:
        module = BENCHMARKS.load(name)
        default = getattr(module, "DEFAULT_SPLIT", None)
        splits = list(getattr(module, "SPLITS", ()))
        if default in splits:
            splits = [default] + [s for s in splits if s != default]
        rows.append(
            {
                "name": name,
                "title": getattr(module, "TITLE", name),
                "splits": splits,
                "module": getattr(module, "__name__", ""),
            }
        )
    return rows


def judge(core: SessionCore, spec: str | None, template: str = "crossvid") -> Any:
    """A judge of open-ended answers over a hub of its own for ``spec`` (default: the llm
    role's spec), made from the settings even where the session borrows its hub."""
    from vidagent.bench.judge import Judge

    hub = core.hub_with(llm=spec) if spec else core.hub_with()
    return Judge(hub, template=template)


def score(
    core: SessionCore,
    benchmark: str,
    data: Path,
    predictions: Path,
    *,
    split: str | None = None,
    subset: str | None = None,
    ids: Path | None = None,
    judge_spec: str | None = None,
    judge_prompt: str = "crossvid",
) -> ScoreResult:
    """Score a predictions file with a benchmark's official rules.

    Raises:
        BenchmarkDataError: the file is missing, empty, not UTF-8, holds no predictions, or
            none of them matches a question.
    """
    from vidagent.bench import evaluate, get_benchmark
    from vidagent.bench.base import load, read_predictions
    from vidagent.bench.predictions import check_predictions_file, read_id_list

    bench = get_benchmark(benchmark)
    if not data.is_dir():
        raise BenchmarkDataError(f"no such data folder: {data}")
    options: dict[str, Any] = {"subset": subset} if subset else {}
    loaded = load(bench, data, split=split, **options)
    if ids is not None:
        loaded = loaded.only(read_id_list(ids))
    check_predictions_file(predictions)
    found = read_predictions(bench, predictions, loaded.samples)
    if not found:
        raise BenchmarkDataError(f"{predictions}: holds no predictions")
    open_ended = any(s.task == "open" and found.get(s.id) is not None for s in loaded.samples)
    judged = judge(core, judge_spec, judge_prompt) if open_ended else None
    scores = evaluate(bench, loaded, found, judge=judged)
    return ScoreResult(scores, bench.TITLE, len(found))


def report(
    core: SessionCore,
    runs: Sequence[Path],
    *,
    out: Path,
    plots: bool = True,
    resamples: int = 1000,
    seed: int = 0,
    judge_spec: str | None = None,
) -> ReportResult:
    """Score run folders again and write ``report.md``, ``report.json`` and plots to ``out``."""
    from vidagent.bench.report import load_run, named_apart, write_report

    if plots:
        from vidagent.bench.plots import require_matplotlib

        try:
            require_matplotlib()
        except BackendMissingError as e:
            raise UserError(f"{e}; or leave the plots out with --no-plots") from None
    runs = expand_runs(runs)  # a frame-budget ladder reads as its rungs
    needs = any(read_manifest(r)["benchmark"] in JUDGED_BENCHMARKS for r in runs)
    judged = judge(core, judge_spec) if needs else None
    reports = named_apart([load_run(r, judge=judged, resamples=resamples, seed=seed) for r in runs])
    written = write_report(reports, out, plots=plots, resamples=resamples, seed=seed)
    return ReportResult(reports, list(written), resamples, seed)


def compare(
    core: SessionCore,
    run_a: Path,
    run_b: Path,
    *more: Path,
    against_first: bool = False,
    out: Path | None = None,
    plots: bool = True,
    right_at: float = 0.5,
    resamples: int = 1000,
    seed: int = 0,
    judge_spec: str | None = None,
) -> CompareResult:
    """Run B against run A on the questions both ran without an error; with ``more`` runs, all
    of them as one family: Cochran's Q and every pair (``against_first``: each run against the
    first) with Holm's adjustment over the pairs (:mod:`vidagent.bench.compare`). With ``out``,
    ``compare.json`` (and with ``plots`` ``compare.png``) are written there."""
    import json

    from vidagent.bench.compare import (
        Comparison,
        Comparisons,
        compare_many,
        compare_runs,
        plot_comparison,
        plot_comparisons,
    )

    if plots and out is not None:
        from vidagent.bench.plots import require_matplotlib

        try:
            require_matplotlib()
        except BackendMissingError as e:
            raise UserError(f"{e}; or leave the plot out with --no-plots") from None
    if not 0.0 < right_at <= 1.0:
        raise UserError(
            f"--right-at must be a share of a question's points in (0, 1], not {right_at}"
        )
    runs = (run_a, run_b, *more)
    needs = any(read_manifest(r)["benchmark"] in JUDGED_BENCHMARKS for r in runs)
    judged = judge(core, judge_spec) if needs else None
    comparison: Comparison | Comparisons
    if more:
        comparison = compare_many(
            runs,
            against_first=against_first,
            judge=judged,
            right_at=right_at,
            resamples=resamples,
            seed=seed,
        )
    else:
        comparison = compare_runs(
            run_a, run_b, judge=judged, right_at=right_at, resamples=resamples, seed=seed
        )
    written: list[Path] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        body = json.dumps(comparison.to_dict(), indent=2) + "\n"
        (out / "compare.json").write_text(body, encoding="utf-8")
        written.append(out / "compare.json")
        if plots:
            written.append(
                plot_comparison(comparison, out / "compare.png")
                if isinstance(comparison, Comparison)
                else plot_comparisons(comparison, out / "compare.png")
            )
    return CompareResult(comparison, written)
