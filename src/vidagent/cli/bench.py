"""``vidagent bench score``: score any system's predictions with a benchmark's official rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from vidagent.cli import cli, settings_of

if TYPE_CHECKING:
    from vidagent.bench.base import Scores


@cli.group()
def bench() -> None:
    """Benchmarks: load the official annotation files and score predictions."""


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
    help="model judging open-ended answers (CrossVid CCQA); default: the llm role",
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
    """Score a predictions file on BENCH (egoschema, nextqa, intentqa, lvbench,
    longvideobench, videomme, charades_sta, crossvid)."""
    from vidagent.bench import evaluate, get_benchmark
    from vidagent.bench.base import BenchmarkDataError
    from vidagent.bench.predictions import read_id_list

    bench_module = get_benchmark(benchmark)
    if not data.is_dir():
        raise BenchmarkDataError(f"no such data folder: {data}")
    options: dict[str, Any] = {"subset": subset} if subset else {}
    loaded = bench_module.load(data, split=split, **options)
    if ids is not None:
        loaded = loaded.only(read_id_list(ids))
    found = bench_module.read_predictions(predictions, loaded.samples)
    needs_judge = any(s.task == "open" and found.get(s.id) is not None for s in loaded.samples)
    if needs_judge:
        from vidagent.bench.judge import Judge
        from vidagent.models.client import Models

        settings = settings_of(ctx)
        if judge_spec:
            settings = settings.model_copy(update={"llm": judge_spec})
        with Models(settings) as models:
            scores = evaluate(
                bench_module, loaded, found, judge=Judge(models, template=judge_prompt)
            )
    else:
        scores = evaluate(bench_module, loaded, found)
    if as_json:
        body = scores.to_dict() | {"title": bench_module.TITLE, "predictions": len(found)}
        click.echo(json.dumps(body, indent=2))
        return
    click.echo(render(scores, bench_module.TITLE, len(found)))


def render(scores: Scores, title: str, predictions: int) -> str:
    """The report as aligned text: headline, rule, then each breakdown."""
    o = scores.overall
    rule = (
        "every question counts" if scores.rule == "all" else "questions without an answer left out"
    )
    head = f"{title} {scores.split}: {o.questions} questions, {predictions} predictions"
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
