"""Frames out of a video, in memory, at the size the caller needs.

Two entry points:

* :func:`frames_at` returns the frames nearest to arbitrary timestamps, in the order asked.
* :func:`iter_sampled_frames` walks the video once and yields frames on a uniform grid; it is the
  hot path of indexing.

Both scale inside swscale while converting to RGB (one pass, no full-size RGB copy), apply the
display rotation, and measure time from the first frame (``t = 0``). Nothing touches the disk.

Speed comes from these choices, measured in ``benchmarks/decode.py``:

* ``skip_frame = "NONREF"`` while no target is near: non-reference frames (most B-frames) are
  then not decoded at all, since nothing depends on them and none of them is wanted;
* only frames that are kept are converted, straight to the small size;
* :func:`iter_sampled_frames` decodes several time chunks at once, one thread and one
  single-threaded decoder per chunk. At the small frame sizes we index (360p-480p) this scales
  almost linearly, while the decoder's own frame threading (``thread_type = "AUTO"``, used
  everywhere else) gained at most 1.3x on 2 cores, and nothing once non-reference frames are
  skipped, for its per-frame synchronisation cost.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Literal

import av
import cv2
import numpy as np
from av.video.reformatter import Interpolation, VideoReformatter

from vidagent.exceptions import CorruptMediaError
from vidagent.media.probe import VideoInfo, lead_in_rejected, open_media, probe, time_base

Size = int | tuple[int, int] | None
"""``None``: display size; ``int``: longest side at most this (never upscaled);
``(w, h)``: exactly this display size."""

Strategy = Literal["auto", "sequential", "seek"]
FrameCallback = Callable[[float, np.ndarray], None]

# A frame further than this many frame periods before the next target can never be the nearest
# one, so it may be skipped; 2 leaves room for timestamp jitter.
_SKIP_MARGIN_FRAMES = 2.0
# Parallel chunks: each costs one seek plus decoding from the keyframe before it, so a chunk
# spans at least this many keyframe intervals (and seconds); its decoded frames wait in memory
# until earlier chunks are consumed, so it holds at most about this many bytes when it can.
_CHUNK_MIN_KEYFRAME_INTERVALS = 4.0
_CHUNK_MIN_SECONDS = 20.0
_CHUNK_MAX_BYTES = 32 << 20
# Packets the decoder rejects are skipped (it conceals the damage in later frames); this many
# in one pass means the file is too damaged to use.
_MAX_BAD_PACKETS = 100


def frames_at(
    source: str | Path | VideoInfo,
    timestamps: Sequence[float],
    *,
    size: Size = None,
    strategy: Strategy = "auto",
) -> np.ndarray:
    """Return the frame nearest to each timestamp, in the order requested.

    Timestamps are seconds from the first frame, clamped to ``[0, duration)``; duplicates are
    allowed and cost nothing extra.

    How the frames are reached (``strategy="auto"``): the distinct timestamps are sorted, and
    each gap between neighbours is compared with the keyframe interval estimated by
    :func:`~vidagent.media.probe.probe`. A gap no longer than one keyframe interval is decoded
    straight through, because seeking would land on a keyframe at or before the current position
    and save nothing. A longer gap seeks to the keyframe before the next timestamp, skipping at
    least one whole GOP. Dense requests therefore become one sequential pass and sparse ones one
    seek each. ``"sequential"`` and ``"seek"`` force one behaviour (useful for tests).

    Args:
        source: A video path, or the :class:`VideoInfo` from an earlier probe (saves a probe).
        timestamps: Seconds from the first frame.
        size: Output size (see :data:`Size`).
        strategy: ``"auto"``, ``"sequential"`` or ``"seek"``.

    Returns:
        The frames.  # (N, H, W, 3) uint8 RGB

    Raises:
        MediaError: The subclass :func:`probe` raises for a file that cannot be used.
        ValueError: A timestamp that is not a finite number, or a size under 1.
    """
    info = source if isinstance(source, VideoInfo) else probe(source)
    width, height = output_size(info, size)
    out = np.empty((len(timestamps), height, width, 3), np.uint8)  # (N, H, W, 3) uint8
    if not len(timestamps):
        return out
    last = max(0.0, info.duration - 1e-6)
    if not all(math.isfinite(float(t)) for t in timestamps):  # NaN gave a frame
        raise ValueError(f"timestamps must be finite seconds, got {list(timestamps)[:5]}")
    clamped = [min(max(float(t), 0.0), last) for t in timestamps]
    targets = sorted(set(clamped))
    slot = {t: i for i, t in enumerate(targets)}
    where: list[list[int]] = [[] for _ in targets]  # where[k]: output rows that want targets[k]
    for row, t in enumerate(clamped):
        where[slot[t]].append(row)
    with open_media(info.path) as container:
        reader = _Reader(container, info, (width, height))
        for run, seek in _plan_runs(targets, info.keyframe_interval, strategy):
            for k, frame in reader.nearest(run, seek=seek):
                rgb = reader.to_rgb(frame)  # (H, W, 3) uint8
                for row in where[slot[run[k]]]:
                    out[row] = rgb
    return out


def iter_sampled_frames(
    source: str | Path | VideoInfo,
    fps: float = 1.0,
    size: Size = None,
    *,
    start: float = 0.0,
    end: float | None = None,
    skip_nonref: bool | None = None,
    on_frame: FrameCallback | None = None,
    on_frame_size: Size = 128,
    on_frame_prepare: Callable[[np.ndarray], np.ndarray] | None = None,
    keep: tuple[float, Size] | None = None,
    on_keep: FrameCallback | None = None,
    workers: int | None = None,
    frame_score: Callable[[np.ndarray, np.ndarray], float] | None = None,
    on_score: Callable[[float, float], None] | None = None,
) -> Iterator[tuple[float, np.ndarray]]:
    """Yield frames on a uniform time grid, decoding the video once.

    The grid is ``start, start + 1/fps, ...`` while below ``end`` (default: the duration). Each
    yielded ``t`` is the grid time, not the frame's own timestamp; the frame is the one nearest
    to it (at most half a frame period away on constant-rate video).

    With ``workers > 1`` the grid is cut into time chunks (each at least four keyframe
    intervals and 20 s long, so the extra decoding from the keyframe before each chunk stays
    small) that are decoded concurrently, each by its own single-threaded decoder; results are
    still yielded in order. A short video is one chunk, decoded with codec threading.

    Args:
        source: A video path, or its :class:`VideoInfo`.
        fps: Samples per second.
        size: Size of the yielded frames (see :data:`Size`).
        start: First grid time in seconds.
        end: Stop before this time; ``None`` for the whole video.
        skip_nonref: Leave non-reference frames undecoded between targets. ``None`` (default)
            means on, unless ``on_frame`` is given: a shot detector wants every frame.
        on_frame: Called as ``on_frame(t, small_rgb)`` with every decoded frame from ``start``
            to ``end`` in time order, on the calling thread, at ``on_frame_size``; ``t`` is the
            frame's own time. Pass ``ShotDetector.push`` to find shots in the same pass. Calls
            may run up to one chunk ahead of the yielded samples.
        on_frame_size: Size of the frames given to ``on_frame``.
        on_frame_prepare: Applied to each frame for ``on_frame`` in the thread that decoded it,
            which ``on_frame`` then gets instead: per-frame work that runs beside the decoding
            (with ``workers > 1``, on every worker) rather than on the calling thread.
        keep: ``(fps, size)`` of a coarser grid from 0 whose every time is also one of this
            grid (``fps`` a whole fraction of this one): its frames, the very ones sampled
            here, are also converted at ``size`` and given to ``on_keep(t, frame)`` on the
            calling thread in time order, so that one decode serves a later sampling of that
            grid (ingest keeps OCR's and detection's frames from the structure pass).
        on_keep: See ``keep``.
        frame_score: ``score(previous, frame)`` of two consecutive frames for ``on_frame``
            (after ``on_frame_prepare``), computed where they were decoded; with it, ``on_score``
            is called instead of ``on_frame``, as ``on_score(t, score)`` for every frame in time
            order (0 for the first). A worker then holds no frame for ``on_frame`` but the first
            and the last of its chunk (the first is scored against the previous chunk's last on
            the calling thread), so memory does not grow with a chunk's length: a shot detector
            holding every 320x180 frame of a chunk needed 1.8 GB for 20 minutes of video.
        on_score: See ``frame_score``.
        workers: Concurrent chunks; ``None`` for one per CPU core (at most 8), ``1`` for a
            single pass.

    Yields:
        ``(t, frame)`` pairs.  # frame: (H, W, 3) uint8 RGB

    Raises:
        MediaError: The subclass :func:`probe` raises for a file that cannot be used.
    """
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    if (frame_score is None) != (on_score is None):
        raise ValueError("frame_score and on_score go together")
    info = source if isinstance(source, VideoInfo) else probe(source)
    first = max(start, 0.0)
    stop = info.duration if end is None else min(end, info.duration)
    targets = sample_grid(info, fps, start, end)
    if not targets:
        return
    job = _SampleJob(
        info=info,
        out_size=output_size(info, size),
        skip_nonref=(on_frame is None and on_score is None) if skip_nonref is None else skip_nonref,
        tap_size=(output_size(info, on_frame_size) if on_frame is not None or on_score else None),
        tap_prepare=on_frame_prepare,
        keep=(keep[0], output_size(info, keep[1])) if keep and on_keep else None,
        tap_score=frame_score if on_score is not None else None,
    )
    last: np.ndarray | None = None  # the previous chunk's last tapped frame
    for kind, t, frame in _events(job, targets, first, stop, workers):
        if kind == _SAMPLE:
            yield t, frame
        elif kind == _TAP and on_score is not None and frame_score is not None:
            on_score(t, 0.0 if last is None else frame_score(last, frame))
            last = frame
        elif kind == _TAP and on_frame is not None:
            on_frame(t, frame)
        elif kind == _SCORE and on_score is not None:
            on_score(t, float(frame))
        elif kind == _LAST:
            last = frame
        elif kind == _KEEP and on_keep is not None:
            on_keep(t, frame)


def sample_grid(
    info: VideoInfo, fps: float, start: float = 0, end: float | None = None
) -> list[float]:
    """Times :func:`iter_sampled_frames` samples: ``start, start + 1/fps, ...`` below ``end``."""
    first = max(start, 0.0)
    stop = info.duration if end is None else min(end, info.duration)
    return [first + i / fps for i in range(max(0, math.ceil((stop - first) * fps - 1e-9)))]


def _on_grid(t: float, fps: float) -> bool:
    """Whether ``t`` is a time of the grid ``0, 1/fps, 2/fps, ...``."""
    return abs(t * fps - round(t * fps)) < 1e-6


# The kinds of events: a sample, a tapped frame, a kept frame, a tapped frame's score (the
# frame is a 0-d array then), and a chunk's last tapped frame (where scores are computed).
_SAMPLE, _TAP, _KEEP, _SCORE, _LAST = 0, 1, 2, 3, 4
_Event = tuple[int, float, np.ndarray]  # (kind, t, frame)
_Chunk = tuple[list[float], float, float]  # (targets, tap_from, tap_until)


def _events(
    job: _SampleJob, targets: list[float], first: float, stop: float, workers: int | None
) -> Iterator[_Event]:
    """Run the job over the grid, one chunk or several concurrent ones, events in time order."""
    width, height = job.out_size
    held = width * height * 3  # bytes a chunk holds per target: the sample, and kept frames
    if job.keep is not None:
        keep_fps, (kw, kh) = job.keep
        step = targets[1] - targets[0] if len(targets) > 1 else 1.0
        held += round(kw * kh * 3 * min(1.0, keep_fps * step))
    chunks = _plan_chunks(job.info, targets, first, stop, held, workers)
    if len(chunks) == 1:
        yield from job.run(*chunks[0], thread_type="AUTO")
        return
    n_workers = _worker_count(workers)
    pool = ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="vidagent-decode")
    pending: deque[Future[list[_Event]]] = deque()
    try:
        for chunk in chunks:  # keep every worker busy, with one finished chunk waiting at most
            pending.append(pool.submit(job.collect, *chunk))
            if len(pending) > n_workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        # Also reached when the caller stops iterating early: drop the chunks not yet started.
        pool.shutdown(wait=True, cancel_futures=True)


def _worker_count(workers: int | None) -> int:
    # The default stops at 8: more threads mostly add memory (a chunk in flight each).
    return max(1, workers if workers is not None else min(os.cpu_count() or 1, 8))


def _plan_chunks(
    info: VideoInfo,
    targets: list[float],
    first: float,
    stop: float,
    frame_bytes: int,
    workers: int | None,
) -> list[_Chunk]:
    """Cut the grid into chunks of consecutive targets, with the time window each one taps."""
    n_workers = _worker_count(workers)
    min_len = max(_CHUNK_MIN_KEYFRAME_INTERVALS * info.keyframe_interval, _CHUNK_MIN_SECONDS)
    most = min(len(targets), int((stop - first) // min_len))
    wanted = max(2 * n_workers, math.ceil(len(targets) * frame_bytes / _CHUNK_MAX_BYTES))
    n = min(most, wanted) if n_workers > 1 else 1
    if n <= 1:
        return [(targets, first, stop)]
    bounds = [round(i * len(targets) / n) for i in range(n + 1)]
    parts = [targets[a:b] for a, b in pairwise(bounds)]
    edges = [first] + [part[0] for part in parts[1:]] + [stop]
    return [(part, edges[i], edges[i + 1]) for i, part in enumerate(parts)]


class _SampleJob:
    """Decodes the samples (and tapped frames) of one chunk; safe to run in several threads."""

    def __init__(
        self,
        info: VideoInfo,
        out_size: tuple[int, int],
        skip_nonref: bool,
        tap_size: tuple[int, int] | None,
        tap_every: int = 1,
        tap_prepare: Callable[[np.ndarray], np.ndarray] | None = None,
        keep: tuple[float, tuple[int, int]] | None = None,
        tap_score: Callable[[np.ndarray, np.ndarray], float] | None = None,
    ) -> None:
        self.info = info
        self.out_size = out_size
        self.skip_nonref = skip_nonref
        self.tap_size = tap_size
        self.tap_every = tap_every
        self.tap_prepare = tap_prepare
        self.keep = keep  # (fps, size) of a coarser grid whose frames are converted at size too
        self.tap_score = tap_score  # tapped frames become their score against the one before

    def collect(self, targets: list[float], tap_from: float, tap_until: float) -> list[_Event]:
        # One decoder thread per chunk: the chunks themselves are the parallelism.
        return list(self.run(targets, tap_from, tap_until, thread_type="NONE"))

    def run(
        self, targets: list[float], tap_from: float, tap_until: float, thread_type: str
    ) -> Iterator[_Event]:
        events: deque[_Event] = deque()
        with open_media(self.info.path) as container:
            reader = _Reader(
                container,
                self.info,
                self.out_size,
                skip_nonref=self.skip_nonref,
                thread_type=thread_type,
            )
            previous: list[np.ndarray] = []  # the last tapped frame, where tap_score is set
            if self.tap_size is not None:
                prepare, score = self.tap_prepare, self.tap_score

                def tapped(t: float, small: np.ndarray) -> None:
                    frame = prepare(small) if prepare else small
                    if score is None or not previous:  # a chunk's first: scored by the caller
                        events.append((_TAP, t, frame))
                    else:
                        events.append((_SCORE, t, np.asarray(score(previous[0], frame))))
                    previous[:] = [frame]

                reader.tap(
                    tapped,
                    self.tap_size,
                    tap_from,
                    tap_until,
                    self.tap_every,
                )
            seek = targets[0] > self.info.keyframe_interval
            for k, frame in reader.nearest(targets, seek=seek):
                rgb = reader.to_rgb(frame)
                while events:
                    yield events.popleft()
                if self.keep is not None and _on_grid(targets[k], self.keep[0]):
                    size = self.keep[1]
                    kept = rgb if size == self.out_size else reader.to_rgb(frame, size=size)
                    yield _KEEP, targets[k], kept
                yield _SAMPLE, targets[k], rgb
            while events:
                yield events.popleft()
            if previous:
                yield _LAST, 0.0, previous[0]


def iter_frames(
    source: str | Path | VideoInfo,
    size: Size = None,
    *,
    every: int = 1,
    workers: int | None = None,
) -> Iterator[tuple[float, np.ndarray]]:
    """Yield every ``every``-th decoded frame with its own timestamp, in time order.

    All frames are decoded (the codec needs them as references), but only the yielded ones are
    converted, so a small ``size`` and ``every > 1`` make this cheap. Long videos are decoded
    as concurrent chunks, like :func:`iter_sampled_frames` (``every`` then counts from each
    chunk's first frame).

    Args:
        source: A video path, or its :class:`VideoInfo`.
        size: Size of the yielded frames (see :data:`Size`).
        every: Yield one frame out of this many.
        workers: Concurrent chunks; ``None`` for one per CPU core (at most 8).

    Yields:
        ``(t, frame)`` pairs, ``t`` in seconds from the first frame.  # frame: (H, W, 3) uint8

    Raises:
        MediaError: The subclass :func:`probe` raises for a file that cannot be used.
    """
    info = source if isinstance(source, VideoInfo) else probe(source)
    out_size = output_size(info, size)
    job = _SampleJob(info, out_size, skip_nonref=False, tap_size=out_size, tap_every=every)
    # The tap is the output here; a one-per-second grid only gives the chunks their anchors.
    grid = [float(i) for i in range(max(1, math.ceil(info.duration)))]
    for kind, t, frame in _events(job, grid, 0.0, info.duration, workers):
        if kind == _TAP:
            yield t, frame


def encode_jpeg(rgb: np.ndarray, quality: int = 80) -> bytes:
    """Encode an RGB image as JPEG bytes (OpenCV's libjpeg-turbo: about 1 ms for 320x180).

    Args:
        rgb: The image.  # (H, W, 3) uint8 RGB
        quality: JPEG quality, 0-100.

    Returns:
        The JPEG file contents.
    """
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)  # (H, W, 3) uint8
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ValueError(f"JPEG encoding failed for an array of shape {rgb.shape}")
    return buf.tobytes()


def output_size(info: VideoInfo, size: Size) -> tuple[int, int]:
    """Resolve a :data:`Size` request to ``(width, height)`` in display orientation."""
    if size is None:
        return info.width, info.height
    if isinstance(size, int):
        if size < 1:  # -1 gave a 1x1 picture
            raise ValueError(f"size must be positive, got {size}")
        scale = min(1.0, size / max(info.width, info.height))
        return max(1, round(info.width * scale)), max(1, round(info.height * scale))
    width, height = size
    if width < 1 or height < 1:
        raise ValueError(f"size must be positive, got {size}")
    return int(width), int(height)


def _plan_runs(
    targets: list[float], keyframe_interval: float, strategy: Strategy
) -> list[tuple[list[float], bool]]:
    """Split sorted targets into runs, each decoded forward after at most one seek.

    Returns ``(run, seek)`` pairs; ``seek`` says whether to seek before decoding the run.
    """
    if strategy == "sequential":
        return [(targets, False)]
    if strategy == "seek":
        return [([t], True) for t in targets]
    runs = [([targets[0]], targets[0] > keyframe_interval)]
    for prev, t in pairwise(targets):
        if t - prev > keyframe_interval:
            runs.append(([t], True))
        else:
            runs[-1][0].append(t)
    return runs


class _Overshoot(Exception):
    """A seek landed after the target (imprecise seeking in some demuxers)."""


class _Reader:
    """Decodes one video stream of an open container and hands out frames nearest to targets."""

    def __init__(
        self,
        container: av.container.InputContainer,
        info: VideoInfo,
        out_size: tuple[int, int],
        *,
        skip_nonref: bool = True,
        thread_type: str = "AUTO",
    ) -> None:
        self.container = container
        self.info = info
        self.stream = container.streams.video[0]
        for stream in container.streams.video:
            if stream.index == info.stream_index:
                self.stream = stream
        self.stream.thread_type = thread_type
        self.skip_nonref = skip_nonref
        self.out_size = out_size
        self.reformatter = VideoReformatter()  # keeps one swscale context across frames
        self.tap_fn: FrameCallback | None = None
        self.tap_reformatter = VideoReformatter()
        self.other_reformatters: dict[tuple[int, int], VideoReformatter] = {}
        self.tap_size = out_size
        self.tap_window = (0.0, math.inf)
        self.tap_every = self.tap_count = 1
        self.time_base = float(time_base(self.stream))
        self.frame_period = 1.0 / info.fps if info.fps > 0 else 0.04
        self.position: float | None = None  # time of the last decoded frame, None before any

    def tap(
        self,
        fn: FrameCallback,
        size: tuple[int, int],
        lo: float = 0.0,
        hi: float = math.inf,
        every: int = 1,
    ) -> None:
        """Call ``fn(t, small_rgb)`` for every ``every``-th decoded frame with ``lo <= t < hi``.

        :meth:`nearest` then keeps decoding past its last target until ``hi``.
        """
        self.tap_fn, self.tap_size, self.tap_window = fn, size, (lo, hi)
        self.tap_every, self.tap_count = max(1, every), 0

    def to_rgb(
        self, frame: av.VideoFrame, small: bool = False, size: tuple[int, int] | None = None
    ) -> np.ndarray:
        """Convert one decoded frame: scale and colour-convert in swscale, then rotate. To the
        tap's size when ``small``, to ``size`` when given, else to the output size."""
        if size is not None:
            reformatter = self.other_reformatters.setdefault(size, VideoReformatter())
        else:
            size = self.tap_size if small else self.out_size
            reformatter = self.tap_reformatter if small else self.reformatter
        width, height = size
        rotation = self.info.rotation
        coded = (height, width) if rotation in (90, 270) else (width, height)
        rgb: np.ndarray = reformatter.reformat(
            frame,
            width=coded[0],
            height=coded[1],
            format="rgb24",
            # Area averaging: no aliasing (which would add false shot cuts), and it measured
            # faster than swscale's bilinear for these downscales.
            interpolation=Interpolation.AREA,
        ).to_ndarray()  # (h, w, 3) uint8, coded orientation
        if rotation:
            rgb = np.ascontiguousarray(np.rot90(rgb, k=-rotation // 90))  # k<0 turns clockwise
        return rgb

    def nearest(self, targets: list[float], seek: bool) -> Iterator[tuple[int, av.VideoFrame]]:
        """Yield ``(k, frame)`` with the frame nearest ``targets[k]`` for every k, in order.

        Decodes forward from the current position, or seeks first when ``seek`` is true (and
        always when the targets lie behind the current position).
        """
        if self.position is not None and targets[0] < self.position:
            seek = True
        if not seek:
            yield from self._scan(targets, check_overshoot=False)
            return
        # Back off further when a demuxer seeks imprecisely and lands after the target.
        interval = self.info.keyframe_interval
        for back in (0.0, 2 * interval, 8 * interval, None):
            at = 0.0 if back is None else max(0.0, targets[0] - back)
            self._seek(at)
            try:
                yield from self._scan(targets, check_overshoot=back is not None and at > 0)
                return
            except _Overshoot:
                continue

    def _seek(self, t: float) -> None:
        pts = int((self.info.start_time + t) / self.time_base)
        self.container.seek(pts, stream=self.stream, backward=True)
        self.position = None

    def _scan(
        self, targets: list[float], check_overshoot: bool
    ) -> Iterator[tuple[int, av.VideoFrame]]:
        k, prev_t = 0, 0.0
        prev: av.VideoFrame | None = None

        def next_target() -> float | None:
            return targets[k] if k < len(targets) else None

        for t, frame in self.decode_forward(next_target):
            if check_overshoot and prev is None and t > targets[0] + self.frame_period / 2:
                raise _Overshoot
            if self.tap_fn is not None and self.tap_window[0] <= t < self.tap_window[1]:
                if self.tap_count % self.tap_every == 0:
                    self.tap_fn(t, self.to_rgb(frame, small=True))
                self.tap_count += 1
            while k < len(targets) and t >= targets[k]:
                # The target lies between the previous frame and this one: take the nearer.
                nearer = (
                    prev if prev is not None and targets[k] - prev_t <= t - targets[k] else None
                )
                yield k, frame if nearer is None else nearer
                k += 1
            prev, prev_t = frame, t
            if k == len(targets) and (self.tap_fn is None or t >= self.tap_window[1]):
                return
        if prev is not None:  # past the last frame: the last frame is the nearest
            for j in range(k, len(targets)):
                yield j, prev

    def decode_forward(
        self, next_target: Callable[[], float | None]
    ) -> Iterator[tuple[float, av.VideoFrame]]:
        """Demux and decode in order, leaving non-reference frames undecoded far from targets.

        Yields ``(t, frame)`` with ``t`` in seconds from the first frame.
        """
        ctx = self.stream.codec_context
        margin = _SKIP_MARGIN_FRAMES * self.frame_period
        skipping, bad, lead_in = False, 0, True
        try:
            for packet in self.container.demux(self.stream):
                if self.skip_nonref:
                    target = next_target()
                    pts = packet.pts if packet.pts is not None else packet.dts
                    far = (
                        target is not None
                        and pts is not None
                        and pts * self.time_base - self.info.start_time < target - margin
                    )
                    if far != skipping:
                        ctx.skip_frame = "NONREF" if far else "DEFAULT"
                        skipping = far
                lead_in = lead_in and not packet.is_keyframe
                try:
                    frames = packet.decode()
                except av.error.InvalidDataError:
                    if lead_in_rejected(packet.is_keyframe, lead_in):
                        continue  # a cut before the first keyframe: no damage to count
                    bad += 1
                    if bad > _MAX_BAD_PACKETS:
                        raise
                    continue
                for frame in frames:
                    lead_in = False
                    yield self._frame_time(frame), frame
        except av.error.FFmpegError as exc:
            raise CorruptMediaError(self.info.path, f"decoding failed ({exc.strerror})") from exc
        finally:
            if skipping:
                ctx.skip_frame = "DEFAULT"

    def _frame_time(self, frame: av.VideoFrame) -> float:
        if frame.time is not None:
            t = float(frame.time) - self.info.start_time
        elif self.position is not None:  # no timestamp at all: assume constant rate
            t = self.position + self.frame_period
        else:
            t = 0.0
        self.position = t
        return t
