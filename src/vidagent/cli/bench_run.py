"""``vidagent bench run`` (answer a benchmark with a strategy, resumably) and ``bench report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from vidagent.cli.base import (
    POSITIVE,
    echo_json,
    on_abort,
    parse_sets,
    session_of,
    strategy_sets_option,
    tool_mode_option,
)
from vidagent.cli.bench import bench
from vidagent.cli.index import EXECUTOR_HELP, EXECUTORS
from vidagent.exceptions import UserError


@bench.command(name="run")
@click.argument("benchmark", metavar="BENCH")
@click.option(
    "--data",
    required=True,
    type=click.Path(path_type=Path),
    help="folder holding the benchmark's annotation files",
)
@click.option("--split", help="split or task list (default: the benchmark's usual one)")
@click.option("--subset", help="a named subset (longvideobench: long)")
@click.option(
    "--videos",
    type=click.Path(path_type=Path),
    help="folder of the videos, found by the names the annotation files give, or by file stem "
    "anywhere below it [the benchmark's own folder in --data, e.g. DATA/videos]",
)
@click.option(
    "--ids",
    type=click.Path(path_type=Path),
    help="answer only these question ids (e.g. NExT-QA's ATP-hard list)",
)
@click.option("--strategy", "-s", default="dvd", show_default=True, help="agent strategy")
@click.option("--limit", type=int, help="only the first N questions of the split")
@click.option(
    "--concurrency",
    "-j",
    type=int,
    default=4,
    show_default=True,
    help="questions at once (capped by the endpoints' limits in the settings)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="run folder [$VIDAGENT_HOME/runs/<bench>-<split>-<strategy>-<hash>]",
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    help="reasoning steps or search rounds [strategy's own: dvd 15, videoagent2 5, eea 10, avi 10, cvr 20 turns, retrieval 1]",
)
@click.option(
    "--max-frames", type=click.IntRange(min=1), help="frames looked at per question [2000]"
)
@click.option(
    "--frames",
    "ladder",
    metavar="N1,N2,…",
    help="a frame-budget ladder: the run once per --max-frames value, in OUT/frames-N each",
)
@click.option("--max-tokens", type=click.IntRange(min=1), help="tokens per question [1000000]")
@click.option(
    "--max-seconds",
    type=POSITIVE,
    help="wall-clock seconds per question [3600]; the forced answer may go over",
)
@click.option("--max-cost", type=POSITIVE, help="US dollars per question [5]")
@tool_mode_option
@strategy_sets_option
@click.option("--quiet", "-q", is_flag=True, help="no progress bars")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default=None,
    help="where the questions are answered, --concurrency at once at most (default: ray with "
    f"--address, else local). {EXECUTOR_HELP}",
)
@click.option(
    "--address",
    metavar="ADDR",
    help="the Ray cluster: auto, HOST:6379 or ray://HOST:10001 [a local one]",
)
@click.option(
    "--rate-limit",
    "rate_limits",
    multiple=True,
    metavar="[ENDPOINT=]N",
    help="at most N requests per second to a remote endpoint across all workers",
)
@click.pass_context
def run(
    ctx: click.Context,
    benchmark: str,
    data: Path,
    split: str | None,
    subset: str | None,
    videos: Path | None,
    ids: Path | None,
    strategy: str,
    limit: int | None,
    concurrency: int,
    out: Path | None,
    max_steps: int | None,
    max_frames: int | None,
    ladder: str | None,
    max_tokens: int | None,
    max_seconds: float | None,
    max_cost: float | None,
    tool_mode: str,
    sets: tuple[str, ...],
    quiet: bool,
    as_json: bool,
    executor: str | None,
    address: str | None,
    rate_limits: tuple[str, ...],
) -> None:
    """Answer BENCH's questions with an agent, writing one row per question to a run folder.

    Videos are indexed into the Library (--library) first. Running the same command again
    resumes: questions with a row are skipped, failed ones are asked again. Rows go to
    OUT/predictions.jsonl (readable by `bench score`); `bench report OUT` makes the tables.
    """
    from vidagent.app.benchmarks import RunConfig
    from vidagent.app.core import long_running
    from vidagent.app.executors import executor_kind
    from vidagent.budget import Budget
    from vidagent.cli.index import executor_of

    given: dict[str, Any] = {
        "steps": max_steps,
        "frames": max_frames,
        "tokens": max_tokens,
        "seconds": max_seconds,
        "cost_usd": max_cost,
    }
    config = RunConfig(
        benchmark=benchmark,
        data=data,
        split=split,
        subset=subset,
        videos=videos,
        ids=ids,
        strategy=strategy,
        strategy_options=parse_sets(sets),
        tool_mode=tool_mode,  # type: ignore[arg-type]
        budget=Budget(**{k: v for k, v in given.items() if v is not None}),
        limit=limit,
        concurrency=concurrency,
    )
    rungs = _frames(ladder, max_frames)
    long_running()
    kind = executor_kind(executor) if executor else None  # local: this process's threads
    workers = concurrency if kind in ("pool", "ray") else None
    runner = executor_of(kind, workers, address, rate_limits)
    session = session_of(ctx)
    on_abort(
        "every question answered so far is kept in the run folder; the same command asks the rest"
    )
    try:
        if rungs:
            summaries = session.bench_ladder(
                config, rungs, out=out, progress=not quiet, executor=runner
            )
        else:
            summaries = [session.bench_run(config, out=out, progress=not quiet, executor=runner)]
    finally:
        if runner is not None:
            runner.close()
    if as_json:
        shown = [s.to_json() for s in summaries]
        echo_json(shown if rungs else shown[0])
    else:
        for s in summaries:
            _show(s)
        if rungs:
            click.echo(f"ladder: {summaries[0].out.parent} (bench report reads it as its rungs)")
    failed = [s for s in summaries if s.ran and s.errors == s.ran]
    if failed:  # rows were written, and a resume asks those questions again
        raise UserError(
            f"every question asked now failed ({failed[0].errors}); "
            f"see {failed[0].errors_log}, then run the same command again"
        )


def _frames(ladder: str | None, max_frames: int | None) -> list[int]:
    """The ``--frames`` ladder's budgets, or [] for one run."""
    if ladder is None:
        return []
    if max_frames is not None:
        raise click.UsageError("give --frames (a ladder) or --max-frames (one budget), not both")
    try:
        rungs = [int(x) for x in ladder.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{ladder!r}: whole numbers, e.g. 32,128,512", param_hint="--frames"
        ) from None
    if not rungs or min(rungs) < 1:
        raise click.BadParameter("positive frame budgets, e.g. 32,128,512", param_hint="--frames")
    return rungs


def _show(s: Any) -> None:
    """One run's summary as text."""
    click.echo(
        f"{s.benchmark} {s.split}: {s.questions} question{'s' * (s.questions != 1)}; "
        f"{s.done_before} done before, "
        f"{s.ran} asked now ({s.errors} failed), {s.missing} without a video; "
        f"{s.concurrency} at once, {s.seconds:.1f} s"
    )
    if s.scores is not None:
        o = s.scores.overall
        click.echo(
            f"{s.scores.metric}: {o.score:.2f} (strict {o.strict:.2f}, {o.answered}/{o.questions} answered)"
        )
    for note in s.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"run: {s.out}")


@bench.command(name="report")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-report"),
    show_default=True,
    help="folder for report.md, report.json and the plots",
)
@click.option("--no-plots", is_flag=True, help="skip the PNG plots (no matplotlib needed)")
@click.option(
    "--resamples",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="bootstrap resamples, for the numbers that are not a share of right answers (0: no intervals)",
)
@click.option("--seed", type=int, default=0, show_default=True, help="bootstrap seed")
@click.option(
    "--judge",
    "judge_spec",
    metavar="SPEC",
    help="model judging open-ended answers (CrossVid CCQA); default: the llm role",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of the table")
@click.pass_context
def report(
    ctx: click.Context,
    runs: tuple[Path, ...],
    out: Path,
    no_plots: bool,
    resamples: int,
    seed: int,
    judge_spec: str | None,
    as_json: bool,
) -> None:
    """Tables of one or more run folders: official beside strict, per category, with 95%
    intervals (Wilson's for a share of right answers, else a percentile bootstrap) and per-question steps, frames, tokens, cost and latency; also written
    to OUT as Markdown, JSON and PNG plots."""
    result = session_of(ctx).bench_report(
        runs, out=out, plots=not no_plots, resamples=resamples, seed=seed, judge=judge_spec
    )
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(result.to_text())
    click.echo("wrote: " + ", ".join(str(p) for p in result.written), err=as_json)


@bench.command(name="compare")
@click.argument("run_a", type=click.Path(file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, path_type=Path))
@click.argument("more", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--against-first",
    is_flag=True,
    help="with three runs or more: each run against RUN_A only, not every pair",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for compare.json and compare.png (default: print only)",
)
@click.option("--no-plots", is_flag=True, help="skip the PNG plot (no matplotlib needed)")
@click.option(
    "--right-at",
    type=click.FloatRange(min=0.0, max=1.0, min_open=True),
    default=0.5,
    show_default=True,
    help="share of a question's points that counts it right (0.5: IoU 0.5 for grounding)",
)
@click.option(
    "--resamples",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help=(
        "paired bootstrap resamples, for what is not a share of right answers; with three "
        "runs or more, also Cochran's Q permutations"
    ),
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="bootstrap (and permutation) seed"
)
@click.option(
    "--judge",
    "judge_spec",
    metavar="SPEC",
    help="model judging open-ended answers (CrossVid CCQA); default: the llm role",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of the tables")
@click.pass_context
def compare(
    ctx: click.Context,
    run_a: Path,
    run_b: Path,
    more: tuple[Path, ...],
    against_first: bool,
    out: Path | None,
    no_plots: bool,
    right_at: float,
    resamples: int,
    seed: int,
    judge_spec: str | None,
    as_json: bool,
) -> None:
    """RUN_B against RUN_A on the questions both ran without an error (how many were left out, and why):
    the 2x2 table of joint correctness with the change in steps, frames and tokens per cell, an
    exact McNemar test, and 95% intervals of the differences in the official and strict numbers
    (Newcombe's paired score interval for a share of right answers, else a paired bootstrap)
    and in mean steps, frames, tokens, cost and latency; the same per category, with
    Holm-adjusted p-values. With more runs (MORE...), all as one family on the questions every
    run ran without an error: each run's numbers, Cochran's Q test, and every pair (or each
    against RUN_A) compared so, the pairs' McNemar p-values adjusted by Holm's method."""
    result = session_of(ctx).bench_compare(
        run_a,
        run_b,
        *more,
        against_first=against_first,
        out=out,
        plots=not no_plots,
        right_at=right_at,
        resamples=resamples,
        seed=seed,
        judge=judge_spec,
    )
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(result.to_text())
    if result.written:
        click.echo("wrote: " + ", ".join(str(p) for p in result.written), err=as_json)
