"""A per-process cache of recently searched videos: their clip vectors and clip rows.

Every LanceDB query pays a few milliseconds of fixed cost (planning, a version check, reading
pages) whatever it returns -- about 3.5 ms on a loaded 2-core machine (benchmarks/scale.py).
A clip search confined to a few videos, the agents' most frequent call and one repeated many
times within a question, is therefore answered from memory after its first: each video's
vectors as an (N, D) matrix of unit rows with their times, and its clip rows, searched exactly
with one matrix product.

Entries belong to one version of the ``clip_vectors``, ``clips`` and ``videos`` tables: any
commit, this process's or another's, changes a version and empties the cache, so an answer is
never stale (a version check is one small file read). The cache is bounded by rows and drops the
least recently used videos first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from vidagent.library.schema import ClipRow


@dataclass(frozen=True)
class HotVideo:
    """One video's clip vectors and rows, in clip order."""

    index: np.ndarray  # (N,) int32 clip indexes
    t0: np.ndarray  # (N,) float64
    t1: np.ndarray  # (N,) float64
    vectors: np.ndarray  # (N, D) float32 unit rows
    #: the video's stored clip rows as read (Arrow), made ClipRows only when they are hits:
    #: making Python rows of all of a video's 720 took longer than the search
    rows: pa.Table
    #: clip index -> its row in ``rows``
    positions: dict[int, int]

    def clips(self, clip_indexes: Sequence[int]) -> list[ClipRow | None]:
        """The stored rows of these clips, in one Arrow take; None where a clip's row is gone
        (a vector without a clip)."""
        positions = [self.positions.get(int(i)) for i in clip_indexes]
        taken = self.rows.take([p for p in positions if p is not None])
        stored: list[dict[str, Any]] = taken.to_pylist()
        made = iter([ClipRow.from_row(r) for r in stored])
        return [None if p is None else next(made) for p in positions]


Loader = Callable[[list[str]], dict[str, HotVideo]]


class HotVideos:
    """Cached :class:`HotVideo` entries for one version key; thread-safe."""

    def __init__(self, max_rows: int = 100_000) -> None:
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._key: tuple[int, ...] | None = None
        self._videos: OrderedDict[str, HotVideo] = OrderedDict()
        self._rows = 0
        self._listed: tuple[int, list[str], frozenset[str]] | None = None

    def clear(self) -> None:
        """Forget every cached video (the next search of each reads it from the tables)."""
        with self._lock:
            self._key, self._rows = None, 0
            self._videos.clear()

    def holds(self, ids: Sequence[str]) -> bool:
        """Whether a search of ``ids`` has nothing to load: each is cached (as of the last
        version key seen) or not listed in the last listing read (never loaded)."""
        with self._lock:
            listed = self._listed[2] if self._listed is not None else None
            return all(v in self._videos or (listed is not None and v not in listed) for v in ids)

    def listed(self, version: int, load: Callable[[], list[str]]) -> list[str]:
        """The listed video ids as of ``version`` of the videos table."""
        with self._lock:
            if self._listed is not None and self._listed[0] == version:
                return self._listed[1]
        ids = load()
        with self._lock:
            self._listed = (version, ids, frozenset(ids))
        return ids

    def videos(self, key: tuple[int, ...], ids: Sequence[str], load: Loader) -> list[HotVideo]:
        """The entries of ``ids`` as of table versions ``key``, loading the missing ones."""
        with self._lock:
            if key != self._key:
                self._key, self._rows = key, 0
                self._videos.clear()
            have = {v: self._videos[v] for v in ids if v in self._videos}
            for v in have:
                self._videos.move_to_end(v)
        loaded = load([v for v in ids if v not in have])
        with self._lock:
            if key == self._key:
                for video_id, entry in loaded.items():
                    if video_id not in self._videos:
                        self._videos[video_id] = entry
                        self._rows += len(entry.index)
                while self._rows > self.max_rows and len(self._videos) > 1:
                    _, dropped = self._videos.popitem(last=False)
                    self._rows -= len(dropped.index)
        entries = {**have, **loaded}
        return [entries[v] for v in ids if v in entries]


def nearest(
    videos: Sequence[HotVideo],
    vector: np.ndarray,
    t_from: float | None,
    t_to: float | None,
    k: int,
) -> list[tuple[ClipRow, float]]:
    """The ``k`` clips of ``videos`` nearest ``vector`` by cosine similarity, best first, among
    clips overlapping ``[t_from, t_to]`` (the same overlap rule as the Lance filter)."""
    query = np.asarray(vector, np.float32).reshape(-1)
    query = query / max(float(np.linalg.norm(query)), 1e-12)  # (D,)
    found: list[tuple[float, int, int]] = []  # (score, video's order, row)
    for order, video in enumerate(videos):
        if t_from is None and t_to is None:  # every row: no copy of the (N, D) matrix
            rows = np.arange(len(video.index))
            sims = video.vectors @ query  # (N,)
        else:
            keep = np.ones(len(video.index), bool)
            if t_from is not None:
                keep &= video.t1 > t_from
            if t_to is not None:
                keep &= video.t0 < t_to
            rows = np.flatnonzero(keep)
            sims = video.vectors[rows] @ query  # (n,)
        best = np.argsort(-sims, kind="stable")[:k]
        found += [(float(sims[b]), order, int(rows[b])) for b in best]
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    chosen = found[:k]
    clips: dict[tuple[int, int], ClipRow | None] = {}
    for order in dict.fromkeys(f[1] for f in chosen):  # one Arrow take per video
        video = videos[order]
        mine = [row for _, o, row in chosen if o == order]
        for row, clip in zip(mine, video.clips([video.index[r] for r in mine]), strict=True):
            clips[order, row] = clip
    # A vector whose clip row is gone is not a hit.
    return [(c, score) for score, o, row in chosen if (c := clips[o, row]) is not None]
