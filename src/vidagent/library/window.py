"""A Library read through a time window per video: what a question limited to ``--last 10m``
(or ``--since``/``--until``) may see.

:class:`WindowedLibrary` is the Library itself (it shares the open tables, no second open) with
every read a tool or a strategy makes of a windowed video cut to that video's window
``[t0, t1]``, in the video's own time (stream time: citations keep their place on the video's
timeline):

- the video's record says ``duration = t1`` (the live edge fixed when the question started,
  or the window's end), so nothing that clamps to the video reaches past it while a watcher
  keeps adding clips;
- clips, clip rows, thumbnails, shots, transcript segments and frame vectors are those that
  overlap the window (a clip half inside counts);
- clip searches only return clips overlapping the window (each windowed video searched in its
  own window, the hits merged by score);
- the entity graph keeps the edges, timed actions and entities whose times meet the window;
- the subject registry keeps the subjects seen in the window (``temporal_spans``; a subject
  with no recorded spans stays) and VideoAgent2's stored context its segments in the window;
- the video-level summary (``kind="summary"``, and the summary half of VideoAgent2's context)
  describes the whole video, outside the window too, so it is **hidden** unless the window
  held the whole video when it was resolved: a strategy reads ``""`` as for a video never
  summarised, and falls back on what it finds in the window (the subject registry, the clips);
- memoised tool answers (``memo``: DVD's global browse) are keyed by the window as well, so an
  answer about other times is never reused.

Where a tool decodes frames it asks :meth:`~vidagent.library.store.Library.window` and clamps
its times into the window (``ToolContext.span``), so no pixel outside it is looked at either.
Writes go to the Library unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from vidagent.library.graph import EntityGraph
from vidagent.library.schema import (
    Artifact,
    ArtifactKind,
    ClipHit,
    ClipRow,
    FrameRow,
    ShotRow,
    TranscriptSegment,
    VideoRecord,
)
from vidagent.library.store import Library

Window = tuple[float, float]


def meets(a: float, b: float, window: Window) -> bool:
    """Whether the span ``[a, b]`` overlaps ``window``, as the Library's time filters read it:
    a span that only touches the window's edge does not; an instant inside it, ends included,
    does."""
    if a == b:
        return window[0] <= a <= window[1]
    return a < window[1] and b > window[0]


def _cut(window: Window, t0: float | None, t1: float | None) -> Window | None:
    """``[t0, t1]`` (None: open) within ``window``; None when they do not meet."""
    lo = window[0] if t0 is None else max(t0, window[0])
    hi = window[1] if t1 is None else min(t1, window[1])
    return (lo, hi) if lo <= hi else None


class WindowedLibrary(Library):
    """``library`` read through ``windows`` (``video_id -> (t0, t1)`` in seconds); videos
    without a window read whole. See the module docstring for what each read keeps.

    Args:
        library: the open Library (its tables are shared, not reopened).
        windows: each windowed video's ``(t0, t1)``, ``t0 <= t1``.
        whole: windowed videos whose window held all of them when it was resolved (a
            question about the last hour of a 20-minute stream): their summaries stay
            readable, while their live edge is still fixed at the window's end.
    """

    def __init__(
        self, library: Library, windows: Mapping[str, Window], whole: Iterable[str] = ()
    ) -> None:
        # The Library's state is its parts (uri, tables, rows, …): share them all, so this is
        # the same Library to every write and every read it does not cut.
        self.__dict__.update(vars(library))
        self.windows = {v: (float(a), float(b)) for v, (a, b) in windows.items()}
        self.whole = frozenset(whole)

    def __repr__(self) -> str:
        return f"WindowedLibrary({self.uri!r}, {self.windows!r})"

    def window(self, video_id: str) -> Window | None:
        """The window reads of ``video_id`` are cut to; None: the whole video."""
        return self.windows.get(video_id)

    # -- rows -----------------------------------------------------------------------------------

    def get_video(self, ref: str) -> VideoRecord:
        """The video's record; a windowed video's ``duration`` is its window's end."""
        record = super().get_video(ref)
        window = self.windows.get(record.video_id)
        return record if window is None else dataclasses.replace(record, duration=window[1])

    def clips(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[ClipRow]:
        """The video's clips overlapping ``[t0, t1]`` and its window, in clip order."""
        window = self.windows.get(video_id)
        if window is None:
            return super().clips(video_id, t0, t1)
        cut = _cut(window, t0, t1)
        return [] if cut is None else super().clips(video_id, *cut)

    def clip_rows(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ClipRow]:
        """The clips with these keys that overlap their video's window."""
        rows = super().clip_rows(keys)
        return {k: c for k, c in rows.items() if self._keeps(c.video_id, c.t0, c.t1)}

    def frames(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[FrameRow]:
        """The video's thumbnails in ``[t0, t1]`` and its window, in time order."""
        window = self.windows.get(video_id)
        if window is None:
            return super().frames(video_id, t0, t1)
        cut = _cut(window, t0, t1)
        return [] if cut is None else super().frames(video_id, *cut)

    def shots(self, video_id: str) -> list[ShotRow]:
        """The video's shots overlapping its window."""
        return [s for s in super().shots(video_id) if self._keeps(video_id, s.t0, s.t1)]

    def transcript(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[TranscriptSegment]:
        """The video's speech segments overlapping ``[t0, t1]`` and its window."""
        window = self.windows.get(video_id)
        if window is None:
            return super().transcript(video_id, t0, t1)
        cut = _cut(window, t0, t1)
        return [] if cut is None else super().transcript(video_id, *cut)

    # -- artefacts ------------------------------------------------------------------------------

    def artifact(self, video_id: str, kind: ArtifactKind, key: str = "") -> Artifact | None:
        """The artefact as seen through the window: summaries hidden, the registry's subjects
        and a stored context's segments cut to it."""
        found = super().artifact(video_id, kind, key)
        window = self.windows.get(video_id)
        if found is None or window is None or video_id in self.whole:
            return found
        return _artifact_within(found, window)

    def artifacts(self, video_id: str, kind: ArtifactKind | None = None) -> list[Artifact]:
        """The video's artefacts as :meth:`artifact` sees each."""
        window = self.windows.get(video_id)
        found = super().artifacts(video_id, kind)
        if window is None or video_id in self.whole:
            return found
        return [a for a in (_artifact_within(f, window) for f in found) if a is not None]

    def registry(self, video_id: str) -> dict[str, Any]:
        """The video's subject registry, only the subjects seen in its window."""
        stored = self.artifact(video_id, "registry")
        return dict(stored.data) if stored is not None else {}

    def global_summary(self, video_id: str) -> str:
        """``""`` for a video windowed to part of it (its summary covers times outside the
        window)."""
        if video_id in self.windows and video_id not in self.whole:
            return ""
        return super().global_summary(video_id)

    def memo(
        self,
        video_id: str,
        kind: ArtifactKind,
        key: str,
        *,
        producer: str,
        inputs_hash: str,
        build: Callable[[], tuple[str, dict[str, Any]]],
    ) -> tuple[Artifact, bool]:
        """:meth:`Library.memo <vidagent.library.store.Library.memo>`, keyed by the window too."""
        window = self.windows.get(video_id)
        if window is not None:
            scope = f"@{window[0]:.3f}-{window[1]:.3f}"
            key, inputs_hash = key + scope, inputs_hash + scope
        return super().memo(
            video_id, kind, key, producer=producer, inputs_hash=inputs_hash, build=build
        )

    # -- vectors and the graph ------------------------------------------------------------------

    def frame_vectors(self, video_id: str) -> tuple[np.ndarray, np.ndarray]:
        """The video's frame times ``(N,)`` and vectors ``(N, D)`` inside its window."""
        times, vectors = super().frame_vectors(video_id)
        window = self.windows.get(video_id)
        if window is None:
            return times, vectors
        inside = (times >= window[0]) & (times <= window[1])  # (N,) bool
        return times[inside], vectors[inside]

    def search_clips(
        self,
        vector: np.ndarray,
        *,
        video_ids: Sequence[str] | None = None,
        t_from: float | None = None,
        t_to: float | None = None,
        k: int = 10,
    ) -> list[ClipHit]:
        """The ``k`` clips nearest ``vector``; a windowed video's only inside its window (each
        windowed video searched on its own, the hits merged by score)."""
        ids = list(video_ids) if video_ids is not None else self.listed_ids()
        whole = [v for v in ids if v not in self.windows]
        hits: list[ClipHit] = []
        if whole:
            hits += super().search_clips(vector, video_ids=whole, t_from=t_from, t_to=t_to, k=k)
        for video_id in (v for v in ids if v in self.windows):
            cut = _cut(self.windows[video_id], t_from, t_to)
            if cut is not None:
                hits += super().search_clips(
                    vector, video_ids=[video_id], t_from=cut[0], t_to=cut[1], k=k
                )
        return sorted(hits, key=lambda h: -h.score)[:k]

    def entity_graph(self, video_id: str) -> EntityGraph | None:
        """The video's entity graph, only what its window holds (module docstring)."""
        graph = super().entity_graph(video_id)
        window = self.windows.get(video_id)
        if graph is None or window is None:
            return graph
        return graph_within(graph, window)

    def _keeps(self, video_id: str, t0: float, t1: float) -> bool:
        window = self.windows.get(video_id)
        return window is None or meets(t0, t1, window)


def _artifact_within(found: Artifact, window: Window) -> Artifact | None:
    """An artefact as a question limited to ``window`` sees it (None: hidden)."""
    if found.kind == "summary":
        return None
    if found.kind == "registry":
        kept = {
            sid: entry
            for sid, entry in found.data.items()
            if not isinstance(entry, dict)
            or not entry.get("temporal_spans")
            or any(meets(float(a), float(b), window) for a, b in entry["temporal_spans"])
        }
        return dataclasses.replace(found, data=kept)
    if found.kind == "context":
        segments = [s for s in found.data.get("segments", []) if meets(s[0], s[1], window)]
        return dataclasses.replace(found, text="", data={**found.data, "segments": segments})
    return found


def graph_within(graph: EntityGraph, window: Window) -> EntityGraph:
    """``graph`` with only the timed edges, actions and entity appearances that meet
    ``window``; an entity with none left (and no untimed membership) is dropped."""
    nodes = {}
    for node_id, node in graph.nodes.items():
        timeline = [s for s in node.timeline if meets(s[0], s[1], window)]
        actions = [
            a for a in node.actions if meets(float(a.get("t0", -1)), float(a.get("t1", -1)), window)
        ]
        if timeline or actions or node.members or not node.timeline:
            kept = copy.copy(node)
            kept.timeline, kept.actions = timeline, actions
            nodes[node_id] = kept
    edges = [
        e
        for e in graph.edges
        if e.src in nodes and e.dst in nodes and (e.span is None or meets(*e.span, window))
    ]
    return dataclasses.replace(graph, nodes=nodes, edges=edges)
