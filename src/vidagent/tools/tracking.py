"""Where objects are over time: VideoAgent2's detection window and tracking (appendix A.2, A.3).

Detection at frame ``m`` runs the detector on every frame of ``[m - alpha, m + alpha]``; for
each target the frame where it scores highest (above the threshold) gives its boxes, and the
tracker carries each box to ``m``. Tracking ``object_name`` over ``[m, n]`` starts the tracker
from the most confident detection in the range and runs it forwards and backwards.

Frames and times: the window and the reported track are on the sampling grid (``sample_fps``,
the paper's fps_d; ``alpha`` counts its frames, so 5 frames are 5 s at the default 1 fps). The
tracker steps on a finer grid when it asks to (``step_fps``), capped at the video's frame rate.

Decisions where the paper is silent:

* A target is a class name (spec A.11 #9); every box of that class above the threshold in its
  best frame is followed. Detections at ``m`` itself that nothing followed covers are kept: the
  window exists to recover what the detector misses at ``m``, not to drop what it sees there.
* Confidence: the paper reports SAM2's score. Here it is the detector's score where the box
  was found times the tracker's confidence at the frame reported (just the score at the frame
  it was found), so a weak detection or a drifting track both lower it.
* A box followed to ``m`` with a tracker confidence under 0.2 counts as lost, whatever the
  tracker (the OpenCV ones stop there themselves); a trajectory reports every step, lost or
  with its confidence, and leaves the judgement to the model.
* What a detector says went wrong (a VLM reply without usable boxes,
  :func:`~vidagent.tools.detectors.detector_report`) is added to the observation as a note, so
  "nothing found" is not mistaken for "nothing there"; its model calls are counted.
* The threshold is 0.5 (spec A.5); a track spans at most 60 s per call, since its frames are
  held in memory (121 frames of 512 px at the default tracker's 2 steps a second).

Settings come from :class:`~vidagent.tools.options.PerceptionOptions` (``ctx.options.perception``):
``detect_alpha`` ("typically 5", appendix A.2), ``detect_threshold`` (0.5, spec A.5; the paper
gives none), and through :func:`~vidagent.tools.detectors.backends` ``object_detector`` and
``object_tracker``.
Boxes are fractions of the frame ``(x0, y0, x1, y1)`` everywhere in this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace

import cv2
import numpy as np

from vidagent.exceptions import ToolInputError
from vidagent.geometry import box_iou
from vidagent.media import VideoInfo, frames_at, probe
from vidagent.models.base import Box, Detection
from vidagent.tools.base import Evidence, Observation, ToolContext
from vidagent.tools.detectors import (
    LOST,
    ObjectTracker,
    TrackPoint,
    backends,
    detector_report,
    normal_name,
    resolve_target,
    same_label,
    to_fraction,
    to_pixels,
)

MAX_TRACK_SECONDS = 60.0
DETECT_SIZE = 800  # the default detector's working width: it downscales wider frames itself
TRACK_SIZE = 512  # tracking held people on vtest.avi as well as at 768 px (detectors.py)
ZOOM_SIDE = 1024  # long side of a zoomed crop (spec A.5)
WHOLE: Box = (0.0, 0.0, 1.0, 1.0)


# ---------------------------------------------------------------------------------------------
# Videos, times and regions


@dataclass
class Cost:
    """Frames decoded and model calls made for one observation."""

    frames: int = 0
    calls: int = 0


@dataclass(frozen=True)
class VideoView:
    """One video as a tool sees it: its file, the sampling grid and how to name it."""

    video_id: str
    info: VideoInfo
    fps: float  # the sampling grid: the paper's fps_d
    name: str  # "" with one video in scope, else " in video <id>"


def open_video(ctx: ToolContext, video: str | None) -> VideoView:
    """The video ``video`` names (or the only one in scope), probed from its source file."""
    video_id = ctx.resolve_video(video)
    info = probe(ctx.library.get_video(video_id).source)
    fps = ctx.models.settings.sample_fps if ctx.models is not None else 1.0
    name = f" in video {video_id}" if len(ctx.video_ids) > 1 else ""
    return VideoView(video_id, info, fps, name)


def check_time(ctx: ToolContext, v: VideoView, t: float) -> float:
    """``t`` itself; a time outside the video is the model's to fix (ToolInputError)."""
    start, end = ctx.span(v.video_id)
    if not start <= t <= end:
        raise ToolInputError(f"{t:g} s is outside the video{v.name} ({start:g} to {end:.1f} s)")
    return t


def check_span(ctx: ToolContext, v: VideoView, t0: float, t1: float) -> tuple[float, float]:
    """``(t0, t1)`` in order and clamped to the video; a span wholly outside it is a ToolInputError."""
    lo, hi = sorted((t0, t1))
    start, end = ctx.span(v.video_id)
    if hi < start or lo > end:
        raise ToolInputError(
            f"{lo:g}-{hi:g} s is outside the video{v.name} ({start:g} to {end:.1f} s)"
        )
    return ctx.clamp_span(v.video_id, lo, hi)


def grid(t0: float, t1: float, fps: float) -> list[float]:
    """Times ``t0, t0 + 1/fps, ...`` up to ``t1`` inclusive."""
    n = math.floor((t1 - t0) * fps + 1e-6)
    return [round(t0 + k / fps, 3) for k in range(n + 1)]


def window(m: float, alpha: int, fps: float, duration: float, start: float = 0.0) -> list[float]:
    """The frames ``m - alpha .. m + alpha`` of the grid through ``m`` that lie in the video
    (in ``[start, duration]``: a question's window)."""
    steps = (m if k == 0 else round(m + k / fps, 3) for k in range(-alpha, alpha + 1))
    return [t for t in steps if start <= t <= duration]


def spread(times: list[float], most: int) -> tuple[list[float], str]:
    """At most ``most`` of ``times``, evenly spread, and a note when some were left out."""
    if len(times) <= most:
        return times, ""
    kept = [times[int(i)] for i in np.linspace(0, len(times) - 1, most).round()]
    return kept, f" ({most} of {len(times)} frames, evenly spread)"


def check_box(box: Sequence[float]) -> Box:
    """A box of fractions ``[x0, y0, x1, y1]`` checked; a bad one is a ToolInputError for the model."""
    x0, y0, x1, y1 = (float(v) for v in box)
    if not all(0.0 <= v <= 1.0 for v in (x0, y0, x1, y1)):
        raise ToolInputError(
            f"box {list(box)} must be fractions of the frame in [0, 1]: [x0, y0, x1, y1], "
            "e.g. [0.5, 0.0, 1.0, 0.5] for the top right quarter"
        )
    if x0 >= x1 or y0 >= y1:
        raise ToolInputError(f"box {list(box)} needs x0 < x1 and y0 < y1 ([x0, y0, x1, y1])")
    return (x0, y0, x1, y1)


def zoom(rgb: np.ndarray, box: Box, side: int = ZOOM_SIDE) -> np.ndarray:
    """The ``box`` of an (H, W, 3) frame with its long side scaled to ``side`` px (bicubic up).

    Raises:
        ToolInputError: the box spans under 2 px of this frame either way.
    """
    h, w = rgb.shape[:2]
    x0, y0 = math.floor(box[0] * w), math.floor(box[1] * h)
    x1, y1 = math.ceil(box[2] * w), math.ceil(box[3] * h)
    if x1 - x0 < 2 or y1 - y0 < 2:
        raise ToolInputError(f"box {list(box)} is under 2 pixels wide or high in a {w}x{h} frame")
    crop = rgb[y0:y1, x0:x1]  # (h, w, 3) uint8
    scale = side / max(crop.shape[:2])
    size = (max(1, round(crop.shape[1] * scale)), max(1, round(crop.shape[0] * scale)))
    method = cv2.INTER_CUBIC if scale > 1 else cv2.INTER_AREA
    return cv2.resize(crop, size, interpolation=method)  # (h', w', 3) uint8


@dataclass(frozen=True)
class Region:
    """The part of every frame a tool looks at: the whole frame, or a box zoomed into."""

    box: Box = WHOLE

    def frames(self, v: VideoView, times: Sequence[float], side: int, cost: Cost) -> np.ndarray:
        """Frames at ``times``: whole ones at most ``side`` px, crops scaled to ``side`` px."""
        cost.frames += len(times)
        if self.box == WHOLE:
            return frames_at(v.info, times, size=side)  # (N, H, W, 3) uint8
        # Decode only as large as the crop needs to reach `side` px, never above display size.
        x0, y0, x1, y1 = self.box
        span = x1 - x0 if v.info.width >= v.info.height else y1 - y0
        full = frames_at(v.info, times, size=math.ceil(side / span))  # (N, H, W, 3) uint8
        return np.stack([zoom(rgb, self.box, side) for rgb in full])  # (N, h, w, 3) uint8

    def to_frame(self, b: Box) -> Box:
        """A box in fractions of the region as fractions of the whole frame."""
        x0, y0, x1, y1 = self.box
        w, h = x1 - x0, y1 - y0
        return (x0 + b[0] * w, y0 + b[1] * h, x0 + b[2] * w, y0 + b[3] * h)


def fmt_box(box: Box) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in box) + "]"


# ---------------------------------------------------------------------------------------------
# The procedures


@dataclass(frozen=True)
class Sighting:
    """One object at the frame asked about.

    Attributes:
        label: The detector's class name.
        box: Fractions of the frame.
        confidence: See the module docstring.
        seen_at: Time of the detection it rests on.
        score: The detector's score there.
    """

    label: str
    box: Box
    confidence: float
    seen_at: float
    score: float


Follow = Callable[[float, Box, float], TrackPoint]
"""``follow(from_t, box, to_t)``: the tracker's point at ``to_t`` for ``box`` seen at ``from_t``."""


def best_frames(
    detections: Sequence[Sequence[Detection]],
    targets: Collection[str] | None,
    threshold: float,
    near: int = 0,
) -> dict[str, tuple[int, list[Detection]]]:
    """Per label: the frame index where its best detection scores highest, and its detections
    there at or above ``threshold``, best first. Labels never that high are left out. Of frames
    scoring the same, the one nearest to index ``near`` wins (it needs the least tracking)."""
    best: dict[str, tuple[int, list[Detection]]] = {}
    for i in sorted(range(len(detections)), key=lambda i: (abs(i - near), i)):
        by_label: dict[str, list[Detection]] = {}
        for d in detections[i]:
            if _counts(d, targets, threshold):
                by_label.setdefault(normal_name(d.label), []).append(d)
        for label, ds in by_label.items():
            ds.sort(key=lambda d: -d.score)
            if label not in best or ds[0].score > best[label][1][0].score:
                best[label] = (i, ds)
    return best


def _counts(d: Detection, targets: Collection[str] | None, threshold: float) -> bool:
    wanted = targets is None or any(same_label(d.label, t) for t in targets)
    return wanted and d.score >= threshold


def detect_at(
    at: int,
    times: Sequence[float],
    detections: Sequence[Sequence[Detection]],
    targets: Collection[str] | None,
    follow: Follow,
    threshold: float,
) -> list[Sighting]:
    """Objects at ``times[at]`` from detections over the window ``times`` (appendix A.2).

    Args:
        at: Index of the frame asked about.
        times: Window times in seconds, in order.
        detections: Per time, detections with boxes as fractions of the frame.
        targets: Class names wanted, or None for all.
        follow: The tracker between two times; its confidence is the tracker's alone.
        threshold: Lowest detector score that counts.
    """
    found: list[Sighting] = []
    for label, (i, ds) in best_frames(detections, targets, threshold, near=at).items():
        for d in ds:
            if i == at:
                found.append(Sighting(label, d.box, d.score, times[i], d.score))
                continue
            point = follow(times[i], d.box, times[at])
            if point.box is not None and point.confidence >= LOST:
                confidence = d.score * point.confidence
                found.append(Sighting(label, point.box, confidence, times[i], d.score))
    for d in detections[at]:
        label = normal_name(d.label)
        covered = any(s.label == label and box_iou(s.box, d.box) >= 0.3 for s in found)
        if _counts(d, targets, threshold) and not covered:
            found.append(Sighting(label, d.box, d.score, times[at], d.score))
    return suppress(found)


def suppress(found: Sequence[Sighting], overlap: float = 0.5) -> list[Sighting]:
    """Most confident first; of two sightings of one label overlapping more, the lesser goes."""
    kept: list[Sighting] = []
    for s in sorted(found, key=lambda s: -s.confidence):
        if all(k.label != s.label or box_iou(k.box, s.box) <= overlap for k in kept):
            kept.append(s)
    return kept


def run_tracker(
    tracker: ObjectTracker, frames: np.ndarray, start: int, box: Box, score: float
) -> list[TrackPoint]:
    """Track ``box`` from ``frames[start]``: points in fractions, confidences times ``score``.

    Args:
        tracker: The backend.
        frames: RGB frames in time order.  # (N, H, W, 3) uint8
        start: Index of the frame the box was found in.
        box: Fractions of the frame.
        score: The detector's score for the box.
    """
    h, w = frames.shape[1:3]
    points = tracker.track(frames, start, to_pixels(box, w, h))
    return [
        TrackPoint(to_fraction(p.box, w, h), score * min(max(p.confidence, 0.0), 1.0))
        if p.box is not None
        else TrackPoint(None, 0.0)
        for p in points
    ]


def step_grid(v: VideoView, tracker: ObjectTracker, t0: float, t1: float) -> list[float]:
    """The sampling grid over ``[t0, t1]`` refined to the tracker's rate, at most the video's."""
    steps = max(1, round((tracker.step_fps or v.fps) / v.fps))
    if v.info.fps:
        steps = max(1, min(steps, math.floor(v.info.fps / v.fps)))
    return grid(t0, t1, v.fps * steps)


def nearest(times: Sequence[float], t: float) -> int:
    return min(range(len(times)), key=lambda i: abs(times[i] - t))


@dataclass
class _Follower:
    """:data:`Follow` within one window, on tracking frames decoded on first use."""

    v: VideoView
    tracker: ObjectTracker
    region: Region
    span: tuple[float, float]
    cost: Cost
    _times: list[float] = field(default_factory=list)
    _frames: np.ndarray | None = None

    def __call__(self, from_t: float, box: Box, to_t: float) -> TrackPoint:
        if self._frames is None:
            self._times = step_grid(self.v, self.tracker, *self.span)
            self._frames = self.region.frames(self.v, self._times, TRACK_SIZE, self.cost)
        a, b = nearest(self._times, from_t), nearest(self._times, to_t)
        lo, hi = min(a, b), max(a, b)
        self.cost.calls += 1
        return run_tracker(self.tracker, self._frames[lo : hi + 1], a - lo, box, 1.0)[b - lo]


# ---------------------------------------------------------------------------------------------
# Observations


def _settings(ctx: ToolContext) -> tuple[int, float]:
    options = ctx.options.perception
    return options.detect_alpha, options.detect_threshold


def observe_objects(
    ctx: ToolContext,
    v: VideoView,
    moments: Sequence[float],
    objects: Sequence[str] | None,
    region: Region,
    what: str,
) -> Observation:
    """The detection observation at each of ``moments``, looking only at ``region``."""
    detector, tracker = backends(ctx)
    alpha, threshold = _settings(ctx)
    targets = sorted({resolve_target(o, detector) for o in objects}) if objects else None
    (start, end), cost = ctx.span(v.video_id), Cost()
    windows = {m: window(m, alpha, v.fps, end, start) for m in moments}
    times = sorted({t for w in windows.values() for t in w})
    side = DETECT_SIZE if region.box == WHOLE else ZOOM_SIDE
    frames = region.frames(v, times, side, cost)  # (N, H, W, 3) uint8
    h, w = frames.shape[1:3]
    found = detector.detect(list(frames), targets or ())
    calls, notes = detector_report(detector)
    cost.calls += calls
    by_time = {
        t: [replace(d, box=to_fraction(d.box, w, h)) for d in ds]
        for t, ds in zip(times, found, strict=False)
    }
    rows = [f"{what} (detector {detector.name}, tracker {tracker.name}, window ±{alpha} frames):"]
    rows += [f"Note: {note}." for note in notes]
    confidences: list[float] = []
    for m, times_m in windows.items():
        follow = _Follower(v, tracker, region, (times_m[0], times_m[-1]), cost)
        dets = [by_time[t] for t in times_m]
        seen = detect_at(times_m.index(m), times_m, dets, targets, follow, threshold)
        seen = [replace(s, box=region.to_frame(s.box)) for s in seen]
        rows += [f"{m:.1f}s:", *_sighting_rows(m, seen)]
        confidences += [s.confidence for s in seen]
    rows.append("Boxes are fractions of the frame [x0, y0, x1, y1], as zoom_in takes them.")
    evidence = tuple(Evidence(v.video_id, w[0], w[-1]) for w in windows.values())
    confidence = sum(confidences) / len(confidences) if confidences else 0.0
    return Observation("\n".join(rows), confidence, evidence, cost.frames, cost.calls)


def _sighting_rows(m: float, seen: Sequence[Sighting]) -> list[str]:
    rows = []
    for k, s in enumerate(seen, 1):
        how = (
            f"detected at {m:.1f}s"
            if abs(s.seen_at - m) < 1e-6
            else f"best detection {s.score:.2f} at {s.seen_at:.1f}s, tracked to {m:.1f}s"
        )
        rows.append(f"- {s.label} {k}: box {fmt_box(s.box)}, confidence {s.confidence:.2f} ({how})")
    return rows or ["- nothing found above the detection threshold"]


def observe_track(
    ctx: ToolContext, v: VideoView, object_name: str, t0: float, t1: float
) -> Observation:
    """The tracking observation for ``object_name`` over ``[t0, t1]`` (appendix A.3)."""
    detector, tracker = backends(ctx)
    _, threshold = _settings(ctx)
    target = resolve_target(object_name, detector)
    note, cost = "", Cost()
    if t1 - t0 > MAX_TRACK_SECONDS:
        t1 = t0 + MAX_TRACK_SECONDS
        note = f" (cut to {MAX_TRACK_SECONDS:.0f} s; call again for more)"
    times = grid(t0, t1, v.fps)
    frames = Region().frames(v, times, DETECT_SIZE, cost)  # (N, H, W, 3) uint8
    h, w = frames.shape[1:3]
    found = detector.detect(list(frames), [target])
    calls, notes = detector_report(detector)
    cost.calls += calls
    dets = [[replace(d, box=to_fraction(d.box, w, h)) for d in ds] for ds in found]
    best = best_frames(dets, [target], threshold)
    head = f"Track of {target} from {t0:.1f}s to {t1:.1f}s{v.name}{note}"
    evidence = (Evidence(v.video_id, t0, t1),)
    said = "".join(f" Note: {n}." for n in notes)
    if not best:
        text = f"{head}: {detector.name} found no {target} scoring {threshold} or more.{said}"
        return Observation(text, 0.0, evidence, cost.frames, cost.calls)
    i, ds = max(best.values(), key=lambda b: b[1][0].score)
    fine = step_grid(v, tracker, t0, t1)
    track_frames = Region().frames(v, fine, TRACK_SIZE, cost)  # (M, h, w, 3) uint8
    points = run_tracker(tracker, track_frames, nearest(fine, times[i]), ds[0].box, ds[0].score)
    cost.calls += 1
    rate = (len(fine) - 1) / (t1 - t0) if t1 > t0 else v.fps
    start = f"the detection at {times[i]:.1f}s scoring {ds[0].score:.2f}"
    rows = [f"{head} ({tracker.name} at {rate:.0f} fps, started from {start}):{said}"]
    reported = [points[nearest(fine, t)] for t in times]
    for t, p in zip(times, reported, strict=False):
        place = f"box {fmt_box(p.box)}, confidence {p.confidence:.2f}" if p.box else "lost"
        rows.append(f"- {t:.1f}s: {place}")
    confidence = sum(p.confidence for p in reported) / len(reported)
    return Observation("\n".join(rows), confidence, evidence, cost.frames, cost.calls)
