"""AVI's entity-centric temporal knowledge graph: building it, scoring it, retrieving from it.

Spec B.2 steps 7-9, B.3 and B.7; the paper wins where the spec adds detail.

**Nodes** (:class:`EntityNode`): one ``kind="human"`` node per subject of the extraction (id =
its ``subject_id``, else a generated ``H_<n>``), with its name, attributes, individual actions,
appearance timeline and ``clips`` (the clip indices whose span overlaps an appearance interval);
a ``kind="event"`` node ``E_<n>`` per interaction of more than two people; ``kind="super"``
nodes ``S_<n>`` from spectral clustering.

**Edges** (:class:`EntityEdge`, a directed multigraph: the same pair may interact many times):
``interaction`` edges from the first-listed participant to each other one, with the
description as the relation and the interaction's ``[t0, t1]``; ``participant`` edges from each
participant of a group interaction to its event node; ``member_of`` edges from each member to
its super-node.

**Super-nodes** (Eq. 10, B.11 #5-#7): among the human nodes, ``S_ij`` = cosine of their
``name; attributes`` embeddings clipped at 0, zero unless ``i`` and ``j`` are at most two hops
apart in the undirected graph. The number of clusters is the elbow of the normalised
Laplacian's spectrum, ``k = argmax_k (lambda_k - lambda_(k-1))`` over ``k`` in 3..8 (at most
``n - 1``); rows of the first ``k`` eigenvectors, normalised, are clustered by k-means
(``scipy.cluster.vq.kmeans2``, ten seeded restarts, the least distortion kept). With fewer than
six humans there is no clustering. A cluster of more than three becomes a super-node whose
timeline is the union of its members' and whose attributes are those at least half its members
share (lower-cased).

**Importance** (Eqs. 4, 11-13): ``freq = |clips| / |C| * ln(1 + sum of appearance durations)``,
min-max normalised over the video's nodes (all equal: 1 when positive, else 0);
``centrality = 0.5 * degree / max degree + 0.5 * betweenness`` (networkx, normalised), both on
the relations (``interaction`` and ``participant`` edges; ``member_of`` edges come from
similarity, not from the video, so they are left out), a super-node taking its members' mean;
``query_rel`` = cosine of the name embedding and the query embedding clipped at 0, computed per
query; ``w = 0.4 freq + 0.3 centrality + 0.3 query_rel``.

**Retrieval** (:meth:`EntityGraph.retrieve`, B.3.2): see its docstring.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from vidagent.library.graph_extract import Extraction, Span, merge_extractions, merge_spans

if TYPE_CHECKING:
    import networkx as nx

NodeKind = Literal["human", "event", "super"]
EdgeKind = Literal["interaction", "participant", "member_of"]
RELATION_KINDS = ("interaction", "participant")
#: Eq. 4's coefficients (appendix): frequency, centrality, query relevance.
LAMBDAS = (0.4, 0.3, 0.3)
MIN_CLUSTER_NODES = 6
MIN_SUPER_MEMBERS = 4  # "more than 3 entities"
K_RANGE = (3, 8)


@dataclass
class EntityNode:
    """A node of the entity graph; the importance terms are set by :meth:`EntityGraph.score`."""

    node_id: str
    kind: NodeKind
    name: str
    attributes: list[str] = field(default_factory=list)
    timeline: list[Span] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)  # {"action", "t0", "t1"}
    clips: list[int] = field(default_factory=list)
    members: list[str] = field(default_factory=list)  # super-nodes only
    name_vector: np.ndarray | None = None  # (D,) float32, unit length
    freq_raw: float = 0.0
    freq: float = 0.0
    degree: float = 0.0
    betweenness: float = 0.0
    centrality: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "kind": self.kind,
            "name": self.name,
            "attributes": self.attributes,
            "timeline": [list(s) for s in self.timeline],
            "actions": self.actions,
            "clips": self.clips,
            "members": self.members,
            "freq": self.freq,
            "freq_raw": self.freq_raw,
            "degree": self.degree,
            "betweenness": self.betweenness,
            "centrality": self.centrality,
        }


@dataclass
class EntityEdge:
    """A directed edge with its time interval; ``participants`` as the extractor listed them."""

    src: str
    dst: str
    kind: EdgeKind
    relation: str
    span: Span | None = None
    participants: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "kind": self.kind,
            "relation": self.relation,
            "t0": self.span[0] if self.span else None,
            "t1": self.span[1] if self.span else None,
            "participants": self.participants,
        }


@dataclass(frozen=True)
class GraphRetrieval:
    """What :meth:`EntityGraph.retrieve` found.

    Attributes:
        text: the relation lines ``(<id>: <name>) --[<relation>]--> (<id>: <name>) @ [t0s,
            t1s]`` and a card per returned entity, or a sentence saying why there are none.
        spans: the evidence, ``(t0, t1)`` seconds: the returned relations' intervals, or the
            seeds' appearances when no relation connects them; sorted, overlaps merged.
        nodes: ids of the returned entities, seeds first.
        mode: ``"path"``, ``"bfs"`` or ``"empty"``.
    """

    text: str
    spans: list[tuple[float, float]]
    nodes: list[str]
    mode: str = "bfs"


def secs(t: float) -> str:
    """``12s`` for whole seconds, else ``12.5s``."""
    return f"{t:.0f}s" if abs(t - round(t)) < 0.05 else f"{t:.1f}s"


def _overlaps(c0: float, c1: float, span: Span) -> bool:
    a, b = span
    return max(c0, a) < min(c1, b) or (a == b and c0 <= a < c1)


def _cosine(a: np.ndarray | None, b: np.ndarray) -> float:
    if a is None or a.shape != b.shape:
        return 0.0
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return max(0.0, float(a @ b) / (na * nb)) if na and nb else 0.0


@dataclass
class EntityGraph:
    """A video's entity graph (module docstring). ``clip_count`` is ``|C|`` of Eq. 11."""

    video_id: str
    nodes: dict[str, EntityNode] = field(default_factory=dict)
    edges: list[EntityEdge] = field(default_factory=list)
    clip_count: int = 0
    notes: list[str] = field(default_factory=list)

    # -- building -----------------------------------------------------------------------------

    @classmethod
    def build(
        cls, video_id: str, extraction: Extraction, clips: Sequence[tuple[int, float, float]]
    ) -> EntityGraph:
        """Nodes and edges of an extraction (merged first, so repeated subjects become one);
        ``clips`` are ``(clip_index, t0, t1)`` of the video's clips."""
        extraction = merge_extractions([extraction])
        graph = cls(video_id, clip_count=len(clips))
        names: dict[str, str] = {}
        generated = itertools.count(1)
        for s in extraction.subjects:
            node_id = s.subject_id or f"H_{next(generated)}"
            while node_id in graph.nodes:
                node_id = f"H_{next(generated)}"
            actions = [
                {
                    "action": a.action,
                    "t0": a.span[0] if a.span else None,
                    "t1": a.span[1] if a.span else None,
                }
                for a in s.actions
            ]
            graph.nodes[node_id] = EntityNode(
                node_id,
                "human",
                s.name,
                attributes=list(s.attributes),
                timeline=list(s.timeline),
                actions=actions,
                clips=_clips_of(s.timeline, clips),
            )
            names.setdefault(node_id.lower(), node_id)
            names.setdefault(s.name.lower(), node_id)
        events = itertools.count(1)
        for i in extraction.interactions:
            who: list[str] = []
            for ref in i.participants:
                known = names.get(ref.lower())
                if known is None:  # named in an interaction but not analysed: keep the edge
                    known = ref
                    graph.nodes[ref] = EntityNode(ref, "human", ref)
                    names[ref.lower()] = ref
                who.append(known)
            who = list(dict.fromkeys(who))
            if len(who) < 2:
                graph.notes.append(f"interaction with one participant left out: {i.description}")
                continue
            for other in who[1:]:
                graph.edges.append(
                    EntityEdge(who[0], other, "interaction", i.description, i.span, list(who))
                )
            if len(who) > 2:
                event_id = f"E_{next(events)}"
                spans = [i.span] if i.span else []
                graph.nodes[event_id] = EntityNode(
                    event_id,
                    "event",
                    i.description,
                    timeline=spans,
                    clips=_clips_of(spans, clips),
                    members=list(who),
                )
                for p in who:
                    graph.edges.append(
                        EntityEdge(p, event_id, "participant", "takes part in", i.span, list(who))
                    )
        return graph

    def add_super_nodes(self, vectors: Mapping[str, np.ndarray]) -> list[str]:
        """Cluster the human nodes by ``vectors`` (node id -> embedding of ``"name; attributes"``)
        and add a super-node per cluster of more than three; returns the new ids."""
        humans = [n for n in self.nodes.values() if n.kind == "human" and n.node_id in vectors]
        if len(humans) < MIN_CLUSTER_NODES:
            self.notes.append(
                f"{len(humans)} people: fewer than {MIN_CLUSTER_NODES}, no super-nodes"
            )
            return []
        ids = [n.node_id for n in humans]
        labels = spectral_clusters(self._affinity(ids, vectors))
        made: list[str] = []
        for label in sorted(set(labels.tolist())):
            members = [ids[i] for i in np.flatnonzero(labels == label)]
            if len(members) >= MIN_SUPER_MEMBERS:
                made.append(self._add_super([self.nodes[m] for m in members], len(made) + 1))
        return made

    def _affinity(self, ids: list[str], vectors: Mapping[str, np.ndarray]) -> np.ndarray:
        """Eq. 10: cosine clipped at 0, masked to pairs at most two hops apart."""
        import networkx as nx

        x = np.stack([np.asarray(vectors[i], np.float64) for i in ids])  # (n, D)
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        sim = np.clip(x @ x.T, 0.0, None)  # (n, n)
        undirected = self.relations_view()
        index = {node_id: k for k, node_id in enumerate(ids)}
        mask = np.zeros_like(sim)
        for node_id, k in index.items():
            near = nx.single_source_shortest_path_length(undirected, node_id, cutoff=2)
            for other in near:
                if other in index:
                    mask[k, index[other]] = 1.0
        return np.asarray(sim * mask)

    def _add_super(self, members: list[EntityNode], number: int) -> str:
        node_id = f"S_{number}"
        while node_id in self.nodes:
            number += 1
            node_id = f"S_{number}"
        counts: dict[str, int] = {}
        for m in members:
            for a in {a.lower() for a in m.attributes}:
                counts[a] = counts.get(a, 0) + 1
        shared = [a for a, c in counts.items() if 2 * c >= len(members)]
        shown = ", ".join(m.name for m in members[:4])
        more = f" and {len(members) - 4} more" if len(members) > 4 else ""
        self.nodes[node_id] = EntityNode(
            node_id,
            "super",
            f"group of {shown}{more}",
            attributes=sorted(shared),
            timeline=merge_spans([s for m in members for s in m.timeline]),
            clips=sorted({c for m in members for c in m.clips}),
            members=[m.node_id for m in members],
        )
        for m in members:
            span = (m.timeline[0][0], m.timeline[-1][1]) if m.timeline else None
            self.edges.append(EntityEdge(m.node_id, node_id, "member_of", "member of", span))
        return node_id

    # -- importance -----------------------------------------------------------------------------

    def relations_view(self) -> nx.Graph:
        """Every node, joined where an ``interaction`` or ``participant`` edge joins them."""
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from((e.src, e.dst) for e in self.edges if e.kind in RELATION_KINDS)
        return g

    def score(self) -> None:
        """Set every node's freq, degree, betweenness and centrality (module docstring)."""
        import networkx as nx

        total = max(self.clip_count, 1)
        for n in self.nodes.values():
            seconds = sum(b - a for a, b in n.timeline)
            n.freq_raw = len(n.clips) / total * float(np.log1p(seconds))
        raw = [n.freq_raw for n in self.nodes.values()]
        low, high = (min(raw), max(raw)) if raw else (0.0, 0.0)
        degree: dict[str, int] = dict.fromkeys(self.nodes, 0)
        for e in self.edges:
            if e.kind in RELATION_KINDS:
                degree[e.src] += 1
                degree[e.dst] += 1
        top = max(degree.values(), default=0)
        between = nx.betweenness_centrality(self.relations_view(), normalized=True)
        for n in self.nodes.values():
            if high > low:
                n.freq = (n.freq_raw - low) / (high - low)
            else:
                n.freq = 1.0 if high > 0 else 0.0
            n.degree = degree[n.node_id] / top if top else 0.0
            n.betweenness = float(between.get(n.node_id, 0.0))
        for n in self.nodes.values():
            if n.kind == "super" and n.members:
                n.degree = float(np.mean([self.nodes[m].degree for m in n.members]))
                n.betweenness = float(np.mean([self.nodes[m].betweenness for m in n.members]))
            n.centrality = 0.5 * n.degree + 0.5 * n.betweenness

    def query_rel(self, query_vector: np.ndarray | None) -> dict[str, float]:
        """Eq. 13 per node: cosine of name and query embeddings, clipped at 0."""
        if query_vector is None:
            return dict.fromkeys(self.nodes, 0.0)
        q = np.asarray(query_vector, np.float64).reshape(-1)
        return {i: _cosine(n.name_vector, q) for i, n in self.nodes.items()}

    def weights(self, query_vector: np.ndarray | None) -> dict[str, float]:
        """Eq. 4 per node: ``0.4 freq + 0.3 centrality + 0.3 query_rel``."""
        rel = self.query_rel(query_vector)
        a, b, c = LAMBDAS
        return {i: a * n.freq + b * n.centrality + c * rel[i] for i, n in self.nodes.items()}

    # -- retrieval ------------------------------------------------------------------------------

    def retrieve(
        self, query: str, query_vector: np.ndarray | None, *, max_edges: int = 20
    ) -> GraphRetrieval:
        """Entities, their relations and when, for a query (spec B.3.2).

        Seeds are the three humans or events most relevant to the query (``query_rel`` > 0) plus
        every one whose name or id the query contains (as whole words, any case). With two or more
        seeds, the shortest paths of at most four hops between each pair of seeds in the undirected
        relations are listed, every edge of a hop with its interval; when no seeds are that close,
        or with fewer seeds, a breadth-first walk of two hops from the seeds (the node of highest
        ``w`` when nothing is relevant) visits neighbours in descending ``w`` and skips those below
        the 25th percentile of ``w``. At most ``max_edges`` relations are listed, then a card per
        entity: kind, ``w`` and its terms, attributes, appearance timeline, actions and the
        super-nodes it belongs to.
        """
        if not self.nodes:
            text = (
                f"The entity graph of video {self.video_id} is empty: the extractor found no "
                "people in its captions."
            )
            return GraphRetrieval(text, spans=[], nodes=[], mode="empty")
        rel = self.query_rel(query_vector)
        w = self.weights(query_vector)
        seeds = self._seeds(query, rel, w)
        undirected = self.relations_view()
        mode, edges = "path", self._paths(undirected, seeds, max_edges)
        if not edges:
            mode, edges = "bfs", self._walk(undirected, seeds, w, max_edges)
        order = list(seeds) + [x for e in edges for x in (e.src, e.dst)]
        nodes = list(dict.fromkeys(order))
        spans = [e.span for e in edges if e.span] or [
            s for n in seeds for s in self.nodes[n].timeline
        ]
        head = (
            "Paths between " + ", ".join(self._label(s) for s in seeds) + ":"
            if mode == "path"
            else "Around " + ", ".join(self._label(s) for s in seeds) + " (2 hops, by importance):"
        )
        lines = [head] + [self._line(e) for e in edges]
        if not edges:
            lines.append("  (no relations recorded for these entities)")
        lines += ["", "Entities:"] + [self._card(n, w[n], rel[n]) for n in nodes]
        return GraphRetrieval("\n".join(lines), merge_spans(spans), nodes, mode)

    def _seeds(self, query: str, rel: dict[str, float], w: dict[str, float]) -> list[str]:
        candidates = [n for n in self.nodes.values() if n.kind != "super"]
        ranked = sorted(candidates, key=lambda n: (-rel[n.node_id], n.node_id))
        seeds = [n.node_id for n in ranked[:3] if rel[n.node_id] > 0]
        text = query.lower()
        for n in candidates:
            named = [
                x
                for x in (n.node_id, n.name)
                if len(x) >= 3 and re.search(rf"(?<!\w){re.escape(x.lower())}(?!\w)", text)
            ]  # whole words: "Subject_1" is not named by "Subject_12"
            if named and n.node_id not in seeds:
                seeds.append(n.node_id)
        if not seeds and candidates:
            seeds = [max(candidates, key=lambda n: (w[n.node_id], n.node_id)).node_id]
        return seeds

    def _between(self, a: str, b: str) -> list[EntityEdge]:
        pair = {a, b}
        found = [e for e in self.edges if e.kind in RELATION_KINDS and {e.src, e.dst} == pair]
        return sorted(found, key=lambda e: e.span or (float("inf"), float("inf")))

    def _paths(self, g: nx.Graph, seeds: list[str], limit: int) -> list[EntityEdge]:
        import networkx as nx

        out: list[EntityEdge] = []
        for a, b in itertools.combinations(seeds, 2):
            try:
                path = nx.shortest_path(g, a, b)
            except nx.NetworkXNoPath:
                continue
            if len(path) - 1 > 4:
                continue
            for u, v in itertools.pairwise(path):
                out += [e for e in self._between(u, v) if not any(e is o for o in out)]
        return out[:limit]

    def _walk(
        self, g: nx.Graph, seeds: list[str], w: dict[str, float], limit: int
    ) -> list[EntityEdge]:
        floor = float(np.percentile([w[n] for n in g.nodes], 25)) if len(g) else 0.0
        depth = dict.fromkeys(seeds, 0)
        queue, out = list(seeds), list[EntityEdge]()
        while queue and len(out) < limit:
            u = queue.pop(0)
            if depth[u] >= 2:
                continue
            for v in sorted(g.neighbors(u), key=lambda n: (-w[n], n)):
                if w[v] < floor and v not in depth:
                    continue  # pruned: a transient entity
                out += [e for e in self._between(u, v) if not any(e is o for o in out)]
                if v not in depth:
                    depth[v] = depth[u] + 1
                    queue.append(v)
        return out[:limit]

    def _label(self, node_id: str) -> str:
        return f"{node_id} ({self.nodes[node_id].name})"

    def _line(self, e: EntityEdge) -> str:
        when = f" @ [{secs(e.span[0])}, {secs(e.span[1])}]" if e.span else ""
        src, dst = self.nodes[e.src], self.nodes[e.dst]
        return f"({src.node_id}: {src.name}) --[{e.relation}]--> ({dst.node_id}: {dst.name}){when}"

    def _card(self, node_id: str, w: float, rel: float) -> str:
        n = self.nodes[node_id]
        head = (
            f"- {n.node_id}: {n.name} ({n.kind}) w={w:.2f} (freq {n.freq:.2f}, centrality "
            f"{n.centrality:.2f}, query_rel {rel:.2f})"
        )
        lines = [head]
        if n.attributes:
            lines.append(f"    attributes: {', '.join(n.attributes)}")
        if n.timeline:
            shown = ", ".join(f"[{secs(a)}, {secs(b)}]" for a, b in n.timeline[:8])
            more = f" (+{len(n.timeline) - 8} more)" if len(n.timeline) > 8 else ""
            lines.append(f"    appears: {shown}{more}")
        if n.actions:
            acts = [
                a["action"] + (f" @ {secs(a['t0'])}" if a.get("t0") is not None else "")
                for a in n.actions[:5]
            ]
            lines.append(f"    actions: {'; '.join(acts)}")
        groups = [e.dst for e in self.edges if e.kind == "member_of" and e.src == node_id]
        if groups:
            lines.append("    member of: " + "; ".join(self._label(g) for g in groups))
        if n.kind == "super":
            lines.append(f"    members: {', '.join(n.members)}")
        return "\n".join(lines)

    # -- reading --------------------------------------------------------------------------------

    def super_nodes(self) -> list[EntityNode]:
        return [n for n in self.nodes.values() if n.kind == "super"]

    def to_json(self) -> dict[str, Any]:
        """``{"entities": [...], "relations": [...]}`` (what ``show --graph --json`` prints)."""
        return {
            "entities": [n.to_json() for n in self.nodes.values()],
            "relations": [e.to_json() for e in self.edges],
        }


def _clips_of(spans: list[Span], clips: Sequence[tuple[int, float, float]]) -> list[int]:
    return [i for i, c0, c1 in clips if any(_overlaps(c0, c1, s) for s in spans)]


def spectral_clusters(affinity: np.ndarray) -> np.ndarray:
    """Cluster labels (n,) of a symmetric non-negative (n, n) affinity (module docstring)."""
    from scipy.cluster.vq import kmeans2
    from scipy.sparse.csgraph import laplacian

    n = affinity.shape[0]
    a = affinity.copy()
    np.fill_diagonal(a, 0.0)
    lap = laplacian(a, normed=True)  # (n, n)
    values, vectors = np.linalg.eigh(lap)  # ascending
    low, high = K_RANGE[0], min(K_RANGE[1], n - 1)
    k = max(range(low, high + 1), key=lambda k: (values[k] - values[k - 1], -k))
    u = vectors[:, :k]
    u = u / np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
    best: tuple[float, np.ndarray] | None = None
    for seed in range(10):
        centroids, labels = kmeans2(u, k, minit="++", rng=np.random.default_rng(seed))
        distortion = float(((u - centroids[labels]) ** 2).sum())
        if best is None or distortion < best[0] - 1e-12:
            best = (distortion, labels)
    assert best is not None
    return best[1]
