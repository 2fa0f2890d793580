"""The read-only view of the index that agents hold, and the one text search over clip vectors.

Agents reach the index through tools, and between tool calls through an :class:`IndexView`: a
strategy that needs a video's length to write its prompt, a stored context, a transcript window,
a text search (the ``retrieval`` baseline, EEA's anchors, the evidence pass) or the pixels of a
few frames (EEA's reward model) asks the view; no module under :mod:`vidagent.agents` reads the
Library or decodes a frame itself (``tests/test_layers.py`` checks it). The view is narrow on
purpose: it reads, it never writes, and each method is one thing a strategy reads today.

:func:`search_text` is the one sequence "check that the Library's vectors were made by this
embedder, embed the query, search the clip vectors", which the view, ``clip_search``, AVI's
``clip_retrieve_tool``, the boundary scorer and the application layer's ``search`` share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from vidagent.library.search import require_embedding

if TYPE_CHECKING:
    import numpy as np

    from vidagent.budget import Meter
    from vidagent.library import Library
    from vidagent.library.schema import (
        Artifact,
        ArtifactKind,
        ClipHit,
        ClipRow,
        TranscriptSegment,
        VideoRecord,
    )
    from vidagent.models.base import ImagePart
    from vidagent.models.client import Client, Models
    from vidagent.tools.base import ToolContext
    from vidagent.tools.options import ToolOptions
    from vidagent.trace import Trace


#: The store an :class:`IndexView` reads: the type of what an agent is built over and hands to
#: its view, named so that agents need not import the Library to say so.
Store: TypeAlias = "Library"


def search_text(
    library: Library,
    client: Client,
    query: str,
    video_ids: Sequence[str] | None,
    *,
    k: int,
    t_from: float | None = None,
    t_to: float | None = None,
) -> list[ClipHit]:
    """The ``k`` clips of ``video_ids`` (None: every video) whose embedded text is nearest
    ``query``, best first, optionally only those overlapping ``[t_from, t_to]``.

    Raises:
        LibraryError: the Library has no clip vectors yet.
        EmbeddingMismatchError: they were made by another model than ``client``'s.
    """
    require_embedding(library, client.spec)
    vector = client.embed([query]).vectors[0]  # (D,)
    ids = list(video_ids) if video_ids is not None else None
    return library.search_clips(vector, video_ids=ids, t_from=t_from, t_to=t_to, k=k)


class IndexView:
    """What a strategy may read of the index outside a tool call, over one Library and the
    run's models; and the tool context its tool calls run in (:meth:`context`)."""

    def __init__(self, library: Library, models: Models) -> None:
        self._library = library
        self._models = models

    def context(
        self,
        video_ids: Sequence[str],
        *,
        budget: Meter | None = None,
        trace: Trace | None = None,
        options: ToolOptions | None = None,
    ) -> ToolContext:
        """The context a run's tools share: this index, the models, the videos in scope."""
        from vidagent.tools.base import ToolContext
        from vidagent.tools.options import ToolOptions

        return ToolContext(
            self._library,
            self._models,
            list(video_ids),
            budget=budget,
            trace=trace,
            options=options or ToolOptions(),
        )

    def video(self, video_id: str) -> VideoRecord:
        """The video's record (name, duration, source, fps, stages).

        Raises:
            VideoNotFoundError: no such video.
        """
        return self._library.get_video(video_id)

    def duration(self, video_id: str) -> float:
        """The video's duration in seconds."""
        return self.video(video_id).duration

    def window(self, video_id: str) -> tuple[float, float] | None:
        """The time window the run's reads of the video are cut to (``--last``, ``--since``,
        ``--until``); None: the whole video."""
        return self._library.window(video_id)

    def span(self, video_id: str) -> tuple[float, float]:
        """The part of the video the run may see: its :meth:`window`, else ``(0, duration)``."""
        window = self.window(video_id)
        return window if window is not None else (0.0, self.duration(video_id))

    def artifact(self, video_id: str, kind: ArtifactKind, key: str = "") -> Artifact | None:
        """A stored artefact (summary, context, registry), or None when there is none."""
        return self._library.artifact(video_id, kind, key)

    def global_summary(self, video_id: str) -> str:
        """The video's global summary text, ``""`` when there is none."""
        return self._library.global_summary(video_id)

    def transcript(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[TranscriptSegment]:
        """The transcript segments of the video that overlap ``[t0, t1]``, in time order."""
        return self._library.transcript(video_id, t0, t1)

    def speaker_names(self, video_id: str) -> dict[str, str]:
        """The names a user gave the video's speaker labels (``{"S1": "Dr Lee"}``)."""
        stored = self._library.artifact(video_id, "speakers", "names")
        return {str(k): str(v) for k, v in (stored.data if stored else {}).items()}

    def clips(self, video_id: str, t0: float, t1: float) -> list[ClipRow]:
        """The video's clips that overlap ``[t0, t1]`` (an instant: the clip holding it), in
        clip order, with what the ingest stages found in each."""
        return self._library.clips(video_id, t0, t1)

    def graph_events(self, video_id: str, t0: float, t1: float) -> list[tuple[float, float, str]]:
        """What the video's entity graph says happens in ``[t0, t1]``: each relation
        (``"man hands over box to woman"``) and each entity's timed action, with its own
        ``(t0, t1)``; empty when the graph stage never ran."""
        graph = self._library.entity_graph(video_id)
        if graph is None:
            return []
        events: list[tuple[float, float, str]] = []
        for e in graph.edges:
            if e.span is None or e.kind == "member_of" or not (e.span[0] <= t1 and t0 <= e.span[1]):
                continue
            src, dst = graph.nodes.get(e.src), graph.nodes.get(e.dst)
            names = [n.name if n is not None else "" for n in (src, dst)]
            events.append((e.span[0], e.span[1], f"{names[0]} {e.relation} {names[1]}".strip()))
        for node in graph.nodes.values():
            for act in node.actions:
                a, b = float(act.get("t0", -1)), float(act.get("t1", -1))
                if a >= 0 and a <= t1 and t0 <= b:
                    events.append((a, b, f"{node.name} {act.get('action', '')}".strip()))
        return sorted(events)

    def check_search(self) -> None:
        """Raises LibraryError/EmbeddingMismatchError when the clip vectors cannot be searched
        with the ``embed`` role's model."""
        require_embedding(self._library, self._models.client("embed").spec)

    def search(self, query: str, video_ids: Sequence[str], *, k: int) -> list[ClipHit]:
        """The ``k`` clips nearest ``query`` by the ``embed`` role (see :func:`search_text`)."""
        return search_text(self._library, self._models.client("embed"), query, video_ids, k=k)

    def frame_vector_spec(self) -> str | None:
        """The image-text model the stored frame vectors were made with (None: none stored)."""
        return self._library.frame_vector_spec()

    def frame_vectors(self, video_id: str) -> tuple[np.ndarray, np.ndarray]:
        """The video's stored frame times ``(N,)`` and vectors ``(N, D)``."""
        return self._library.frame_vectors(video_id)

    def frame_images(self, video_id: str, times: Sequence[float], *, size: int) -> list[ImagePart]:
        """The video's frames nearest ``times`` (each moved into the video's :meth:`span`),
        decoded from its source at most ``size`` pixels on their long side, as JPEG image parts."""
        from vidagent.models.vision import frame_images

        start, end = self.span(video_id)
        inside = [min(max(t, start), end) for t in times]
        return frame_images(self.video(video_id).source, inside, size=size)
