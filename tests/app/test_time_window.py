"""``--last``, ``--since`` and ``--until`` read into a window of a video's own timeline."""

from __future__ import annotations

import dataclasses

import pytest
from factories import video_record

from vidagent.app.window import TimeWindow, resolve_window
from vidagent.exceptions import ConfigError
from vidagent.library.schema import VideoRecord
from vidagent.timecode import parse_duration


def recorded(start: str, duration: float, name: str = "cam.mp4") -> VideoRecord:
    return dataclasses.replace(video_record("v1", duration, name), recorded_at=start)


def window(record: VideoRecord, **given: str) -> tuple[float, float]:
    asked = TimeWindow.parse(**given)
    assert asked is not None
    return resolve_window(asked, record)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10m", 600), ("90s", 90), ("1h30m", 5400), ("2h", 7200), ("45", 45), ("1.5m", 90)]
    + [("7d", 604800), ("1d12h", 129600)],
)
def test_lengths_read_as_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["10x", "m10", "0", "0s", "1m1h", "10m10m", "", "-5m", "1 h", "1h1d", "99999999999999999999h"],
)
def test_a_bad_length_is_refused_with_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="10m, 90s, 1h30m|more than 0 s|at most 36500d"):
        parse_duration(text)
    with pytest.raises(ConfigError, match="^--last: "):
        TimeWindow.parse(last=text)


def test_no_option_is_no_window_and_last_does_not_mix_with_wall_clock_times() -> None:
    assert TimeWindow.parse() is None and TimeWindow.parse(since=" ") is None
    with pytest.raises(ConfigError, match="--last counts back from the live edge"):
        TimeWindow.parse(last="5m", since="10:00")
    for bad in ("25:00", "10:61", "yesterday", "2026-13-01T00:00"):
        with pytest.raises(ConfigError, match="--since: .* (not a time|not a clock time)"):
            window(recorded("2026-11-28T09:00:00Z", 600), since=bad)


def test_last_counts_back_from_the_live_edge() -> None:
    assert window(video_record("v", 3600.0), last="10m") == (3000.0, 3600.0)
    assert window(video_record("v", 300.0), last="10m") == (0.0, 300.0)  # shorter: all of it
    # a stream's length summed from its windows: 30 s back is 30.0, not a hair before it
    assert window(video_record("v", 59.99999999999999), last="30s") == (30.0, 60.0)
    with pytest.raises(ConfigError, match="nothing is indexed of it yet"):
        window(video_record("v", 0.0), last="10m")


def test_clock_times_fall_on_the_live_edges_day() -> None:
    nine_to_eleven = recorded("2026-11-28T09:00:00Z", 7200)
    assert window(nine_to_eleven, since="10:30") == (5400.0, 7200.0)
    assert window(nine_to_eleven, since="10:30", until="10:45:30") == (5400.0, 6330.0)
    assert window(nine_to_eleven, until="10:00") == (0.0, 3600.0)
    assert window(nine_to_eleven, since="08:00") == (0.0, 7200.0)  # from before it started
    assert window(nine_to_eleven, until="12:00") == (0.0, 7200.0)  # up to the live edge
    with pytest.raises(ConfigError, match=r"cam.mp4: --since 12:00 holds nothing of it \("):
        window(nine_to_eleven, since="12:00")  # today, after the live edge: not yesterday
    with pytest.raises(ConfigError, match="2026-11-28T09:00:00Z to 2026-11-28T11:00:00Z"):
        window(nine_to_eleven, until="08:30")


def test_clock_times_of_a_recording_that_crossed_midnight() -> None:
    night = recorded("2026-11-27T23:00:00Z", 7200)  # to 01:00 on the 28th
    assert window(night, since="23:30") == (1800.0, 7200.0)  # yesterday's, still recorded
    assert window(night, since="00:30") == (5400.0, 7200.0)
    assert window(night, since="23:30", until="00:15") == (1800.0, 4500.0)  # after since


def test_times_are_read_in_the_recordings_timezone() -> None:
    paris = recorded("2026-11-28T09:00:00+02:00", 3600)
    assert window(paris, since="09:30") == (1800.0, 3600.0)
    assert window(paris, since="2026-11-28T07:15:00Z") == (900.0, 3600.0)
    assert window(paris, since="2026-11-28T09:45:00") == (2700.0, 3600.0)  # no offset: Paris'
    local = recorded("2026-11-28T09:00:00", 3600)  # no offset: as written, or UTC
    assert window(local, since="09:15") == (900.0, 3600.0)
    assert window(local, until="2026-11-28T09:20:00Z") == (0.0, 1200.0)


def test_wall_clock_times_need_the_recording_start() -> None:
    with pytest.raises(ConfigError) as caught:
        window(video_record("v", 600.0, "lecture.mp4"), since="10:00")
    message = str(caught.value)
    assert message.startswith("lecture.mp4 has no recording start time")
    assert "--started-at" in message and "\n" not in message
    assert window(video_record("v", 600.0), last="1m") == (540.0, 600.0)  # --last needs none
