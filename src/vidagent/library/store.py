"""The Library: a LanceDB-backed, versioned on-disk index of many videos.

On-disk layout of a Library at ``<uri>`` (a directory, or an object-store URI)::

    <uri>/
      manifest.json          schema version, embedding spec + dim per vector table, prompt
                             hashes, sampling settings (see manifest.py)
      videos.lance/          one row per video: source, probe facts, per-stage status (JSON)
      clips.lance/           one row per uniform clip: t0, t1, caption, transcript, OCR text,
                             detections, subjects
      frames.lance/          sampled frames as small JPEGs (one per 1/sample_fps seconds)
      shots.lance/           shot boundaries
      clip_vectors.lance/    clip embeddings of the model the manifest names, with t0/t1
                             copied in so searches filter by video and time without a join

Every table is a Lance dataset: each write is one atomic commit of a new version, so a crash in
the middle of a write leaves the previous version readable. Writes for one video replace that
video's rows in a single ``merge_insert`` commit (update matches, insert new, delete stale), and
the ``videos`` row is written *last* and deleted *first*: a video is listed only once all its
rows are in place, and a crash half-way through a removal leaves rows no listing points to,
which the next write or removal of that id replaces or deletes.

A video's id is derived from its bytes (:func:`content_id`), not its name: renaming or copying a
file keeps its id, and two different files never share one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from vidagent.exceptions import EmbeddingMismatchError, LibraryError, VideoNotFoundError
from vidagent.library.manifest import Manifest, migrate, read_manifest, split_uri, write_manifest
from vidagent.library.schema import (
    TABLES,
    VECTOR_KEYS,
    ClipHit,
    ClipRow,
    FrameRow,
    ShotRow,
    Summary,
    TranscriptSegment,
    VideoRecord,
    vectors_schema,
)

_SAMPLE = 1 << 20  # bytes read from each of the head, middle and tail of a file


def content_id(path: str | Path) -> str:
    """A 16-hex-digit id from a file's size and 1 MiB samples of its head, middle and tail.

    Sampling keeps this instant on multi-gigabyte files; size plus three samples separate real
    video files in practice (a re-encode, trim or edit changes them all).
    """
    path = Path(path)
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        for offset in sorted({0, max(0, size // 2 - _SAMPLE // 2), max(0, size - _SAMPLE)}):
            f.seek(offset)
            h.update(f.read(_SAMPLE))
    return h.hexdigest()[:16]


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _in(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(_quote(v) for v in values)})"


class Library:
    """An index of videos on disk. Opening creates it if needed and runs pending migrations.

    Args:
        uri: a directory path, or an object-store URI such as ``s3://bucket/videos``.
        create: create the Library when there is none at ``uri`` (else raise LibraryError).
    """

    def __init__(self, uri: str | Path, *, create: bool = True) -> None:
        import lancedb

        self.uri = str(uri)
        self._fs, self._root = split_uri(self.uri)
        manifest = read_manifest(self._fs, self._root)
        if manifest is None:
            if not create:
                raise LibraryError(f"no Library at {self.uri}")
            manifest = Manifest()
            write_manifest(self._fs, self._root, manifest)
        self._db = lancedb.connect(self._root if "://" not in self.uri else self.uri)
        self._tables: dict[str, Any] = {}
        self.manifest = migrate(self, manifest)

    def __repr__(self) -> str:
        return f"Library({self.uri!r})"

    # -- manifest -------------------------------------------------------------------------------

    def save_manifest(self, manifest: Manifest | None = None) -> None:
        if manifest is not None:
            self.manifest = manifest
        write_manifest(self._fs, self._root, self.manifest)

    def set_sampling(self, **settings: Any) -> None:
        """Record the sampling settings stored rows were made with."""
        if {k: self.manifest.sampling.get(k) for k in settings} != settings:
            self.manifest.sampling.update(settings)
            self.save_manifest()

    # -- tables ---------------------------------------------------------------------------------

    def _table_names(self) -> list[str]:
        return list(self._db.list_tables().tables)

    def _exists(self, name: str) -> bool:
        return name in self._tables or name in self._table_names()

    def table(self, name: str, schema: pa.Schema | None = None) -> Any:
        """The LanceDB table ``name``, created empty with ``schema`` when missing."""
        if name not in self._tables:
            if self._exists(name):
                self._tables[name] = self._db.open_table(name)
            else:
                schema = schema or TABLES[name][0]
                self._tables[name] = self._db.create_table(name, schema=schema, exist_ok=True)
        return self._tables[name]

    def _scan(self, name: str, where: str) -> list[dict[str, Any]]:
        if not self._exists(name):
            return []
        return self.table(name).search().where(where).limit(None).to_arrow().to_pylist()  # type: ignore[no-any-return]

    def _replace(
        self,
        name: str,
        video_id: str,
        rows: Sequence[dict[str, Any]],
        schema: pa.Schema | None = None,
    ) -> None:
        """Make ``rows`` the only rows of ``video_id`` in ``name``, in one atomic commit."""
        schema = schema or TABLES[name][0]
        keys = VECTOR_KEYS if name not in TABLES else TABLES[name][1]
        table = self.table(name, schema)
        if not rows:
            table.delete(f"video_id = {_quote(video_id)}")
            return
        data = pa.Table.from_pylist(list(rows), schema=schema)
        (
            table.merge_insert(list(keys))
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(f"video_id = {_quote(video_id)}")
            .execute(data)
        )

    # -- videos ---------------------------------------------------------------------------------

    def put_video(self, record: VideoRecord) -> None:
        """Insert or update a video's row (call after its other rows are written)."""
        data = pa.Table.from_pylist([record.to_row()], schema=TABLES["videos"][0])
        self.table("videos").merge_insert(
            "video_id"
        ).when_matched_update_all().when_not_matched_insert_all().execute(data)

    def list_videos(self) -> list[VideoRecord]:
        if not self._exists("videos"):
            return []
        rows = self.table("videos").to_arrow().to_pylist()
        return sorted(
            (VideoRecord.from_row(r) for r in rows), key=lambda v: (v.added_at, v.video_id)
        )

    def resolve(self, ref: str) -> str:
        """A full video id from an id, a unique id prefix, a file name or a source path."""
        videos = self.list_videos()
        exact = [v for v in videos if ref in (v.video_id, v.source, v.name)]
        matches = exact or [v for v in videos if v.video_id.startswith(ref)]
        if len(matches) == 1:
            return matches[0].video_id
        if not matches:
            raise VideoNotFoundError(f"no video {ref!r} in {self.uri}; see `vidagent list`")
        ids = ", ".join(v.video_id for v in matches[:5])
        raise VideoNotFoundError(f"{ref!r} matches several videos ({ids}); give more of the id")

    def get_video(self, ref: str) -> VideoRecord:
        video_id = self.resolve(ref)
        return next(v for v in self.list_videos() if v.video_id == video_id)

    def has_video(self, video_id: str) -> bool:
        return (
            bool(self._exists("videos"))
            and self.table("videos").count_rows(f"video_id = {_quote(video_id)}") > 0
        )

    def remove_video(self, ref: str) -> str:
        """Delete a video and all its rows; returns its id."""
        video_id = self.resolve(ref)
        where = f"video_id = {_quote(video_id)}"
        self.table("videos").delete(where)  # first: from here on the video is not listed
        for name in self._table_names():
            if name != "videos":
                self.table(name).delete(where)
        return video_id

    def set_stage(self, video_id: str, stage: str, info: dict[str, Any]) -> VideoRecord:
        """Record that ``stage`` finished for a video, with what produced it."""
        video = self.get_video(video_id)
        stages = {**video.stages, stage: info}
        updated = VideoRecord(**{**video.__dict__, "stages": stages})
        self.put_video(updated)
        return updated

    # -- clips, frames, shots --------------------------------------------------------------------

    def put_clips(self, video_id: str, clips: Sequence[ClipRow]) -> None:
        """Make ``clips`` the video's clips. Its clip vectors belong to the old clips: dropped."""
        if self._exists("clip_vectors"):
            self.table("clip_vectors").delete(f"video_id = {_quote(video_id)}")
        self._replace("clips", video_id, [c.__dict__ for c in clips])

    def update_clips(self, video_id: str, updates: Sequence[dict[str, Any]]) -> None:
        """Set some columns of existing clips, in one atomic commit (a stage's checkpoint).

        Each update holds ``clip_index`` and the columns to set; other columns are kept.
        """
        if not updates:
            return
        schema = TABLES["clips"][0]
        columns = ["video_id", *dict.fromkeys(k for u in updates for k in u)]
        part = pa.schema([schema.field(c) for c in columns])
        data = pa.Table.from_pylist([{"video_id": video_id, **u} for u in updates], schema=part)
        self.table("clips").merge_insert(
            ["video_id", "clip_index"]
        ).when_matched_update_all().execute(data)

    def clips(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[ClipRow]:
        rows = self._scan("clips", _span_filter([video_id], t0, t1, "t0", "t1"))
        return sorted((ClipRow.from_row(r) for r in rows), key=lambda c: c.clip_index)

    def put_frames(self, video_id: str, frames: Sequence[FrameRow]) -> None:
        self._replace("frames", video_id, [f.__dict__ for f in frames])

    def frames(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[FrameRow]:
        rows = self._scan("frames", _span_filter([video_id], t0, t1, "t", "t"))
        return sorted((FrameRow.from_row(r) for r in rows), key=lambda f: f.t)

    def put_shots(self, video_id: str, shots: Sequence[ShotRow]) -> None:
        self._replace("shots", video_id, [s.__dict__ for s in shots])

    def shots(self, video_id: str) -> list[ShotRow]:
        rows = self._scan("shots", f"video_id = {_quote(video_id)}")
        return sorted((ShotRow.from_row(r) for r in rows), key=lambda s: s.shot_index)

    def put_transcript(self, video_id: str, segments: Sequence[TranscriptSegment]) -> None:
        self._replace("transcript", video_id, [s.__dict__ for s in segments])

    def transcript(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[TranscriptSegment]:
        rows = self._scan("transcript", _span_filter([video_id], t0, t1, "t0", "t1"))
        return sorted((TranscriptSegment.from_row(r) for r in rows), key=lambda s: s.segment_index)

    def put_summary(self, summary: Summary) -> None:
        """Insert or replace one ``(video_id, kind)`` artefact."""
        data = pa.Table.from_pylist([summary.__dict__], schema=TABLES["summaries"][0])
        table = self.table("summaries")
        table.merge_insert(
            ["video_id", "kind"]
        ).when_matched_update_all().when_not_matched_insert_all().execute(data)

    def summary(self, video_id: str, kind: str) -> Summary | None:
        rows = self._scan("summaries", f"video_id = {_quote(video_id)} AND kind = {_quote(kind)}")
        return Summary.from_row(rows[0]) if rows else None

    # -- vectors --------------------------------------------------------------------------------

    def use_embedding(self, table: str, spec: str, dim: int) -> bool:
        """Bind an embedding table to a model; a different model empties it first.

        Returns True when the table was reset (its vectors must be recomputed).
        """
        current = self.manifest.embeddings.get(table)
        if current == {"spec": spec, "dim": dim}:
            return False
        if self._exists(table):
            self._db.drop_table(table)
            self._tables.pop(table, None)
        self.manifest.embeddings[table] = {"spec": spec, "dim": dim}
        self.save_manifest()
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
        bound = self.manifest.embeddings.get("clip_vectors")
        if bound is None or bound["spec"] != spec or vectors.shape[1:] != (bound["dim"],):
            raise EmbeddingMismatchError(
                f"clip vectors from {spec} ({vectors.shape[1:]}) do not match the Library's "
                f"{bound}; call use_embedding('clip_vectors', spec, dim) to switch models"
            )
        if len(clips) != len(vectors):
            raise ValueError(f"{len(clips)} clips but {len(vectors)} vectors")
        hashes = list(text_hashes) if text_hashes is not None else [""] * len(clips)
        rows = [
            {
                "video_id": video_id,
                "clip_index": c.clip_index,
                "t0": c.t0,
                "t1": c.t1,
                "text_hash": h,
                "vector": v,
            }
            for c, v, h in zip(clips, vectors.astype(np.float32), hashes)
        ]
        schema = vectors_schema(bound["dim"])
        if replace:
            self._replace("clip_vectors", video_id, rows, schema)
            return
        data = pa.Table.from_pylist(rows, schema=schema)
        table = self.table("clip_vectors", schema)
        table.merge_insert(
            list(VECTOR_KEYS)
        ).when_matched_update_all().when_not_matched_insert_all().execute(data)

    def clip_vector_hashes(self, video_id: str) -> dict[int, str]:
        """``clip_index -> text_hash`` of the vectors stored for a video."""
        if "clip_vectors" not in self.manifest.embeddings:
            return {}
        rows = self._scan("clip_vectors", f"video_id = {_quote(video_id)}")
        return {int(r["clip_index"]): str(r["text_hash"]) for r in rows}

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
        """
        if "clip_vectors" not in self.manifest.embeddings or not self._exists("clip_vectors"):
            return []
        listed = [v.video_id for v in self.list_videos()]
        wanted = [v for v in (video_ids or listed) if v in listed]
        if not wanted:
            return []
        query = (
            self.table("clip_vectors")
            .search(np.asarray(vector, np.float32).reshape(-1))
            .distance_type("cosine")
            .where(_span_filter(wanted, t_from, t_to, "t0", "t1"), prefilter=True)
            .limit(k)
        )
        hits = query.to_list()
        clips = {}
        for vid in {h["video_id"] for h in hits}:
            clips.update({(vid, c.clip_index): c for c in self.clips(vid)})
        return [
            ClipHit(clips[(h["video_id"], h["clip_index"])], 1.0 - float(h["_distance"]))
            for h in hits
            if (h["video_id"], h["clip_index"]) in clips
        ]

    # -- housekeeping ---------------------------------------------------------------------------

    def size_bytes(self) -> int:
        """Bytes the Library occupies (local Libraries only)."""
        if "://" in self.uri:
            raise LibraryError("size_bytes is only available for local Libraries")
        return sum(
            os.path.getsize(os.path.join(d, f))
            for d, _, files in os.walk(self._root)
            for f in files
        )


def _span_filter(
    video_ids: Sequence[str], t0: float | None, t1: float | None, start_col: str, end_col: str
) -> str:
    # Spans overlap a range when they end after it starts and start before it ends; points
    # (start_col == end_col) count when they fall inside it, ends included.
    strict = start_col != end_col
    parts = [_in("video_id", video_ids)]
    if t0 is not None:
        parts.append(f"{end_col} {'>' if strict else '>='} {float(t0)}")
    if t1 is not None:
        parts.append(f"{start_col} {'<' if strict else '<='} {float(t1)}")
    return " AND ".join(parts)
