"""Event boundaries from similarity curves: the algorithm of AVI's ``boundary_detect`` tool.

The AVI paper gives the tool's input and output only, ``(t_range, q_event) -> [t_start, t_end]``
by "frame-level similarity scores using a CLIP model" (SigLIP 2 in its citation), so the
algorithm is the spec's (B.5.2):

1. score frames of ``t_range`` against the event text: :func:`image_curve`, each frame's cosine
   with the text in the ``image_embed`` role's space;
2. smooth the curve with a 3-frame moving average (:func:`smooth`; 1.5 s at 2 fps);
3. threshold it at ``θ = min + 0.6·(max − min)`` and return the contiguous run above ``θ``
   that holds the maximum, with the peak's time and score (:func:`boundary_from_curve`).

Frames are the 2 fps frames of the range up to 240 of them (2 minutes; B.11 #23). A longer range
is searched in two passes (:func:`locate`): 240 frames spread evenly over it, then 2 fps frames
around the coarse run (:func:`refine_range`).

Without an image-text model, :func:`caption_curve` is the fallback: each clip's caption vector
(the ``embed`` role, as ``clip_search`` ranks clips) scored against the event text, one point per
clip at its midpoint. Its resolution is the clip length (5 s by default), so a boundary found on
it is coarse, and the tool says so.

These are plain functions: the tool that wraps them owns the argument checks, the budget and the
observation's words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vidagent.geometry import unit_rows
from vidagent.library.search import require_embedding
from vidagent.models.vision import short_side_size
from vidagent.tools.index import search_text

if TYPE_CHECKING:
    from vidagent.library import Library
    from vidagent.models.client import Models

#: frames per second of the fine pass (the database's frame rate, AVI B.2)
FPS = 2.0
#: most frames scored in one pass: 2 minutes at 2 fps (spec B.5.2, B.11 #23)
CAP = 240
#: frames are decoded at this short side for the image tower (SigLIP 2 so400m's input is 384)
SHORT_SIDE = 384


@dataclass(frozen=True)
class Boundary:
    """An event's span on a similarity curve.

    Attributes:
        t_start: time of the run's first frame, in seconds.
        t_end: time of the run's last frame plus half a frame step, so one frame has a width.
        peak_t: time of the highest raw score inside the run.
        peak_score: that score (a cosine, before smoothing).
        threshold: ``θ`` the smoothed curve was cut at.
    """

    t_start: float
    t_end: float
    peak_t: float
    peak_score: float
    threshold: float


def smooth(curve: np.ndarray, window: int = 3) -> np.ndarray:
    """Centred moving average of ``window`` points, the same length as ``curve``; at the edges it
    averages the points there are (no zero padding pulling the ends down)."""
    values = np.asarray(curve, dtype=np.float64)  # (N,)
    if window <= 1 or values.size == 0:
        return np.array(values)
    kernel = np.ones(window)
    sums = np.convolve(values, kernel, mode="same")  # (N,)
    counts = np.convolve(np.ones_like(values), kernel, mode="same")  # (N,)
    return sums / counts


def boundary_from_curve(
    times: Sequence[float] | np.ndarray,
    sims: Sequence[float] | np.ndarray,
    *,
    window: int = 3,
    fraction: float = 0.6,
    threshold: float | None = None,
) -> Boundary:
    """The run of the smoothed curve above ``min + fraction·(max − min)`` holding its maximum.

    A flat curve (max == min) has no event in it: the whole range comes back. ``threshold``
    replaces that θ with a given one (:func:`locate`'s fine pass uses the coarse pass's, which
    saw the whole range) unless the smoothed curve never reaches it.

    Raises:
        ValueError: no points, or ``times`` and ``sims`` of different lengths (a caller's bug).
    """
    t = np.asarray(times, dtype=np.float64)  # (N,)
    raw = np.asarray(sims, dtype=np.float64)  # (N,)
    if t.size == 0 or t.shape != raw.shape:
        raise ValueError(f"a curve needs as many times as scores, got {t.size} and {raw.size}")
    curve = smooth(raw, window)  # (N,)
    step = float(np.median(np.diff(t))) if t.size > 1 else 0.0
    low, high = float(curve.min()), float(curve.max())
    if threshold is None or threshold > high:
        threshold = low + fraction * (high - low)
    if math.isclose(high, low, rel_tol=1e-9, abs_tol=1e-12):
        first, last = 0, t.size - 1
    else:
        top = int(np.argmax(curve))
        above = curve >= threshold
        first, last = top, top
        while first > 0 and above[first - 1]:
            first -= 1
        while last < t.size - 1 and above[last + 1]:
            last += 1
    peak = first + int(np.argmax(raw[first : last + 1]))
    return Boundary(
        t_start=float(t[first]),
        t_end=float(t[last]) + step / 2,
        peak_t=float(t[peak]),
        peak_score=float(raw[peak]),
        threshold=threshold,
    )


def frame_times(t0: float, t1: float, fps: float = FPS, cap: int = CAP) -> list[float]:
    """Times to score in ``[t0, t1)``: every frame at ``fps`` from ``t0``, or, when there would
    be more than ``cap``, ``cap`` times spread evenly (the coarse pass of :func:`locate`)."""
    n = max(1, math.ceil((t1 - t0) * fps - 1e-6))
    if n <= cap:
        return [round(t0 + k / fps, 3) for k in range(n)]
    step = (t1 - t0) / cap
    return [round(t0 + k * step, 3) for k in range(cap)]


def refine_range(
    coarse: Boundary, t0: float, t1: float, step: float, fps: float = FPS, cap: int = CAP
) -> tuple[float, float]:
    """Where to score again at ``fps`` after a coarse pass of ``step`` seconds: the coarse run
    widened by one coarse step each side (its true edges lie within it), inside ``[t0, t1]``,
    and at most ``cap`` frames long, centred on the coarse peak when the run is longer."""
    lo, hi = max(t0, coarse.t_start - step), min(t1, coarse.t_end + step)
    width = cap / fps
    if hi - lo > width:
        lo = min(max(t0, coarse.peak_t - width / 2), t1 - width)
        hi = lo + width
    return lo, hi


def locate(
    score: Callable[[list[float]], np.ndarray],
    t0: float,
    t1: float,
    *,
    fps: float = FPS,
    cap: int = CAP,
    window: int = 3,
    fraction: float = 0.6,
) -> tuple[Boundary, int]:
    """The event's boundary in ``[t0, t1)``, scoring frames with ``score(times) -> (N,) sims``.

    A range of at most ``cap`` frames at ``fps`` is scored once. A longer one is scored at
    ``cap`` evenly spread times, then again at ``fps`` over :func:`refine_range` of the coarse
    run, cut at the coarse pass's θ (the fine window alone would set θ from its own minimum,
    which for a long event lies inside it). An edge of the fine run that touches the fine
    window's edge where the window was cut to ``cap`` frames is the coarse run's edge (the fine
    pass could not see past it): such an edge is only as sharp as the coarse step.

    Returns:
        The boundary and how many frames were scored in all.
    """
    times = frame_times(t0, t1, fps, cap)
    coarse = boundary_from_curve(times, score(times), window=window, fraction=fraction)
    if math.ceil((t1 - t0) * fps - 1e-6) <= cap:  # every frame at fps was scored
        return coarse, len(times)
    step = (t1 - t0) / cap
    lo, hi = refine_range(coarse, t0, t1, step, fps, cap)
    fine_times = frame_times(lo, hi, fps, cap)
    fine = boundary_from_curve(
        fine_times, score(fine_times), window=window, fraction=fraction, threshold=coarse.threshold
    )
    start, end = fine.t_start, fine.t_end
    if start <= fine_times[0] and lo > coarse.t_start - step:
        start = min(start, coarse.t_start)
    if end >= fine_times[-1] and hi < coarse.t_end + step:
        end = max(end, coarse.t_end)
    fine = Boundary(start, end, fine.peak_t, fine.peak_score, fine.threshold)
    return fine, len(times) + len(fine_times)


def image_curve(
    models: Models,
    source_path: str | Path,
    width: int,
    height: int,
    times: Sequence[float],
    text: str,
) -> np.ndarray:
    """Cosine of each frame at ``times`` with ``text``, both in the ``image_embed`` role's space.

    Frames are decoded from the source at :data:`SHORT_SIDE` pixels on their short side (the
    image tower resizes anyway; 720p would only cost decoding).

    Returns:
        One score per time.  # (N,) float64
    """
    from vidagent.media import frames_at

    if not times:
        return np.zeros(0)
    client = models.client("image_embed")
    size = short_side_size(width, height, SHORT_SIDE)
    frames = frames_at(source_path, list(times), size=size)  # (N, H, W, 3) uint8
    # Adapters normalise already; a fake or a plugin may not.
    images = unit_rows(client.embed_images(list(frames)), np.float64)  # (N, D)
    query = unit_rows(client.embed([text]).vectors, np.float64)[0]  # (D,)
    return np.asarray((images @ query).astype(np.float64))  # (N,)


def caption_curve(
    library: Library,
    models: Models,
    video_id: str,
    t0: float,
    t1: float,
    text: str,
) -> tuple[list[float], np.ndarray]:
    """Cosine of each clip overlapping ``[t0, t1]`` with ``text`` through its caption vector
    (the ``embed`` role, the vectors ``clip_search`` ranks), one point at each clip's midpoint.

    Coarse: one point per clip (5 s by default). Feed it to :func:`boundary_from_curve` with
    ``window=1`` (a 3-clip average would blur 15 s); the run's edges are then clip midpoints, and
    its end is widened by half a clip.

    Returns:
        The midpoints and their scores, in time order (empty when no clip is embedded there).

    Raises:
        LibraryError: the Library has no clip vectors yet.
        EmbeddingMismatchError: they were made by another embedding model.
    """
    client = models.client("embed")
    require_embedding(library, client.spec)
    clips = [c for c in library.clips(video_id) if c.t1 > t0 and c.t0 < t1]
    if not clips:
        return [], np.zeros(0)
    inside = {c.clip_index for c in clips}
    # k past the clips inside: the search's range also holds clips that only touch its ends
    hits = search_text(library, client, text, [video_id], t_from=t0, t_to=t1, k=len(clips) + 2)
    scored = sorted(
        ((h.clip.t0 + h.clip.t1) / 2, float(h.score)) for h in hits if h.clip.clip_index in inside
    )
    return [round(t, 3) for t, _ in scored], np.array([s for _, s in scored], dtype=np.float64)
