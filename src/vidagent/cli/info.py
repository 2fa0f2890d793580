"""``vidagent info`` and ``vidagent probe``."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from vidagent import __version__
from vidagent.cli import cli, hms, settings_of
from vidagent.config import ROLES


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """Show each model role's spec and backend, and where the Library lives."""
    from vidagent.models.registry import backend_status

    settings = settings_of(ctx)
    roles = {role: backend_status(settings.spec(role), settings, role) for role in ROLES}
    library = settings.library_uri
    exists = "://" in library or (Path(library) / "manifest.json").is_file()
    if as_json:
        body = {
            "version": __version__,
            "home": str(settings.home),
            "library": library,
            "library_exists": exists,
            "roles": {
                r: {"spec": s.spec, "usable": s.usable, "detail": s.detail}
                for r, s in roles.items()
            },
        }
        click.echo(json.dumps(body, indent=2))
        return
    click.echo(f"vidagent {__version__}")
    click.echo(f"home     {settings.home}")
    click.echo(f"library  {library}{'' if exists else '  (not created yet)'}")
    click.echo("")
    for role, status in roles.items():
        mark = "ok " if status.usable else "-- "
        click.echo(f"{role:<12} {settings.spec(role):<40} {mark}{status.detail}")


@cli.command()
@click.argument("path", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def probe(path: str, as_json: bool) -> None:
    """Show what a video file holds: duration, frame rate, size, rotation, audio."""
    from vidagent.media import probe as probe_media

    found = probe_media(path)
    if as_json:
        click.echo(json.dumps(asdict(found), indent=2, default=str))
        return
    audio = ", ".join(f"{a.codec} {a.sample_rate} Hz x{a.channels}" for a in found.audio_streams)
    click.echo(f"{found.path}")
    click.echo(f"  duration  {hms(found.duration)} ({found.duration:.2f} s)")
    click.echo(
        f"  video     {found.codec} {found.width}x{found.height} @ {found.fps:.3g} fps, rotation {found.rotation}"
    )
    click.echo(f"  audio     {audio or 'none'}")
