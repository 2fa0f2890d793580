"""``vidagent bench score``: score any system's predictions with a benchmark's official rules."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from vidagent.cli.base import cli, echo_json, session_of

if TYPE_CHECKING:
    from vidagent.app.benchmarks import Scores


@cli.group()
def bench() -> None:
    """Benchmarks: load the official annotation files and score predictions."""


@bench.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def list_cmd(as_json: bool) -> None:
    """The benchmarks BENCH may name: each with its splits (the default first) and where its
    module's docstring says its files and videos are laid out."""
    from vidagent.app.benchmarks import benchmarks

    rows = benchmarks()
    if as_json:
        echo_json({"benchmarks": rows})
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        click.echo(f"{r['name']:<{width}}  {r['title']}: {', '.join(r['splits'])}")
    click.echo("(layouts: python -m pydoc vidagent.bench.tasks.<name>)")


@bench.command(name="score")
@click.argument("benchmark", metavar="BENCH")
@click.option(
    "--data",
    required=True,
    type=click.Path(path_type=Path),
    help="folder holding the benchmark's annotation files",
)
@click.option(
    "--predictions",
    required=True,
    type=click.Path(path_type=Path),
    help="predictions in the benchmark's usual format, or the runner's JSONL",
)
@click.option("--split", help="split or task list (default: the benchmark's usual one)")
@click.option("--subset", help="a named subset (longvideobench: long)")
@click.option(
    "--ids",
    type=click.Path(path_type=Path),
    help="score only these question ids (e.g. NExT-QA's ATP-hard list)",
)
@click.option(
    "--judge",
    "judge_spec",
    metavar="SPEC",
    help="model judging open-ended answers (CrossVid CCQA, MMBench-Video); default: the llm role",
)
@click.option(
    "--judge-prompt",
    type=click.Choice(["crossvid", "agentcvr"]),
    default="crossvid",
    show_default=True,
    help="the judge's prompt",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def score(
    ctx: click.Context,
    benchmark: str,
    data: Path,
    predictions: Path,
    split: str | None,
    subset: str | None,
    ids: Path | None,
    judge_spec: str | None,
    judge_prompt: str,
    as_json: bool,
) -> None:
    """Score a predictions file on BENCH (egoschema, nextqa, nextgqa, intentqa, lvbench,
    longvideobench, videomme, charades_sta, crossvid, mmbench_video, videozerobench,
    timelens)."""
    result = session_of(ctx).bench_score(
        benchmark,
        data,
        predictions,
        split=split,
        subset=subset,
        ids=ids,
        judge=judge_spec,
        judge_prompt=judge_prompt,
    )
    if as_json:
        echo_json(result.to_json())
        return
    click.echo(render(result.scores, result.title, result.predictions))


def render(scores: Scores, title: str, predictions: int) -> str:
    """The report as aligned text: headline, rule, then each breakdown."""
    o = scores.overall
    rule = (
        "every question counts" if scores.rule == "all" else "questions without an answer left out"
    )
    head = (
        f"{title} {scores.split}: {o.questions} question{'s' * (o.questions != 1)}, "
        f"{predictions} prediction{'s' * (predictions != 1)}"
    )
    lines = [
        f"{head}, {scores.missing} unanswered",
        f"{scores.metric}: {o.score:.2f}  (official rule: {rule}; strict {o.strict:.2f})",
    ]
    lines += [f"{name}: {value:.2f}" for name, value in scores.extra.items()]
    for name, groups in scores.sections.items():
        if not groups:
            continue
        lines.append(f"{name}  (official, strict, answered/questions)")
        width = max(len(k) for k in groups)
        for key, g in groups.items():
            label = scores.labels.get(key, "")
            lines.append(
                f"  {key:<{width}}  {g.score:6.2f}  {g.strict:6.2f}  "
                f"{g.answered:>5}/{g.questions:<5}  {label}".rstrip()
            )
    lines += [f"note: {note}" for note in scores.notes]
    return "\n".join(lines)
