"""The detection window and tracking procedures, and the OpenCV trackers, without video files."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import pytest

from vidagent.exceptions import ToolInputError
from vidagent.geometry import box_iou
from vidagent.models.base import Box, Detection
from vidagent.tools.detectors import (
    MILTracker,
    TemplateTracker,
    TrackPoint,
    _patch,
    resolve_target,
    similarity,
)
from vidagent.tools.tracking import (
    Sighting,
    best_frames,
    detect_at,
    run_tracker,
    suppress,
    window,
)

A: Box = (0.50, 0.20, 0.60, 0.60)
A_MOVED: Box = (0.52, 0.21, 0.62, 0.61)
B: Box = (0.10, 0.20, 0.20, 0.60)


class Still:
    """Follows nothing: the box stays where it was found, with a fixed confidence."""

    def __init__(self, confidence: float = 0.9) -> None:
        self.confidence = confidence
        self.calls: list[tuple[float, Box, float]] = []

    def __call__(self, from_t: float, box: Box, to_t: float) -> TrackPoint:
        self.calls.append((from_t, box, to_t))
        return TrackPoint(box, self.confidence)


def test_the_window_keeps_each_targets_most_confident_detection() -> None:
    times = [3.0, 4.0, 5.0, 6.0, 7.0]
    detections = [
        [],
        [Detection("person", A, 0.7)],
        [Detection("person", A_MOVED, 0.6)],  # the frame asked about: weaker
        [Detection("person", A, 0.95), Detection("face", B, 0.55)],
        [Detection("person", A, 0.4)],  # under the threshold
    ]
    follow = Still(0.9)
    found = detect_at(2, times, detections, None, follow, threshold=0.5)
    assert [(s.label, s.box, s.seen_at, s.score) for s in found] == [
        ("person", A, 6.0, 0.95),
        ("face", B, 6.0, 0.55),
    ]
    assert found[0].confidence == pytest.approx(0.95 * 0.9)
    assert follow.calls == [(6.0, A, 5.0), (6.0, B, 5.0)]


def test_what_is_seen_at_the_frame_itself_is_kept() -> None:
    times = [4.0, 5.0, 6.0]
    detections = [[], [Detection("person", B, 0.6)], [Detection("person", A, 0.95)]]
    found = detect_at(1, times, detections, ["person"], Still(0.9), threshold=0.5)
    assert {(s.box, s.seen_at) for s in found} == {(A, 6.0), (B, 5.0)}


def test_a_track_that_drifted_is_lost_and_targets_filter() -> None:
    times = [4.0, 5.0]
    detections = [[Detection("person", A, 0.9), Detection("face", B, 0.9)], []]
    assert detect_at(1, times, detections, None, Still(0.1), threshold=0.5) == []
    found = detect_at(0, times, detections, ["face"], Still(), threshold=0.5)
    assert [s.label for s in found] == ["face"]


def test_best_frames_and_suppression() -> None:
    detections = [
        [Detection("Person", A, 0.8), Detection("person", B, 0.6)],
        [Detection("person", A, 0.9)],
    ]
    best = best_frames(detections, None, 0.5)
    assert best["person"][0] == 1
    assert best_frames(detections, ["face"], 0.5) == {}
    kept = suppress([Sighting("person", A, 0.5, 0, 0.5), Sighting("person", A_MOVED, 0.8, 0, 0.8)])
    assert [s.box for s in kept] == [A_MOVED]


def test_window_is_alpha_frames_of_the_grid_each_side_inside_the_video() -> None:
    assert window(10.0, 5, 1.0, 60.0) == [
        5.0,
        6.0,
        7.0,
        8.0,
        9.0,
        10.0,
        11.0,
        12.0,
        13.0,
        14.0,
        15.0,
    ]
    assert window(1.25, 2, 2.0, 2.0) == [0.25, 0.75, 1.25, 1.75]


class _Closed:
    """A detector that knows two classes and finds nothing."""

    name = "opencv:hog+haar"
    vocabulary: frozenset[str] | None = frozenset({"person", "face"})

    def detect(self, frames: Sequence[np.ndarray], targets: Sequence[str]) -> list[list[Detection]]:
        return [[] for _ in frames]


def test_object_names_map_onto_the_detectors_classes() -> None:
    detector = _Closed()
    assert resolve_target("a pedestrian", detector) == "person"
    assert resolve_target("Faces", detector) == "face"
    with pytest.raises(ToolInputError, match="detects only: face, person"):
        resolve_target("dog", detector)
    detector.vocabulary = None  # open vocabulary: any name goes, synonyms still apply
    assert resolve_target("the mobile phone", detector) == "cell phone"
    assert resolve_target("dog", detector) == "dog"


def _moving_square(n: int = 15, gone_from: int | None = None) -> tuple[np.ndarray, list[Box]]:
    """A blotchy 48 px square drifting 6 px a frame over a smooth background, not drawn from
    frame ``gone_from`` on."""
    rng = np.random.default_rng(0)
    background = np.full((240, 320, 3), 90, np.uint8)
    background[..., 1] = np.linspace(60, 140, 320, dtype=np.uint8)[None, :]
    coarse = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
    texture = cv2.resize(coarse, (48, 48), interpolation=cv2.INTER_CUBIC)  # (48, 48, 3) uint8
    frames, boxes = [], []
    for k in range(n):
        x, y = 40 + 6 * k, 80 + 2 * k
        rgb = background.copy()
        if gone_from is None or k < gone_from:
            rgb[y : y + 48, x : x + 48] = texture
        frames.append(rgb)
        boxes.append((float(x), float(y), float(x + 48), float(y + 48)))
    return np.stack(frames), boxes  # (N, 240, 320, 3) uint8


def test_template_tracker_follows_a_moving_object_both_ways() -> None:
    frames, truth = _moving_square()
    start = 7
    points = TemplateTracker().track(frames, start, truth[start])
    assert points[start] == TrackPoint(truth[start], 1.0)
    for point, box in zip(points, truth, strict=False):
        assert point.box is not None and box_iou(point.box, box) > 0.8
        assert 0.9 < point.confidence <= 1.0


def test_template_tracker_reports_lost_once_the_object_is_gone() -> None:
    frames, truth = _moving_square(gone_from=10)
    points = TemplateTracker().track(frames, 7, truth[7])
    assert all(p.box is not None for p in points[:10])
    assert all(p == TrackPoint(None, 0.0) for p in points[10:])


def test_mil_tracker_keeps_the_protocol() -> None:
    # MIL's own RNG makes its path differ from call to call: only its shape is checked.
    frames, truth = _moving_square(6)
    points = MILTracker().track(frames, 2, truth[2])
    assert len(points) == 6 and points[2] == TrackPoint(truth[2], 1.0)
    for p in points:
        assert 0.0 <= p.confidence <= 1.0 and (p.box is None) == (p.confidence == 0.0)


def test_similarity_drops_when_the_object_is_gone() -> None:
    frames, truth = _moving_square(2)
    template = _patch(frames[0], truth[0])
    assert template is not None
    assert similarity(template, frames[0], truth[0]) == pytest.approx(1.0, abs=1e-4)
    assert similarity(template, frames[0], (250.0, 10.0, 298.0, 58.0)) < 0.2


def test_run_tracker_speaks_fractions_and_weighs_by_the_detector_score() -> None:
    frames, truth = _moving_square(5)
    h, w = frames.shape[1:3]
    start = truth[0]
    box = (start[0] / w, start[1] / h, start[2] / w, start[3] / h)
    points = run_tracker(TemplateTracker(), frames, 0, box, score=0.8)
    assert points[0].box == pytest.approx(box)
    assert points[0].confidence == pytest.approx(0.8)
    last = points[-1].box
    assert last is not None and last[0] == pytest.approx(truth[-1][0] / w, abs=0.02)
