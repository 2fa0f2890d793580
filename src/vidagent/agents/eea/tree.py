"""EEA's search state and the pure parts of its algorithm (spec ``videoagent2-eea.md`` B.3-B.4).

Everything here is arithmetic on spans, scores and anchors, with no model and no video, so each
rule is tested on its own: the minimax coverage sampler of Semantic-Guided Expansion
(:func:`coverage_sample`), the query score and the normalised entropy of Uncertainty-Aware
Reward Fusion (:func:`query_score`, :func:`entropy`, :func:`fuse`), temporal clustering of
retrieved clips into semantic anchors (:func:`cluster_anchors`), and the memory buffer with
lowest-reward eviction (:func:`update_memory`).

Time is a 1-fps frame grid (spec B.11 #8 [S]): a frame index is a whole second of its video, as
the paper's prompts assume ("a 180-frame video (180 seconds)"). A node spans ``[start, end]`` of
one video, both ends frame indices; its boundary frames count as observed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Node:
    """A tree node: a segment ``[start, end]`` (frame indices) of one video.

    Attributes:
        id: global id, the segment's label in every prompt (spec B.11 #12).
        r: intrinsic reward, 0-100; u: query score; h: fused reward (set by :func:`fuse`).
        explanation: the reward model's reasoning trace for this segment.
    """

    id: int
    video_id: str
    start: int
    end: int
    parent: int | None = None
    depth: int = 0
    round: int = 0
    r: float = 0.0
    u: float = 0.0
    h: float = 0.0
    explanation: str = ""
    expanded: bool = False
    children: list[int] = field(default_factory=list)

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.end)

    def interior(self, observed: AbstractSet[tuple[str, int]] = frozenset()) -> int:
        """Frames strictly inside the span not yet observed."""
        inside = range(self.start + 1, self.end)
        return sum((self.video_id, t) not in observed for t in inside)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "video_id": self.video_id,
            "span": [self.start, self.end],
            "parent": self.parent,
            "depth": self.depth,
            "round": self.round,
            "r": round(self.r, 2),
            "u": round(self.u, 4),
            "h": round(self.h, 4),
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class RetrievedClip:
    """An element of D: a clip a query retrieved, its best frame ``t`` and similarity ``phi``."""

    query: str
    video_id: str
    start: float
    end: float
    t: int
    phi: float


@dataclass(frozen=True)
class Anchor:
    """A semantic anchor: the best frame of one temporal cluster of retrieved clips.

    ``phi_n`` is ``phi`` min-max normalised over every clip of D (spec B.11 #4), so the query
    score and the reward ``r / 100`` share [0, 1].
    """

    video_id: str
    t: int
    phi: float
    phi_n: float
    span: tuple[float, float]
    queries: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "video_id": self.video_id,
            "t": self.t,
            "phi": round(self.phi, 4),
            "phi_n": round(self.phi_n, 4),
            "span": list(self.span),
            "queries": list(self.queries),
        }


@dataclass
class MemoryFrame:
    """A frame in the memory buffer, scored by the larger reward of the two children it
    separates (spec B.11 #11)."""

    video_id: str
    t: int
    score: float
    round: int


# ---------------------------------------------------------------------------------------------
# Semantic-Guided Expansion


def coverage_sample(
    gaps: Sequence[tuple[str, int, int]],
    anchors: Sequence[tuple[str, int]],
    budget: int,
    observed: AbstractSet[tuple[str, int]] = frozenset(),
) -> tuple[list[tuple[str, int]], list[tuple[str, int, int]]]:
    """Frames that minimise the longest unobserved interval, with ``anchors`` kept fixed.

    Args:
        gaps: the spans to cover, ``(video_id, start, end)``; one for a node's expansion, one
            per video for a forest's first round. Ends count as observed points.
        anchors: frames that must be taken (SGE's top-B_s anchors), ``(video_id, t)``; those
            outside every span, on a boundary or already observed are ignored.
        budget: B, frames to take in all (anchors included).
        observed: frames seen before: never taken again.

    Returns:
        The frames taken, sorted, and the child spans they cut the gaps into (a gap that got no
        frame is one child). Greedy on ``length / (k + 1)`` is exact for this 1-D minimax
        problem once the fixed points are given (spec B.3.3); a span with fewer interior frames
        than asked gives all it has (B.11 #8).
    """
    fixed: dict[int, list[int]] = {i: [] for i in range(len(gaps))}
    taken = 0
    for vid, t in anchors:
        for i, (gvid, a, b) in enumerate(gaps):
            ok = gvid == vid and a < t < b and (vid, t) not in observed and t not in fixed[i]
            if ok and taken < budget:
                fixed[i].append(t)
                taken += 1
                break
    pieces = []  # (gap index, a, b): the intervals between fixed points
    for i, (_, a, b) in enumerate(gaps):
        points = [a, *sorted(fixed[i]), b]
        pieces += [(i, points[j], points[j + 1]) for j in range(len(points) - 1)]
    free = {i: _free(gaps[i][0], gaps[i][1], gaps[i][2], fixed[i], observed) for i in fixed}
    room = [sum(a < t < b for t in free[i]) for i, a, b in pieces]  # free frames per piece
    k = [0] * len(pieces)
    for _ in range(min(budget - taken, sum(room))):
        open_ = [j for j in range(len(pieces)) if k[j] < room[j]]
        best = max(open_, key=lambda j: ((pieces[j][2] - pieces[j][1]) / (k[j] + 1), -j))
        k[best] += 1
    chosen: dict[int, set[int]] = {i: set(fixed[i]) for i in fixed}
    for (i, a, b), kj in zip(pieces, k, strict=True):
        inside = [t for t in free[i] if a < t < b]
        for m in range(1, kj + 1):
            snapped = _snap(a + (b - a) * m / (kj + 1), inside, chosen[i])
            if snapped is not None:
                chosen[i].add(snapped)
    frames: list[tuple[str, int]] = []
    spans: list[tuple[str, int, int]] = []
    for i, (vid, a, b) in enumerate(gaps):
        ts = sorted(chosen[i])
        frames += [(vid, t) for t in ts]
        bounds = [a, *ts, b]
        spans += [(vid, bounds[j], bounds[j + 1]) for j in range(len(bounds) - 1)]
    return frames, spans


def _free(
    vid: str, a: int, b: int, fixed: list[int], observed: AbstractSet[tuple[str, int]]
) -> list[int]:
    return [t for t in range(a + 1, b) if (vid, t) not in observed and t not in fixed]


def _snap(x: float, free: list[int], chosen: set[int]) -> int | None:
    """The free frame nearest ``x`` not chosen yet (frames are whole seconds)."""
    left = [t for t in free if t not in chosen]
    return min(left, key=lambda t: (abs(t - x), t)) if left else None


def select_anchors(
    node: Node, anchors: Iterable[Anchor], k: int, observed: AbstractSet[tuple[str, int]]
) -> list[Anchor]:
    """SGE step 1: the top-``k`` anchors by similarity strictly inside ``node``, skipping those
    already observed (spec B.11 #7)."""
    inside = [
        a
        for a in anchors
        if a.video_id == node.video_id
        and node.start < a.t < node.end
        and (a.video_id, a.t) not in observed
    ]
    return sorted(inside, key=lambda a: (-a.phi, a.t))[: max(0, k)]


# ---------------------------------------------------------------------------------------------
# Dynamic Query Management


def dedup_clips(clips: Iterable[RetrievedClip]) -> list[RetrievedClip]:
    """D without duplicates: a clip retrieved by several queries is kept once, with its best
    similarity (spec B.11 #2)."""
    best: dict[tuple[str, float, float], RetrievedClip] = {}
    for c in clips:
        key = (c.video_id, c.start, c.end)
        if key not in best or c.phi > best[key].phi:
            best[key] = c
    return sorted(best.values(), key=lambda c: (c.video_id, c.start, c.end))


def cluster_anchors(clips: Sequence[RetrievedClip], gap: float = 1.0) -> list[Anchor]:
    """Semantic anchors: clips merged by temporal overlap (touching within ``gap`` seconds),
    each cluster's best-scoring clip's frame kept (of equal scores, the one nearest the
    cluster's middle: several clips naming one event should anchor inside it, not at its
    edge), ``phi_n`` normalised over all of D."""
    if not clips:
        return []
    lo, hi = min(c.phi for c in clips), max(c.phi for c in clips)
    anchors: list[Anchor] = []
    for vid in sorted({c.video_id for c in clips}):
        members = sorted((c for c in clips if c.video_id == vid), key=lambda c: (c.start, c.end))
        group: list[RetrievedClip] = []
        reach = -math.inf
        for c in [*members, None]:
            if c is None or (group and c.start > reach + gap):
                span = (min(m.start for m in group), max(m.end for m in group))
                middle = (span[0] + span[1]) / 2  # ties: the clip nearest the cluster's middle
                best = max(group, key=lambda m: (m.phi, -abs(m.t - middle), -m.t))
                queries = tuple(dict.fromkeys(m.query for m in group))
                phi_n = (best.phi - lo) / (hi - lo) if hi > lo else 1.0
                anchors.append(Anchor(vid, best.t, best.phi, phi_n, span, queries))
                group, reach = [], -math.inf
            if c is not None:
                group.append(c)
                reach = max(reach, c.end)
    return anchors


def normalise_queries(new: Iterable[str], known: Iterable[str] = (), limit: int = 5) -> list[str]:
    """Queries lower-cased and stripped, without duplicates of each other or of ``known``
    (case-insensitive), at most ``limit`` (spec B.7.6)."""
    seen = {" ".join(q.lower().split()) for q in known}
    out: list[str] = []
    for q in new:
        q = " ".join(str(q).lower().split()).strip(" .\"'")
        if q and q not in seen:
            seen.add(q)
            out.append(q)
    return out[:limit]


# ---------------------------------------------------------------------------------------------
# Uncertainty-Aware Reward Fusion


def query_score(phis: Sequence[float], tau: float = 0.1) -> float:
    """u(s) = tau * log(mean(exp(phi / tau))): a soft maximum of the anchors' similarities,
    between their mean and their maximum; 0 when the segment holds no anchor (spec B.11 #5)."""
    if not phis:
        return 0.0
    m = max(p / tau for p in phis)
    return tau * (m + math.log(sum(math.exp(p / tau - m) for p in phis) / len(phis)))


ENTROPY_TEMPERATURE = 10.0  # reward points: a gap-fill (the paper gives the entropy none)


def entropy(rewards: Sequence[float], temperature: float = ENTROPY_TEMPERATURE) -> float:
    """H: the entropy of softmax(r / temperature) over the candidates, divided by log N so it
    lies in [0, 1]; 0 for a single candidate (spec B.11 #6).

    The paper gives the entropy's softmax no temperature (spec B.11 #3): the default 10 (reward
    points) is vidagent's gap-fill, not the paper's tau_c, which scales unit-scale similarities
    elsewhere; 10 equals r / 100 at 0.1, the scale of that temperature. Under it a clear winner (a 50-point margin or
    more) gives H near 0 and ties give H near 1, Fig. 4's two modes, while a 5-point margin stays
    uncertain (rewards 80, 75, 20, 10, 10, 10, 10: H = 0.36), so an unreliable reward model hands
    the ranking to the query score as Fig. 5 shows. At temperature 1 on the raw scores (the
    spec's suggestion, ``entropy_temperature=1``) any 5-point margin gives H near 0 (0.02 for
    the same scores) and UARF is h = r almost always.
    """
    n = len(rewards)
    if n <= 1:
        return 0.0
    z = [r / temperature for r in rewards]
    m = max(z)
    e = [math.exp(v - m) for v in z]
    total = sum(e)
    p = [v / total for v in e]
    h = -sum(pi * math.log(pi) for pi in p if pi > 0) / math.log(n)
    return min(1.0, max(0.0, h))


def anchor_phis(node: Node, anchors: Iterable[Anchor], raw: bool = False) -> list[float]:
    """The similarities of the anchors inside ``node``: H(s) of the paper. Ends are included:
    an anchor sampled as a split point marks an event that may run on either side of it, so
    both neighbours keep its score."""
    return [
        a.phi if raw else a.phi_n
        for a in anchors
        if a.video_id == node.video_id and node.start <= a.t <= node.end
    ]


def fuse(
    candidates: Sequence[Node],
    *,
    temperature: float = ENTROPY_TEMPERATURE,
    mode: str = "uarf",
    scale: str = "unit",
) -> float:
    """Set ``h`` of every candidate and return H.

    ``mode``: ``uarf`` fuses h = (1 - H) r + H u; ``r`` keeps the intrinsic reward alone (the
    paper's "w/o UARF"). ``scale``: ``unit`` fuses r / 100 with u from normalised similarities
    (spec B.11 #4); ``raw`` fuses the literal numbers (r on 0-100, u on the retriever's scale).
    """
    h_ent = entropy([c.r for c in candidates], temperature)
    for c in candidates:
        r = c.r / 100.0 if scale == "unit" else c.r
        c.h = r if mode == "r" else (1 - h_ent) * r + h_ent * c.u
    return h_ent


# ---------------------------------------------------------------------------------------------
# Memory


def update_memory(
    memory: list[MemoryFrame],
    frames: Sequence[tuple[str, int]],
    children: Sequence[Node],
    capacity: int,
    round_: int,
) -> list[MemoryFrame]:
    """Add this round's frames, each scored by the larger reward of the children on its two
    sides, and evict the lowest-scoring frames past ``capacity`` (ties: the older goes first);
    the buffer is kept in time order."""
    added = []
    for vid, t in frames:
        sides = [c.r for c in children if c.video_id == vid and t in (c.start, c.end)]
        added.append(MemoryFrame(vid, t, max(sides, default=0.0), round_))
    pool = memory + added
    kept = sorted(pool, key=lambda m: (-m.score, -m.round))[: max(0, capacity)]
    return sorted(kept, key=lambda m: (m.video_id, m.t))
