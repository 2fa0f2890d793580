"""Time spans of a video: fixed-length clips and detected shots.

Shot detection re-implements PySceneDetect's ``AdaptiveDetector`` (and ``ContentDetector``) on
PyAV frames instead of depending on the ``scenedetect`` package, whose OpenCV 5 requirement
breaks our pinned ``opencv-python-headless`` 4.x.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from vidagent.media.decode import iter_frames
from vidagent.media.probe import VideoInfo, probe


@dataclass(frozen=True)
class TimeSpan:
    """A half-open interval ``[t0, t1)`` of video time in seconds.

    Attributes:
        t0: Start, inclusive.
        t1: End, exclusive.
    """

    t0: float
    t1: float

    def __post_init__(self) -> None:
        if self.t1 < self.t0:
            raise ValueError(f"TimeSpan ends before it starts: [{self.t0}, {self.t1})")

    @property
    def duration(self) -> float:
        """Length in seconds."""
        return self.t1 - self.t0

    def overlaps(self, other: TimeSpan) -> bool:
        """Whether the spans share some time (spans that only touch do not overlap)."""
        return self.t0 < other.t1 and other.t0 < self.t1

    def contains(self, item: float | TimeSpan) -> bool:
        """Whether a time lies in ``[t0, t1)``, or another span lies entirely inside this one."""
        if isinstance(item, TimeSpan):
            return self.t0 <= item.t0 and item.t1 <= self.t1
        return self.t0 <= item < self.t1


def uniform_clips(duration: float, clip_seconds: float = 5.0) -> list[TimeSpan]:
    """Cut ``[0, duration]`` into back-to-back clips of ``clip_seconds``.

    The clips cover the whole duration without gaps or overlaps. The last clip is shorter,
    except that a remainder under a fifth of ``clip_seconds`` is merged into the clip before it
    (so the last clip is at most 1.2 × ``clip_seconds``): a one-second tail clip would carry too
    little content to caption or embed on its own.

    Args:
        duration: Video length in seconds.
        clip_seconds: Target clip length.

    Returns:
        The clips in time order; empty when ``duration <= 0``.
    """
    if clip_seconds <= 0:
        raise ValueError(f"clip_seconds must be positive, got {clip_seconds}")
    if duration <= 0:
        return []
    n = int(duration // clip_seconds)
    if duration - n * clip_seconds > 1e-9 * max(1.0, duration):
        n += 1  # a shorter last clip
    if n > 1 and duration - (n - 1) * clip_seconds < clip_seconds / 5:
        n -= 1  # merge a short remainder into the previous clip
    bounds = [i * clip_seconds for i in range(n)] + [duration]
    return [TimeSpan(a, b) for a, b in pairwise(bounds)]


def to_hsv(frame: np.ndarray) -> np.ndarray:
    """The colour space the detector compares frames in.  # (h, w, 3) uint8 RGB -> HSV"""
    return cv2.cvtColor(frame, cv2.COLOR_RGB2HSV)


def content_score(previous: np.ndarray, hsv: np.ndarray) -> float:
    """The content score of ``hsv`` after ``previous`` (both from :func:`to_hsv`): the mean
    absolute difference over the three channels, in one pass (PySceneDetect averages each
    channel's, which equals this to within 1e-14); 0 across a change of size, as for a first
    frame, which has nothing to differ from.  # (h, w, 3) uint8 each"""
    if previous.shape != hsv.shape:
        return 0.0
    return float(cv2.norm(hsv, previous, cv2.NORM_L1)) / hsv.size


class ShotDetector:
    """Streaming shot-cut detector: PySceneDetect's ``AdaptiveDetector`` or ``ContentDetector``.

    For every pushed frame, the *content score* is the mean absolute difference from the
    previous pushed frame, averaged over the H, S and V channels (PySceneDetect's
    ``ContentDetector`` with its default weights 1, 1, 1, 0 for hue, saturation, luma, edges).

    ``method="adaptive"`` (default, ``AdaptiveDetector``): a frame's *adaptive ratio* is its
    score divided by the mean score of ``window`` frames on each side; the frame starts a new
    shot when the ratio is at least ``threshold`` (3.0), its score at least ``min_score`` (15.0)
    and the current shot at least ``min_shot_seconds`` long. These are PySceneDetect's defaults
    (``adaptive_threshold=3.0``, ``min_content_val=15.0``, ``window_width=2``,
    ``min_scene_len=15`` frames, 0.5 s at 30 fps). It ignores fast camera motion but also misses
    transitions that spread over several frames (wipes, dissolves, animated cuts).

    ``method="content"`` (``ContentDetector``): a cut wherever the score reaches ``threshold``
    (27.0), with PySceneDetect's merge filter: bursts of high-score frames closer together than
    ``min_shot_seconds`` become one cut at the burst's last frame. It catches multi-frame
    transitions, at the price of false cuts on fast motion.

    Checked against PySceneDetect 0.7.2 on ``wannaworktogether.mp4``: the same 3 adaptive cuts
    (also at 128 px wide), and the same 14 content cuts at full width, all but one within a frame
    (colour conversion differs slightly). The adaptive ratio hardly depends on resolution, so feed
    it small frames (96-160 px); the content threshold is absolute and was tuned at
    PySceneDetect's working width (256-511 px): smaller frames give fewer content cuts.

    The minimum shot length is in seconds, so frames may come at any spacing (every frame, every
    other one, only reference frames); the window then covers correspondingly more time.
    """

    def __init__(
        self,
        method: Literal["adaptive", "content"] = "adaptive",
        *,
        threshold: float | None = None,
        min_score: float = 15.0,
        window: int = 2,
        min_shot_seconds: float = 0.5,
    ) -> None:
        """Set the rule; ``threshold=None`` takes the method's default (3.0 or 27.0), and
        ``min_score`` and ``window`` only apply to ``"adaptive"``."""
        if window < 1:
            raise ValueError("window must be at least 1")
        if method not in ("adaptive", "content"):
            raise ValueError(f"method must be 'adaptive' or 'content', got {method!r}")
        self.method = method
        self.threshold = threshold if threshold is not None else _DEFAULT_THRESHOLD[method]
        self.min_score = min_score
        self.window = window
        # The epsilon keeps a shot of exactly the minimum length from failing on float rounding.
        self.min_shot_seconds = min_shot_seconds - 1e-6
        self.cuts: list[float] = []
        self._previous: np.ndarray | None = None  # (h, w, 3) uint8 HSV
        self._buffer: list[tuple[float, float]] = []  # (t, score), newest last
        self._last_cut: float | None = None  # adaptive: time of the last cut (or first frame)
        self._last_above: float | None = None  # content: last frame at or above the threshold
        self._merge_start: float | None = None  # content: start of a burst being merged
        self._merge_enabled = False

    def push(self, t: float, frame: np.ndarray) -> None:
        """Add the next frame (in time order).

        Args:
            t: Frame time in seconds.
            frame: The frame, small.  # (h, w, 3) uint8 RGB
        """
        self.push_hsv(t, to_hsv(frame))

    def push_hsv(self, t: float, hsv: np.ndarray) -> None:
        """:meth:`push` for a frame already in :func:`to_hsv` (which a decoder's worker threads
        can run: ``on_frame_prepare=to_hsv``).  # hsv: (h, w, 3) uint8"""
        score = 0.0 if self._previous is None else content_score(self._previous, hsv)
        self._previous = hsv
        self.push_score(t, score)

    def push_score(self, t: float, score: float) -> None:
        """:meth:`push` for a frame whose :func:`content_score` against the frame pushed before
        it is already known (a decoder's workers compute it, so that no frame waits in memory:
        ``on_score=detector.push_score``); the first frame's is 0."""
        if self.method == "adaptive":
            self._adaptive(t, score)
        else:
            self._content(t, score)

    def finish(self, duration: float) -> list[TimeSpan]:
        """Return the shots: spans between consecutive cuts, covering ``[0, duration]``."""
        cuts = [c for c in self.cuts if 0.0 < c < duration]
        bounds = [0.0, *cuts, duration]
        return [TimeSpan(a, b) for a, b in pairwise(bounds) if b > a]

    def _adaptive(self, t: float, score: float) -> None:
        if self._last_cut is None:
            self._last_cut = t
        self._buffer.append((t, score))
        size = 2 * self.window + 1
        if len(self._buffer) < size:
            return
        del self._buffer[:-size]
        target_t, target_score = self._buffer[self.window]
        neighbours = [s for i, (_, s) in enumerate(self._buffer) if i != self.window]
        average = sum(neighbours) / len(neighbours)
        if abs(average) < 1e-5:
            ratio = 255.0 if target_score >= self.min_score else 0.0
        else:
            ratio = min(target_score / average, 255.0)
        # PySceneDetect measures the length to the newest frame (t), not to the candidate.
        long_enough = t - self._last_cut >= self.min_shot_seconds
        if ratio >= self.threshold and target_score >= self.min_score and long_enough:
            self.cuts.append(target_t)
            self._last_cut = target_t

    def _content(self, t: float, score: float) -> None:
        # PySceneDetect's FlashFilter in MERGE mode.
        if self._last_above is None:
            self._last_above = t
        above = score >= self.threshold
        long_enough = t - self._last_above >= self.min_shot_seconds
        if above:
            self._last_above = t
        if self._merge_start is not None:
            burst_over = self._last_above - self._merge_start >= self.min_shot_seconds
            if long_enough and not above and burst_over:
                self.cuts.append(self._last_above)
                self._merge_start = None
        elif above and long_enough:
            self._merge_enabled = True  # merging only starts once a first cut exists
            self.cuts.append(t)
        elif above and self._merge_enabled:
            self._merge_start = t


_DEFAULT_THRESHOLD = {"adaptive": 3.0, "content": 27.0}


def detect_shots(
    source: str | Path | VideoInfo | Iterable[tuple[float, np.ndarray]],
    *,
    method: Literal["adaptive", "content"] = "adaptive",
    duration: float | None = None,
    threshold: float | None = None,
    min_score: float = 15.0,
    window: int = 2,
    min_shot_frames: int = 15,
    width: int | None = None,
    frame_skip: int = 0,
) -> list[TimeSpan]:
    """Split a video into shots with :class:`ShotDetector` (PySceneDetect's defaults).

    Args:
        source: A video path or :class:`VideoInfo` (decoded sequentially at ``width`` pixels),
            or an iterable of ``(t, small_frame)`` pairs already decoded by the caller.
        duration: Video length; required when ``source`` is an iterable of frames.
        method: ``"adaptive"`` (PySceneDetect ``AdaptiveDetector``) or ``"content"``
            (``ContentDetector``); see :class:`ShotDetector`.
        threshold: Adaptive ratio (default 3.0) or content score (default 27.0) for a cut.
        min_score: Content score a cut needs (PySceneDetect ``min_content_val``).
        window: Frames on each side averaged for the ratio (PySceneDetect ``window_width``).
        min_shot_frames: Shortest shot in frames of the source (PySceneDetect ``min_scene_len``);
            converted to seconds with the video's frame rate, or 30 fps for an iterable.
        width: Width the frames are scaled to for scoring (height keeps the aspect ratio).
            ``None``: 128 px for ``"adaptive"``, whose ratio barely depends on resolution; for
            ``"content"``, whose absolute threshold does, PySceneDetect's own working width
            (the source divided by ``width // 256``, i.e. 256-511 px).
        frame_skip: Score one frame out of ``frame_skip + 1`` (faster; cuts may then be
            reported up to ``frame_skip`` frames late).

    Returns:
        Shots in time order, covering ``[0, duration]`` without gaps.
    """
    if isinstance(source, (str, Path, VideoInfo)):
        info = source if isinstance(source, VideoInfo) else probe(source)
        frames: Iterable[tuple[float, np.ndarray]] = iter_frames(
            info, _scaled(info, width, method), every=frame_skip + 1
        )
        fps, duration = info.fps, info.duration
    else:
        if duration is None:
            raise ValueError("detect_shots needs duration= when given an iterable of frames")
        frames, fps = source, 30.0
    detector = ShotDetector(
        method,
        threshold=threshold,
        min_score=min_score,
        window=window,
        min_shot_seconds=min_shot_frames / fps,
    )
    for t, frame in frames:
        detector.push(t, frame)
    return detector.finish(duration)


def _scaled(info: VideoInfo, width: int | None, method: str) -> tuple[int, int]:
    if width is None:
        width = 128 if method == "adaptive" else info.width // max(1, info.width // 256)
    width = min(width, info.width)
    return width, max(1, round(info.height * width / info.width))
