"""``vidagent ask`` (index what is missing, answer, show each step live) and ``replay``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from vidagent.cli import cli, settings_of


def _echo_to(stream: Any) -> Any:
    def echo(line: str) -> None:
        click.echo(line, file=stream)

    return echo


def _summary(trace: Any) -> dict[str, Any]:
    """What ``--json`` prints: the answer, the run's totals, where the trace is."""
    from dataclasses import asdict

    answered, totals = trace.answer, trace.totals
    return {
        "answer": {k: v for k, v in asdict(answered).items() if k != "t"} if answered else None,
        "letter": chr(65 + answered.choice) if answered and answered.choice is not None else None,
        "totals": {k: v for k, v in asdict(totals).items() if k != "t"} if totals else None,
        "trace": str(trace.path) if trace.path else None,
    }


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1, required=True, metavar="VIDEO... QUESTION")
@click.option(
    "--option", "-o", "options", multiple=True, metavar="TEXT", help="an answer option (repeat)"
)
@click.option("--strategy", "-s", default="dvd", show_default=True, help="agent strategy")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    help="trace JSONL file [default: $VIDAGENT_HOME/traces/…]",
)
@click.option("--max-steps", type=int, help="reasoning steps [strategy's own: dvd 15, videoagent2 5]")
@click.option("--max-frames", type=int, help="frames looked at [2000]")
@click.option("--max-tokens", type=int, help="tokens over all model calls [1000000]")
@click.option("--max-seconds", type=float, help="wall-clock seconds [3600]")
@click.option("--max-cost", type=float, help="US dollars, from configured prices [5]")
@click.option(
    "--tool-mode",
    type=click.Choice(["auto", "native", "json"]),
    default="auto",
    show_default=True,
    help="native tool calls or JSON actions",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="a strategy option, e.g. prefill_global_browse=true",
)
@click.option("--calls", is_flag=True, help="also show every model call")
@click.option("--quiet", "-q", is_flag=True, help="do not show the steps")
@click.option("--json", "as_json", is_flag=True, help="print the answer and totals as JSON")
@click.pass_context
def ask(ctx: click.Context, args: tuple[str, ...], options: tuple[str, ...], strategy: str,
        trace_path: str | None, max_steps: int | None, max_frames: int | None,
        max_tokens: int | None, max_seconds: float | None, max_cost: float | None,
        tool_mode: str, sets: tuple[str, ...], calls: bool, quiet: bool, as_json: bool) -> None:  # fmt: skip
    """Answer QUESTION about one or more videos (files are indexed first where needed).

    Each step is shown as it happens: thought, tool, arguments, a short observation. The
    answer ends with the video spans it rests on; the whole run is in the trace file.
    """
    from vidagent.agents.ask import ask as run_ask
    from vidagent.agents.budget import Budget
    from vidagent.agents.trace import Renderer

    if len(args) < 2:
        raise click.UsageError("give at least one VIDEO and a QUESTION")
    *videos, question = args
    given: dict[str, Any] = {"steps": max_steps, "frames": max_frames, "tokens": max_tokens,
             "seconds": max_seconds, "cost_usd": max_cost}  # fmt: skip
    budget = Budget(**{k: v for k, v in given.items() if v is not None})
    stream = sys.stderr if as_json else sys.stdout
    renderer, echo = Renderer(calls=calls), _echo_to(stream)

    def show(event: Any) -> None:
        line = renderer(event)
        if line is not None and not quiet:
            echo(line)

    answer = run_ask(
        videos, question, options=options, strategy=strategy, settings=settings_of(ctx),
        budget=budget, trace=trace_path or True, on_event=show, tool_mode=tool_mode,  # type: ignore[arg-type]
        progress=not quiet, **_strategy_options(sets),
    )  # fmt: skip
    assert answer.trace is not None
    if as_json:
        click.echo(json.dumps(_summary(answer.trace), indent=2))
    else:
        answered = answer.trace.answer
        if quiet and answered is not None:  # else the live display printed it already
            click.echo(renderer(answered))
        click.echo(f"trace: {answer.trace.path}")


def _strategy_options(sets: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs with JSON values where they parse (``true``, ``3``, ``["a"]``)."""
    out: dict[str, Any] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--set")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
        if isinstance(out[key], list):
            out[key] = tuple(out[key])
    return out


@cli.command()
@click.argument("trace_file", type=click.Path(dir_okay=False))
@click.option("--calls", is_flag=True, help="also show every model call")
@click.option("--width", type=int, default=160, show_default=True, help="cut long lines (0: never)")
@click.option("--json", "as_json", is_flag=True, help="print the answer and totals as JSON")
def replay(trace_file: str, calls: bool, width: int, as_json: bool) -> None:
    """Re-render a run from its trace file, offline: no model is called."""
    from vidagent.agents.trace import Trace, render

    trace = Trace.load(trace_file)
    if as_json:
        trace.path = None
        click.echo(json.dumps(_summary(trace) | {"trace": trace_file}, indent=2))
        return
    for line in render(trace.events, width=width, calls=calls):
        click.echo(line)
