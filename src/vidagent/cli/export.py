"""``vidagent export`` and ``vidagent sheet``: evidence a person can take away."""

from __future__ import annotations

import click

from vidagent.cli.base import cli, echo_json, parse_time, session_of


@cli.command()
@click.argument("trace", required=False, type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--out",
    type=click.Path(),
    help="folder (or .zip) to write [export-<trace name> here]",
)
@click.option("--zip", "as_zip", is_flag=True, help="write a zip instead of a folder")
@click.option(
    "--json", "as_json", is_flag=True, help="print {path, warnings, index: index.json's content}"
)
@click.pass_context
def export(
    ctx: click.Context, trace: str | None, out: str | None, as_zip: bool, as_json: bool
) -> None:
    """Write the evidence of an answer (TRACE, default: the newest trace under the home's
    traces/ holding an answer; a --trace FILE of ask is named here) to a folder or zip:
    each cited span as an MP4 clip, frames, a contact sheet per video, the cited speech as
    text, SRT and WebVTT, timeline.md and index.json."""
    result = session_of(ctx).export(trace, out=out, as_zip=as_zip)
    for line in result.warnings:
        click.echo(f"warning: {line}", err=True)
    if as_json:
        echo_json(result.to_json())
        return
    index = result.index
    clips = len({c["clip"] for c in index["citations"] if c["clip"]})  # citations share a clip
    click.echo(
        f"wrote {result.path}: {len(index['citations'])} citations, "
        f"{clips} clip{'s' * (clips != 1)}, "
        f"{len(index['videos'])} video(s); open timeline.md first"
    )


@cli.command()
@click.argument("video")
@click.option("--from", "t_from", metavar="T", help="start of the span (s or HH:MM:SS)")
@click.option("--to", "t_to", metavar="T", help="end of the span")
@click.option(
    "--count",
    default=12,
    show_default=True,
    type=click.IntRange(min=1),
    help="frames (at most 400)",
)
@click.option("--columns", type=click.IntRange(min=1), help="frames per row")
@click.option("-o", "--out", type=click.Path(dir_okay=False), help="PNG or JPEG file")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def sheet(
    ctx: click.Context,
    video: str,
    t_from: str | None,
    t_to: str | None,
    count: int,
    columns: int | None,
    out: str | None,
    as_json: bool,
) -> None:
    """Draw a contact sheet of VIDEO (or of --from/--to): a grid of frames with their times,
    from the index's thumbnails where they cover the span."""
    result = session_of(ctx).sheet(
        video,
        t_from=parse_time(t_from) if t_from else None,
        t_to=parse_time(t_to) if t_to else None,
        count=count,
        columns=columns,
        out=out,
    )
    if result.note:
        click.echo(f"warning: {result.note}", err=True)
    if as_json:
        echo_json(result.to_json())
        return
    body = result.to_json()
    click.echo(
        f"wrote {result.path}: {len(result.times)} frame{'s' * (len(result.times) != 1)} "
        f"{body['start']}-{body['end']}"
        f" ({result.thumbnails} from the index's thumbnails, {body['decoded']} decoded"
        + (f", {result.not_recorded} not recorded: blank" if result.not_recorded else "")
        + ")"
    )
