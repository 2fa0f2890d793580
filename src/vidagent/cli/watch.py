"""``vidagent watch``: index a live or growing source as it arrives, and raise alerts."""

from __future__ import annotations

import json
import signal
import sys
from types import FrameType
from typing import Any

import click

from vidagent import timecode
from vidagent.cli.base import cli, hms, session_of, settings_of
from vidagent.cli.index import _stages, parse_started_at


def parse_duration(text: str, option: str) -> float:
    """Seconds from ``90``, ``90s``, ``10m``, ``24h``, ``7d`` or ``1h30m`` (as ``--last``)."""
    try:
        return timecode.parse_duration(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint=option) from None


@cli.command()
@click.argument("source")
@click.option(
    "--window", "window", metavar="SECONDS", help="stream seconds indexed at a time (default 30)"
)
@click.option(
    "--alert",
    "alerts",
    multiple=True,
    metavar="TEXT",
    help="raise an alert when a window says, shows or has detected TEXT's key words (the "
    "citation checker's scoring); a JSON line on stdout; repeatable",
)
@click.option("--alert-url", metavar="URL", help="also POST each alert, as JSON, to URL")
@click.option(
    "--keep",
    metavar="DURATION",
    help="roll out windows older than this (24h, 90m, 3600) but those a saved trace cites "
    "[keep everything]",
)
@click.option(
    "--summary-every",
    metavar="DURATION",
    default="5m",
    show_default=True,
    help="wall time between refreshes of the stream's summary",
)
@click.option(
    "--stall",
    metavar="SECONDS",
    default="10",
    show_default=True,
    help="no data for this long is an outage: reconnect with backoff",
)
@click.option(
    "--give-up",
    metavar="DURATION",
    default="5m",
    show_default=True,
    help="an outage this long ends the watch (what was indexed is kept)",
)
@click.option(
    "--started-at",
    metavar="ISO",
    help="the wall-clock time of the stream's start [when its first packet is read]",
)
@click.option("--stages", metavar="LIST", help="comma-separated stages (default: as index)")
@click.option("--json", "as_json", is_flag=True, help="every event as a JSON line on stdout")
@click.pass_context
def watch(
    ctx: click.Context,
    source: str,
    window: str | None,
    alerts: tuple[str, ...],
    alert_url: str | None,
    keep: str | None,
    summary_every: str,
    stall: str,
    give_up: str,
    started_at: str | None,
    stages: str | None,
    as_json: bool,
) -> None:
    """Index SOURCE as it arrives: a growing file, an HLS playlist (path or URL), or any URL
    FFmpeg opens (rtsp://, rtmp://, srt://, http://).

    The stream is one video of the Library that grows window by window; ask, search and
    ground work on it meanwhile. Stalls and drops are retried with backoff and recorded.
    Ctrl-C stops at the next keyframe, once what was read is indexed (twice: at once). The same
    command again resumes where it stopped, a kill -9 included.
    """
    settings = settings_of(ctx)
    options: dict[str, Any] = {
        "window_seconds": parse_duration(window, "--window") if window else None,
        "alerts": alerts,
        "alert_url": alert_url,
        "keep_seconds": parse_duration(keep, "--keep") if keep else None,
        "summary_seconds": parse_duration(summary_every, "--summary-every"),
        "stall_seconds": parse_duration(stall, "--stall"),
        "give_up_seconds": parse_duration(give_up, "--give-up"),
        "started_at": parse_started_at(started_at) if started_at else None,
        "stages": _stages(stages),
        "on_event": lambda event: _show(event, as_json),
    }
    session = session_of(ctx, settings)
    watching = session.watch(source, **options)
    stops = 0

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stops
        stops += 1
        if stops > 1:
            raise KeyboardInterrupt
        click.echo("stopping at the next keyframe (Ctrl-C again: at once)", err=True)
        watching.stop()

    previous = signal.signal(signal.SIGINT, stop)
    previous_term = signal.signal(signal.SIGTERM, stop)
    try:
        report = watching.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    if not as_json:
        click.echo(
            f"{report.state}: {report.windows} windows, {hms(report.duration)} of stream in "
            f"{report.video_id}; {len(report.alerts)} alerts, {len(report.outages)} outages",
            err=True,
        )


def _show(event: dict[str, Any], as_json: bool) -> None:
    kind = event.get("event")
    if as_json or kind == "alert":
        click.echo(json.dumps(event, default=str))
        sys.stdout.flush()
        return
    if kind == "window":
        line = (
            f"window {event['index']}: {hms(event['t0'])}-{hms(event['t1'])}, "
            f"{event['clips']} clips, indexed in {event['seconds']:.1f} s"
        )
    elif kind == "source_down":
        line = (
            f"source down at {hms(event['at'])} ({event['reason']}): reconnecting, giving up "
            f"after {hms(event['give_up_seconds'])}"
        )
    elif kind == "waiting":
        line = (
            f"waiting for the source ({event['reason']}): giving up after "
            f"{hms(event['give_up_seconds'])}"
        )
    elif kind == "audio-skipped":
        line = f"no sound from {hms(event['at'])}: {event['why']}"
    elif kind == "summary":
        line = f"summary refreshed ({event['stage']}, {event['seconds']:.1f} s)"
    elif kind == "outage":
        lost = f", {event['lost']:.1f} s of stream lost" if event["lost"] else ""
        line = f"outage at {hms(event['at'])}: {event['reason']} for {event['seconds']:.0f} s{lost}"
    elif kind == "end":
        return
    else:
        line = " ".join(f"{k}={v}" for k, v in event.items())
    click.echo(line, err=True)
