"""TimeSpan, uniform_clips and shot detection."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from vidagent.media import ShotDetector, TimeSpan, detect_shots, iter_frames, probe, uniform_clips
from vidagent.media.synth import make_video


def test_timespan():
    a, b = TimeSpan(0.0, 5.0), TimeSpan(5.0, 7.5)
    assert b.duration == 2.5
    assert not a.overlaps(b)  # touching is not overlapping
    assert a.overlaps(TimeSpan(4.9, 6.0)) and TimeSpan(4.9, 6.0).overlaps(a)
    assert a.contains(0.0) and a.contains(4.999) and not a.contains(5.0)
    assert a.contains(TimeSpan(1.0, 5.0)) and not a.contains(TimeSpan(4.0, 6.0))
    with pytest.raises(ValueError):
        TimeSpan(3.0, 2.0)
    with pytest.raises(AttributeError):
        a.t0 = 1.0  # frozen


@pytest.mark.parametrize(
    "duration,expected",
    [
        (12.0, [(0, 5), (5, 10), (10, 12)]),
        (10.0, [(0, 5), (5, 10)]),
        (10.5, [(0, 5), (5, 10.5)]),  # a 0.5 s remainder (< 1 s) joins the previous clip
        (11.0, [(0, 5), (5, 10), (10, 11)]),  # exactly a fifth: kept as its own clip
        (3.0, [(0, 3)]),
        (0.5, [(0, 0.5)]),
        (0.0, []),
    ],
)
def test_uniform_clips(duration, expected):
    assert [(c.t0, c.t1) for c in uniform_clips(duration, 5.0)] == expected


@pytest.mark.parametrize("duration", [0.04, 7.3, 59.99, 600.0, 3601.7])
@pytest.mark.parametrize("clip", [1.0, 5.0, 30.0])
def test_uniform_clips_cover_without_gaps(duration, clip):
    clips = uniform_clips(duration, clip)
    assert clips[0].t0 == 0.0 and clips[-1].t1 == duration
    assert all(a.t1 == b.t0 for a, b in pairwise(clips))
    assert all(0 < c.duration <= 1.2 * clip + 1e-9 for c in clips)


@pytest.mark.parametrize("method", ["adaptive", "content"])
def test_detect_shots_finds_the_cuts(shots_video, method):
    shots = detect_shots(shots_video.path, method=method)
    assert len(shots) == 8
    assert [s.t0 for s in shots[1:]] == pytest.approx(shots_video.cuts, abs=1 / 25)
    assert shots[0].t0 == 0.0 and shots[-1].t1 == pytest.approx(16.0, abs=1 / 25)
    assert all(a.t1 == b.t0 for a, b in pairwise(shots))


def test_frame_skip_is_within_skip_frames(shots_video):
    shots = detect_shots(shots_video.path, frame_skip=1)
    assert [s.t0 for s in shots[1:]] == pytest.approx(shots_video.cuts, abs=2 / 25 + 1e-6)


def test_one_moving_shot_has_no_cut(tmp_path):
    path = tmp_path / "one.mp4"
    make_video(path, duration=6, fps=25, size=(256, 144), shots=1)
    assert detect_shots(path) == [TimeSpan(0.0, probe(path).duration)]


def test_min_shot_length_suppresses_close_cuts(shots_video):
    shots = detect_shots(shots_video.path, min_shot_frames=75)  # 3 s: every other 2 s cut
    assert len(shots) == 4
    assert all(s.duration >= 3.0 for s in shots[:-1])


def test_detect_shots_from_frames(shots_video):
    info = probe(shots_video.path)
    frames = iter_frames(info, size=(96, 54))
    shots = detect_shots(frames, duration=info.duration)
    assert [s.t0 for s in shots[1:]] == pytest.approx(shots_video.cuts, abs=1 / 25)
    with pytest.raises(ValueError, match="duration"):
        detect_shots(iter_frames(info, size=64))


def test_shot_detector_rejects_bad_settings():
    with pytest.raises(ValueError):
        ShotDetector(window=0)
    with pytest.raises(ValueError):
        ShotDetector("histogram")  # type: ignore[arg-type]


@pytest.mark.parametrize("grey, cut", [(80, False), (81, True)])
def test_content_score_is_the_mean_hsv_difference_against_27(grey: int, cut: bool) -> None:
    """PySceneDetect's content score: the mean absolute HSV difference over the three channels.
    Black to a grey of value v differs only in V, so the score is v / 3: 81 reaches the
    threshold of 27 and cuts, 80 does not."""
    detector = ShotDetector("content")
    for i in range(30):
        detector.push(i * 0.1, np.full((36, 64, 3), 0 if i < 15 else grey, np.uint8))
    shots = detector.finish(3.0)
    assert [s.t0 for s in shots[1:]] == ([pytest.approx(1.5)] if cut else [])
