"""Watches driven over HTTP (``/api/streams``): live and growing sources indexed as they arrive.

A watch (:class:`vidagent.app.watching.Watch`) runs as a ``watch`` job of the server's registry
(:mod:`vidagent.server.jobs`), on a thread of its own: its events (``window``, ``alert``,
``outage``, ``summary``, ``retention``, ``alert-post-failed``) are the job's events, so
``/api/streams/{id}/events`` is the job's event stream, and stopping it is cancelling the job
(the watch ends after the window being read is indexed; what was indexed stays). The job's
``progress`` is the watch's report so far (its newest alerts included) and is written to the
job's file after each window and alert, so a restarted server still shows them.

A stream is listed from the Library (each video with a ``watch`` stage entry: the live edge is
its duration) joined with the running watches and the newest job of each. One source runs at
most once per server: its video id is :func:`~vidagent.app.watching.stream_id` of the source,
and starting a running one again is a 409. Starting a stopped one resumes it.

Sources: a file inside the media roots (a growing file, an HLS playlist), or a URL of a scheme
in :data:`SCHEMES`; FFmpeg's other protocols (``file:``, ``concat:``, ``subfile:``...) could
read files outside the roots and are refused. Alert hooks (``alert_url``) are http(s) only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vidagent.app.results import video_json
from vidagent.app.watching import (
    KEEP_ALERTS,
    STAGE,
    Watch,
    display_name,
    stream_id,
    watch_state,
)
from vidagent.exceptions import ConfigError, MediaNotFoundError, VideoNotFoundError
from vidagent.server.jobs import Job
from vidagent.server.security import inside_roots
from vidagent.server.state import Server

if TYPE_CHECKING:
    from vidagent.app import Session

#: URL schemes a stream may be read from (FFmpeg's network protocols).
SCHEMES = frozenset({"http", "https", "rtsp", "rtsps", "rtmp", "rtmps", "srt", "udp", "rtp"})
#: Window events a stream's details show (the newest, from its job's events).
SHOW_WINDOWS = 200


class StreamConflict(Exception):
    """The source is being watched already (409)."""

    def __init__(self, video_id: str, job_id: str) -> None:
        super().__init__(f"{video_id} is being watched already (job {job_id}); stop it first")
        self.video_id, self.job_id = video_id, job_id


def check_source(server: Server, source: str) -> str:
    """The source as the watch reads it: a URL of a known scheme as given, a path resolved
    inside the media roots: a file, or one not there yet in a folder that is (a recorder about
    to start, which the watch waits for up to its give-up, as ``vidagent watch`` does).

    Raises:
        ConfigError: a URL of another scheme.
        Forbidden: a path outside the roots.
        MediaNotFoundError: no such file, nor a folder for it.
    """
    given = source.strip()
    if not given:
        raise ConfigError("source: give a file inside a media root or a stream URL")
    if "://" in given or given.split(":", 1)[0].lower() in {"file", "concat", "subfile", "pipe"}:
        scheme = urlsplit(given).scheme.lower()
        if scheme not in SCHEMES:
            raise ConfigError(
                f"source: {scheme or 'this'}: URLs are not watched; use "
                f"{', '.join(sorted(SCHEMES))}, or a file inside a media root"
            )
        return given
    try:
        return str(server.media_path(given))
    except MediaNotFoundError:
        coming = inside_roots(given, server.roots)
        if not coming.parent.is_dir():
            raise MediaNotFoundError(given, "no such file, nor a folder for it") from None
        return str(coming)
    except OSError as e:  # a name too long for this system
        raise ConfigError(f"source: not a usable path ({e.strerror or e})") from None


def check_hook(url: str | None) -> str | None:
    """An alert hook URL: http(s) with a host.

    Raises:
        ConfigError: anything else.
    """
    if url is None or not url.strip():
        return None
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError("alert_url: give an http:// or https:// URL")
    return url.strip()


def start(server: Server, source: str, options: dict[str, Any]) -> Job:
    """A job watching ``source`` (checked by :func:`check_source`) with ``Watch`` options.

    Raises:
        StreamConflict: it is being watched already.
    """
    video_id = stream_id(source, server.session.settings.home)
    streams = server.streams
    params = {"source": source, "video_id": video_id} | {
        k: v for k, v in options.items() if k != "on_event"
    }
    with streams.lock:
        going = streams.running.get(video_id)
        if going is not None:
            raise StreamConflict(video_id, going[0].job_id)
        watch = server.session.watch(source, **options)

        def work(job: Job) -> dict[str, Any]:
            return _run(server, job, watch)

        job = server.jobs.submit("watch", params, work)
        streams.running[video_id] = (job, watch)
    return job


def _run(server: Server, job: Job, watch: Watch) -> dict[str, Any]:
    """The work of a watch job: the watch's events become the job's, its report the result."""

    def on_event(event: dict[str, Any]) -> None:
        kind = str(event.get("event", "message"))
        if kind == "end":  # the job's own ``end`` carries the report
            return
        job.progress = progress(watch)
        job.emit(kind, event)
        if kind in ("window", "alert", "outage"):
            server.jobs.save(job)

    watch.on_event = on_event
    job.on_cancel(watch.stop)
    try:
        report = watch.run()
    finally:
        with server.streams.lock:
            server.streams.running.pop(watch.video_id, None)
        job.progress = progress(watch)
    return report.to_json() | {"alerts": job.progress["alerts"]}


def progress(watch: Watch) -> dict[str, Any]:
    """A watch's report so far, with only its newest alerts."""
    report = watch.report.to_json()
    alerts = report["alerts"]
    return report | {"alerts": alerts[-KEEP_ALERTS:], "alert_count": len(alerts)}


def stop(server: Server, video_id: str) -> Job:
    """Ask the running watch of ``video_id`` to stop (it ends after the window being read).

    Raises:
        VideoNotFoundError: no watch of it runs here.
    """
    with server.streams.lock:
        going = server.streams.running.get(video_id)
    if going is None:
        raise VideoNotFoundError(f"no watch of {video_id} runs on this server")
    return server.jobs.cancel(going[0])


def _jobs_by_video(server: Server) -> dict[str, Job]:
    """The newest watch job of each stream this server knows."""
    newest: dict[str, Job] = {}
    for job in server.jobs.list():  # newest first
        if job.kind == "watch":
            newest.setdefault(str(job.params.get("video_id", "")), job)
    return newest


def _summary(
    video_id: str, record: dict[str, Any] | None, job: Job | None, running: bool, home: Path
) -> dict[str, Any]:
    watch = (record or {}).get("stages", {}).get(STAGE, {})
    shown = job.progress if job is not None else {}
    if job is not None and job.result:
        shown = job.result
    state = str(shown.get("state") or watch.get("state") or "starting")
    if record is None and job is not None and job.state == "failed":
        state = job.state  # it ended before its first window: never in the Library
    if running:
        state = "watching"
    elif state == "watching" and job is not None:  # this server's watcher died with it
        state = "interrupted"
    else:  # a watcher elsewhere (`vidagent watch`, another server), if it still holds the lock
        state = watch_state(home, video_id, state)
    duration = float(record["duration"]) if record else float(shown.get("duration", 0.0))
    outages = watch.get("outages") if record else shown.get("outages")
    source = str(watch.get("source") or (job.params.get("source") if job else ""))
    return {
        "video_id": video_id,
        # not in the Library yet (or never: it failed first): the name it will be given there
        "name": record["name"] if record else display_name(source),
        "source": source,
        "state": state,
        "running": running,
        "live_edge": duration,
        "recorded_at": record.get("recorded_at", "") if record else "",
        "windows": int(watch.get("windows", shown.get("windows", 0)) or 0),
        "window_seconds": watch.get("window_seconds"),
        "kept_from": float(watch.get("kept_from", 0.0) or 0.0),
        "outages": list(outages or []),
        # the Library's count is of every run's alerts, whichever front end ran the watch
        "alert_count": int(
            watch.get("alert_count", shown.get("alert_count", len(shown.get("alerts", []))))
        ),
        "job_id": job.job_id if job is not None else None,
        "error": job.error if job is not None else None,
    }


def library_streams(session: Session) -> list[dict[str, Any]]:
    """The streams of a Library as its records say (the MCP server's ``list_streams``, which
    runs no watch: ``watching`` is a watcher elsewhere, ``vidagent watch`` or a server)."""
    records = [video_json(v) for v in session.videos() if STAGE in (v.stages or {})]
    home = session.settings.home
    shown = [_summary(r["video_id"], r, None, False, home) for r in records]
    for s in shown:
        del s["running"], s["job_id"], s["error"], s["alert_count"]
    return sorted(shown, key=lambda s: (s["name"], s["video_id"]))


def listing(server: Server) -> list[dict[str, Any]]:
    """Every stream: those in the Library (a ``watch`` stage entry), those starting, and those
    whose watch ended before its first window (a source that could not be opened, say)."""
    with server.streams.lock:
        running = set(server.streams.running)
    jobs = _jobs_by_video(server)
    records = {
        v.video_id: video_json(v) for v in server.session.videos() if STAGE in (v.stages or {})
    }
    home = server.session.settings.home
    shown = [
        _summary(vid, rec, jobs.get(vid), vid in running, home) for vid, rec in records.items()
    ]
    shown += [
        _summary(vid, None, jobs.get(vid), True, home) for vid in running if vid not in records
    ]
    shown += [
        _summary(vid, None, job, False, home)
        for vid, job in jobs.items()
        if vid not in records and vid not in running and job.state == "failed"
    ]
    return sorted(shown, key=lambda s: (not s["running"], s["name"], s["video_id"]))


def details(server: Server, video_id: str) -> dict[str, Any]:
    """One stream: its summary, its alerts (the newest), its windows (this server's newest)
    and its video record.

    Raises:
        VideoNotFoundError: no such stream.
    """
    with server.streams.lock:
        running = video_id in server.streams.running
    job = _jobs_by_video(server).get(video_id)
    # the videos table only: a stream's clips may run to days
    found = [v for v in server.session.videos() if v.video_id == video_id]
    record = video_json(found[0]) if found and STAGE in (found[0].stages or {}) else None
    if record is None and job is None:
        raise VideoNotFoundError(f"no stream {video_id}")
    shown = (job.result or job.progress) if job is not None else {}
    windows = [e for kind, e in (list(job.events) if job else []) if kind == "window"]
    watch = (record or {}).get("stages", {}).get(STAGE, {})
    return _summary(video_id, record, job, running, server.session.settings.home) | {
        "alerts": list(watch.get("alerts", shown.get("alerts", []))),
        "recent_windows": windows[-SHOW_WINDOWS:],
        "video": record,
    }


def job_of(server: Server, video_id: str) -> Job:
    """The running or newest watch job of a stream (its events are the stream's).

    Raises:
        VideoNotFoundError: this server never watched it.
    """
    with server.streams.lock:
        going = server.streams.running.get(video_id)
    if going is not None:
        return going[0]
    job = _jobs_by_video(server).get(video_id)
    if job is None:
        raise VideoNotFoundError(f"this server has not watched {video_id}")
    return job


__all__ = [
    "SCHEMES",
    "StreamConflict",
    "check_hook",
    "check_source",
    "details",
    "job_of",
    "library_streams",
    "listing",
    "start",
    "stop",
]
