"""Reading a live or growing source in windows: the media side of ``vidagent watch``.

:class:`Capture` opens a source with PyAV (a growing local file, an HLS playlist on disk or
over HTTP, or any URL its FFmpeg opens: RTMP, RTSP, HTTP; SRT only where FFmpeg has libsrt,
which PyAV's wheels lack) and copies its packets, without decoding them, into one MPEG-TS file
per window. A window ends at the first video keyframe at least ``window_seconds`` after it
began, so each file decodes on its own and windows are a few frames longer or shorter than the
setting where keyframes are sparse.

Times. The stream's own clock (*stream seconds*) starts at 0 at the first keyframe ever read.
Packets keep the source's timestamps, shifted where the source restarted its clock (a dropped
RTSP session, a replaced file), so the window files put end to end, as
:func:`write_playlist` lists them, decode as one video whose times are stream seconds.

Failures. No packet for ``stall_seconds`` (PyAV's read timeout) or an error from the source is
an outage: the source is opened again after 0.5, 1, 2, … seconds (at most 30 between tries)
until it answers, or until the outage has lasted ``give_up_seconds``, when the capture ends as
if the source had. On reconnecting, packets already read are skipped (a growing file is sought
back to where it was); the stream time the source skipped while it was away is the outage's
``lost`` seconds. A local file is read with FFmpeg's ``follow`` option, so its end is a stall,
not the end: a growing file reads like a live stream, and a finished one ends after
``give_up_seconds`` without growth. A source of known length that cannot grow so (a finished
HLS playlist, on disk or over HTTP, one with ``#EXT-X-ENDLIST``; a file over HTTP) ends the
capture when it is read to its end: opened again it would play from its start. A live
playlist (no ``#EXT-X-ENDLIST``) is read again as FFmpeg's HLS reader polls it; one that has
ended by the time it is opened again (while the watch was away) plays from its start: what was
read is skipped, and its clock going back is not taken for a restart. A playlist on disk is
read from its first listed segment, as a growing file is from its start, and is never taken for
a replaced file: a recorder renames a new playlist over the old with each segment it adds.

A known limit: a growing file opened again is sought by time to the last packet read, so a
stream appended to it after a stall with its clock restarted, or in another picture size, is
not seen (docs/live.md).

A change of codec or picture size raises :class:`SourceChangedError` (one line): a window's
stages, the stored thumbnails and detection boxes assume one format per stream.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from vidagent.exceptions import MediaError
from vidagent.media.probe import codec_name, time_base

Packet = Any  # av.Packet, whose stub is generic in a way PyAV's own code does not use

#: Seconds between reconnection tries: doubled from the first up to the last.
BACKOFF = (0.5, 30.0)
#: A reconnected source whose first packet lies this far before the last one read restarted
#: its clock (a new session), rather than resuming where it was (a growing file sought back to
#: the keyframe before).
RESTART_SECONDS = 30.0
#: The packets last read that a reconnection is checked against, by stream type, decoding
#: time and a checksum of their data (a minute or more at 30 frames a second and AAC's 43
#: packets a second): one it sends again is skipped as read, and a first picture within the
#: last read's time that is none of them is a restarted clock (:meth:`Capture._rebase`).
RECENT_PACKETS = 8192

#: The window files' timestamps are stream seconds plus this: never negative (a muxer would
#: move negative decoding times, and the files would no longer line up end to end).
ORIGIN = 10.0
#: A reconnection that resumes within this many stream seconds of the last packet lost nothing
#: (the packets either side of a stall are a frame or an audio packet apart).
LOST_SECONDS = 1.0
#: Stream seconds FFmpeg reads to learn a URL's streams while opening it (its
#: ``analyzeduration``, set so that it is a bound). A live source sends them in real time, and
#: an FLV one (RTMP) is read that long whatever it announced, since FLV has no header listing
#: its streams: opening such a source takes this long however fast the network is.
PROBE_SECONDS = 5.0


NOT_YET = "no such file yet"
#: the video codecs FFmpeg's MPEG-TS muxer gives a stream type its demuxer reads back as video
#: (any other, an AVI's msmpeg4 say, is written as private data: windows with no video; so is
#: AV1 by the FFmpeg PyAV ships, 8.1, though it was listed here and named by its decoder,
#: libdav1d, so refused all the same)
TS_VIDEO = frozenset(
    {"mpeg1video", "mpeg2video", "mpeg4", "h264", "hevc", "vvc", "cavs", "dirac", "vc1"}
)
#: how often a growing local file that gave nothing more is looked at (seconds)
POLL_SECONDS = 0.25
#: a source's state before any read of it: read it
_UNREAD = object()


class SourceChangedError(MediaError):
    """The source changed codec or picture size mid-stream."""


@dataclass(frozen=True)
class Window:
    """One window of the stream, copied to its own MPEG-TS file.

    Attributes:
        index: its place in the stream, from 0.
        path: the file holding its packets.
        t0: stream seconds where it starts (its first keyframe).
        t1: stream seconds where it ends (the next window's first keyframe, or its last
            packet's end).
        seen: the source's own decoding time (seconds) of the last packet read, by stream
            type (``video``, ``audio``): a reconnection skips what is not after it.
        shift: seconds added to the source's timestamps in the file (stream seconds plus
            :data:`ORIGIN`).
        wall: the wall-clock time (Unix seconds) it was complete, as its last packet was read
            (0: not known, a window of an older watch): the wall time of ``t1`` for a source
            read as it arrives, before the window is indexed.
        placed: a growing local file's byte position of the last packet read, by stream type,
            with the file's ``device`` and ``inode`` (empty for any other source): a watch run
            again on the same file goes on after it (see :attr:`Position.placed`).
    """

    index: int
    path: Path
    t0: float
    t1: float
    seen: dict[str, float]
    shift: float
    wall: float = 0.0
    placed: dict[str, int] = field(default_factory=dict)

    def sidecar(self) -> Path:
        return self.path.with_suffix(".json")

    def save(self) -> None:
        """Write its sidecar next to its file (a complete window, found again on resume)."""
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        self.sidecar().write_text(json.dumps(data), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Window | None:
        """The complete window whose file is ``path``, or None (no sidecar: cut short)."""
        side = path.with_suffix(".json")
        if not (path.exists() and side.exists()):
            return None
        return cls(path=path, **json.loads(side.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class Outage:
    """A stretch when the source gave nothing: a stall or a drop.

    Attributes:
        at: stream seconds of the last packet before it.
        began: wall-clock time it began (ISO 8601, UTC).
        seconds: wall seconds it lasted.
        lost: stream seconds the source moved on by while away (0: nothing missed).
        reason: what happened (``stalled``, ``dropped: …``).
    """

    at: float
    began: str
    seconds: float
    lost: float
    reason: str


@dataclass
class Position:
    """Where a capture stands: what a resumed capture needs to go on without repeating."""

    next_index: int = 0
    #: stream seconds where the next window starts (None: nothing read yet)
    t: float | None = None
    #: the source's decoding time (seconds) of the last packet read, by stream type
    seen: dict[str, float] = field(default_factory=dict)
    shift: float = 0.0
    #: stream seconds of the last video packet read
    last: float = 0.0
    #: the wall-clock time (Unix seconds) stream second ``last`` was read, as a window ended
    #: there (0: not known): how long a live source went on while no watcher read it, when it
    #: restarted its clock meanwhile
    wall: float = 0.0
    #: the codec and picture size of the stream, ``"h264 640x360"``
    format: str = ""
    outages: list[Outage] = field(default_factory=list)
    #: a local file's identity (device, inode) and size when it was last opened: a file
    #: replaced or cut short since (a new recording under the old name) is read from its start
    #: (kept in memory: a watch run again later does not compare). Not of a playlist, which a
    #: recorder replaces with each segment it adds (FFmpeg's HLS muxer writes a temporary
    #: file and renames it): a restarted encoder's playlist is told by its clock, as a URL's
    file: tuple[int, int, int] | None = None
    #: a growing local file's byte position of the last packet read, by stream type, and the
    #: file's ``device`` and ``inode``: a watch run again on the same file goes on after it, by
    #: position as a reconnection does (by the clock, a recording appended with a restarted
    #: clock while no watch ran was skipped as read, and a changed picture size with it)
    placed: dict[str, int] = field(default_factory=dict)
    #: a growing local file as it stood when a read of it last ended, with what had been read
    #: then: ``{"file": [device, inode, size], "seen": {...}}``. Kept with the stream, so a
    #: watch run again on a file that has not changed since does not open it (FFmpeg, following
    #: a file, blocks for several stalls before it finds nothing new: a finished recording's
    #: watch run again took 64 s to give up after 2 s)
    read_to: dict[str, Any] | None = None


def is_local(source: str) -> bool:
    """Whether ``source`` names a local file (a path, or ``file:``), not a URL."""
    return "://" not in source or source.startswith("file://")


def local_path(source: str) -> Path:
    return Path(source.removeprefix("file://")).expanduser()


#: A media segment's duration in an HLS playlist.
_EXTINF = re.compile(r"^#EXTINF:\s*([0-9.]+)", re.MULTILINE)


def is_playlist(source: str) -> bool:
    """Whether ``source`` names an HLS playlist (``.m3u8``, ``.m3u``), local or not."""
    path = source.split("?", 1)[0].split("#", 1)[0]
    return path.lower().endswith((".m3u8", ".m3u"))


class Capture:
    """Copies a source's packets into window files (module docstring).

    Args:
        source: a path or a URL.
        folder: where the window files go (``w000000.ts`` and its ``.json`` sidecar).
        window_seconds: the length a window reaches before it ends at the next keyframe.
        stall_seconds: no packet for this long is an outage.
        give_up_seconds: an outage this long ends the capture.
        position: where a previous capture of this stream stopped (resume), else a new stream.
        clock: wall seconds (tests make it fast).
    """

    def __init__(
        self,
        source: str,
        folder: Path,
        *,
        window_seconds: float = 30.0,
        stall_seconds: float = 10.0,
        give_up_seconds: float = 300.0,
        position: Position | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.folder = folder
        self.window_seconds = window_seconds
        self.stall_seconds = stall_seconds
        self.give_up_seconds = give_up_seconds
        self.position = position or Position()
        self.clock = clock
        self.stopping = threading.Event()
        self.on_outage: Callable[[Outage], None] = lambda outage: None
        #: told when an outage begins (stream seconds where it stands, the reason), so a user
        #: hears of it then, not only when it ends: a source that gives nothing for its
        #: ``--give-up`` minutes was minutes of silence
        self.on_down: Callable[[float, str], None] = lambda at, reason: None
        #: told once when a file to watch is not there yet (the reason): the watch waits for it
        #: up to its give-up, which was minutes of silence too
        self.on_wait: Callable[[str], None] = lambda reason: None
        #: told when a connection's audio is not read (stream seconds where it stands): the
        #: probe of the source's start found no sample rate for it
        self.on_unheard: Callable[[float], None] = lambda at: None
        self._said_down = self._said_wait = self._said_unheard = False
        self._down: float | None = None  # when the current outage began (clock seconds)
        self._opened = 0.0  # when the source was last opened (Unix seconds)
        self._complete = False  # the source is of known length, and ends where it ends
        self._read_wall = 0.0  # when this capture last read a packet (Unix seconds; 0: never)
        #: a growing local file's byte position of the last packet read, by stream type: where
        #: a connection opened again after a stall goes on (its clock may have restarted)
        self._placed: dict[str, int] = self._placed_before()
        #: stream seconds where the last picture read ends (a watch run again: where the last
        #: window ended); a restarted clock goes on from there
        self._end = self.position.t or 0.0
        self._streams: list[Any] = []
        #: the packets last read (:data:`RECENT_PACKETS`): ``(stream type, decoding seconds,
        #: CRC-32 of the data)``, in order and as a set
        self._recent: deque[tuple[str, float, int]] = deque(maxlen=RECENT_PACKETS)
        self._recent_set: set[tuple[str, float, int]] = set()
        #: a growing local file as it stood when a read of it last ended (``_UNREAD``: read it)
        self._read_up_to: tuple[int, int, int] | None | object = _UNREAD
        ended = self.position.read_to
        if ended and ended.get("seen") == self.position.seen and self._file_state() is not _UNREAD:
            self._read_up_to = tuple(ended["file"])  # read to there by an earlier watch
        folder.mkdir(parents=True, exist_ok=True)

    def stop(self) -> None:
        """Ends the capture at the next keyframe, so a resumed capture starts its window
        there (or when the source gives nothing for ``stall_seconds``); the window so far is
        kept."""
        self.stopping.set()

    def windows(self) -> Iterator[Window]:
        """Each window as its file is complete, until the source ends, the capture gives up
        after an outage, or :meth:`stop`; the last window is what was read by then.

        Raises:
            SourceChangedError: the codec or picture size changed.
            MediaError: the source could never be opened (the first connection gives up).
        """
        writer: _WindowWriter | None = None
        self._down = None
        quiet = -math.inf  # when a growing local file last changed (clock seconds)
        reason = ""
        delay = BACKOFF[0]
        resumed = "video" in self.position.seen  # an earlier capture read up to p.last
        while not self.stopping.is_set():
            try:
                if self._unchanged():  # nothing new to read: wait below, where a stop is heard
                    raise MediaError(self.source, reason or "stalled")
                for packet, t, keyframe, kind, dts, skipped in self._packets():
                    lost, first = 0.0, resumed and kind == "video"
                    if kind == "video":
                        resumed = False
                    if self._down is not None and kind == "video":
                        if not self._reread(reason, t):
                            lost = self._outage(self._down, reason, t).lost
                        self._down, delay, reason = None, BACKOFF[0], ""
                        self._said_down = False
                    elif first and t - self.position.last > LOST_SECONDS:
                        # a live source went on while no capture read it (a watcher killed,
                        # or stopped and run again later)
                        # since the last window was written, when the last watcher stood there
                        gone, since = t - self.position.last, self.position.wall
                        lost = self._skipped(t, gone, "not watched (no watcher ran)", since).lost
                    elif skipped:  # the source itself moved on (a live playlist it missed)
                        lost = self._skipped(t, skipped).lost
                    if kind == "video":
                        self.position.last = max(self.position.last, t)
                    if lost and writer is not None:  # no window spans lost time
                        yield self._close(writer, None)
                        writer = None
                    stopping = self.stopping.is_set()
                    full = writer is not None and t >= writer.t0 + self.window_seconds
                    if writer is not None and keyframe and (full or stopping):
                        # at a keyframe, so a resumed capture starts its next window there
                        yield self._close(writer, t)
                        writer = None
                    if stopping and (writer is None or keyframe):
                        break
                    if writer is None:
                        if not keyframe:  # a window starts at a keyframe: it decodes alone
                            self.position.seen[kind] = dts  # read, and let go
                            self._placed[kind] = packet.pos
                            continue
                        writer = self._open(t)
                    writer.write(packet, t)
                    self.position.seen[kind] = dts  # written: a resumed capture goes on after
                    self._placed[kind] = packet.pos
                else:
                    reason = _graver(reason, "ended")
                    if self._complete:  # read to its end: the capture ends with it
                        break
            except SourceChangedError:
                if writer is not None:
                    yield self._close(writer, None)
                raise
            except (av.error.FFmpegError, OSError, MediaError) as e:
                reason = _graver(reason, _reason(e))
            if writer is not None and not is_local(self.source) and reason not in ("", "ended"):
                # a live source dropped or stalled: what was read is a window now, searchable
                # while the source is away (it waited for the reconnection, or the give-up)
                yield self._close(writer, None)
                writer = None
            before, self._read_up_to = self._read_up_to, self._file_state()
            if self.stopping.is_set():
                break
            if isinstance(self._read_up_to, tuple):
                self.position.read_to = {
                    "file": list(self._read_up_to),
                    "seen": dict(self.position.seen),
                }
            now = self.clock()
            if self._down is None:
                self._down = now
            if self.position.seen and not self._said_down and reason not in ("", "ended"):
                self._said_down = True  # (a read the source ended is no outage yet: _reread)
                self.on_down(self.position.last, reason)
            elif not self.position.seen and reason == NOT_YET and not self._said_wait:
                self._said_wait = True
                self.on_wait(reason)
            # A local file that grew meanwhile is not silent, though no packet of it was read
            # yet (opened again, FFmpeg may take several stalls to reach it): the give-up
            # counts from its last change.
            if before is not _UNREAD and self._read_up_to != before:
                quiet = now
            if now - max(self._down, quiet) >= self.give_up_seconds:
                if not is_local(self.source) and self.position.seen:
                    self._outage(self._down, reason, None)
                break
            if not self.position.seen and reason != "ended" and not self._patient(reason):
                raise MediaError(self.source, f"cannot be opened ({reason})")
            self._wait(min(delay, max(0.0, self.give_up_seconds - (now - max(self._down, quiet)))))
            delay = min(delay * 2, BACKOFF[1])
        down = self._down if self._said_down and not is_local(self.source) else None
        if self.stopping.is_set() and down is not None:
            # stopped while a URL was away (Ctrl-C): the outage so far is recorded, as a
            # give-up's is (it went unrecorded; a later watch records what it did not watch)
            self._outage(down, reason, None, over="the watch was stopped during it")
        if writer is not None:
            yield self._close(writer, None)
        if self.position.t is None and not self.stopping.is_set():
            why = f"nothing readable as video came in {self.give_up_seconds:g} s ({reason})"
            raise MediaError(self.source, why + self._as_it_stands())

    def _as_it_stands(self) -> str:
        """What FFmpeg makes of a local file read once as it stands (not followed, as a growing
        one is), for the message of a watch that gave up on it: ``""`` where it is missing or
        empty, or reads as a video after all."""
        if not is_local(self.source):
            return ""
        path = local_path(self.source)
        if not path.is_file() or path.stat().st_size == 0:
            return ""
        try:
            with av.open(str(path), metadata_errors="ignore") as container:
                if container.streams.video:
                    return ""
            return "; as it stands it holds no video stream"
        except av.error.FFmpegError as e:
            return f"; as it stands it is no video FFmpeg reads ({e.strerror or type(e).__name__})"

    def _placed_before(self) -> dict[str, int]:
        """Where an earlier watch's read of this growing local file stood, by byte position:
        empty unless it is the same file (device and inode) and holds that much still."""
        placed = self.position.placed
        state = self._file_state()
        if not placed or not isinstance(state, tuple):
            return {}
        kinds = {k: v for k, v in placed.items() if k in ("video", "audio")}
        same = (placed.get("device"), placed.get("inode")) == state[:2]
        return kinds if same and kinds and max(kinds.values()) < state[2] else {}

    def _file_state(self) -> tuple[int, int, int] | None | object:
        """A growing local file's device, inode and size (``None``: not there); ``_UNREAD`` for
        any other source, which is opened again each time."""
        if not is_local(self.source) or is_playlist(self.source):
            return _UNREAD
        try:
            st = local_path(self.source).stat()
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size)

    def _unchanged(self) -> bool:
        """Whether a growing local file is as it stood when a read of it last ended. Opened
        again, FFmpeg would block in its probe and reads (``follow=1``) for several stalls
        before saying what it said before, deaf to a stop meanwhile (a finished recording's
        Ctrl-C took 45 s with the default 10 s stall)."""
        return self._read_up_to is not _UNREAD and self._file_state() == self._read_up_to

    def _wait(self, seconds: float) -> None:
        """The backoff between connections: a growing local file is looked at every quarter
        second and read again as soon as it changes; any wait ends at a stop."""
        end = time.monotonic() + seconds
        while not self.stopping.wait(min(POLL_SECONDS, max(0.0, end - time.monotonic()))):
            if time.monotonic() >= end or (
                self._read_up_to is not _UNREAD and not self._unchanged()
            ):
                return

    def _patient(self, reason: str) -> bool:
        """Whether a source never read yet is waited for: a local file not there yet, empty,
        or with too little to read (a recorder starting). A URL that never answered, or a
        file that is not a video, is a mistake the user should hear of at once."""
        if not is_local(self.source):
            return False
        path = local_path(self.source)
        return reason in (NOT_YET, "stalled") or not path.exists() or path.stat().st_size == 0

    def _reread(self, reason: str, t: float) -> bool:
        """Whether a read the source itself ended (FFmpeg's HLS reader, polling a live
        playlist) was taken up again within a stall, missing nothing: no outage, the source
        was never away."""
        quick = self._down is not None and self.clock() - self._down < self.stall_seconds
        return reason == "ended" and quick and t - self.position.last <= LOST_SECONDS

    def _outage(self, since: float, reason: str, t: float | None, over: str = "") -> Outage:
        """The outage that began at ``since`` (clock seconds), over at stream second ``t``
        (None: the capture gave up on it, or ``over`` says what else ended it; what the source
        did meanwhile unknown)."""
        p = self.position
        at = p.last
        gone = 0.0 if t is None else t - at
        began = datetime.now(timezone.utc).timestamp() - (self.clock() - since)
        said = "stalled" if reason in ("", "stalled", "ended") else f"dropped: {reason}"
        outage = Outage(
            at=round(at, 3),
            began=datetime.fromtimestamp(began, timezone.utc).isoformat(timespec="seconds"),
            seconds=round(self.clock() - since, 3),
            lost=round(gone if gone > LOST_SECONDS else 0.0, 3),
            reason=said
            if t is not None
            else f"{said}; {over or f'gave up after {self.give_up_seconds:g} s'}",
        )
        p.outages.append(outage)
        self.on_outage(outage)
        return outage

    def _skipped(
        self, t: float, seconds: float, reason: str = "skipped by the source", since: float = 0.0
    ) -> Outage:
        """The ``seconds`` of stream before ``t`` that were never read, recorded: away since
        the wall time ``since`` (Unix seconds; 0: its wall time unknown, recorded as now and
        lasting 0)."""
        now = time.time()
        began = since if 0 < since <= now else now
        outage = Outage(
            at=round(t - seconds, 3),
            began=datetime.fromtimestamp(began, timezone.utc).isoformat(timespec="seconds"),
            seconds=round(now - began, 3),
            lost=round(seconds, 3),
            reason=reason,
        )
        self.position.outages.append(outage)
        self.on_outage(outage)
        return outage

    def _open(self, t: float) -> _WindowWriter:
        p = self.position
        path = self.folder / f"w{p.next_index:06d}.ts"
        return _WindowWriter(path, t, self._streams)

    def _close(self, writer: _WindowWriter, next_t: float | None) -> Window:
        p = self.position
        end = writer.close()
        t1 = next_t if next_t is not None else max(end, writer.t0)
        placed = {}
        if self._placed and p.file is not None:
            placed = {**self._placed, "device": p.file[0], "inode": p.file[1]}
        window = Window(
            p.next_index,
            writer.path,
            writer.t0,
            t1,
            dict(p.seen),
            p.shift,
            wall=time.time(),
            placed=placed,
        )
        window.save()
        p.next_index += 1
        p.t = t1
        p.wall = window.wall
        return window

    def _packets(self) -> Iterator[tuple[Packet, float, bool, str, float, float]]:
        """The source's packets as ``(packet, stream seconds, is a keyframe, stream type, the
        source's decoding seconds, seconds the source skipped before it)`` from where the
        capture stands; each packet's timestamps already on the stream's clock. A source whose
        clock goes back within a connection (a discontinuity) goes on from where it stood."""
        p = self.position
        options = {"rw_timeout": str(int(self.stall_seconds * 1e6))}
        target = self.source
        opening = self.stall_seconds
        playlist = is_playlist(self.source)
        renewed = False  # a local file replaced or cut short since it was last opened
        from_start = False  # a playlist read again from its first segment, its clock going on
        if is_local(self.source):
            if playlist:
                back = self._segments_back()
                options["live_start_index"] = "0" if back is None else str(-back)
                from_start = back is None and "video" in p.seen
            else:  # FFmpeg's HLS reader cannot open a playlist with follow=1
                options["follow"] = "1"
                # MPEG-TS's duration is estimated from the timestamps at the end of the file,
                # and a followed file has no end: the estimate read on as the file grew, in
                # real time (a recording growing at 37 kB/s opened after 8.4 s, 0.75 s without
                # it; one written in 256 kB bursts, after two of them, and past a short stall)
                options["skip_estimate_duration_from_pts"] = "1"
            target = str(local_path(self.source))
            if not Path(target).exists():
                raise MediaError(self.source, NOT_YET)
            if not playlist:  # a playlist is rewritten under its name at each segment
                st = os.stat(target)
                was, p.file = p.file, (st.st_dev, st.st_ino, st.st_size)
                renewed = was is not None and (was[:2] != p.file[:2] or st.st_size < was[2])
        else:
            # PyAV's open timeout bounds opening as a whole, the probe of the streams
            # included, and a probe cut short mid-read breaks the connection without an error
            # (an RTMP stream then fails at its next read: "RTMP packet size mismatch"). A live
            # source sends what is probed in real time, so the open allows the probe's length
            # (bounded here) on top of a stall; a server that sends nothing is still a stall
            # after ``stall_seconds``, by ``rw_timeout``, which bounds each read while it opens.
            # A local file keeps the plain stall: its probe reads what is on disk, and one too
            # short to probe yet is then a stall (waited for), not rw_timeout's I/O error.
            options["analyzeduration"] = str(int(PROBE_SECONDS * 1e6))
            opening += PROBE_SECONDS
        if renewed:
            self._placed = {}
        # A growing local file read before goes on after the last packet read, told by its
        # byte position, not its clock: a recorder that restarted after a stall appends a
        # stream whose clock starts again, and its packets were skipped as read before (and
        # a changed picture size with them, never seen).
        known = "video" in self._placed and min(self._placed.values()) >= 0
        placed = dict(self._placed) if known and not playlist else {}

        def connect() -> Any:
            self._opened = time.time()  # a live source sends from here on (the probe reads it)
            return av.open(
                target,
                options=options,
                timeout=(opening, self.stall_seconds),
                metadata_errors="ignore",
            )

        container = connect()
        # A source of known length that is not a growing local file (a finished HLS playlist,
        # one with #EXT-X-ENDLIST; a file over HTTP) ends where it ends: opened again it would
        # play from its start, which would read as a restart of a live source.
        self._complete = container.duration is not None and (playlist or not is_local(target))
        try:
            video, keep = self._streams_of(container)
            resume = {} if renewed else dict(p.seen)  # what an earlier connection read
            packets: Iterator[Packet] = container.demux(*keep)
            if "video" in resume and is_local(self.source):
                with suppress(av.error.FFmpegError):  # unseekable: read from the start
                    container.seek(int(resume["video"] / float(time_base(video))), stream=video)
                packets = container.demux(*keep)
                head = next(packets, None)
                if head is not None and placed and (head.pos or -1) > placed["video"]:
                    # sought past what was read (a clock that restarted in the file misleads
                    # the seek): read it from its start, what was read skipped by position
                    container.close()
                    container = connect()
                    video, keep = self._streams_of(container)
                    packets = container.demux(*keep)
                elif head is not None:
                    packets = itertools.chain([head], packets)
            # A source of known length opened again (a live playlist that ended while the watch
            # was away) plays from its start: its clock did not restart, and what was read
            # before is skipped below. (Not sought: a playlist that no longer lists the segment
            # read last would be sought past the first one it lists.)
            replayed = "video" in resume and (self._complete or from_start)
            # The last video packet's decoding time: a file read on by position goes on from
            # the packet read last, and a clock that went back since is a restart (told by the
            # pictures: a restarted source's sound sent ahead of them is dropped by the window
            # file as not going on in time, and a sound alone going back is no restart)
            before = resume.get("video") if placed else None
            first = not placed
            growing = is_local(self.source) and not playlist
            restarted = False  # a restart's first keyframe is looked at (its picture size)
            rate = float(video.average_rate or video.guessed_rate or 25)
            jump = max(LOST_SECONDS, 3.0 / rate)
            for packet in packets:
                if packet.pts is None or packet.dts is None or packet.time_base is None:
                    continue
                tb, kind = packet.time_base, packet.stream.type
                own, dts = float(packet.pts * tb), float(packet.dts * tb)
                key = (kind, round(dts, 6), zlib.crc32(bytes(packet)))
                if placed:
                    if packet.pos is not None and 0 <= packet.pos <= placed.get(kind, -1):
                        continue  # read before this reconnection
                elif first and kind == "video":
                    first = False
                    if not replayed and self._rebase(dts, renewed, None if growing else key):
                        resume = {}
                # sent again (not by a growing file, read on by position, whose appended part
                # may repeat what it holds): a source joined again before where it was read, or
                # played from its start once finished
                again = not growing and key in self._recent_set
                skipped = 0.0
                if kind == "video" and before is not None:
                    if dts < before - LOST_SECONDS and p.t is not None and not again:
                        # A restart, told by every picture, those skipped as read before too: a
                        # live playlist joined again at its start sends the part read, then the
                        # restarted one, whose times were all read (a restart read before is
                        # sent again, not restarted again). Its pictures go on after the last
                        # one read (its first sound may overlap the sound read, which ran past
                        # it: the window file drops that), and a URL's after the time it was
                        # away (a paused encoder's pause is on the stream's clock).
                        away = 0.0 if is_local(self.source) else self._away()
                        p.shift = self._end + away + ORIGIN - own
                        resume, restarted = {}, True
                    elif dts - before > jump:
                        skipped = dts - before
                if kind == "video":
                    before = dts
                if not placed and kind in resume and dts <= resume[kind] + 1e-6:
                    continue  # read before this reconnection
                if again:  # the part before a restart, past the restarted clock's last time, was
                    continue  # read as new (indexed twice)
                self._remember(key)
                keyframe = kind == "video" and packet.is_keyframe
                if p.t is None and not keyframe:
                    continue
                if p.t is None:  # the stream's first keyframe is its time 0
                    p.shift = ORIGIN - own
                    p.t = 0.0
                t = own + p.shift - ORIGIN
                if kind == "video":
                    step = float(packet.duration * tb) if packet.duration else 1.0 / rate
                    self._end = max(self._end, t + step)
                if restarted and keyframe:
                    restarted = False
                    self._check_restart(video, packet, t)
                _shift(packet, p.shift, tb)
                self._read_wall = time.time()
                yield packet, t, keyframe, kind, dts, skipped
        finally:
            container.close()

    def _streams_of(self, container: Any) -> tuple[Any, list[Any]]:
        """A connection's video stream and the streams read (it and the first audio one whose
        sample rate and channels the probe found: one listed but sending nothing yet, or only
        after what the probe read, cannot be written to a window, and was the whole source's
        "cannot be opened (Invalid argument)")."""
        video = next((s for s in container.streams.video), None)
        if video is None:
            raise MediaError(self.source, "no video stream")
        self._check_format(video)
        audio = container.streams.audio[:1]
        if audio and not (audio[0].codec_context.sample_rate and audio[0].codec_context.channels):
            if not self._said_unheard:
                self._said_unheard = True
                self.on_unheard(self.position.t or 0.0)
            audio = []
        self._streams = [video, *audio]
        return video, self._streams

    def _segments_back(self) -> int | None:
        """Where a live playlist on disk is joined, in segments before its end: ``None``, its
        first segment, when nothing of it was read yet or this capture read nothing of it (a
        watch run again: what was read before is skipped, and what the recorder wrote meanwhile
        is all still listed); else the segments written since this capture last read a packet,
        and two more (FFmpeg's HLS reader joins a live playlist three segments before its end,
        which left out what a longer absence added)."""
        if "video" not in self.position.seen or not self._read_wall:
            return None
        away = max(0.0, time.time() - self._read_wall)
        try:
            text = local_path(self.source).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        durations = [float(m) for m in _EXTINF.findall(text)]
        count = 0
        while count < len(durations) and sum(durations[len(durations) - count :]) < away:
            count += 1
        return count + 2

    def _away(self) -> float:
        """Clock seconds the source has been away in the outage under way (0: none), where it
        was away a stall or more: a read the source itself ended and taken up again at once
        (FFmpeg's HLS reader at a live playlist's end) is no time away."""
        gone = 0.0 if self._down is None else self.clock() - self._down
        return gone if gone >= self.stall_seconds else 0.0

    def _remember(self, key: tuple[str, float, int]) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._recent_set.discard(self._recent[0])
        self._recent.append(key)
        self._recent_set.add(key)

    def _rebase(
        self, dts: float, renewed: bool = False, key: tuple[str, float, int] | None = None
    ) -> bool:
        """Whether the source's clock went back (a restart; a local file ``renewed``, replaced
        or cut short, restarts wherever its clock stands); then the stream's clock goes on
        from where it stood rather than overwrite what was read.

        A connection's first picture ``key`` within the time this capture last read, but none
        of the pictures it read, is a restart too: a source joined again a little before where
        it was read sends those pictures again, while a restarted one (an encoder started again
        after a pause) sends others at those times, all of which were skipped as read."""
        p = self.position
        if "video" not in p.seen:
            return False
        went_back = renewed or dts < p.seen["video"] - RESTART_SECONDS
        recent = [k for k in self._recent if k[0] == "video"]
        if not went_back and key is not None and recent and dts <= p.seen["video"]:
            went_back = recent[0][1] <= dts and key not in self._recent_set
        if not went_back:
            return False
        if self._down is not None:  # away since the outage began
            away = self._away()
        elif not is_local(self.source) and p.wall:
            # a live source restarted while no watcher read it (a watch stopped and run again):
            # it went on meanwhile, so the stream's clock does too, and the time is recorded as
            # not watched (a file is read when it is read, not as it was recorded). Until it
            # was opened: its first packets were read after the probe had read them.
            away = max(0.0, self._opened - p.wall)
        else:
            away = 0.0
        p.shift = self._end + away + ORIGIN - dts
        p.seen = {}
        return True

    def _check_format(self, video: av.video.stream.VideoStream) -> None:
        p = self.position
        ctx = video.codec_context
        name = codec_name(ctx)  # the format's (av1), not its decoder's (libdav1d)
        if name not in TS_VIDEO:  # written as a data stream: each window holds no video
            raise MediaError(
                self.source,
                f"its video ({name}) cannot be carried in the watch's MPEG-TS windows; "
                "index the file instead (vidagent index), or re-encode it (H.264)",
            )
        found = f"{name} {ctx.width}x{ctx.height}"
        if not p.format:
            p.format = found
        elif found != p.format:
            self._changed(found, p.t or 0.0)

    def _check_restart(self, video: Any, keyframe: Packet, t: float) -> None:
        """A restarted encoder's first keyframe (at stream second ``t``), decoded alone: its
        picture size is told by the picture, not by the stream as first probed (the same file
        or connection goes on, listing the size it began with; a window mixing both was
        indexed at the old size)."""
        decoder = av.CodecContext.create(video.codec_context.name, "r")
        try:
            frames = [*decoder.decode(keyframe), *decoder.decode(None)]
        except av.error.FFmpegError:
            return  # not decodable alone: the window's own check looks at it
        if frames:
            name = codec_name(video.codec_context)
            found = f"{name} {frames[0].width}x{frames[0].height}"
            if found != self.position.format:
                self._changed(found, t)

    def _changed(self, found: str, at: float) -> None:
        raise SourceChangedError(
            self.source,
            f"changed from {self.position.format} to {found} at {at:.0f} s: one watch indexes "
            "one format; start another watch for the new one",
        )


def _shift(packet: Packet, seconds: float, tb: Fraction) -> None:
    if seconds:
        step = round(seconds / tb)
        packet.pts = int(packet.pts or 0) + step
        packet.dts = int(packet.dts or 0) + step


def _graver(before: str, now: str) -> str:
    """What an outage is recorded as, so far: a source that refused or failed (a drop) at any
    attempt of one outage was dropped, whatever a later attempt met (a reconnection that
    stalled, or found nothing new yet); otherwise the latest reason."""
    quiet = ("", "stalled", "ended", NOT_YET)
    return before if before not in quiet and now in quiet else now


def _reason(e: BaseException) -> str:
    if isinstance(e, av.error.FFmpegError):
        text = e.strerror or type(e).__name__
        return "stalled" if "timed out" in text.lower() or "exit" in text.lower() else text
    if isinstance(e, MediaError):
        return e.reason
    return str(e) or type(e).__name__


class _WindowWriter:
    """One window's MPEG-TS file, written to ``.part`` and renamed when complete."""

    def __init__(self, path: Path, t0: float, streams: list[Any]) -> None:
        self.path = path
        self.t0 = t0
        self.end = t0
        self.part = path.with_suffix(".part")
        self.out = av.open(str(self.part), "w", format="mpegts")
        self.streams = {s.index: self.out.add_stream_from_template(s) for s in streams}
        self.dts: dict[int, Fraction] = {}  # each stream's last decoding time written

    def write(self, packet: Packet, t: float) -> None:
        out = self.streams.get(packet.stream.index)
        if out is None:
            return
        dts = packet.dts * packet.time_base
        if dts <= self.dts.get(packet.stream.index, -math.inf):
            # A stream whose time does not go on (a restarted source's sound overlapping the
            # sound read before, which ran past the last picture): FFmpeg refuses it, which
            # ended the watch at the restart; the overlap is dropped, as FFmpeg's remuxer does
            return
        self.dts[packet.stream.index] = dts
        if packet.stream.type == "video":  # a window ends with its pictures
            step = float(packet.duration * packet.time_base) if packet.duration else 0.0
            self.end = max(self.end, t + step)
        packet.stream = out
        self.out.mux(packet)

    def close(self) -> float:
        self.out.close()
        os.replace(self.part, self.path)
        return self.end


def write_playlist(path: Path, windows: list[Window], *, first: Window | None = None) -> None:
    """An HLS playlist of the window files, replaced atomically: the stream as one video.

    Each entry lasts until the next window starts, so an outage's lost seconds stay on the
    timeline (FFmpeg finds a time's segment by adding the durations up). ``first``, when
    retention has rolled the stream's first windows out, is kept as the head entry lasting
    until the first kept window: the playlist's time 0 stays the stream's.
    """
    entries = ([first] if first is not None and first not in windows else []) + windows
    ends = [entries[k + 1].t0 if k + 1 < len(entries) else w.t1 for k, w in enumerate(entries)]
    seconds = [max(end - w.t0, 0.001) for w, end in zip(entries, ends, strict=True)]
    # the target is the longest entry as listed, lost seconds included: HLS requires each
    # rounded EXTINF within it (Safari refuses a playlist that breaks it)
    target = math.ceil(round(max(seconds, default=1.0), 3))
    lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-PLAYLIST-TYPE:VOD"]
    lines.append(f"#EXT-X-TARGETDURATION:{target}")
    for w, length in zip(entries, seconds, strict=True):
        lines += [f"#EXTINF:{length:.3f},", w.path.name]
    lines.append("#EXT-X-ENDLIST")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)
