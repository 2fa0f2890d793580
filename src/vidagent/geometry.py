"""Intervals and boxes: the one copy of IoU, IoP, merge and unit-normalise.

Every scorer (``bench/``), the RL reward (``train/rewards.py``), the detectors and trackers
(``tools/``, ``models/``) and the vector stores use these, so two numbers that a reader compares
were computed by the same lines. The module sits at the bottom of the rank table
(``tests/test_layers.py``) and imports nothing of vidagent.

Conventions, each the one the official scorers use:

- An interval is ``(start, end)`` in any unit; a reversed one (``end < start``) has no extent
  and overlaps nothing.
- A box is ``(x0, y0, x1, y1)``, corners in the same units for both boxes.
- A ratio whose denominator is empty is 0, never a division error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Interval = tuple[float, float]


def interval_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Temporal IoU of two ``(start, end)`` intervals: their overlap over the span from the
    earlier start to the later end (their union whenever they overlap); 0 when that is empty or
    negative (disjoint intervals, or a reversed one).

    This is the Charades-STA authors' ``calculate_IoU``, CrossVid's ``FSA.py`` and NExT-GQA's
    ``get_tIoU`` (which NExT-GQA computes with the union ``max(end) - min(start)`` as here).
    """
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def interval_iop(pred: Sequence[float], gold: Sequence[float]) -> float:
    """Intersection over prediction: how much of the predicted interval lies inside the gold
    one (NExT-GQA's IoP); 0 when the prediction has no extent."""
    inter = max(0.0, min(pred[1], gold[1]) - max(pred[0], gold[0]))
    length = pred[1] - pred[0]
    return inter / length if length > 0 else 0.0


def merge_intervals(intervals: Sequence[Sequence[float]]) -> list[Interval]:
    """Sorted intervals with every touching or overlapping pair joined into one."""
    merged: list[Interval] = []
    for s, e in sorted((float(i[0]), float(i[1])) for i in intervals):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def intervals_overlap(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    """Total length covered by both sets of intervals (each set merged first)."""
    g, p = merge_intervals(a), merge_intervals(b)
    inter, i, j = 0.0, 0, 0
    while i < len(g) and j < len(p):
        s, e = max(g[i][0], p[j][0]), min(g[i][1], p[j][1])
        if e > s:
            inter += e - s
        if g[i][1] <= p[j][1]:
            i += 1
        else:
            j += 1
    return inter


def covered_length(intervals: Sequence[Sequence[float]]) -> float:
    """Total length the intervals cover, overlaps counted once (reversed ones count nothing)."""
    return sum(max(0.0, e - s) for s, e in merge_intervals(intervals))


def intervals_iou(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    """IoU of two sets of intervals: the length covered by both over the length covered by
    either (VideoZeroBench's ``tiou_multi``); 0 when neither covers anything."""
    inter = intervals_overlap(a, b)
    union = covered_length(a) + covered_length(b) - inter
    return inter / union if union > 0 else 0.0


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two ``(x0, y0, x1, y1)`` boxes in the same units."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(0.0, w) * max(0.0, h)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def unit_rows(vectors: np.ndarray, dtype: type[np.floating] = np.float32) -> np.ndarray:
    """(N, D) rows scaled to length 1, as ``dtype`` (a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float64)  # (N, D)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)  # (N, 1)
    return np.asarray(vectors / np.where(norms > 0, norms, 1.0), dtype=dtype)
