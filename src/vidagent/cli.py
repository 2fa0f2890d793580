"""The ``vidagent`` command: a thin noun-verb shell over the library functions.

Errors print as one line on stderr with a non-zero exit; ``--json`` gives machine output.
Heavy modules are imported inside the commands that need them so ``--help`` and ``info`` stay
fast and never import torch.
"""

from __future__ import annotations

import glob
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from vidagent import __version__
from vidagent.config import ROLES, Settings, load_settings
from vidagent.exceptions import MediaError, VidagentError

F = TypeVar("F", bound=Callable[..., Any])


def hms(seconds: float) -> str:
    """``HH:MM:SS`` for a time in seconds."""
    s = int(round(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _settings(ctx: click.Context) -> Settings:
    return ctx.find_object(Settings) or ctx.ensure_object(Settings)  # type: ignore[no-any-return]


def _role_options(fn: F) -> F:
    for role in reversed(ROLES):
        fn = click.option(
            f"--{role.replace('_', '-')}", role, metavar="SPEC", help=f"model spec for the {role} role"
        )(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vidagent")
@click.option("--home", type=click.Path(file_okay=False), help="home directory [$VIDAGENT_HOME]")
@click.option("--library", metavar="URI", help="Library directory or URI [$VIDAGENT_LIBRARY]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="config file")
@_role_options
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, **flags: Any) -> None:
    """Answer questions about long videos with agents over a multi-granular index."""
    ctx.obj = load_settings(flags, config_file=config_file)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """Show each model role's spec and backend, and where the Library lives."""
    from vidagent.models.registry import backend_status

    settings = _settings(ctx)
    roles = {role: backend_status(settings.spec(role), settings, role) for role in ROLES}
    library = settings.library_uri
    exists = "://" in library or (Path(library) / "manifest.json").is_file()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "version": __version__,
                    "home": str(settings.home),
                    "library": library,
                    "library_exists": exists,
                    "roles": {
                        r: {"spec": s.spec, "usable": s.usable, "detail": s.detail} for r, s in roles.items()
                    },
                },
                indent=2,
            )
        )
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
    from dataclasses import asdict

    from vidagent.media import probe as probe_media

    found = probe_media(path)
    if as_json:
        click.echo(json.dumps(asdict(found), indent=2, default=str))
        return
    audio = ", ".join(f"{a.codec} {a.sample_rate} Hz x{a.channels}" for a in found.audio_streams)
    click.echo(f"{found.path}")
    click.echo(f"  duration  {hms(found.duration)} ({found.duration:.2f} s)")
    click.echo(f"  video     {found.codec} {found.width}x{found.height} @ {found.fps:.3g} fps, rotation {found.rotation}")
    click.echo(f"  audio     {audio or 'none'}")


def expand_paths(patterns: tuple[str, ...]) -> list[Path]:
    """Files from file paths, directories (their video files, recursively) and globs."""
    suffixes = {".mp4", ".mkv", ".mov", ".avi", ".webm", ".m4v", ".mpg", ".mpeg", ".ogv", ".ts", ".flv", ".wmv"}
    out: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        for m in map(Path, matches):
            if m.is_dir():
                out += sorted(p for p in m.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)
            else:
                out.append(m)
    return list(dict.fromkeys(out))


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--clip-seconds", type=float, help="uniform clip length in seconds (default 5)")
@click.option("--sample-fps", type=float, help="thumbnails kept per second (default 1)")
@click.option("--json", "as_json", is_flag=True, help="print JSON lines, one per video")
@click.pass_context
def index(ctx: click.Context, paths: tuple[str, ...], clip_seconds: float | None, sample_fps: float | None, as_json: bool) -> None:
    """Index videos (files, directories, globs) into the Library.

    For now this runs the structure stage: probe, 1 fps thumbnails, shots and uniform clips.
    A bad file gets a one-line error; the others are still indexed and the exit code is 1.
    """
    from vidagent.ingest import index_structure
    from vidagent.library import Library

    settings = _settings(ctx)
    if clip_seconds is not None:
        settings.clip_seconds = clip_seconds
    if sample_fps is not None:
        settings.sample_fps = sample_fps
    files = expand_paths(paths)
    if not files:
        raise click.UsageError(f"no video files match {' '.join(paths)}")
    library = Library(settings.library_uri)
    failed = 0
    for path in files:
        try:
            report = index_structure(library, path, settings)
        except MediaError as e:
            failed += 1
            click.echo(f"error: {e}", err=True)
            continue
        v = report.video
        if as_json:
            click.echo(json.dumps({"video_id": v.video_id, "name": v.name, "duration": v.duration,
                                   "clips": report.clips, "shots": report.shots, "frames": report.frames,
                                   "thumbnail_bytes": report.thumbnail_bytes, "seconds": report.seconds,
                                   "reused": report.reused}))
            continue
        click.echo(f"{v.video_id}  {v.name}")
        click.echo(f"  {hms(v.duration)}  {v.width}x{v.height} @ {v.fps:.3g} fps  {v.codec}  audio: {'yes' if v.has_audio else 'no'}")
        click.echo(f"  {report.shots} shots, {report.clips} clips of {settings.clip_seconds:g} s, "
                   f"{report.frames} thumbnails ({report.thumbnail_bytes / 1024:.0f} KiB)")
        for shot in library.shots(v.video_id)[:40]:
            click.echo(f"    shot {shot.shot_index + 1:>3}  {hms(shot.t0)} - {hms(shot.t1)}")
        click.echo(f"  {'already indexed' if report.reused else f'indexed in {report.seconds:.1f} s'}  ->  {library.uri}")
    if failed:
        ctx.exit(1)


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def list_videos(ctx: click.Context, as_json: bool) -> None:
    """List the videos in the Library."""
    from vidagent.library import Library

    videos = Library(_settings(ctx).library_uri).list_videos()
    if as_json:
        click.echo(json.dumps([v.to_row() | {"stages": v.stages} for v in videos], indent=2))
        return
    for v in videos:
        click.echo(f"{v.video_id}  {hms(v.duration)}  {', '.join(v.stages) or '-':<12}  {v.name}")


@cli.command()
@click.argument("video")
@click.pass_context
def remove(ctx: click.Context, video: str) -> None:
    """Remove a video (id, id prefix or file name) and all its rows from the Library."""
    from vidagent.library import Library

    click.echo(f"removed {Library(_settings(ctx).library_uri).remove_video(video)}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn vidagent errors into one line and exit code 1."""
    try:
        # Without standalone mode click returns ctx.exit()'s code instead of exiting.
        code = cli.main(args=argv, prog_name="vidagent", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except VidagentError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
