"""``vidagent list``, ``show``, ``search`` and ``remove``: reading and pruning the Library."""

from __future__ import annotations

import json
from pathlib import Path

import click

from vidagent.cli import cli, hms, parse_time, settings_of


def _library(ctx: click.Context):  # type: ignore[no-untyped-def]
    """The configured Library; reading commands never create one."""
    from vidagent.exceptions import LibraryError
    from vidagent.library import Library

    uri = settings_of(ctx).library_uri
    try:
        return Library(uri, create=False)
    except LibraryError:
        raise LibraryError(f"no Library at {uri}; index a video first (vidagent index PATH)") from None


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def list_videos(ctx: click.Context, as_json: bool) -> None:
    """List the videos in the Library."""
    from vidagent.library.manifest import MANIFEST

    uri = settings_of(ctx).library_uri
    fresh = "://" not in uri and not (Path(uri).expanduser() / MANIFEST).is_file()
    videos = [] if fresh else _library(ctx).list_videos()
    if as_json:
        click.echo(json.dumps([v.to_row() | {"stages": v.stages} for v in videos], indent=2))
        return
    for v in videos:
        click.echo(f"{v.video_id}  {hms(v.duration)}  {len(v.stages):>2} stages  {v.name}")


@cli.command()
@click.argument("video")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def show(ctx: click.Context, video: str, as_json: bool) -> None:
    """Show a video's summary, subject registry and clip table."""
    lib = _library(ctx)
    v = lib.get_video(video)
    clips = lib.clips(v.video_id)
    summary = lib.summary(v.video_id, "global")
    registry = lib.summary(v.video_id, "registry")
    subjects = json.loads(registry.data) if registry else {}
    if as_json:
        body = {
            "video": v.to_row() | {"stages": v.stages},
            "summary": summary.text if summary else "",
            "registry": subjects,
            "clips": [c.__dict__ for c in clips],
        }
        click.echo(json.dumps(body, indent=2))
        return
    click.echo(f"{v.video_id}  {v.name}  {hms(v.duration)}  {v.width}x{v.height}  {v.source}")
    stages = ", ".join(f"{name} ({info.get('model', '')})" for name, info in v.stages.items())
    click.echo(f"stages: {stages}")
    if summary:
        click.echo(f"\nsummary\n  {summary.text.strip()}")
    if subjects:
        click.echo("\nsubjects")
        for sid, s in subjects.items():
            looks = ", ".join(s.get("appearance", []))
            click.echo(
                f"  {sid:<12} {s.get('name', 'unknown'):<16} first seen {s.get('first_seen', '?')}  {looks}"
            )
    click.echo("\nclips")
    for c in clips:
        click.echo(f"  {hms(c.t0)}-{hms(c.t1)}  {' '.join(c.caption.split())[:110]}")
        if c.transcript:
            click.echo(f"                     speech: {c.transcript[:100]}")
        if c.ocr_text:
            click.echo(f"                     text:   {' | '.join(c.ocr_text.splitlines())[:100]}")


@cli.command()
@click.argument("video")
@click.argument("text")
@click.option(
    "--from", "t_from", metavar="T", help="only clips overlapping from this time (s or HH:MM:SS)"
)
@click.option("--to", "t_to", metavar="T", help="only clips overlapping up to this time")
@click.option("--top", default=5, show_default=True, help="how many clips")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def search(
    ctx: click.Context,
    video: str,
    text: str,
    t_from: str | None,
    t_to: str | None,
    top: int,
    as_json: bool,
) -> None:
    """Find the clips of VIDEO (id, prefix, name, or 'all') that match TEXT in meaning."""
    from vidagent.library.search import search as search_clips
    from vidagent.models.client import Models

    lib = _library(ctx)
    settings = settings_of(ctx)
    bound = lib.manifest.embeddings.get("clip_vectors")
    if bound:  # search with the model that made the vectors, whatever is configured now
        settings = settings.model_copy(update={"embed": bound["spec"]})
    videos = None if video == "all" else [video]
    start = parse_time(t_from) if t_from else None
    end = parse_time(t_to) if t_to else None
    with Models(settings) as models:
        hits = search_clips(
            lib, text, models=models, videos=videos, t_from=start, t_to=end, top=top
        )
    if as_json:
        rows = [
            {
                "video_id": h.clip.video_id,
                "t0": h.clip.t0,
                "t1": h.clip.t1,
                "start": hms(h.clip.t0),
                "end": hms(h.clip.t1),
                "score": round(h.score, 4),
                "caption": h.clip.caption,
                "transcript": h.clip.transcript,
                "ocr_text": h.clip.ocr_text,
            }
            for h in hits
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    if not hits:
        click.echo("no matching clips")
    for h in hits:
        said = f'  "{h.clip.transcript[:80]}"' if h.clip.transcript else ""
        click.echo(
            f"{h.score:.3f}  {h.clip.video_id[:8]}  {hms(h.clip.t0)}-{hms(h.clip.t1)}  {' '.join(h.clip.caption.split())[:90]}{said}"
        )


@cli.command()
@click.argument("video")
@click.pass_context
def remove(ctx: click.Context, video: str) -> None:
    """Remove a video (id, id prefix or file name) and all its rows from the Library."""
    click.echo(f"removed {_library(ctx).remove_video(video)}")
