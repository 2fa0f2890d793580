"""Times as people read and write them: ``HH:MM:SS`` out, seconds or ``HH:MM:SS`` in."""

from __future__ import annotations

import math


def hhmmss(t: float) -> str:
    """``HH:MM:SS`` with the seconds truncated, as Deep Video Discovery writes clip times."""
    s = max(0, int(t))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def hms(t: float) -> str:
    """``HH:MM:SS`` rounded to the nearest second, for display."""
    return hhmmss(round(t))


def clock(t: float) -> str:
    """``HH:MM:SS``, plus ``.d`` when ``t`` is not a whole second (2 fps labels need it)."""
    whole, tenth = divmod(max(0, round(t * 10)), 10)
    return hhmmss(whole) + (f".{tenth}" if tenth else "")


def parse_time(text: str) -> float:
    """Seconds from ``SS``, ``SS.s``, ``MM:SS`` or ``HH:MM:SS``.

    Raises:
        ValueError: not a time; the message says which forms are accepted.
    """
    try:
        parts = [float(p) for p in str(text).strip().split(":")]
    except ValueError:
        parts = []
    if not 1 <= len(parts) <= 3 or any(not math.isfinite(p) or p < 0 for p in parts):
        raise ValueError(f"{text!r} is not a time; use seconds or HH:MM:SS")
    seconds = 0.0
    for p in parts:
        seconds = seconds * 60 + p
    return seconds


def wall_clock(started_at: str, t: float) -> str:
    """The ISO-8601 wall-clock time ``t`` seconds into a video recorded from ``started_at``
    (an ISO-8601 time, with its offset where it has one); ``""`` when the start is unknown
    (empty) or not an ISO-8601 time. Whole seconds unless ``t`` has a fraction."""
    from datetime import datetime, timedelta

    if not started_at:
        return ""
    try:
        start = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except ValueError:
        return ""
    at = start + timedelta(seconds=max(0.0, t))
    spec = "seconds" if at.microsecond == 0 else "milliseconds"
    return at.isoformat(timespec=spec).replace("+00:00", "Z")


def parse_wall_clock(text: str) -> str:
    """An ISO-8601 date and time (``2026-05-01T09:30:00``, with ``Z`` or an offset where known)
    in canonical form (``Z`` for UTC; a time without an offset is kept as local wall time).

    Raises:
        ValueError: not an ISO-8601 date and time; the message shows the form.
    """
    from datetime import datetime

    try:
        when = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO-8601 date and time; use e.g. 2026-05-01T09:30:00Z"
        ) from None
    spec = "seconds" if when.microsecond == 0 else "milliseconds"
    return when.isoformat(timespec=spec).replace("+00:00", "Z")


_DURATION_PART = r"(\d+(?:\.\d+)?)([dhms])"


def parse_duration(text: str) -> float:
    """Seconds from a length such as ``10m``, ``90s``, ``1h30m``, ``2h``, ``7d`` or a bare
    number of seconds; it must be above zero and at most :data:`MAX_DURATION` (a window of
    3.6e23 s was taken, and kept in a stream's record for good).

    Raises:
        ValueError: not such a length; the message shows the forms.
    """
    import re

    given = str(text).strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", given):
        seconds = float(given)
    elif re.fullmatch(rf"(?:{_DURATION_PART})+", given):
        parts = re.findall(_DURATION_PART, given)
        units = [u for _, u in parts]
        if len(set(units)) != len(units) or units != sorted(units, key="dhms".index):
            raise ValueError(f"{text!r} is not a length; use e.g. 10m, 90s, 1h30m, 2h or 7d")
        scale = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
        seconds = sum(float(n) * scale[u] for n, u in parts)
    else:
        raise ValueError(f"{text!r} is not a length; use e.g. 10m, 90s, 1h30m, 2h or 7d")
    if seconds <= 0:
        raise ValueError(f"{text!r} is no length of time; give more than 0 s")
    if seconds > MAX_DURATION:
        raise ValueError(f"{text!r} is longer than any recording; give at most 36500d")
    return seconds


#: The longest length :func:`parse_duration` takes: a hundred years, in seconds.
MAX_DURATION = 36500 * 86400.0
