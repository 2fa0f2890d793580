"""``vidagent index``: build the index for many videos, or say what that would cost."""

from __future__ import annotations

import glob
import json
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from vidagent.cli.base import POSITIVE, cli, hms, on_abort, session_of, settings_of
from vidagent.cli.render import shorten
from vidagent.config import Settings
from vidagent.exceptions import ConfigError

if TYPE_CHECKING:
    from vidagent.app.executors import Executor
    from vidagent.app.results import EstimateReport, IndexReport

F = TypeVar("F", bound=Callable[..., Any])

#: ``--executor``'s names, as :data:`vidagent.app.executors.NAMES` (not imported: ``--help``
#: stays light): the kinds, then the older names of ``local``.
EXECUTORS = ("local", "pool", "ray", "sequential", "threads")
EXECUTOR_HELP = (
    "local: this process (index: one video after another; bench run: questions on threads); "
    "pool: a local process pool; ray: a Ray cluster. sequential and threads are older names "
    "of local, accepted by both commands"
)

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
    # camcorders' and phones' (AVCHD, Blu-ray, 3GPP), broadcast's and DVDs'
    ".mts",
    ".m2ts",
    ".m2t",
    ".3gp",
    ".3g2",
    ".mxf",
    ".vob",
    ".asf",
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
                found = sorted(p for p in m.rglob("*") if p.is_file())
                out += [p for p in found if p.suffix.lower() in VIDEO_SUFFIXES]
                _say_skipped(m, [p for p in found if p.suffix.lower() not in VIDEO_SUFFIXES])
            else:
                out.append(m)
    return list(dict.fromkeys(out))


def _say_skipped(folder: Path, skipped: list[Path]) -> None:
    """A note of a folder's files not taken for videos by their names (it said nothing, and
    a camera's .MTS files were left out unseen); hidden files are not counted."""
    shown = [p for p in skipped if not any(x.startswith(".") for x in p.relative_to(folder).parts)]
    if not shown:
        return
    kinds = ", ".join(sorted({p.suffix.lower() or "no extension" for p in shown})[:6])
    click.echo(
        f"note: {folder}: {len(shown)} file{'s' * (len(shown) != 1)} not taken for video by "
        f"name ({kinds}) left out; name a file to index it",
        err=True,
    )


def library_sources(session: Any, files: list[Path]) -> list[Path]:
    """Each path that names no file but a video of the Library (its id, id prefix or name, as
    ``ask`` reads one) read as that video's source file, so ``vidagent index talk`` runs the
    stages ``talk.mp4``'s index lacks (the speakers stage, added after it was indexed). Any
    other path is left as it is, for the indexer's one-line error.

    Raises:
        AmbiguousVideoError: a name that matches several videos (the message lists them).
        UserError: a name of a watched stream (``vidagent watch`` resumes it).
    """
    from vidagent.exceptions import AmbiguousVideoError, LibraryError, UserError

    if all(f.exists() for f in files) or not session.library_exists():
        return files
    try:
        library = session.existing_library()
    except LibraryError:  # a remote Library not made yet: nothing to name
        return files

    def source(f: Path) -> Path:
        if f.exists():
            return f
        try:
            video = library.get_video(str(f))
        except AmbiguousVideoError:
            raise
        except LibraryError:
            return f
        if "watch" in video.stages:
            resume = f"`vidagent watch {shlex.quote(video.source)}`"
            raise UserError(f"{f} is a watched stream; {resume} resumes it")
        return Path(video.source)

    return list(dict.fromkeys(map(source, files)))


def _stages(text: str | None) -> tuple[str, ...] | None:
    from vidagent.app import Session

    if text is None:
        return None
    try:
        return Session.chosen_stages(text.split(","))  # always in pipeline order
    except ConfigError as e:
        raise click.BadParameter(str(e)) from None


def executor_options(jobs_help: str) -> Callable[[F], F]:
    """``--executor``, ``--address``, ``--jobs`` and ``--rate-limit`` (index and bench run)."""

    def add(f: F) -> F:
        f = click.option(
            "--rate-limit",
            "rate_limits",
            multiple=True,
            metavar="[ENDPOINT=]N",
            help="at most N requests per second to a remote endpoint (all of them without "
            "ENDPOINT=) across every worker; repeatable",
        )(f)
        f = click.option("--jobs", "-j", "jobs", type=int, help=jobs_help)(f)
        f = click.option(
            "--address",
            metavar="ADDR",
            help="the Ray cluster to use: auto, HOST:6379 or ray://HOST:10001 "
            "(default: start a local one)",
        )(f)
        return click.option(
            "--executor",
            type=click.Choice(EXECUTORS),
            default=None,
            help=f"where the work runs (default: pool with --jobs N > 1, else local). "
            f"{EXECUTOR_HELP}",
        )(f)

    return add


def executor_of(
    kind: str | None, jobs: int | None, address: str | None, rate_limits: tuple[str, ...]
) -> Executor | None:
    """The executor the options name (None: in this process); bad values are usage errors."""
    from vidagent.app.executors import make_executor
    from vidagent.app.executors.gate import parse_rates

    try:
        rates = parse_rates(rate_limits)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return make_executor(kind, jobs=jobs, address=address, rates=rates)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--dry-run",
    is_flag=True,
    help="print clips, frames, calls, tokens, cost and time; spend nothing",
)
@click.option(
    "--stages",
    metavar="LIST",
    help="comma-separated stages after structure (default: all but embed_frames, and graph "
    "only when the llm is not the embedded SmolLM2)",
)
@click.option("--clip-seconds", type=POSITIVE, help="uniform clip length in seconds (default 5)")
@click.option("--sample-fps", type=POSITIVE, help="thumbnails kept per second (default 1)")
@click.option(
    "--caption-style",
    type=click.Choice(["registry", "avi"]),
    help="captions with DVD's subject registry (default) or AVI's independent per-clip prompt",
)
@click.option(
    "--skip-repeats",
    type=click.FloatRange(0, 1, max_open=True),
    metavar="DIFF",
    help="reuse the previous clip's caption where the picture repeats: no pixel of the stored "
    "thumbnails, shrunk to 32x32 greyscale, differs by more than DIFF (0-1; 0.05 suggested; "
    "default 0: off, every clip captioned as the papers do)",
)
@click.option(
    "--batch/--no-batch",
    default=None,
    help="send the entity graph's windows and AVI-style captions through OpenAI's Batch API: "
    "half the price, answers within 24 h while the command waits; a rerun resumes the batch "
    "(default: off, or the batch setting)",
)
@click.option(
    "--started-at",
    metavar="ISO",
    help="when the recording started (ISO-8601, e.g. 2026-05-01T09:30:00Z; one file only): "
    "times then also read as wall-clock times [the container's creation time]",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON lines, one per video")
@click.option(
    "--progress/--no-progress", default=None, help="progress bars (default: on a terminal)"
)
@executor_options(
    "worker processes (a local pool without --executor ray; Ray actors with "
    "it, default one per CPU of the cluster)"
)
@click.pass_context
def index(
    ctx: click.Context,
    paths: tuple[str, ...],
    dry_run: bool,
    stages: str | None,
    clip_seconds: float | None,
    sample_fps: float | None,
    caption_style: Literal["registry", "avi"] | None,
    skip_repeats: float | None,
    batch: bool | None,
    started_at: str | None,
    as_json: bool,
    progress: bool | None,
    executor: str | None,
    address: str | None,
    jobs: int | None,
    rate_limits: tuple[str, ...],
) -> None:
    """Index videos (files, directories, globs) into the Library; a video already in it may be
    named as `ask` names one (id, id prefix, file name), to index its file again.

    Stages: structure (probe, thumbnails, shots, clips), transcribe, read_text, detect,
    speakers, caption, embed, summarize; embed_frames and graph (AVI's entity graph) when named, graph
    also by default with an llm other than the embedded SmolLM2. Rerunning finishes
    interrupted work without repeating it.
    A bad file gets a one-line error; the others are still indexed and the exit code is 1.
    With --jobs N or --executor ray, videos are indexed in parallel, one per worker.
    """
    settings = settings_of(ctx)
    if clip_seconds is not None:
        settings.clip_seconds = clip_seconds
    if sample_fps is not None:
        settings.sample_fps = sample_fps
    if caption_style is not None:
        settings.caption_style = caption_style
    if skip_repeats is not None:
        settings.caption_skip_repeats = skip_repeats
    if batch is not None:
        settings.batch = batch
    session = session_of(ctx, settings)
    files = library_sources(session, expand_paths(paths))
    if not files:
        raise click.UsageError(f"no video files match {' '.join(paths)}")
    chosen = _stages(stages)
    if started_at is not None:
        if len(files) != 1:
            raise click.BadParameter(
                f"gives one recording's start; {len(files)} files were named",
                param_hint="--started-at",
            )
        started_at = parse_started_at(started_at)
    if dry_run:
        failed = _dry_run(session.estimate(files, stages=chosen), settings, as_json)
    else:
        show = progress if progress is not None else sys.stderr.isatty()
        on_abort("what each video's stages finished is kept; the same command indexes the rest")
        runner = executor_of(executor, jobs, address, rate_limits)
        try:
            reports = session.index(files, stages=chosen, progress=show, executor=runner)
            if started_at:
                reports = _stamped(session, reports, started_at)
            failed = _index(reports, as_json)
        finally:
            if runner is not None:
                runner.close()
    if failed:
        ctx.exit(1)


def parse_started_at(text: str) -> str:
    """``--started-at`` in canonical ISO-8601 form."""
    from vidagent.timecode import parse_wall_clock

    try:
        return parse_wall_clock(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--started-at") from None


def _stamped(session: Any, reports: Iterable[IndexReport], when: str) -> Iterator[IndexReport]:
    """The reports, each indexed video's recording start recorded as ``when`` first."""
    for report in reports:
        if report.ok and report.result is not None and report.result.structure is not None:
            session.set_recorded_at(report.result.structure.video.video_id, when)
        yield report


def _index(reports: Iterable[IndexReport], as_json: bool) -> int:
    failed = 0
    for report in reports:
        failed += not report.ok
        if not report.ok:
            click.echo(f"error: {report.error}", err=True)
        elif as_json:
            click.echo(json.dumps(report.to_json()))
        else:
            _print_result(report)
    return failed


def _print_result(report: IndexReport) -> None:
    result = report.result
    assert result is not None and result.structure is not None
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    s = result.structure
    v = result.video or s.video
    click.echo(f"{v.video_id}  {v.name}")
    click.echo(
        f"  {hms(v.duration)}  {v.width}x{v.height} @ {round(v.fps, 3):g} fps  {v.codec}  audio: {'yes' if v.has_audio else 'no'}"
    )
    click.echo(
        f"  {s.shots} shots, {s.clips} clips, {s.frames} thumbnails ({s.thumbnail_bytes / 1024:.0f} KiB)"
    )
    for run in result.stages:
        done = f"{run.clips} clips" if run.clips else "up to date"
        at_once = "  [at once]" if run.at_once else ""
        click.echo(
            f"  {run.stage:<12} {done:<12} {run.seconds:6.1f} s{at_once}{'  (' + run.note + ')' if run.note else ''}"
        )
    if any(run.at_once for run in result.stages):
        click.echo("  [at once]: stages that ran side by side; their seconds overlap")
    if report.speech:
        click.echo(f"  speech       {shorten(report.speech, 160)}")
    if report.on_screen or report.on_screen_hidden:
        hidden = report.on_screen_hidden
        unread = f" ({hidden} unreadable line{'s' * (hidden != 1)} searchable, not shown)"
        shown = shorten(" | ".join(report.on_screen), 160 - len(unread) * bool(hidden))
        click.echo(f"  on screen    {shown}{unread if hidden else ''}")
    if report.people_clips is not None:
        click.echo(f"  people in    {report.people_clips} of {report.clips} clips")
    if report.summary:
        click.echo(f"  summary      {shorten(report.summary, 300)}")
    fresh = any(r.clips for r in result.stages) or not s.reused
    click.echo(
        f"  {'indexed' if fresh else 'up to date'} in {result.seconds:.1f} s -> {report.library}"
    )


def _dry_run(reports: Iterable[EstimateReport], settings: Settings, as_json: bool) -> int:
    failed, seconds, cost, any_file = 0, 0.0, 0.0, False
    unpriced: list[str] = []
    basis = ""  # where the offline stages' times come from (one CPU: the same for every file)
    for report in reports:
        any_file = True
        if report.estimate is None:
            failed += 1
            click.echo(f"error: {report.error}", err=True)
            continue
        rows, est = report.estimate.stages, report.estimate
        seconds += sum(r.seconds for r in rows)
        if any(r.cpu_seconds and r.seconds for r in rows):
            basis = est.speed.basis()
        cost += sum(c or 0.0 for c in report.costs)
        for r, c in zip(rows, report.costs, strict=False):
            if c is None and r.spec not in unpriced:
                unpriced.append(r.spec)
        if as_json:
            click.echo(json.dumps(report.to_json()))
            continue
        click.echo(
            f"{report.path}  {hms(est.duration)}  {est.clips} clips of {settings.clip_seconds:g} s"
        )
        click.echo(
            f"  {'stage':<12} {'spec':<38} {'calls':>6} {'frames':>7} {'in tok':>9} {'out tok':>8} {'cost $':>8} {'time':>8}"
        )
        for r, c in zip(rows, report.costs, strict=False):
            shown = f"{c:.4f}" if c is not None else "no price"
            click.echo(
                f"  {r.stage:<12} {r.spec[:38]:<38} {r.calls:>6} {r.frames:>7} {r.input_tokens:>9} "
                f"{r.output_tokens:>8} {shown:>8} {hms(r.seconds):>8}"
            )
        own = sum(c or 0.0 for c in report.costs)
        click.echo(f"  {'this video':<70} {own:>8.4f} {hms(sum(r.seconds for r in rows)):>8}")
    if not as_json and any_file:
        missing = f" + no price for {', '.join(unpriced)}" if unpriced else ""
        click.echo(f"total: about {hms(seconds)}, ${cost:.4f}{missing}")
        if basis:
            click.echo(f"  {basis}")
    return failed
