"""EEA's text-to-clip retrievers: what turns a semantic query into candidate clips ``D_i``.

The paper's retriever is an unnamed "VideoCLIP-style" text encoder over the video (spec B.11 #1).
Two are built in, picked by :func:`make_retriever`:

- :class:`FrameRetriever` (``frames``): with an image-text model in the ``image_embed`` role (a
  CLIP), frames are embedded once per video at ingest (the ``embed_frames`` stage, cached in the
  Library) and a query is compared with clips of 4 s (stride 2 s) whose vector is the mean of
  their frames' vectors; ``phi`` is that cosine, the clip's frame ``t_k`` the one of highest
  frame-level cosine (spec B.11 #1's suggestion).
- :class:`ClipIndexRetriever` (``clips``, the offline default): the index's clip vectors (text
  embeddings of each clip's caption, speech and on-screen text, the ``embed`` role); ``t_k`` is
  the clip's middle frame.

A retriever's model calls are ordinary model calls of their role in the trace; its cost never
counts as frames observed (the paper's efficiency figure counts only frames a VLM looked at).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from vidagent.agents.eea.tree import RetrievedClip
from vidagent.exceptions import ConfigError, LibraryError

if TYPE_CHECKING:
    from vidagent.models.client import Models
    from vidagent.tools.index import IndexView


class Retriever(Protocol):
    """Top-``k`` clips of the videos in scope for a text query."""

    name: str

    def search(self, query: str, k: int) -> list[RetrievedClip]: ...


def last_frame(duration: float) -> int:
    """The last whole-second frame of a video of ``duration`` seconds."""
    return max(0, math.ceil(duration) - 1)


class ClipIndexRetriever:
    """The index's clip vectors (``embed`` role), searched in the Library."""

    name = "clips"

    def __init__(self, index: IndexView, video_ids: Sequence[str]) -> None:
        self.index, self.video_ids = index, list(video_ids)
        index.check_search()
        self.last = {v: last_frame(index.duration(v)) for v in self.video_ids}

    def search(self, query: str, k: int) -> list[RetrievedClip]:
        hits = self.index.search(query, self.video_ids, k=k)
        out = []
        for h in hits:
            c = h.clip
            t = min(self.last[c.video_id], max(0, math.floor((c.t0 + c.t1) / 2 + 0.5)))
            out.append(RetrievedClip(query, c.video_id, c.t0, c.t1, t, float(h.score)))
        return out


class FrameRetriever:
    """Frame vectors of an image-text model (``image_embed``), pooled into sliding clips."""

    name = "frames"

    def __init__(
        self,
        index: IndexView,
        models: Models,
        video_ids: Sequence[str],
        *,
        window: float = 4.0,
        stride: float = 2.0,
    ) -> None:
        self.client = models.client("image_embed")
        bound = index.frame_vector_spec()
        if bound is None:
            raise LibraryError(
                "no frame embeddings yet: index with an image_embed model (stage embed_frames)"
            )
        if bound != self.client.spec:
            raise ConfigError(
                f"the Library's frames were embedded with {bound}, not {self.client.spec}; "
                f"use --image-embed {bound} (or re-index with the new model)"
            )
        self.clips: list[tuple[str, float, float, np.ndarray, np.ndarray]] = []
        for vid in video_ids:
            times, vectors = index.frame_vectors(vid)  # (N,), (N, D)
            self.clips += _windows(vid, times, vectors, window, stride)
        # each clip's mean frame vector, normalised once for every query
        means = [frames.mean(axis=0) for *_, frames in self.clips]
        self.means = [m / (np.linalg.norm(m) or 1.0) for m in means]

    def search(self, query: str, k: int) -> list[RetrievedClip]:
        if not self.clips:
            return []
        q = self.client.embed([query]).vectors[0]  # (D,)
        q = q / (np.linalg.norm(q) or 1.0)
        scored = []
        for (vid, t0, t1, times, frames), mean in zip(self.clips, self.means, strict=True):
            phi = float(mean @ q)
            best = float(times[int(np.argmax(frames @ q))])
            scored.append(RetrievedClip(query, vid, t0, t1, round(best), phi))
        scored.sort(key=lambda c: (-c.phi, c.video_id, c.start))
        return scored[:k]


def _windows(
    video_id: str, times: np.ndarray, vectors: np.ndarray, window: float, stride: float
) -> list[tuple[str, float, float, np.ndarray, np.ndarray]]:
    """Clips of ``window`` seconds every ``stride`` seconds: (video, t0, t1, times, vectors)."""
    if len(times) == 0:
        return []
    out = []
    start, end = 0.0, float(times[-1])
    while True:
        mask = (times >= start) & (times < start + window)
        if mask.any():
            out.append((video_id, start, min(start + window, end + 1), times[mask], vectors[mask]))
        if start + window > end:
            return out
        start += stride


def make_retriever(
    kind: str, index: IndexView, models: Models, video_ids: Sequence[str]
) -> Retriever:
    """The retriever ``kind`` asks for: ``frames``, ``clips``, or ``auto`` (frames when an
    ``image_embed`` model is configured, else the clip index).

    Raises:
        ConfigError, LibraryError: the retriever's model or vectors are missing or mismatched.
    """
    if kind == "auto":
        kind = "frames" if image_embed_configured(models) else "clips"
    if kind == "frames":
        return FrameRetriever(index, models, video_ids)
    return ClipIndexRetriever(index, video_ids)


def image_embed_configured(models: Models) -> bool:
    """Whether the ``image_embed`` role names a model (it defaults to ``none:``)."""
    return not models.settings.spec("image_embed").startswith("none:")
