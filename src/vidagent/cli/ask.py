"""``vidagent ask`` (index what is missing, answer, show each step live), ``ground`` (when an
event happens) and ``replay``.

Exit codes of ``ask`` and ``ground``, the same for every strategy: 0 when the model answered
(an answer naming no option included: it is shown and recorded as unparsable), 1 for an error
(``ground`` also when the answer names no interval), 2 for a usage error, and
:data:`NO_ANSWER` (3) when the model never answered: its endpoint failed on every try, whether
while a strategy prepared (VideoAgent2's segment summaries, AVI's entity graph at index time),
in its search, or in the forced final answer. The run's trace, when one started, records why.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn, TextIO

import click

from vidagent.cli.base import (
    POSITIVE,
    cli,
    echo_json,
    parse_sets,
    session_of,
    strategy_sets_option,
    tool_mode_option,
    window_of,
    window_options,
)
from vidagent.exceptions import ProviderError, describe

#: The exit code of ``ask`` and ``ground`` when the model never answered (module doc).
NO_ANSWER = 3


def _never_answered(e: ProviderError) -> NoReturn:
    """Stop with :data:`NO_ANSWER`: a model endpoint failed before any answer came."""
    click.echo(f"error: no answer: the model never answered ({describe(e)})", err=True)
    sys.exit(NO_ANSWER)


def _live(
    renderer: Callable[[Any], str | None], *, quiet: bool, stream: TextIO
) -> Callable[[Any], None]:
    """The live display of a run: each event the renderer draws, on ``stream`` (none if quiet)."""

    def show(event: Any) -> None:
        line = renderer(event)
        if line is not None and not quiet:
            click.echo(line, file=stream)

    return show


def _noticed(show: Callable[[Any], None], line: str) -> Callable[[Any], None]:
    """``show``, first printing the strategy's one-line notice (why it answers, what it
    measured) on stderr when the run's first event comes: a question refused before it runs
    (an unknown option, too many choices) prints its error alone."""
    pending = [line] if line else []

    def shown(event: Any) -> None:
        while pending:
            click.echo(f"note: {pending.pop()}", err=True)
        show(event)

    return shown


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1, required=True, metavar="VIDEO... QUESTION")
@click.option(
    "--option", "-o", "options", multiple=True, metavar="TEXT", help="an answer option (repeat)"
)
@click.option(
    "--strategy",
    "-s",
    help="agent strategy [dvd with a model endpoint; without one, retrieval (no LLM)]",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    help="trace JSONL file [default: $VIDAGENT_HOME/traces/…]",
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    help="reasoning steps or search rounds [strategy's own: dvd 15, videoagent2 5, eea 10, avi 10, cvr 20 turns, retrieval 1]",
)
@click.option("--max-frames", type=click.IntRange(min=1), help="frames looked at [2000]")
@click.option(
    "--max-tokens", type=click.IntRange(min=1), help="tokens over all model calls [1000000]"
)
@click.option(
    "--max-seconds",
    type=POSITIVE,
    help="wall-clock seconds [3600]; the call under way is cut, the forced answer may go over",
)
@click.option("--max-cost", type=POSITIVE, help="US dollars, from configured prices [5]")
@tool_mode_option
@strategy_sets_option
@click.option(
    "--abstain",
    type=click.Choice(["auto", "never", "always-report"]),
    help="auto: an answer whose checked claims are found nowhere it cites says 'insufficient "
    "evidence' (multiple choice: keeps its letter, marked abstained) [default: the abstain "
    "setting, auto]",
)
@click.option(
    "--critic",
    type=click.Choice(["auto", "on", "off"]),
    help="a reviewer checks the answer against its cited frames (auto: with a vision model) "
    "[default: auto; off for a strategy's published configuration]",
)
@window_options
@click.option("--calls", is_flag=True, help="also show every model call")
@click.option("--quiet", "-q", is_flag=True, help="do not show the steps")
@click.option("--json", "as_json", is_flag=True, help="print the answer and totals as JSON")
@click.pass_context
def ask(
    ctx: click.Context,
    args: tuple[str, ...],
    options: tuple[str, ...],
    strategy: str | None,
    trace_path: str | None,
    max_steps: int | None,
    max_frames: int | None,
    max_tokens: int | None,
    max_seconds: float | None,
    max_cost: float | None,
    tool_mode: str,
    sets: tuple[str, ...],
    abstain: str | None,
    critic: str | None,
    last: str | None,
    since: str | None,
    until: str | None,
    calls: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Answer QUESTION about one or more videos (files are indexed first where needed).

    A VIDEO is a file, a folder (every video file inside it, as `index` reads one), a quoted
    glob, or a video's id, id prefix or name (with or without its extension) in the Library.

    Each step is shown as it happens: thought, tool, arguments, a short observation. The
    answer ends with the video spans it rests on, each citation checked against the index
    (found, partial, not-found or unchecked, with the quote at its own time); the whole run is
    in the trace file. With no model endpoint configured (the llm is the embedded SmolLM2-135M)
    the retrieval baseline answers unless a strategy is named; a line on stderr says so. Exits 3
    when the model never answered (its endpoint failed on every try), for every strategy.

    --last, --since and --until limit everything the strategy sees (search, clips, frames,
    transcript; the video-level summary is hidden) to a window of each video, read at the live
    edge of a video still being indexed when the question starts.
    """
    from vidagent.budget import Budget
    from vidagent.cli.render import Renderer

    if len(args) < 2:
        raise click.UsageError("give at least one VIDEO and a QUESTION")
    *refs, question = args
    videos = _videos(refs)
    window = window_of(last, since, until)
    given: dict[str, Any] = {
        "steps": max_steps,
        "frames": max_frames,
        "tokens": max_tokens,
        "seconds": max_seconds,
        "cost_usd": max_cost,
    }
    budget = Budget(**{k: v for k, v in given.items() if v is not None})
    renderer = Renderer(calls=calls)
    show = _live(renderer, quiet=quiet, stream=sys.stderr if as_json else sys.stdout)
    plan = session_of(ctx).plan_ask(
        videos,
        question,
        options=options,
        strategy=strategy,
        budget=budget,
        trace=trace_path or True,
        tool_mode=tool_mode,  # type: ignore[arg-type]
        progress=not quiet and sys.stderr.isatty(),  # ingest's bars: on a terminal only
        strategy_options={"abstain": abstain, "critic": critic, **parse_sets(sets)},
        window=window,
    )
    try:
        result = plan.run(on_event=_noticed(show, plan.notice))
    except ProviderError as e:  # while the strategy prepared: no run, no answer
        _never_answered(e)
    if as_json:
        echo_json(result.to_json())
    else:
        answered = result.trace.answer
        if quiet and answered is not None:  # else the live display printed it already
            click.echo(renderer(answered))
        click.echo(f"trace: {result.trace.path}")
    if result.answer is not None and result.answer.unanswered:
        sys.exit(NO_ANSWER)  # the forced final answer's call failed too: shown, with why


def _videos(refs: list[str]) -> list[str]:
    """``refs`` with each folder and glob replaced by the video files it holds, as ``index``
    reads them; a file, id or name stays as given."""
    import glob
    from pathlib import Path

    from vidagent.cli.index import expand_paths

    out: list[str] = []
    for ref in refs:
        path = Path(ref).expanduser()
        if path.is_dir():
            files = expand_paths((str(path),))
            if not files:
                raise click.UsageError(f"{ref}: a folder with no video files in it")
            out += map(str, files)
        elif glob.has_magic(ref) and not path.is_file():
            found = [str(p) for p in expand_paths((str(path),))]
            out += found or [ref]  # matching no file, it may name a video in the Library
        else:
            out.append(ref)
    return out


@cli.command()
@click.argument("video")
@click.argument("event")
@click.option(
    "--strategy",
    "-s",
    help="agent strategy [avi with a model endpoint; without one, retrieval (no LLM)]",
)
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), help="trace JSONL file")
@click.option("--max-steps", type=click.IntRange(min=1), help="tool iterations [avi: 10]")
@tool_mode_option
@strategy_sets_option
@window_options
@click.option("--quiet", "-q", is_flag=True, help="do not show the steps")
@click.option(
    "--json", "as_json", is_flag=True, help="print the interval, answer and totals as JSON"
)
@click.pass_context
def ground(
    ctx: click.Context,
    video: str,
    event: str,
    strategy: str | None,
    trace_path: str | None,
    max_steps: int | None,
    tool_mode: str,
    sets: tuple[str, ...],
    last: str | None,
    since: str | None,
    until: str | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Find when EVENT happens in VIDEO: its [start, end] in seconds and the evidence.

    AVI (the default with a model endpoint) grounds in its own mode: it retrieves candidate
    clips, refines the boundaries by frame-text similarity and answers **Answer:**[start, end].
    Without an endpoint the retrieval baseline answers from the index: the best-matching clip,
    tightened to the times of the event's spoken words. Exits 1 when the answer names no
    interval, 3 when the model never answered. --last, --since and --until look for it only
    in that window (as for ask).
    """
    from vidagent.app.results import GroundResult
    from vidagent.budget import Budget
    from vidagent.cli.render import Renderer

    window = window_of(last, since, until)
    show = _live(Renderer(), quiet=quiet, stream=sys.stderr if as_json else sys.stdout)
    plan = session_of(ctx).plan_ask(
        video,
        event,
        strategy=strategy,
        budget=Budget(steps=max_steps) if max_steps else None,
        trace=trace_path or True,
        tool_mode=tool_mode,  # type: ignore[arg-type]
        progress=not quiet and sys.stderr.isatty(),  # ingest's bars: on a terminal only
        strategy_options=parse_sets(sets),
        task="ground",
        window=window,
    )
    try:
        result = plan.run(on_event=_noticed(show, plan.notice))
    except ProviderError as e:
        _never_answered(e)
    assert isinstance(result, GroundResult)  # the plan's task is ground
    found = result.interval
    if as_json:
        echo_json(result.to_json())
    else:
        shown = f"interval: [{found[0]:.1f}s, {found[1]:.1f}s]" if found else "interval: none found"
        named, span = result.named, result.span
        if found is None and named is not None and span is not None:
            shown += (
                f" (the answer's {named[0]:.1f}–{named[1]:.1f} s lie outside the video, "
                f"{span[0]:.1f}–{span[1]:.1f} s)"
            )
        answered = result.trace.answer
        if found and answered is not None and answered.abstained:  # kept, and said so here too
            shown += f" (abstained: {answered.abstain_reason})"
        click.echo(shown)
        click.echo(f"trace: {result.trace.path}")
    if result.answer is not None and result.answer.unanswered:
        sys.exit(NO_ANSWER)
    if found is None and not as_json:
        sys.exit(1)


@cli.command()
@click.argument("trace_file", type=click.Path(dir_okay=False))
@click.option("--calls", is_flag=True, help="also show every model call")
@click.option("--width", type=int, default=160, show_default=True, help="cut long lines (0: never)")
@click.option("--json", "as_json", is_flag=True, help="print the answer and totals as JSON")
@click.pass_context
def replay(ctx: click.Context, trace_file: str, calls: bool, width: int, as_json: bool) -> None:
    """Re-render a run from its trace file, offline: no model is called."""
    from vidagent.cli.render import render

    result = session_of(ctx).replay(trace_file)
    if as_json:
        done = {"finished": result.trace.answer is not None, "cut": result.trace.cut}
        echo_json(result.to_json() | {"trace": trace_file} | done)  # what the notes say
        return
    for line in render(result.trace.events, width=width, calls=calls):
        click.echo(line)
    if result.trace.cut:
        click.echo("note: the trace's last line was cut off as it was written", err=True)
    if result.trace.answer is None:
        click.echo("note: the trace ends before an answer: the run did not finish", err=True)
