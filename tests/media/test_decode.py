"""frames_at / iter_sampled_frames / iter_frames return the right frames at the right size."""

from __future__ import annotations

import itertools
import threading

import cv2
import numpy as np
import pytest

from vidagent.media import (
    ShotDetector,
    content_score,
    decode,
    encode_jpeg,
    frames_at,
    iter_frames,
    iter_sampled_frames,
    probe,
    to_hsv,
)
from vidagent.media.synth import read_counter

# None of these is exactly half-way between two frames at 25 fps, so the nearest frame is unique.
TIMES = [5.0, 0.0, 11.97, 3.31, 3.31, 7.77, 0.5 + 0.01, 2.0, 9.04]


def expected_index(t: float, n_frames: int = 300) -> int:
    return min(max(round(t * 25), 0), n_frames - 1)


@pytest.mark.parametrize("strategy", ["auto", "sequential", "seek"])
def test_frames_at_returns_nearest_frames_in_request_order(counter_video, strategy):
    frames = frames_at(counter_video.path, TIMES, strategy=strategy)
    assert frames.shape == (len(TIMES), 240, 320, 3)
    assert frames.dtype == np.uint8
    assert [read_counter(f) for f in frames] == [expected_index(t) for t in TIMES]


@pytest.mark.parametrize(
    "size,shape",
    [(None, (240, 320)), (160, (120, 160)), (1000, (240, 320)), ((100, 80), (80, 100))],
)
def test_frames_at_honours_size(counter_video, size, shape):
    frames = frames_at(counter_video.path, [1.0, 6.0], size=size)
    assert frames.shape == (2, *shape, 3)
    assert [read_counter(f) for f in frames] == [25, 150]


def test_timestamps_are_clamped(counter_video):
    frames = frames_at(counter_video.path, [-3.0, 12.0, 1e6])
    assert [read_counter(f) for f in frames] == [0, 299, 299]


@pytest.mark.parametrize(
    ("times", "size", "said"),
    [([float("nan")], None, "finite"), ([float("inf")], None, "finite"), ([1.0], 0, "positive"),
     ([1.0], -1, "positive"), ([1.0], (0, 10), "positive")],
)  # fmt: skip
def test_a_time_that_is_no_number_or_a_size_under_one_is_refused(counter_video, times, size, said):
    # NaN gave a frame, and size=-1 a 1x1 picture
    with pytest.raises(ValueError, match=said):
        frames_at(counter_video.path, times, size=size)


def test_no_timestamps(counter_video):
    assert frames_at(counter_video.path, [], size=64).shape == (0, 48, 64, 3)


def test_frames_at_accepts_videoinfo(counter_video):
    info = probe(counter_video.path)
    assert read_counter(frames_at(info, [4.4])[0]) == 110


def test_auto_strategy_seeks_only_across_long_gaps():
    # Gaps up to one keyframe interval (2 s here) are decoded through; longer ones seek.
    runs = decode._plan_runs([0.5, 1.0, 2.5, 9.0, 9.5, 30.0], 2.0, "auto")
    assert runs == [([0.5, 1.0, 2.5], False), ([9.0, 9.5], True), ([30.0], True)]
    assert decode._plan_runs([5.0], 2.0, "auto") == [([5.0], True)]
    assert decode._plan_runs([1.5], 2.0, "auto") == [([1.5], False)]


def test_rotation_is_applied(rotated_video):
    frames = frames_at(rotated_video.path, [0.0, 1.0], size=120)
    assert frames.shape == (2, 120, 90, 3)  # display is portrait: 240x320 scaled to 90x120
    top_right = frames[0, :8, -8:].reshape(-1, 3).mean(axis=0)
    assert top_right[0] > 180 and top_right[1] < 80  # the coded top-left red marker, turned
    unturned = [np.rot90(f, k=1) for f in frames]  # back to coded orientation
    assert [read_counter(f) for f in unturned] == [0, 25]


def test_iter_sampled_frames_grid(counter_video):
    samples = list(iter_sampled_frames(counter_video.path, fps=3.0, size=160))
    assert len(samples) == 36
    assert [t for t, _ in samples] == pytest.approx([i / 3 for i in range(36)])
    assert all(f.shape == (120, 160, 3) for _, f in samples)
    assert [read_counter(f) for _, f in samples] == [expected_index(t) for t, _ in samples]


def test_iter_sampled_frames_start_end(counter_video):
    samples = list(iter_sampled_frames(counter_video.path, fps=1.0, size=96, start=4.0, end=8.5))
    assert [t for t, _ in samples] == [4.0, 5.0, 6.0, 7.0, 8.0]
    assert [read_counter(f) for _, f in samples] == [100, 125, 150, 175, 200]


def test_skipping_nonref_frames_changes_nothing(counter_video):
    def indices(skip):
        return [
            read_counter(f)
            for _, f in iter_sampled_frames(counter_video.path, fps=7.0, size=96, skip_nonref=skip)
        ]

    assert indices(True) == indices(False)


def test_parallel_chunks_match_a_single_pass(counter_video, monkeypatch):
    # Allow 2 s chunks, so this 12 s video is decoded as several concurrent chunks.
    monkeypatch.setattr(decode, "_CHUNK_MIN_SECONDS", 2.0)
    monkeypatch.setattr(decode, "_CHUNK_MIN_KEYFRAME_INTERVALS", 0.5)
    info = probe(counter_video.path)
    assert len(decode._plan_chunks(info, [i / 2 for i in range(24)], 0.0, 12.0, 1, 2)) > 2

    def run(workers):
        tapped: list[float] = []
        samples = [
            (t, read_counter(f))
            for t, f in iter_sampled_frames(
                info, fps=2.0, size=96, workers=workers, on_frame=lambda t, f: tapped.append(t)
            )
        ]
        return samples, tapped

    single, single_taps = run(1)
    parallel, parallel_taps = run(2)
    assert parallel == single
    assert len(parallel_taps) == 300  # every frame once, in order, across chunk edges
    assert parallel_taps == sorted(parallel_taps) == pytest.approx(single_taps)


def test_tapped_frames_are_prepared_on_the_decode_workers(shots_video, monkeypatch):
    monkeypatch.setattr(decode, "_CHUNK_MIN_SECONDS", 2.0)
    monkeypatch.setattr(decode, "_CHUNK_MIN_KEYFRAME_INTERVALS", 0.5)
    plain, prepared = ShotDetector(min_shot_seconds=15 / 25), ShotDetector(min_shot_seconds=15 / 25)
    preparers: set[str] = set()

    def to_hsv_noting(frame):
        preparers.add(threading.current_thread().name)
        return to_hsv(frame)

    list(iter_sampled_frames(shots_video.path, fps=1.0, size=64, on_frame=plain.push))
    list(
        iter_sampled_frames(
            shots_video.path,
            fps=1.0,
            size=64,
            workers=2,
            on_frame=prepared.push_hsv,
            on_frame_prepare=to_hsv_noting,
        )
    )
    assert prepared.finish(16.0) == plain.finish(16.0)  # the same cuts from prepared frames
    assert preparers and all(name.startswith("vidagent-decode") for name in preparers)


def test_frame_scores_on_the_workers_equal_the_sequential_ones(shots_video, monkeypatch):
    """Each chunk scores its frames where it decodes them and hands over no frame but its
    first and last: every score, across chunk joins too, is the one of one sequential pass."""
    monkeypatch.setattr(decode, "_CHUNK_MIN_SECONDS", 2.0)
    monkeypatch.setattr(decode, "_CHUNK_MIN_KEYFRAME_INTERVALS", 0.5)
    frames: list[tuple[float, np.ndarray]] = []
    list(
        iter_sampled_frames(
            shots_video.path, fps=1.0, size=64, on_frame=lambda t, f: frames.append((t, to_hsv(f)))
        )
    )
    sequential = [(frames[0][0], 0.0)] + [
        (t, content_score(a, b)) for (_, a), (t, b) in itertools.pairwise(frames)
    ]
    scored: list[tuple[float, float]] = []
    workers: set[str] = set()

    def score(a: np.ndarray, b: np.ndarray) -> float:
        workers.add(threading.current_thread().name)
        return content_score(a, b)

    samples = list(
        iter_sampled_frames(
            shots_video.path,
            fps=1.0,
            size=64,
            workers=2,
            on_frame_prepare=to_hsv,
            frame_score=score,
            on_score=lambda t, s: scored.append((t, s)),
        )
    )
    assert len(samples) == 16
    assert [t for t, _ in scored] == pytest.approx([t for t, _ in sequential])
    assert [s for _, s in scored] == pytest.approx([s for _, s in sequential], abs=1e-12)
    assert any(name.startswith("vidagent-decode") for name in workers)
    assert "MainThread" in workers  # each later chunk's first frame, against the one before


def test_shots_in_the_sampling_pass(shots_video):
    detector = ShotDetector(min_shot_seconds=15 / 25)
    samples = list(iter_sampled_frames(shots_video.path, fps=1.0, size=64, on_frame=detector.push))
    assert len(samples) == 16
    cuts = [span.t0 for span in detector.finish(16.0)[1:]]
    assert cuts == pytest.approx(shots_video.cuts, abs=1 / 25)


def test_iter_frames_every(counter_video):
    frames = list(iter_frames(counter_video.path, size=64, every=5))
    assert len(frames) == 60
    assert [t for t, _ in frames] == pytest.approx([i * 0.2 for i in range(60)])
    assert [read_counter(f) for _, f in frames] == list(range(0, 300, 5))


def test_encode_jpeg_round_trip(counter_video):
    rgb = frames_at(counter_video.path, [2.0], size=160)[0]
    jpeg = encode_jpeg(rgb, quality=80)
    assert jpeg[:2] == b"\xff\xd8"
    back = cv2.cvtColor(
        cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB
    )
    assert back.shape == rgb.shape
    assert np.abs(back.astype(int) - rgb.astype(int)).mean() < 8  # colours survive, not BGR
    assert len(encode_jpeg(rgb, quality=30)) < len(jpeg)


def test_damage_in_the_middle_is_concealed(counter_video, tmp_path):
    data = bytearray(counter_video.path.read_bytes())
    lo, hi = int(len(data) * 0.40), int(len(data) * 0.45)
    data[lo:hi] = np.random.default_rng(0).integers(0, 256, hi - lo, dtype=np.uint8).tobytes()
    path = tmp_path / "damaged.mp4"
    path.write_bytes(bytes(data))
    frames = frames_at(path, [1.0, 5.0, 11.0], size=160)
    assert frames.shape == (3, 120, 160, 3)
    assert [read_counter(frames[0]), read_counter(frames[2])] == [25, 275]  # intact parts exact
    assert len(list(iter_sampled_frames(path, fps=1.0, size=96))) == 12
