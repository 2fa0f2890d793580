"""The Library's entity-graph tables: ``entities`` and ``relations`` (AVI, the ``graph`` stage).

One row per node, keyed by ``(video_id, graph_id, node_id)``, and per edge, keyed by
``(video_id, graph_id, edge_index)``; both carry the producer (the graph stage's fingerprint:
extractor spec, prompt hash, embed spec) and the time of the write. A node row keeps the name
embedding and the precomputed importance terms (freq, degree, betweenness, centrality), so a
query only embeds itself (``query_rel``).

**Replacing a graph never loses the old one.** :meth:`Graphs.put_entity_graph` writes the
new graph's rows under a fresh ``graph_id`` beside the old rows, then switches the video's
``("graph", "")`` artefact to that id (one atomic commit), then deletes the rows of other ids.
Readers follow the artefact, so a write that fails half-way leaves the old graph readable (and
rows no artefact points to, which the next write deletes); all of it runs under the write lock,
so two writers of one video never delete each other's rows. :meth:`Graphs.entity_graph`
returns None for a video whose graph stage never ran.

New tables need no migration: like every table they are created on their first write, and a
Library without them simply has no graphs. ``remove_video`` deletes a video's rows from every
table, these included.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import numpy as np

from vidagent.library.artifacts import Artifacts
from vidagent.library.filters import quote
from vidagent.library.graph import EntityEdge, EntityGraph, EntityNode
from vidagent.library.schema import Artifact
from vidagent.library.tables import Tables


def _node_row(i: int, n: EntityNode, head: dict[str, Any]) -> dict[str, Any]:
    vector = None if n.name_vector is None else np.asarray(n.name_vector, np.float32).tolist()
    return head | {
        "node_id": n.node_id,
        "node_index": i,
        "kind": n.kind,
        "name": n.name,
        "attributes": n.attributes,
        "timeline": json.dumps([list(s) for s in n.timeline]),
        "actions": json.dumps(n.actions, ensure_ascii=False),
        "clips": n.clips,
        "members": n.members,
        "name_vector": vector,
        "freq_raw": n.freq_raw,
        "freq": n.freq,
        "degree": n.degree,
        "betweenness": n.betweenness,
        "centrality": n.centrality,
    }


def _edge_row(i: int, e: EntityEdge, head: dict[str, Any]) -> dict[str, Any]:
    return head | {
        "edge_index": i,
        "src": e.src,
        "dst": e.dst,
        "kind": e.kind,
        "relation": e.relation,
        "t0": e.span[0] if e.span else None,
        "t1": e.span[1] if e.span else None,
        "participants": e.participants,
    }


def _node(r: dict[str, Any]) -> EntityNode:
    vector = r["name_vector"]
    return EntityNode(
        node_id=r["node_id"],
        kind=r["kind"],
        name=r["name"],
        attributes=list(r["attributes"] or []),
        timeline=[(float(a), float(b)) for a, b in json.loads(r["timeline"] or "[]")],
        actions=json.loads(r["actions"] or "[]"),
        clips=[int(c) for c in r["clips"] or []],
        members=list(r["members"] or []),
        name_vector=None if vector is None else np.asarray(vector, np.float32),
        freq_raw=r["freq_raw"] or 0.0,
        freq=r["freq"] or 0.0,
        degree=r["degree"] or 0.0,
        betweenness=r["betweenness"] or 0.0,
        centrality=r["centrality"] or 0.0,
    )


def _edge(r: dict[str, Any]) -> EntityEdge:
    span = None if r["t0"] is None or r["t1"] is None else (float(r["t0"]), float(r["t1"]))
    return EntityEdge(
        r["src"], r["dst"], r["kind"], r["relation"], span, list(r["participants"] or [])
    )


class Graphs:
    """A Library's entity graphs (module docstring): its graph part, ``library.graph``.

    Rows go through the Library's table owner; the pointer to each video's current graph is an
    artefact.
    """

    def __init__(self, tables: Tables, artifacts: Artifacts) -> None:
        self.tables = tables
        self.artifacts = artifacts

    def put_entity_graph(
        self,
        video_id: str,
        graph: EntityGraph,
        producer: str,
        inputs_hash: str = "",
        *,
        before_switch: Callable[[], None] | None = None,
    ) -> str:
        """Make ``graph`` the video's entity graph; returns its ``graph_id``.

        Args:
            video_id: the video.
            graph: the graph, scored (:meth:`EntityGraph.score`), name vectors set.
            producer: fingerprint of what made it (the graph stage's).
            inputs_hash: fingerprint of what it was made from (the caption lines).
            before_switch: called after the rows are written, before the switch (tests
                simulate a crash there).
        """
        graph_id = uuid.uuid4().hex[:12]
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        head = {"video_id": video_id, "graph_id": graph_id, "producer": producer, "created_at": now}
        nodes = [_node_row(i, n, head) for i, n in enumerate(graph.nodes.values())]
        edges = [_edge_row(i, e, head) for i, e in enumerate(graph.edges)]
        others = f"video_id = {quote(video_id)} AND graph_id != {quote(graph_id)}"
        with self.tables.write_lock():
            self.tables.merge("entities", nodes)
            self.tables.merge("relations", edges)
            if before_switch is not None:
                before_switch()
            data = {
                "graph_id": graph_id,
                "nodes": len(nodes),
                "edges": len(edges),
                "clips": graph.clip_count,
                "notes": graph.notes,
            }
            self.artifacts.put(Artifact(video_id, "graph", "", "", data, producer, inputs_hash))
            for name in ("entities", "relations"):
                if self.tables.has(name):
                    self.tables.table(name).delete(others)
        return graph_id

    def entity_graph(self, video_id: str) -> EntityGraph | None:
        """The video's entity graph, or None when its graph stage never ran."""
        pointer = self.artifacts.get(video_id, "graph")
        if pointer is None or not pointer.data.get("graph_id"):
            return None
        where = f"video_id = {quote(video_id)} AND graph_id = {quote(pointer.data['graph_id'])}"
        nodes = sorted(self.tables.scan("entities", where), key=lambda r: r["node_index"])
        edges = sorted(self.tables.scan("relations", where), key=lambda r: r["edge_index"])
        return EntityGraph(
            video_id,
            {r["node_id"]: _node(r) for r in nodes},
            [_edge(r) for r in edges],
            int(pointer.data.get("clips", 0)),
            list(pointer.data.get("notes", [])),
        )
