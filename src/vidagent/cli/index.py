"""``vidagent index``: build the index for many videos, or say what that would cost."""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path
from typing import Any

import click

from vidagent.cli import cli, hms, settings_of
from vidagent.config import Settings

VIDEO_SUFFIXES = {
    ".mp4",
    ".mkv",
    ".mov",
    ".avi",
    ".webm",
    ".m4v",
    ".mpg",
    ".mpeg",
    ".ogv",
    ".ts",
    ".flv",
    ".wmv",
}


def expand_paths(patterns: tuple[str, ...]) -> list[Path]:
    """Files from file paths, directories (their video files, recursively) and globs."""
    out: list[Path] = []
    for pattern in patterns:
        matches = (
            sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        )
        for m in map(Path, matches):
            if m.is_dir():
                out += sorted(
                    p for p in m.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES
                )
            else:
                out.append(m)
    return list(dict.fromkeys(out))


def _stages(text: str | None) -> tuple[str, ...]:
    from vidagent.ingest import STAGES

    if not text:
        return STAGES
    chosen = tuple(s.strip() for s in text.split(",") if s.strip() and s.strip() != "structure")
    unknown = [s for s in chosen if s not in STAGES]
    if unknown:
        raise click.BadParameter(
            f"unknown stage(s) {', '.join(unknown)}; stages: structure, {', '.join(STAGES)}"
        )
    return tuple(s for s in STAGES if s in chosen)  # always in pipeline order


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--dry-run",
    is_flag=True,
    help="print clips, frames, calls, tokens, cost and time; spend nothing",
)
@click.option(
    "--stages", metavar="LIST", help="comma-separated stages after structure (default: all)"
)
@click.option("--clip-seconds", type=float, help="uniform clip length in seconds (default 5)")
@click.option("--sample-fps", type=float, help="thumbnails kept per second (default 1)")
@click.option("--json", "as_json", is_flag=True, help="print JSON lines, one per video")
@click.option(
    "--progress/--no-progress", default=None, help="progress bars (default: on a terminal)"
)
@click.pass_context
def index(
    ctx: click.Context,
    paths: tuple[str, ...],
    dry_run: bool,
    stages: str | None,
    clip_seconds: float | None,
    sample_fps: float | None,
    as_json: bool,
    progress: bool | None,
) -> None:
    """Index videos (files, directories, globs) into the Library.

    Stages: structure (probe, thumbnails, shots, clips), transcribe, read_text, detect,
    caption, embed, summarize. Rerunning finishes interrupted work without repeating it.
    A bad file gets a one-line error; the others are still indexed and the exit code is 1.
    """
    settings = settings_of(ctx)
    if clip_seconds is not None:
        settings.clip_seconds = clip_seconds
    if sample_fps is not None:
        settings.sample_fps = sample_fps
    files = expand_paths(paths)
    if not files:
        raise click.UsageError(f"no video files match {' '.join(paths)}")
    chosen = _stages(stages)
    if dry_run:
        failed = _dry_run(files, settings, chosen, as_json)
    else:
        show = progress if progress is not None else sys.stderr.isatty()
        failed = _index(files, settings, chosen, as_json, show)
    if failed:
        ctx.exit(1)


def _index(
    files: list[Path], settings: Settings, stages: tuple[str, ...], as_json: bool, progress: bool
) -> int:
    from vidagent.ingest import index_path
    from vidagent.library import Library
    from vidagent.models.client import Models

    library = Library(settings.library_uri)
    failed = 0
    with Models(settings) as models:
        for path in files:
            result = index_path(
                path,
                library=library,
                settings=settings,
                models=models,
                stages=stages,
                progress=progress,
            )
            if result.error is not None:
                failed += 1
                click.echo(f"error: {result.error}", err=True)
                continue
            if as_json:
                click.echo(json.dumps(_result_json(result)))
            else:
                _print_result(library, result)
    return failed


def _result_json(result: Any) -> dict[str, Any]:
    s = result.structure
    return {
        "video_id": s.video.video_id,
        "name": s.video.name,
        "duration": s.video.duration,
        "clips": s.clips,
        "shots": s.shots,
        "frames": s.frames,
        "thumbnail_bytes": s.thumbnail_bytes,
        "reused": s.reused,
        "stages": {
            r.stage: {"clips": r.clips, "seconds": round(r.seconds, 3), "note": r.note}
            for r in result.stages
        },
        "seconds": round(result.seconds, 3),
    }


def _print_result(library: Any, result: Any) -> None:
    s = result.structure
    v = result.video or s.video
    click.echo(f"{v.video_id}  {v.name}")
    click.echo(
        f"  {hms(v.duration)}  {v.width}x{v.height} @ {v.fps:.3g} fps  {v.codec}  audio: {'yes' if v.has_audio else 'no'}"
    )
    click.echo(
        f"  {s.shots} shots, {s.clips} clips, {s.frames} thumbnails ({s.thumbnail_bytes / 1024:.0f} KiB)"
    )
    for run in result.stages:
        done = f"{run.clips} clips" if run.clips else "up to date"
        click.echo(
            f"  {run.stage:<11} {done:<12} {run.seconds:6.1f} s{'  (' + run.note + ')' if run.note else ''}"
        )
    clips = library.clips(v.video_id)
    speech = " ".join(c.transcript for c in clips if c.transcript).strip()
    if speech:
        click.echo(f"  speech      {_cut(speech, 160)}")
    text = list(dict.fromkeys(line for c in clips for line in c.ocr_text.split("\n") if line))
    if text:
        click.echo(f"  on screen   {_cut(' | '.join(text), 160)}")
    people = sum(1 for c in clips if '"person"' in c.detections)
    if any(c.detect_model for c in clips):
        click.echo(f"  people in   {people} of {len(clips)} clips")
    summary = library.summary(v.video_id, "global")
    if summary is not None and summary.text:
        click.echo(f"  summary     {_cut(summary.text, 300)}")
    click.echo(
        f"  {'indexed' if any(r.clips for r in result.stages) or not s.reused else 'up to date'} in {result.seconds:.1f} s -> {library.uri}"
    )


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _dry_run(files: list[Path], settings: Settings, stages: tuple[str, ...], as_json: bool) -> int:
    from vidagent.exceptions import MediaError
    from vidagent.ingest import estimate_path
    from vidagent.models.base import Usage
    from vidagent.models.client import price_usage

    failed, grand = 0, {"seconds": 0.0, "cost": 0.0}
    for path in files:
        try:
            estimate = estimate_path(path, settings, stages)
        except MediaError as e:
            failed += 1
            click.echo(f"error: {e}", err=True)
            continue
        rows = estimate.stages
        costs = [
            price_usage(Usage(r.input_tokens, r.output_tokens), r.spec, settings).cost_usd
            for r in rows
        ]
        grand["seconds"] += sum(r.seconds for r in rows)
        grand["cost"] += sum(costs)
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "path": str(path),
                        "duration": estimate.duration,
                        "clips": estimate.clips,
                        "stages": [r.__dict__ | {"cost_usd": c} for r, c in zip(rows, costs)],
                    }
                )
            )
            continue
        click.echo(
            f"{path}  {hms(estimate.duration)}  {estimate.clips} clips of {settings.clip_seconds:g} s"
        )
        click.echo(
            f"  {'stage':<11} {'spec':<38} {'calls':>6} {'frames':>7} {'in tok':>9} {'out tok':>8} {'cost $':>8} {'time':>8}"
        )
        for r, c in zip(rows, costs):
            cost = (
                f"{c:.4f}"
                if r.spec in settings.prices or r.spec.split("?")[0] in settings.prices
                else "-"
            )
            click.echo(
                f"  {r.stage:<11} {r.spec[:38]:<38} {r.calls:>6} {r.frames:>7} {r.input_tokens:>9} "
                f"{r.output_tokens:>8} {cost:>8} {hms(r.seconds):>8}"
            )
    if not as_json and files:
        click.echo(
            f"total: about {hms(grand['seconds'])}, ${grand['cost']:.4f} where prices are configured"
        )
    return failed
