"""``vidagent info`` and ``vidagent probe``."""

from __future__ import annotations

import click

from vidagent.cli.base import cli, echo_json, hms, session_of


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """Show each model role's spec and backend, and where the Library lives."""
    report = session_of(ctx).info()
    if as_json:
        echo_json(report.to_json())
        return
    click.echo(f"vidagent {report.version}")
    click.echo(f"home     {report.home}")
    click.echo(f"library  {report.library}{'' if report.library_exists else '  (not created yet)'}")
    click.echo("")
    for role, status in report.roles.items():
        mark = "ok " if status.usable else "-- "
        click.echo(f"{role:<12} {status.spec:<40} {mark}{status.detail}")
    click.echo(f"\nask answers with {report.default_strategy} unless a strategy is named")
    if report.notice:
        click.echo(f"  {report.notice}")


@cli.command()
@click.argument("path", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def probe(ctx: click.Context, path: str, as_json: bool) -> None:
    """Show what a video file holds: duration, frame rate, size, rotation, audio."""
    report = session_of(ctx).probe(path)
    if as_json:
        echo_json(report.to_json())
        return
    found = report.info
    streams = found.audio_streams
    heard = next((a for a in streams if a.default), streams[0] if streams else None)
    audio = ", ".join(
        f"{a.codec} {a.sample_rate} Hz x{a.channels}"
        + (" (transcribed)" if len(streams) > 1 and a is heard else "")
        for a in streams
    )
    click.echo(f"{found.path}")
    click.echo(f"  duration  {hms(found.duration)} ({found.duration:.2f} s)")
    if found.start_time:  # where the index's t = 0 lies on the file's clock
        click.echo(f"  starts    at {found.start_time:.3f} s of the file's clock (t = 0 here)")
    click.echo(
        f"  video     {found.codec} {found.width}x{found.height} @ {round(found.fps, 3):g} fps, rotation {found.rotation}"
    )
    click.echo(f"  audio     {audio or 'none'}")
