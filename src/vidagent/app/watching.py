"""Watching a live or growing source: ``vidagent watch`` and whatever front end drives one.

A :class:`Watch` reads a source in windows (:class:`vidagent.media.live.Capture`, in a thread),
indexes each window with every stage the offline defaults run and grafts it into one video of
the Library that grows (:mod:`vidagent.ingest.live`), so questions, ``search`` and ``ground``
see the stream while it runs. The video's ``duration`` is the live edge and its
``recorded_at`` the wall-clock time of stream second 0 (when the first window's last packet was
read, less its length, unless given): ``recorded_at + t`` is when second ``t`` happened,
outages included (the time a source lost stays on the stream's clock).

What it keeps, under ``VIDAGENT_HOME/streams/<video id>/``: the window files and a playlist of
them (``stream.m3u8``, the video's ``source``: frames are decoded from it on demand as from any
file). In the video's stage map, ``watch`` holds the source, where the capture stands (what a
resumed watch needs), the outages and the state (``watching``, ``stopped``, ``ended``).

Resuming. The same ``vidagent watch SOURCE`` after a crash (even ``kill -9``) finds the video by
its source, drops what a window cut short had written, indexes the windows captured but not yet
indexed, and reads on from the last packet it had read: a growing file loses nothing; a live
source loses what it sent while nothing read it, recorded as an outage.

Alerts. Each ``alert`` text is checked against each new window's speech, on-screen text,
detections and captions by the citation checker's own scoring
(:class:`vidagent.agents.citations.check.Checker`: the text's key words held by one piece of
the index, the embedder's cosine ranking pieces that hold as many): a window where a piece holds
every key word raises an :class:`Alert` with the moment, its quote and its source. An alert
that matches again in the next window is the same event: it is extended, not raised again.
The newest :data:`KEEP_ALERTS` alerts and the count of all are kept in the ``watch`` entry,
across resumed runs, so ``vidagent show``, the HTTP API and the web UI show the alerts of a
watch whichever front end ran it.

Retention (``keep_seconds``). Windows that ended more than ``keep_seconds`` before the live edge
are rolled out (their rows, vectors and files) but those a saved trace cites a moment of
(``VIDAGENT_HOME/traces``), which stay; the first window's file stays as the playlist's head,
so stream times keep their meaning. The video's ``watch`` entry records ``kept_from``: windows
ending before it were rolled out or kept for a trace.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import queue
import shutil
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.app.core import SessionCore
from vidagent.app.holds import held, hold
from vidagent.exceptions import ConfigError, MediaError
from vidagent.tools.index import IndexView

if TYPE_CHECKING:
    from vidagent.library import Library, VideoRecord
    from vidagent.library.schema import TranscriptSegment
    from vidagent.media.live import Capture, Outage, Position, Window

#: The lock file a watcher holds in its stream's folder (:mod:`vidagent.app.holds`).
LOCK = "watch.lock"
STAGE = "watch"
#: Alerts kept in a stream's ``watch`` entry (the newest; ``alert_count`` counts them all).
KEEP_ALERTS = 100
#: Windows indexed in one scratch Library before it is made anew (its files are dropped).
SCRATCH_WINDOWS = 20


def canonical_source(source: str) -> str:
    """``source`` in one spelling: a local file as its absolute path (``a.ts``, ``./a.ts`` and
    ``file:///…/a.ts`` from that folder are one stream), a URL as given but for its scheme, in
    lower case (FFmpeg knows no protocol ``HTTP``)."""
    from vidagent.media.live import is_local, local_path

    source = source.strip()
    scheme, sep, rest = source.partition("://")
    if sep:
        source = scheme.lower() + sep + rest
    return os.path.abspath(local_path(source)) if is_local(source) else source


def stream_id(source: str, home: Path | None = None) -> str:
    """The video id of the stream read from ``source`` (:func:`canonical_source`): the same
    source resumes one video. Given ``home``, a stream begun before sources were spelled so
    (its id from the source as typed, a relative path) keeps its id and resumes."""
    found = "live" + hashlib.sha256(canonical_source(source).encode("utf-8")).hexdigest()[:12]
    if home is not None and not (home / "streams" / found).is_dir():
        typed = "live" + hashlib.sha256(source.strip().encode("utf-8")).hexdigest()[:12]
        if (home / "streams" / typed).is_dir():
            return typed
    return found


def watched_video(core: SessionCore, path: str | Path) -> str | None:
    """The video id of the stream ``vidagent watch`` reads from the file ``path``, where the
    Library holds one (None: no stream of that file): a question naming the file being watched
    is about the stream, not about a copy of what the file held so far."""
    live = stream_id(str(path), core.settings.home)
    return live if core.library_exists() and core.library.has_video(live) else None


@dataclass(frozen=True)
class Alert:
    """An alert text matched in the stream.

    Attributes:
        text: the alert as given.
        video_id: the stream's video.
        t0: stream seconds where the matched moment starts; ``t1`` where it ends (grows while
            the event continues in the windows after).
        at: the wall-clock time of ``t0`` (ISO 8601), where the stream's start is known.
        source: what held the words (``speech``, ``on-screen text``, ``caption``, ``detection``).
        quote: the words as said or shown.
        matched: the alert's key words found.
    """

    text: str
    video_id: str
    t0: float
    t1: float
    at: str
    source: str
    quote: str
    matched: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"event": "alert", **dataclasses.asdict(self), "matched": list(self.matched)}


@dataclass
class WatchReport:
    """What a watch did, so far or in all."""

    video_id: str
    source: str
    windows: int = 0
    duration: float = 0.0
    alerts: list[Alert] = field(default_factory=list)
    outages: list[dict[str, Any]] = field(default_factory=list)
    state: str = "watching"
    #: wall seconds each window took to index, and its length (stream seconds)
    timings: list[tuple[float, float]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "video_id": self.video_id,
            "source": self.source,
            "windows": self.windows,
            "duration": round(self.duration, 3),
            "alerts": [a.to_json() for a in self.alerts],
            "outages": self.outages,
            "state": self.state,
        }


class Watch:
    """Indexes one source as it arrives (module docstring).

    Args:
        core: the session (settings, Library, models).
        source: a path or a URL (HLS playlist, RTSP, RTMP, SRT, HTTP).
        window_seconds: stream seconds per window (default the ``watch_window`` setting).
        alerts: texts raised as :class:`Alert` when a window holds them.
        alert_url: where each alert is also POSTed as JSON.
        keep_seconds: roll out windows older than this (None: keep all).
        summary_seconds: wall seconds between refreshes of the stream's summary.
        stall_seconds: no packet for this long is an outage.
        give_up_seconds: an outage this long ends the watch.
        started_at: the wall-clock time of stream second 0 (ISO 8601), when it is known better
            than the time the first packet is read (a file that already held minutes).
        stages: the stages each window runs (default the offline defaults).
        on_event: called with each event as a JSON-ready dict: ``window``, ``alert``,
            ``outage``, ``summary``, ``retention``, ``alert-post-failed``, ``end``.
    """

    def __init__(
        self,
        core: SessionCore,
        source: str,
        *,
        window_seconds: float | None = None,
        alerts: Sequence[str] = (),
        alert_url: str | None = None,
        keep_seconds: float | None = None,
        summary_seconds: float = 300.0,
        stall_seconds: float = 10.0,
        give_up_seconds: float = 300.0,
        started_at: str | None = None,
        stages: Sequence[str] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.core = core
        if not source.strip():  # not the working folder, as a path it would be
            raise ConfigError("the source to watch is empty: give a file, a playlist or a URL")
        self.source = canonical_source(source)  # a local file as its absolute path
        self.window_seconds = window_seconds or core.settings.watch_window
        if self.window_seconds <= 0:
            raise ConfigError(f"window_seconds must be positive, not {self.window_seconds}")
        self.alert_texts = [x.strip() for x in alerts]
        if not all(self.alert_texts):  # an alert that looks for nothing, rather than dropped
            raise ConfigError("an alert is empty: give the words to look for")
        if alert_url and urllib.parse.urlsplit(alert_url).scheme not in ("http", "https"):
            raise ConfigError(f"alert URL {alert_url!r}: give an http:// or https:// URL")
        self.alert_url = alert_url
        self.keep_seconds = keep_seconds
        self.summary_seconds = summary_seconds
        self.stall_seconds = stall_seconds
        self.give_up_seconds = give_up_seconds
        self.started_at = started_at
        self.stages = stages
        self.on_event = on_event or (lambda event: None)
        self.video_id = stream_id(source, core.settings.home)
        self.folder = core.settings.home / "streams" / self.video_id
        self.report = WatchReport(self.video_id, self.source)
        self._stopping = threading.Event()
        self._capture: Capture | None = None
        self._open: dict[str, Alert] = {}  # alert text -> its event, while it continues
        self._stored: tuple[list[dict[str, Any]], int] = ([], 0)  # alerts of earlier runs
        self._windows: dict[int, Window] | None = None  # the window files on disk
        self._scratch_library: Library | None = None
        self._scratch_uses = 0

    # -- control ----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop reading at the next keyframe (where a resumed watch starts again); what was read
        is indexed, and :meth:`run` returns."""
        self._stopping.set()
        if self._capture is not None:
            self._capture.stop()

    def run(self) -> WatchReport:
        """Index the source until it ends, gives up after an outage, or :meth:`stop`."""
        for _ in self.windows():
            pass
        return self.report

    def windows(self) -> Iterator[dict[str, Any]]:
        """Index window after window, yielding each ``window`` event as it is searchable."""
        from vidagent.ingest.pipeline import default_stages
        from vidagent.media.live import Capture, Window, is_local

        library = self.core.library
        stages = list(self.stages or default_stages(self.core.settings))
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = hold(
            self.folder / LOCK,
            lambda pid: (
                f"{self.source} is already being watched (process {pid}); stop that watch first"
            ),
        )
        scratch_dir = self.folder / "scratch"
        self._last_summary = time.monotonic()
        try:
            position = self._resume(library)
            # windows captured before a crash but not indexed go first
            while (w := Window.load(self._window_path(position.next_index))) is not None:
                position.next_index, position.t, position.seen = w.index + 1, w.t1, dict(w.seen)
                position.shift, position.last, position.wall = w.shift, w.t1, w.wall
                position.placed = dict(w.placed)
                yield self._index(w, library, self._scratch(scratch_dir), stages, position)
            if self._stopping.is_set():
                self.report.state = "stopped"
                return
            capture = Capture(
                self.source,
                self.folder,
                window_seconds=self.window_seconds,
                stall_seconds=self.stall_seconds,
                give_up_seconds=self.give_up_seconds,
                position=position,
            )
            capture.on_outage = self._outage
            capture.on_down = self._source_down
            capture.on_wait = self._waiting
            capture.on_unheard = self._unheard
            self._capture = capture
            if self._stopping.is_set():
                capture.stop()
            # a file waits for its reader: read ahead by one queued window (and one the reader
            # holds until the queue takes it), not the whole file (a stop would index every
            # window read by then: a finished recording's, all of them)
            ahead = 1 if is_local(self.source) else None
            for w in _in_thread(capture.windows(), ahead):
                yield self._index(w, library, self._scratch(scratch_dir), stages, position)
            self.report.state = "stopped" if self._stopping.is_set() else "ended"
        except BaseException:
            self.report.state = "failed"
            raise
        finally:
            if self._capture is not None:
                self._capture.stop()
            self._finish(library, stages)
            shutil.rmtree(scratch_dir, ignore_errors=True)
            self._forget_if_empty(library)
            lock.close()  # the lock goes with it (and with the process, however it ends)

    def _forget_if_empty(self, library: Library) -> None:
        """Remove the stream's folder where the watch left nothing in it but its lock and no
        video in the Library (a source refused, a file never there): each such watch left a
        folder behind. Done while the lock is held, so that no other watch holds it then."""
        if self.report.windows or library.has_video(self.video_id):
            return
        with contextlib.suppress(OSError):
            if [p.name for p in self.folder.iterdir()] == [LOCK]:
                (self.folder / LOCK).unlink()
                self.folder.rmdir()

    def _scratch(self, folder: Path) -> Library:
        """The Library a window is indexed in, made anew every :data:`SCRATCH_WINDOWS`
        windows: it holds one window at a time, but each window leaves table versions."""
        from vidagent.library import Library

        self._scratch_uses += 1
        if self._scratch_library is None or self._scratch_uses > SCRATCH_WINDOWS:
            shutil.rmtree(folder, ignore_errors=True)
            self._scratch_library, self._scratch_uses = Library(str(folder)), 1
        return self._scratch_library

    # -- one window -------------------------------------------------------------------------------

    def _index(
        self,
        w: Window,
        library: Library,
        scratch: Library,
        stages: list[str],
        position: Position,
    ) -> dict[str, Any]:
        from vidagent.ingest.live import index_window

        started = time.perf_counter()
        clips = 0
        if w.t1 - w.t0 > 0.05:
            self._check_format(library, w)
            try:
                grafted = index_window(
                    w.path,
                    scratch=scratch,
                    library=library,
                    video_id=self.video_id,
                    offset=w.t0,
                    settings=self.core.settings,
                    models=self.core.models,
                    stages=stages,
                )
            except MediaError as e:  # a window that does not decode: skipped, said
                self.on_event({"event": "window-skipped", "t0": w.t0, "t1": w.t1, "why": str(e)})
            else:
                clips = len(grafted.clips)
                assert grafted.result.video is not None
                self._save(library, position, w, grafted.result.video)
        if not clips:  # the record comes with the first window that decodes
            self._save(library, position, w, None)
        self._playlist(w)
        seconds = time.perf_counter() - started
        self.report.windows += 1
        self.report.duration = w.t1
        self.report.timings.append((seconds, w.t1 - w.t0))
        event = {
            "event": "window",
            "video_id": self.video_id,
            "index": w.index,
            "t0": round(w.t0, 3),
            "t1": round(w.t1, 3),
            "clips": clips,
            "seconds": round(seconds, 2),
        }
        self.on_event(event)
        if clips:
            self._alerts(library, w)
        self._retain(library)
        if time.monotonic() - self._last_summary >= self.summary_seconds:
            self._summarize(library, stages)
        return event

    def _check_format(self, library: Library, w: Window) -> None:
        """Refuse a window whose codec or picture size is not the stream's, in one line: the
        stored thumbnails, boxes and frames decoded from the playlist assume one format."""
        from vidagent.media import probe
        from vidagent.media.live import SourceChangedError

        if not library.has_video(self.video_id):
            return
        video = library.get_video(self.video_id)
        try:
            info = probe(w.path)
        except MediaError:
            return  # said when the window is indexed
        had = f"{video.codec} {video.width}x{video.height}"
        found = f"{info.codec} {info.width}x{info.height}"
        if found != had:
            raise SourceChangedError(
                self.source,
                f"changed from {had} to {found} at {w.t0:.0f} s of the stream: one watch "
                "indexes one format; what came before is kept, start another watch for the rest",
            )

    def _save(
        self, library: Library, position: Position, w: Window, window_video: VideoRecord | None
    ) -> None:
        """The stream's record after window ``w``: the live edge, the stages, the state."""
        with library.write_lock():
            old = library.get_video(self.video_id) if library.has_video(self.video_id) else None
            if old is None and window_video is None:
                return
            base = old or window_video
            assert base is not None
            done = {k: v for k, v in (window_video.stages if window_video else {}).items()}
            watch = dict(old.stages.get(STAGE, {})) if old else {}
            watch.update(
                source=self.source,
                window_seconds=self.window_seconds,
                windows=w.index + 1,
                position=_position_json(position, w),
                outages=[dataclasses.asdict(o) for o in position.outages],
                state="watching",
            )
            watch.setdefault("kept_from", 0.0)
            record = dataclasses.replace(
                base,
                video_id=self.video_id,
                source=str(self.folder / "stream.m3u8"),
                name=display_name(self.source),
                size_bytes=_folder_bytes(self.folder),
                # to the millisecond: a sum of windows' lengths is 59.99999999999999, and
                # `--last 30s` of it would start a hair before 30 s, taking in the clip before
                duration=round(max(w.t1, old.duration if old else 0.0), 3),
                added_at=old.added_at if old else _now(),
                stages={**(old.stages if old else {}), **done, STAGE: watch},
                recorded_at=(old.recorded_at if old else "") or self._wall_start(w),
            )
            library.put_video(record)

    def _wall_start(self, w: Window) -> str:
        if self.started_at:
            return self.started_at
        # the first window was read as it arrived: its end is when it was complete (not now,
        # after it was indexed: as late as the first window's indexing took, 8-15 s)
        end = datetime.fromtimestamp(w.wall, timezone.utc) if w.wall else datetime.now(timezone.utc)
        return (end - timedelta(seconds=w.t1)).isoformat(timespec="seconds")

    def _source_down(self, at: float, reason: str) -> None:
        # the index of the next window: those before it were read before the source went down
        # (their events may still come, indexed after this one); it or a later one holds what
        # the source sends once it is back (or ends the watch)
        window = self._capture.position.next_index if self._capture is not None else 0
        self.on_event(
            {
                "event": "source_down",
                "video_id": self.video_id,
                "at": round(at, 3),
                "window": window,
                "reason": reason,
                "give_up_seconds": self.give_up_seconds,
            }
        )

    def _waiting(self, reason: str) -> None:
        self.on_event(
            {
                "event": "waiting",
                "video_id": self.video_id,
                "reason": reason,
                "give_up_seconds": self.give_up_seconds,
            }
        )

    def _unheard(self, at: float) -> None:
        self.on_event(
            {
                "event": "audio-skipped",
                "video_id": self.video_id,
                "at": round(at, 3),
                "why": "the source lists a sound stream, but what was probed of it held none "
                "(no sample rate): its windows are written without sound",
            }
        )

    def _outage(self, outage: Outage) -> None:
        data = dataclasses.asdict(outage)
        self.report.outages.append(data)
        self.on_event({"event": "outage", "video_id": self.video_id, **data})

    # -- resume -----------------------------------------------------------------------------------

    def _resume(self, library: Library) -> Position:
        from vidagent.media.live import Outage, Position

        self.folder.mkdir(parents=True, exist_ok=True)
        if not library.has_video(self.video_id):
            return Position()
        video = library.get_video(self.video_id)
        watch = video.stages.get(STAGE, {})
        saved = watch.get("position") or {}
        position = Position(
            next_index=int(saved.get("next_index", 0)),
            t=saved.get("t"),
            seen={k: float(v) for k, v in (saved.get("seen") or {}).items()},
            shift=float(saved.get("shift", 0.0)),
            last=float(saved.get("last", 0.0)),
            wall=float(saved.get("wall", 0.0)),
            format=str(saved.get("format", "")),
            outages=[Outage(**o) for o in watch.get("outages", [])],
            read_to=saved.get("read_to"),
            placed={k: int(v) for k, v in (saved.get("placed") or {}).items()},
        )
        self._stored = (list(watch.get("alerts", [])), int(watch.get("alert_count", 0)))
        # rows a window cut short had written, past the last window the record counts
        library.drop_span(self.video_id, video.duration)
        self.report.windows = 0
        self.report.duration = video.duration
        return position

    def _window_path(self, index: int) -> Path:
        return self.folder / f"w{index:06d}.ts"

    def _files(self) -> dict[int, Window]:
        """The window files on disk by index (read once, then kept up to date)."""
        from vidagent.media.live import Window

        if self._windows is None:
            found = (Window.load(p) for p in sorted(self.folder.glob("w*.ts")))
            self._windows = {w.index: w for w in found if w is not None}
        return self._windows

    def _playlist(self, w: Window | None = None) -> None:
        from vidagent.media.live import write_playlist

        files = self._files()
        if w is not None:
            files[w.index] = w
        if files:
            windows = [files[k] for k in sorted(files)]
            write_playlist(self.folder / "stream.m3u8", windows, first=files.get(0))

    # -- alerts -----------------------------------------------------------------------------------

    def _alerts(self, library: Library, w: Window) -> None:
        if not self.alert_texts:
            return
        found = match_alerts(self.core, self.video_id, self.alert_texts, w.t0, w.t1)
        video = library.get_video(self.video_id)
        raised: list[Alert] = []
        for text in self.alert_texts:
            hit = found.get(text)
            going = self._open.get(text)
            if hit is None:
                self._open.pop(text, None)
                continue
            if going is not None and hit.t0 <= going.t1 + self.window_seconds:
                merged = dataclasses.replace(going, t1=max(going.t1, hit.t1))
                self._open[text] = merged
                self.report.alerts[self.report.alerts.index(going)] = merged
                continue
            alert = dataclasses.replace(hit, at=_wall(video.recorded_at, hit.t0))
            self._open[text] = alert
            self.report.alerts.append(alert)
            raised.append(alert)
        if found:
            self._store_alerts(library)
        for alert in raised:  # said once it is stored: whoever hears it can read it back
            self.on_event(alert.to_json())
            if self.alert_url:
                self._post(alert)

    def _store_alerts(self, library: Library) -> None:
        """The newest alerts (earlier runs' first) and the count of all, in the watch entry."""
        earlier, count = self._stored
        alerts = [*earlier, *(a.to_json() for a in self.report.alerts)]
        with library.write_lock():
            video = library.get_video(self.video_id)
            watch = dict(video.stages.get(STAGE, {}))
            watch.update(alerts=alerts[-KEEP_ALERTS:], alert_count=count + len(self.report.alerts))
            stages = {**video.stages, STAGE: watch}
            library.put_video(dataclasses.replace(video, stages=stages))

    def _post(self, alert: Alert) -> None:
        body = json.dumps(alert.to_json()).encode("utf-8")
        request = urllib.request.Request(
            str(self.alert_url), body, {"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                reply.read()
        except (OSError, ValueError) as e:  # an unreachable hook never stops the watch
            self.on_event({"event": "alert-post-failed", "url": self.alert_url, "why": str(e)})

    # -- summary and retention --------------------------------------------------------------------

    def _summarize(self, library: Library, stages: Sequence[str]) -> None:
        from vidagent.ingest.base import IngestContext
        from vidagent.ingest.live import SCHEDULED
        from vidagent.ingest.pipeline import make_stage, run_stage

        self._last_summary = time.monotonic()
        if not library.has_video(self.video_id):
            return
        video = library.get_video(self.video_id)
        ctx = IngestContext(
            library, self.core.models, self.core.settings, video, Path(video.source)
        )
        for name in (s for s in stages if s in SCHEDULED):
            run = run_stage(make_stage(name), ctx)
            self.on_event({"event": "summary", "stage": name, "seconds": round(run.seconds, 2)})

    def _retain(self, library: Library) -> None:
        if self.keep_seconds is None or not library.has_video(self.video_id):
            return
        video = library.get_video(self.video_id)
        watch = dict(video.stages.get(STAGE, {}))
        cut = video.duration - self.keep_seconds
        kept_from = float(watch.get("kept_from", 0.0))
        files = self._files()
        due = [w for k, w in sorted(files.items()) if kept_from < w.t1 <= cut + 1e-3]
        if not due:
            return
        cited = cited_spans(self.core.traces_folder, self.video_id)
        rolled = []
        for w in due:
            if any(a < w.t1 and b > w.t0 for a, b in cited):
                continue  # a saved answer cites a moment of it: kept
            library.drop_span(self.video_id, w.t0, w.t1)
            if w.index > 0:  # the head stays: the playlist's time 0
                w.path.unlink(missing_ok=True)
                w.sidecar().unlink(missing_ok=True)
                del files[w.index]
            rolled.append(w.index)
        kept_from = max(w.t1 for w in due)
        watch["kept_from"] = kept_from
        library.set_stage(self.video_id, STAGE, watch)
        if rolled:
            self._playlist()
            self.on_event({"event": "retention", "windows": rolled, "kept_from": kept_from})

    def _finish(self, library: Library, stages: Sequence[str]) -> None:
        if not library.has_video(self.video_id):
            return
        if self.report.state != "failed":
            self._summarize(library, stages)
        video = library.get_video(self.video_id)
        watch = {**video.stages.get(STAGE, {}), "state": self.report.state}
        if self._capture is not None:  # one after the last window (the give-up that ended it)
            outages = self._capture.position.outages
            watch["outages"] = [dataclasses.asdict(o) for o in outages]
        library.set_stage(self.video_id, STAGE, watch)
        self.on_event({"event": "end", **self.report.to_json()})


#: Speech either side of a window's start at most this far apart (seconds between the last
#: word before it and the first after it) is one utterance that the cut split.
JOIN_GAP = 1.0
#: How far before a window's start its previous window's last segment is looked for (seconds;
#: a segment is one utterance of the recogniser, far shorter).
JOIN_LOOKBACK = 30.0


def match_alerts(
    core: SessionCore, video_id: str, texts: Sequence[str], t0: float, t1: float
) -> dict[str, Alert]:
    """Each alert text that ``[t0, t1]`` of the video holds, checked as the citation checker
    checks a claim: every key word in one piece of speech, on-screen text, caption or
    detection. Each window is transcribed alone, so a phrase said across its start ("roof |
    repairs") is two segments, neither holding it: the segment that ends the window before
    and the one that begins this window are read as one where the cut fell inside a pause of
    at most :data:`JOIN_GAP` (:class:`_JoinedAtCut`)."""
    from vidagent.agents.citations.check import Checker
    from vidagent.agents.types import Claim
    from vidagent.tools.base import Evidence

    claims = [Claim(text, alert_words(text), names_speech_or_text=True) for text in texts]
    checker = Checker(_JoinedAtCut(core.library, core.models, t0), core.models.client("embed"))
    found: dict[str, Alert] = {}
    for c in checker.check(claims, [Evidence(video_id, t0, t1)]):
        if c.label != "found" or c.claim is None:
            continue
        text = texts[c.claim]
        if text not in found:
            found[text] = Alert(text, video_id, c.t0, c.t1, "", c.source, c.text, tuple(c.matched))
    return found


def alert_words(text: str) -> frozenset[str]:
    """The key words an alert's text is matched by: its content words' stems, as a claim's,
    and the function words it holds, as written, but for articles. A user's phrase is matched
    whole ("lift off" fired on "lift the box": *off* is no content word), while the checker
    leaves function words out of a model's claims, which word them as it likes."""
    from vidagent.agents.citations.claims import stems, tokens
    from vidagent.agents.evidence import STOP_WORDS

    function = {w for w in tokens(text) if w in STOP_WORDS} - {"a", "an", "the"}
    return frozenset(stems(text) | function or tokens(text))


class _JoinedAtCut(IndexView):
    """The index, with the transcript segments either side of ``cut`` (a window's start) read
    as one segment where the speech runs on across it (:func:`match_alerts`)."""

    def __init__(self, library: Library, models: Any, cut: float) -> None:
        super().__init__(library, models)
        self.cut = cut

    def transcript(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[TranscriptSegment]:
        found = super().transcript(video_id, t0, t1)
        before = [
            s
            for s in super().transcript(video_id, self.cut - JOIN_LOOKBACK, self.cut)
            if s.t1 <= self.cut
        ]
        after = [s for s in found if s.t0 >= self.cut]
        if not (before and after):
            return found
        first, last = after[0], before[-1]
        end, start = _words(last), _words(first)
        if not (end and start) or start[0][0] - end[-1][1] > JOIN_GAP:
            return found
        joined = dataclasses.replace(
            first,
            t0=last.t0,
            text=f"{last.text.strip()} {first.text.strip()}",
            words=json.dumps([*end, *start]),
            speaker=first.speaker if first.speaker == last.speaker else "",
        )
        return [joined if s is first else s for s in found if s is not last]


def _words(segment: TranscriptSegment) -> list[Any]:
    """The segment's timed words ``[t0, t1, word, ...]``; none where they cannot be read (the
    segments are then left as they are, never an error in a watch)."""
    try:
        words = json.loads(segment.words or "[]")
    except json.JSONDecodeError:
        return []
    if not isinstance(words, list) or not all(
        isinstance(w, list) and len(w) >= 3 and all(isinstance(x, int | float) for x in w[:2])
        for w in words
    ):
        return []
    return words


def cited_spans(folder: Path, video_id: str) -> list[tuple[float, float]]:
    """The spans of ``video_id`` that saved traces (``*.jsonl`` in ``folder``) cite."""
    spans: list[tuple[float, float]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if (
                value.get("video_id") == video_id
                and _num(value.get("t0"))
                and _num(value.get("t1"))
            ):
                spans.append((float(value["t0"]), float(value["t1"])))
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            if len(value) == 3 and value[0] == video_id and _num(value[1]) and _num(value[2]):
                spans.append((float(value[1]), float(value[2])))
            else:
                for v in value:
                    walk(v)

    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        text = path.read_text(encoding="utf-8", errors="replace")
        if video_id not in text:
            continue
        for line in text.splitlines():
            if video_id in line:
                try:
                    walk(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return spans


def watch_state(home: Path, video_id: str, state: str) -> str:
    """A stream's state as its record says, unless that is ``watching`` and no process holds
    its lock (the watcher was killed, ``kill -9`` or a power cut): then ``interrupted``, which
    the same ``vidagent watch`` resumes."""
    if state == "watching" and not held(home / "streams" / video_id / LOCK):
        return "interrupted"
    return state


def _num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _in_thread(windows: Iterator[Window], ahead: int | None = None) -> Iterator[Window]:
    """``windows`` read in a thread, so the source is read while a window is indexed (a live
    source waits for no one); what is read waits on disk, only its record in memory. ``ahead``
    bounds the windows read and not yet taken (None: a live source, read as it comes)."""
    done = object()
    box: queue.Queue[Any] = queue.Queue(maxsize=ahead or 0)
    left = threading.Event()  # the indexing side is gone (an error, a stop): put nothing more

    def put(item: Any) -> None:
        while not left.is_set():
            try:
                box.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def read() -> None:
        try:
            for w in windows:
                put(w)
        except BaseException as e:  # noqa: BLE001 - handed to the indexing thread, raised there
            put(e)
        put(done)

    thread = threading.Thread(target=read, name="watch-capture", daemon=True)
    thread.start()
    try:
        while (item := box.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
        thread.join()
    finally:
        left.set()


def _position_json(position: Position, w: Window) -> dict[str, Any]:
    """Where a resumed capture starts: after window ``w`` (the capture may be further on,
    its windows on disk to be indexed first)."""
    ended = position.read_to
    return {
        "next_index": w.index + 1,
        "t": w.t1,
        "seen": w.seen,
        "shift": w.shift,
        "last": w.t1,
        "wall": w.wall,
        "format": position.format,
        "placed": w.placed,
        # the file as it stood when the read that ended after ``w`` did: nothing was left
        **({"read_to": ended} if ended and ended.get("seen") == w.seen else {}),
    }


def display_name(source: str) -> str:
    """A stream's name in the Library: its source's last part, marked live."""
    tail = source.rstrip("/").rsplit("/", 1)[-1] or source
    return f"{tail} (live)"


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("w*.ts"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _wall(recorded_at: str, t: float) -> str:
    if not recorded_at:
        return ""
    try:
        start = datetime.fromisoformat(recorded_at)
    except ValueError:
        return ""
    return (start + timedelta(seconds=t)).isoformat(timespec="seconds")
