"""The Library's vector tables: embeddings of clips and of frames, each bound to one model.

``clip_vectors`` holds a text vector per clip (the ``embed`` stage, ``embed`` role) with its
times copied in, ``frame_vectors`` an image vector per stored thumbnail (the ``embed_frames``
stage, ``image_embed`` role). The manifest binds each table to the spec and dimension of the
model that made it (:meth:`Vectors.use_embedding`); a write from another model is refused,
and switching models empties the table, so two models' vectors never mix.

:class:`Vectors` is the Library's vectors part (``library.vectors``): it writes through the
Library's table owner, checks bindings against the manifest it holds, and reads listed videos
and clip rows through the rows part.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vidagent.exceptions import EmbeddingMismatchError
from vidagent.library.filters import one_of, quote, span_filter
from vidagent.library.hot import HotVideo, nearest
from vidagent.library.indexing import vector_query
from vidagent.library.rows import Rows
from vidagent.library.schema import (
    ClipHit,
    ClipRow,
    frame_vectors_schema,
    vectors_schema,
)
from vidagent.library.tables import Tables, read


def unit_rows32(vectors: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """(N, D) float32 rows scaled to length 1 in float32 (a zero row stays zero); with
    ``in_place``, ``vectors`` (a writable float32 array) is scaled and returned.

    Not :func:`~vidagent.geometry.unit_rows`, which works in float64: on a video's 720
    vectors of 384 dimensions that took 2.6 ms of a 12 ms first search, this 0.2 ms. In place
    on a fresh copy it saves the second 1.1 MB array and its page faults (~0.2 ms more).
    """
    vectors = np.asarray(vectors, np.float32)  # (N, D)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))[:, None]  # (N, 1)
    norms[norms == 0] = 1.0
    if in_place:
        vectors /= norms
        return vectors
    unit: np.ndarray = vectors / norms
    return unit


def hot_query(video_ids: Sequence[str]) -> tuple[str, dict[str, list[str] | None]]:
    """The filter and the columns :meth:`Tables.snapshot` reads the hot cache's entries of
    ``video_ids`` with: their clip vectors (not ``text_hash``) and their clip rows."""
    columns = ["video_id", "clip_index", "t0", "t1", "vector"]
    return one_of("video_id", video_ids), {"clip_vectors": columns, "clips": None}


class Vectors:
    """A Library's clip and frame vectors (module docstring)."""

    def __init__(self, tables: Tables, rows: Rows) -> None:
        self.tables = tables
        self.rows = rows

    def use_embedding(self, table: str, spec: str, dim: int) -> bool:
        """Bind an embedding table to a model; a different model empties it first.

        Returns True when the table was reset (its vectors must be recomputed).
        """
        bound = {"spec": spec, "dim": dim}
        with self.tables.write_lock():
            current = self.tables.reload_manifest().embeddings.get(table)
            if current == bound:
                return False
            self.tables.drop(table)
            self.tables.update_manifest(lambda m: m.embeddings.__setitem__(table, bound))
        return current is not None

    def put_clip_vectors(
        self,
        video_id: str,
        spec: str,
        clips: Sequence[ClipRow],
        vectors: np.ndarray,
        text_hashes: Sequence[str] | None = None,
        *,
        replace: bool = True,
    ) -> None:
        """Store one vector per clip, (N, D) float32, made by the model ``spec``.

        ``text_hashes`` fingerprint the embedded text so changed text can be re-embedded alone.
        With ``replace=False`` other clips' vectors of the video are kept (a partial update).
        """
        if len(clips) != len(vectors):
            raise ValueError(f"{len(clips)} clips but {len(vectors)} vectors")
        hashes = list(text_hashes) if text_hashes is not None else [""] * len(clips)
        with self.tables.write_lock():
            # Checked against the manifest on disk: another process may have switched models.
            bound = self.tables.reload_manifest().embeddings.get("clip_vectors")
            if bound is None or bound["spec"] != spec or vectors.shape[1:] != (bound["dim"],):
                raise EmbeddingMismatchError(
                    f"clip vectors from {spec} ({vectors.shape[1:]}) do not match the Library's "
                    f"{bound}; call use_embedding('clip_vectors', spec, dim) to switch models"
                )
            rows = [
                {"video_id": video_id, "clip_index": c.clip_index, "t0": c.t0, "t1": c.t1}
                | {"text_hash": h, "vector": v}
                for c, v, h in zip(clips, vectors.astype(np.float32), hashes, strict=False)
            ]
            schema = vectors_schema(bound["dim"])
            self.tables.merge("clip_vectors", rows, schema, replace=video_id if replace else None)

    def clip_vector_hashes(self, video_id: str) -> dict[int, str]:
        """``clip_index -> text_hash`` of the vectors stored for a video."""
        if "clip_vectors" not in self.tables.reload_manifest().embeddings:
            return {}
        rows = self.tables.scan("clip_vectors", f"video_id = {quote(video_id)}")
        return {int(r["clip_index"]): str(r["text_hash"]) for r in rows}

    def clip_vectors_by_text(self, video_id: str, spec: str) -> dict[str, np.ndarray]:
        """``text_hash -> vector`` (D,) of a video's stored clip vectors, when the table is bound
        to the model ``spec`` (else empty): what the embed stage embedded, reused as it is."""
        bound = self.tables.reload_manifest().embeddings.get("clip_vectors")
        if bound is None or bound["spec"] != spec:
            return {}
        rows = self.tables.scan("clip_vectors", f"video_id = {quote(video_id)}")
        return {str(r["text_hash"]): np.asarray(r["vector"], np.float32) for r in rows}

    def put_frame_vectors(
        self,
        video_id: str,
        spec: str,
        times: Sequence[float] | np.ndarray,
        vectors: np.ndarray,
        *,
        replace: bool = True,
    ) -> None:
        """Store one vector per thumbnail at ``times`` (seconds), (N, D) float32, made by the
        image-text model ``spec`` (bound first with ``use_embedding("frame_vectors", spec, D)``).

        With ``replace`` (the default) these become the video's frame vectors, its others
        deleted in the same commit; with ``replace=False`` vectors at other times are kept
        (a stage's checkpoint).

        Raises:
            ValueError: as many times as vectors are not given.
            EmbeddingMismatchError: ``spec`` or ``D`` is not what the table is bound to.
        """
        if len(times) != len(vectors):
            raise ValueError(f"{len(times)} times but {len(vectors)} vectors")
        with self.tables.write_lock():
            bound = self.tables.reload_manifest().embeddings.get("frame_vectors")
            if bound is None or bound["spec"] != spec or vectors.shape[1:] != (bound["dim"],):
                raise EmbeddingMismatchError(
                    f"frame vectors from {spec} ({vectors.shape[1:]}) do not match the "
                    f"Library's {bound}; call use_embedding('frame_vectors', spec, dim) to "
                    "switch models"
                )
            rows = [
                {"video_id": video_id, "t": round(float(t), 3), "vector": v}
                for t, v in zip(times, vectors.astype(np.float32), strict=False)
            ]
            schema = frame_vectors_schema(bound["dim"])
            self.tables.merge("frame_vectors", rows, schema, replace=video_id if replace else None)

    def frame_vectors(self, video_id: str) -> tuple[np.ndarray, np.ndarray]:
        """A video's frame vectors: ``(times, vectors)``, (N,) float64 in time order and (N, D)
        float32 in the same order; ``(0,)`` and ``(0, 0)`` arrays when it has none."""
        rows = []
        if "frame_vectors" in self.tables.reload_manifest().embeddings:
            rows = sorted(
                self.tables.scan("frame_vectors", f"video_id = {quote(video_id)}"),
                key=lambda r: r["t"],
            )
        if not rows:
            return np.zeros(0, np.float64), np.zeros((0, 0), np.float32)
        times = np.array([r["t"] for r in rows], np.float64)  # (N,)
        return times, np.array([r["vector"] for r in rows], np.float32)  # (N, D)

    def frame_vector_spec(self) -> str | None:
        """The spec of the model the Library's frame vectors are made with (None: none yet)."""
        bound = self.tables.reload_manifest().embeddings.get("frame_vectors")
        return str(bound["spec"]) if bound else None

    def _hot_load(self, video_ids: list[str]) -> dict[str, HotVideo]:
        """Read the clip vectors and clip rows of ``video_ids`` for the hot cache (hot.py)."""
        if not video_ids:
            return {}
        return self._hot_entries(video_ids, self.tables.snapshot((), *hot_query(video_ids)).rows)

    @staticmethod
    def _hot_entries(video_ids: list[str], got: dict[str, pa.Table]) -> dict[str, HotVideo]:
        """The hot cache's entries of ``video_ids`` from the tables :func:`hot_query` read."""
        data, clips = got["clip_vectors"], got["clips"]
        dim = data.schema.field("vector").type.list_size
        flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        stored = flat.reshape(-1, dim)  # (N, D) as stored, not yet unit rows
        index = data.column("clip_index").to_numpy()
        t0, t1 = data.column("t0").to_numpy(), data.column("t1").to_numpy()
        owner = data.column("video_id")
        clip_owner = clips.column("video_id")
        out = {}
        for video_id in video_ids:  # the rows read may hold other videos too (a read-ahead)
            mine = np.flatnonzero(pc.equal(owner, video_id).to_numpy())  # (n,)
            held = pc.equal(clip_owner, video_id)
            rows = clips if pc.all(held).as_py() else clips.filter(held)
            mine = mine[np.argsort(index[mine], kind="stable")]  # (n,) in clip order
            out[video_id] = HotVideo(
                index[mine],
                t0[mine],
                t1[mine],
                unit_rows32(stored[mine], in_place=True),  # a copy, in clip order
                rows,
                dict(zip(rows.column("clip_index").to_pylist(), range(rows.num_rows), strict=True)),
            )
        return out

    def search_clips(
        self,
        vector: np.ndarray,
        *,
        video_ids: Sequence[str] | None = None,
        t_from: float | None = None,
        t_to: float | None = None,
        k: int = 10,
    ) -> list[ClipHit]:
        """The ``k`` clips nearest to ``vector`` (cosine), among videos and a time range.

        A clip is in the range when it overlaps ``[t_from, t_to]``. Only listed videos count.
        Searches over few rows are exact; wide ones use the ANN index once there is one
        (:mod:`vidagent.library.indexing`).
        """
        bound = "clip_vectors" in self.tables.reload_manifest().embeddings
        if not bound or not self.tables.has("clip_vectors") or k <= 0:
            return []
        # A search of a few videos the hot cache lacks reads their rows in the same hand-over
        # as the tables' versions (unused, and so wasted, only when they hold more rows than
        # an exact search takes).
        wanted = None if video_ids is None else list(dict.fromkeys(video_ids))
        ahead = wanted is not None and not self.tables.hot.holds(wanted)
        snap = self.tables.snapshot(
            ["clip_vectors", "clips", "videos"], *(hot_query(wanted) if ahead and wanted else ())
        )
        state = snap.versions
        listed = self.rows.listed_ids(video_ids, version=state.get("videos", (None, 0))[0])
        if not listed:
            return []
        table = self.tables.table("clip_vectors")
        policy = self.tables.index_policy()
        rows = state["clip_vectors"][1]
        every = video_ids is None
        if not every:  # share of the rows the videos hold, estimated from the video count
            rows = rows * len(listed) // max(1, state.get("videos", (0, 0))[1])
        exact = rows <= policy.exact_max_rows
        if exact and not every:  # a few videos: exact, from memory after the first search
            key = (state["clip_vectors"][0], state.get("clips", (0, 0))[0])
            load = partial(self._hot_entries, got=snap.rows) if ahead else self._hot_load
            videos = self.tables.hot.videos(key, listed, load)
            return [ClipHit(c, s) for c, s in nearest(videos, vector, t_from, t_to, k)]
        # Across every video the filter names no ids (a 1,000-id IN list costs more than the
        # search): a few extra hits cover rows of unlisted (half-written or half-removed) videos.
        where = span_filter(None if every else listed, t_from, t_to, "t0", "t1")
        (hits,) = read(
            vector_query(table, vector, where, k + 8 if every else k, policy, exact=exact)
        )
        found = hits.to_pylist()
        if every:
            kept, fetched = set(listed), len(found)
            found = [h for h in found if h["video_id"] in kept]
            if len(found) < k and len(found) < fetched:  # many unlisted: name the videos
                where = span_filter(listed, t_from, t_to, "t0", "t1")
                (hits,) = read(vector_query(table, vector, where, k, policy, exact=exact))
                found = hits.to_pylist()
        clips = self.rows.clip_rows((h["video_id"], h["clip_index"]) for h in found[:k])
        return [
            ClipHit(clips[key], 1.0 - float(h["_distance"]))
            for h in found[:k]
            if (key := (h["video_id"], h["clip_index"])) in clips
        ]
