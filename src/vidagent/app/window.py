"""Questions and searches about part of a video: ``--last 10m``, ``--since``, ``--until``.

A :class:`TimeWindow` is what the user asked for; it is resolved against each video when a
question starts (:func:`resolve_window`), and every read of the question then goes through a
:class:`~vidagent.library.window.WindowedLibrary` cut to the resolved windows (what that hides
and keeps, the video-level summary included, is in its module docstring).

**The live edge.** A video that a watcher is still indexing grows: its ``duration`` in the
Library is the end of what is indexed so far. The live edge is that duration when the question
starts, read once and fixed for the whole run, so a run sees one window and its trace
(``run_started``'s ``videos[].window``, in stream seconds) replays it. A finished file's live
edge is its end.

- ``last``: the window is ``[edge - last, edge]`` (from the start when the video is shorter).
- ``since`` / ``until``: wall-clock times, so the video needs ``recorded_at`` (a stream's start,
  the container's ``creation_time``, or ``vidagent index FILE --started-at``); without it the
  question stops with a line naming the video. Either bound may be left open: the start of the
  video or the live edge. Given as ISO-8601 (``2026-11-28T14:05:00Z``, ``…+01:00``; without an
  offset, in ``recorded_at``'s timezone) or as a clock time ``HH:MM[:SS]``, read in
  ``recorded_at``'s timezone (as written when it has no offset). A clock time is on the live
  edge's day (for a live stream: today), or the day before when it is later than the live
  edge and the day before still falls in the recording (a stream that crossed midnight); an
  ``until`` given with a ``since`` is the first such time after it.
  A ``recorded_at`` without an offset is read as UTC when compared with a time that has one.
- ``last`` does not mix with ``since``/``until``; a window that holds nothing of a video (all
  of it before the start or after the live edge) stops the question with a line saying where
  the video's times lie.

Times stay the video's own (stream time) inside the window, so answers cite the same seconds
(and, with ``recorded_at``, the same wall-clock times) as an unwindowed question would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from vidagent.exceptions import ConfigError
from vidagent.timecode import hms, parse_duration, wall_clock

if TYPE_CHECKING:
    from vidagent.library import Library
    from vidagent.library.schema import VideoRecord

_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")


@dataclass(frozen=True)
class TimeWindow:
    """The part of each video a question or a search may see, as asked.

    Attributes:
        last: seconds before the live edge (``--last 10m``: 600.0).
        since: a wall-clock start, as given (ISO-8601 or ``HH:MM[:SS]``).
        until: a wall-clock end, as given.
    """

    last: float | None = None
    since: str | None = None
    until: str | None = None

    @classmethod
    def parse(
        cls, last: str | float | None = None, since: str | None = None, until: str | None = None
    ) -> TimeWindow | None:
        """The window of ``--last``, ``--since`` and ``--until`` (None: none was given),
        checked as far as can be before a video is read.

        Raises:
            ConfigError: a bad length or time, or ``last`` mixed with ``since``/``until``.
        """
        since, until = (_given(v) for v in (since, until))
        if last is None and since is None and until is None:
            return None
        if last is not None and (since is not None or until is not None):
            raise ConfigError(
                "--last counts back from the live edge; give it or --since/--until, not both"
            )
        seconds = None
        if last is not None:
            try:
                seconds = float(last) if isinstance(last, (int, float)) else parse_duration(last)
            except ValueError as e:
                raise ConfigError(f"--last: {e}") from None
            if not seconds > 0:
                raise ConfigError(f"--last: {last!r} is no length of time; give more than 0 s")
        for name, text in (("--since", since), ("--until", until)):
            if text is not None and not _CLOCK.fullmatch(text):
                _iso(text, name)  # its form is checked now; its meaning needs the video
        return cls(seconds, since, until)

    def describe(self) -> str:
        """The window as the options that asked for it: ``--last 600s``."""
        if self.last is not None:
            return f"--last {self.last:g}s"
        parts = [f"--since {self.since}"] if self.since else []
        return " ".join(parts + ([f"--until {self.until}"] if self.until else []))


def _given(text: str | None) -> str | None:
    return text.strip() or None if text is not None else None


def _iso(text: str, name: str) -> datetime:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{name}: {text!r} is not a time; use HH:MM[:SS] or ISO-8601 (2026-11-28T14:05:00Z)"
        ) from None


def resolve_window(window: TimeWindow, record: VideoRecord) -> tuple[float, float]:
    """``window`` on ``record``'s timeline: ``(t0, t1)`` in seconds, ``t1`` at most its live
    edge (its duration now).

    Raises:
        ConfigError: ``since``/``until`` on a video without ``recorded_at``, or a window that
            holds nothing of the video.
    """
    edge = round(float(record.duration), 3)  # to the millisecond, as a stream records it
    if window.last is not None:
        t0, t1 = max(0.0, round(edge - window.last, 3)), edge
    else:
        t0, t1 = _wall_window(window, record, edge)
    if t1 <= t0 or edge <= 0:
        raise ConfigError(
            f"{record.name}: {window.describe()} holds nothing of it ({_where(record)})"
        )
    return t0, t1


def _wall_window(window: TimeWindow, record: VideoRecord, edge: float) -> tuple[float, float]:
    if not record.recorded_at:
        raise ConfigError(
            f"{record.name} has no recording start time, so --since/--until cannot place a "
            "wall-clock time in it; give it one with `vidagent index FILE --started-at "
            "2026-11-28T14:00:00Z` (or use --last)"
        )
    start = datetime.fromisoformat(record.recorded_at.replace("Z", "+00:00"))
    live = start + timedelta(seconds=edge)
    since = _at(window.since, "--since", start, live) if window.since else None
    until = _at(window.until, "--until", start, live, after=since) if window.until else None
    t0 = 0.0 if since is None else max(0.0, _seconds(since, start))
    t1 = edge if until is None else min(edge, _seconds(until, start))
    return t0, t1


def _at(
    text: str, name: str, start: datetime, live: datetime, after: datetime | None = None
) -> datetime:
    """The wall-clock time ``text`` names (module docstring: which day a clock time is)."""
    clock = _CLOCK.fullmatch(text)
    if clock is None:
        when = _iso(text, name)
        return when.replace(tzinfo=start.tzinfo) if when.tzinfo is None else when
    hour, minute, second = (int(g or 0) for g in clock.groups())
    if hour > 23 or minute > 59 or second > 59:
        raise ConfigError(f"{name}: {text!r} is not a clock time (HH:MM[:SS])")
    zone = start.tzinfo or timezone.utc
    base = (after or live).astimezone(zone) if start.tzinfo else (after or live)
    when = base.replace(hour=hour, minute=minute, second=second, microsecond=0)
    if after is not None:
        return when if when > after else when + timedelta(days=1)
    earlier = when - timedelta(days=1)  # a recording that crossed midnight
    return earlier if when > live and earlier >= start else when


def _seconds(when: datetime, start: datetime) -> float:
    """Seconds from ``start`` to ``when``; a side without an offset is read as UTC."""
    if (when.tzinfo is None) != (start.tzinfo is None):
        when, start = (d if d.tzinfo else d.replace(tzinfo=timezone.utc) for d in (when, start))
    return (when - start).total_seconds()


def _where(record: VideoRecord) -> str:
    """Where a video's times lie, in words: ``00:00:00 to 00:10:00``, with wall-clock times."""
    span = f"{hms(0.0)} to {hms(record.duration)}"
    if record.recorded_at:
        ends = (wall_clock(record.recorded_at, t) for t in (0.0, record.duration))
        span += " = {} to {}".format(*ends)
    return f"its indexed times: {span}" if record.duration > 0 else "nothing is indexed of it yet"


def windowed(library: Library, video_ids: Sequence[str], window: TimeWindow | None) -> Library:
    """``library`` read through ``window`` resolved on each of ``video_ids`` now (their live
    edges fixed here, also where the window holds all of a video); the Library itself when
    there is no window.

    Raises:
        ConfigError: as :func:`resolve_window`, naming the video.
    """
    if window is None:
        return library
    from vidagent.library.window import WindowedLibrary

    cut, whole = {}, []
    for video_id in video_ids:
        record = library.get_video(video_id)
        cut[video_id] = resolve_window(window, record)
        if cut[video_id] == (0.0, record.duration):
            whole.append(video_id)
    return WindowedLibrary(library, cut, whole)
