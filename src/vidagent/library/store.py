"""The Library: a LanceDB-backed, versioned on-disk index of many videos.

On-disk layout of a Library at ``<uri>`` (a directory, or an object-store URI)::

    <uri>/
      manifest.json          schema version, embedding spec + dim per vector table, prompt
                             hashes, sampling settings (see manifest.py)
      .write.lock            local Libraries: the inter-process write lock (empty file)
      videos.lance/          one row per video: source, probe facts, per-stage status (JSON)
      clips.lance/           one row per uniform clip: t0, t1, caption, transcript, OCR text,
                             detections, subjects
      frames.lance/          sampled frames as small JPEGs (one per 1/sample_fps seconds)
      shots.lance/           shot boundaries
      transcript.lance/      speech segments with word times
      artifacts.lance/       derived artefacts by (video_id, kind, key): global summary,
                             subject registry, cached browse answers, agent contexts
      clip_vectors.lance/    clip embeddings of the model the manifest names, with t0/t1
                             copied in so searches filter by video and time without a join
      frame_vectors.lance/   image embeddings of the stored thumbnails (video_id, t, vector)
                             by the image-text model the manifest names (ingest embed_frames)
      entities.lance/        AVI entity-graph nodes with name embeddings and importance terms,
      relations.lance/       and its directed, timed edges (ingest graph; graph_tables.py)

Every table is a Lance dataset: each write is one atomic commit of a new version, so a crash in
the middle of a write leaves the previous version readable. Writes for one video replace that
video's rows in a single ``merge_insert`` commit (update matches, insert new, delete stale), and
the ``videos`` row is written *last* and deleted *first*: a video is listed only once all its
rows are in place, and a crash half-way through a removal leaves rows no listing points to,
which the next write or removal of that id replaces or deletes.

Artefacts are typed :class:`~vidagent.library.schema.Artifact` values whose ``data`` is a dict;
inside the table it is a JSON string column (Lance has no schemaless one) no caller sees.

**Many threads and many processes.** Every write (row writes and deletes, table creation and
drops, manifest changes, the read-modify-write of :meth:`Library.set_stage`) runs inside
:meth:`Library.write_lock`, held for one logical write: an in-process ``threading.RLock``
shared by every Library object on the location (re-entrant: nested writes do not deadlock)
plus, for local Libraries, an exclusive ``fcntl.flock`` on ``<root>/.write.lock``
(:mod:`vidagent.library.locking`). Under it the manifest is re-read from disk before it is
changed and the videos row is read fresh, so no process overwrites another's change with a
stale copy; tables are created with ``exist_ok`` under it, so two creators both succeed.
Readers take no lock: commits are atomic, and the connection uses
``read_consistency_interval=0``, so every read and every write's base is the latest committed
version, other processes' commits included. Opening an up-to-date Library takes no lock, so a
read-only copy stays readable.

A ``file:///dir`` URI is the local Library at ``/dir``, file lock included (a shared
filesystem such as NFS too). Object-store Libraries (``s3://``, ``gs://``; credentials from the
environment or ``storage_options``) have no file lock: the in-process lock still
serialises one process's writes, and across processes Lance's commits are optimistic (a commit
that finds a newer version is re-applied on it, with retries), which keeps each table
consistent; only a read-modify-write (``set_stage``) from two machines at once may lose one of
its two updates there.

**Indexes** (scalar on video id and time, ANN on clip vectors) are built by the write that
takes a table past a threshold of the Library's index policy, and searches of a few videos are
served from a per-process cache after their first: see :mod:`vidagent.library.indexing` and
:mod:`vidagent.library.hot`; :meth:`Library.compact` compacts, re-indexes and prunes versions.

A video's id is derived from its bytes (:func:`content_id`), not its name: renaming or copying a
file keeps its id, and two different files never share one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from vidagent.exceptions import LibraryError, VideoNotFoundError
from vidagent.library.filters import one_of, quote, span_filter
from vidagent.library.graph_tables import GraphTables
from vidagent.library.hot import HotVideos
from vidagent.library.indexing import IndexedTables
from vidagent.library.locking import LOCK_FILE, WriteLock, lock_for
from vidagent.library.manifest import (
    Manifest,
    check_supported,
    migrate,
    outdated,
    read_manifest,
    split_uri,
    write_manifest,
)
from vidagent.library.schema import (
    GLOBAL_SUMMARY,
    TABLES,
    VECTOR_KEYS,
    Artifact,
    ArtifactKind,
    ClipRow,
    FrameRow,
    ShotRow,
    TranscriptSegment,
    VideoRecord,
    check_kind,
)
from vidagent.library.vectors import VectorTables

_SAMPLE = 1 << 20  # bytes read from each of the head, middle and tail of a file


def local_library_path(uri: str) -> str | None:
    """The directory of a local Library (a path or a ``file://`` URI); None for object stores."""
    if uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise LibraryError(f"{uri}: a file:// URI names a local path (file:///dir/library)")
        return unquote(parsed.path)
    return None if "://" in uri else uri


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


class Library(VectorTables, GraphTables, IndexedTables):
    """An index of videos on disk, safe to share between threads and processes (module doc).

    Opening creates it if needed and runs pending migrations.

    Args:
        uri: a directory path, a ``file://`` URI (a local or shared-filesystem directory, with
            the file lock), or an object-store URI such as ``s3://bucket/videos``.
        create: create the Library when there is none at ``uri`` (else raise LibraryError).
        storage_options: LanceDB's object-store options (credentials, endpoint, region); by
            default they come from the environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``).
    """

    def __init__(
        self,
        uri: str | Path,
        *,
        create: bool = True,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        import lancedb

        self.uri = str(uri)
        local_path = local_library_path(self.uri)
        self._local = local_path is not None
        self._fs, self._root = split_uri(local_path or self.uri)
        self._lock: WriteLock = lock_for(
            self._root if self._local else self.uri,
            os.path.join(self._root, LOCK_FILE) if self._local else None,
        )
        manifest = read_manifest(self._fs, self._root)
        if manifest is None and not create:
            raise LibraryError(f"no Library at {self.uri}")
        # Interval 0: every read sees the latest commit, other processes' too (module doc).
        self._db = lancedb.connect(
            self._root if self._local else self.uri,
            read_consistency_interval=timedelta(0),
            storage_options=storage_options,
        )
        self._tables: dict[str, Any] = {}
        self._hot = HotVideos()  # recently searched videos (hot.py)
        if manifest is not None and not outdated(manifest):
            check_supported(manifest, self.uri)
            self.manifest = manifest
            return
        with self.write_lock():
            # Read again under the lock: another process may have created or migrated it.
            manifest = read_manifest(self._fs, self._root)
            if manifest is None:
                manifest = Manifest()
                write_manifest(self._fs, self._root, manifest)
            self.manifest = manifest
            self.manifest = migrate(self, manifest)

    def __repr__(self) -> str:
        return f"Library({self.uri!r})"

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the write lock (re-entrant) around a read and the write that depends on it.

        Every write method takes it itself. Keep it short: never call a model while holding it.
        """
        with self._lock.hold():
            yield

    # -- manifest -------------------------------------------------------------------------------

    def reload_manifest(self) -> Manifest:
        """Read the manifest from disk again (another process may have changed it).

        Raises:
            LibraryVersionError: a newer vidagent has migrated the Library meanwhile.
        """
        fresh = read_manifest(self._fs, self._root)
        if fresh is not None:
            check_supported(fresh, self.uri)
            for name in set(self.manifest.embeddings) | set(fresh.embeddings):
                if self.manifest.embeddings.get(name) != fresh.embeddings.get(name):
                    self._tables.pop(name, None)  # dropped and re-made by another process
            self.manifest = fresh
        return self.manifest

    def save_manifest(self, manifest: Manifest | None = None) -> None:
        """Write ``manifest`` (default: this object's) as the Library's manifest, as is."""
        with self.write_lock():
            if manifest is not None:
                self.manifest = manifest
            write_manifest(self._fs, self._root, self.manifest)

    def update_manifest(self, change: Callable[[Manifest], None]) -> Manifest:
        """Apply ``change`` to the manifest as it is on disk now, and write it, under the lock."""
        with self.write_lock():
            manifest = self.reload_manifest()
            change(manifest)
            write_manifest(self._fs, self._root, manifest)
            return manifest

    def set_sampling(self, **settings: Any) -> None:
        """Record the sampling settings stored rows were made with."""
        with self.write_lock():
            if {k: self.reload_manifest().sampling.get(k) for k in settings} != settings:
                self.update_manifest(lambda m: m.sampling.update(settings))

    # -- tables ---------------------------------------------------------------------------------

    def _table_names(self) -> list[str]:
        return list(self._db.list_tables().tables)

    def has_table(self, name: str) -> bool:
        """Whether the table ``name`` exists (for migrations and housekeeping)."""
        return name in self._tables or name in self._table_names()

    def table(self, name: str, schema: pa.Schema | None = None) -> Any:
        """The LanceDB table ``name``, created empty with ``schema`` when missing."""
        handle = self._tables.get(name)
        if handle is None and name in self._table_names():
            try:
                handle = self._db.open_table(name)
            except ValueError:  # listed, but its creator (another process) has not committed
                handle = None
        if handle is None:
            with self.write_lock():
                # exist_ok: another process may have made it since the listing above.
                schema = schema or TABLES[name][0]
                handle = self._db.create_table(name, schema=schema, exist_ok=True)
        self._tables[name] = handle
        return handle

    def drop_table(self, name: str) -> None:
        """Delete the table ``name`` and its rows, if it exists (for migrations)."""
        with self.write_lock():
            self._tables.pop(name, None)
            if name in self._table_names():
                self._db.drop_table(name)

    def _scan(self, name: str, where: str) -> list[dict[str, Any]]:
        if not self.has_table(name):
            return []
        return self.table(name).search().where(where).limit(None).to_arrow().to_pylist()  # type: ignore[no-any-return]

    def _merge(
        self,
        name: str,
        rows: Sequence[dict[str, Any]],
        schema: pa.Schema | None = None,
        *,
        replace: str | None = None,
    ) -> None:
        """Insert ``rows`` or update the rows with their keys, in one atomic commit.

        With ``replace`` (a video id), that video's other rows are deleted in the same commit.
        """
        if not rows and replace is None:
            return
        schema = schema or TABLES[name][0]
        keys = TABLES[name][1] if name in TABLES else VECTOR_KEYS[name]
        with self.write_lock():
            table = self.table(name, schema)
            if not rows and replace is not None:
                table.delete(f"video_id = {quote(replace)}")
                return
            merge = table.merge_insert(list(keys)).when_matched_update_all()
            merge = merge.when_not_matched_insert_all()
            if replace is not None:
                merge = merge.when_not_matched_by_source_delete(f"video_id = {quote(replace)}")
            merge.execute(pa.Table.from_pylist(list(rows), schema=schema))
            self._maintain(name)

    # -- videos ---------------------------------------------------------------------------------

    def put_video(self, record: VideoRecord) -> None:
        """Insert or update a video's row (call after its other rows are written)."""
        self._merge("videos", [record.to_row()])

    def list_videos(self) -> list[VideoRecord]:
        if not self.has_table("videos"):
            return []
        rows = self.table("videos").to_arrow().to_pylist()
        return sorted(
            (VideoRecord.from_row(r) for r in rows), key=lambda v: (v.added_at, v.video_id)
        )

    def listed_ids(self, among: Sequence[str] | None = None) -> list[str]:
        """Ids of the listed videos (only those in ``among`` when given); reads the id column
        alone, so it stays cheap with thousands of videos."""
        if not self.has_table("videos") or (among is not None and not among):
            return []
        table = self.table("videos")

        def load() -> list[str]:
            column = table.search().select(["video_id"]).limit(None).to_arrow()["video_id"]
            return column.to_pylist()  # type: ignore[no-any-return]

        listed = self._hot.listed(table.version, load)
        if among is None:
            return listed
        known = set(listed)
        return [v for v in dict.fromkeys(among) if v in known]

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
        where = f"video_id = {quote(video_id)}"
        return self.has_table("videos") and self.table("videos").count_rows(where) > 0

    def remove_video(self, ref: str) -> str:
        """Delete a video and all its rows (artefacts included); returns its id."""
        with self.write_lock():
            video_id = self.resolve(ref)
            where = f"video_id = {quote(video_id)}"
            self.table("videos").delete(where)  # first: from here on the video is not listed
            for name in self._table_names():
                if name != "videos":
                    self.table(name).delete(where)
        return video_id

    def set_stage(self, video_id: str, stage: str, info: dict[str, Any]) -> VideoRecord:
        """Record that ``stage`` finished for a video, with what produced it.

        The row is read under the write lock, so stages recorded at the same time by other
        threads or processes are kept.
        """
        with self.write_lock():
            video = self.get_video(video_id)
            stages = {**video.stages, stage: info}
            updated = dataclasses.replace(video, stages=stages)
            self.put_video(updated)
        return updated

    # -- clips, frames, shots, transcript ----------------------------------------------------------

    def put_clips(self, video_id: str, clips: Sequence[ClipRow]) -> None:
        """Make ``clips`` the video's clips. Its clip vectors belong to the old clips: dropped."""
        with self.write_lock():
            if self.has_table("clip_vectors"):
                self.table("clip_vectors").delete(f"video_id = {quote(video_id)}")
            self._merge("clips", [c.__dict__ for c in clips], replace=video_id)

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
        with self.write_lock():
            self.table("clips").merge_insert(
                ["video_id", "clip_index"]
            ).when_matched_update_all().execute(data)

    def clips(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[ClipRow]:
        rows = self._scan("clips", span_filter([video_id], t0, t1, "t0", "t1"))
        return sorted((ClipRow.from_row(r) for r in rows), key=lambda c: c.clip_index)

    def clip_rows(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ClipRow]:
        """The clips with these ``(video_id, clip_index)`` keys, read in one query."""
        wanted: dict[str, set[int]] = {}
        for video_id, index in keys:
            wanted.setdefault(video_id, set()).add(int(index))
        if not wanted:
            return {}
        where = " OR ".join(
            f"(video_id = {quote(v)} AND clip_index IN ({', '.join(map(str, sorted(ix)))}))"
            for v, ix in wanted.items()
        )
        rows = (ClipRow.from_row(r) for r in self._scan("clips", where))
        return {(c.video_id, c.clip_index): c for c in rows}

    def put_frames(self, video_id: str, frames: Sequence[FrameRow]) -> None:
        """Make ``frames`` the video's thumbnails. Its frame vectors belong to the old ones:
        dropped."""
        with self.write_lock():
            if self.has_table("frame_vectors"):
                self.table("frame_vectors").delete(f"video_id = {quote(video_id)}")
            self._merge("frames", [f.__dict__ for f in frames], replace=video_id)

    def frames(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[FrameRow]:
        rows = self._scan("frames", span_filter([video_id], t0, t1, "t", "t"))
        return sorted((FrameRow.from_row(r) for r in rows), key=lambda f: f.t)

    def put_shots(self, video_id: str, shots: Sequence[ShotRow]) -> None:
        self._merge("shots", [s.__dict__ for s in shots], replace=video_id)

    def shots(self, video_id: str) -> list[ShotRow]:
        rows = self._scan("shots", f"video_id = {quote(video_id)}")
        return sorted((ShotRow.from_row(r) for r in rows), key=lambda s: s.shot_index)

    def put_transcript(self, video_id: str, segments: Sequence[TranscriptSegment]) -> None:
        self._merge("transcript", [s.__dict__ for s in segments], replace=video_id)

    def transcript(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[TranscriptSegment]:
        rows = self._scan("transcript", span_filter([video_id], t0, t1, "t0", "t1"))
        return sorted((TranscriptSegment.from_row(r) for r in rows), key=lambda s: s.segment_index)

    # -- artefacts ------------------------------------------------------------------------------

    def put_artifact(self, artifact: Artifact) -> Artifact:
        """Insert or replace the artefact with its ``(video_id, kind, key)``.

        Returns:
            The artefact as stored: ``updated_at`` set, ``data`` as it reads back.

        Raises:
            ValueError: an unknown kind. TypeError: ``data`` is not a JSON-able dict.
        """
        return self.put_artifacts([artifact])[0]

    def put_artifacts(self, artifacts: Sequence[Artifact]) -> list[Artifact]:
        """:meth:`put_artifact` for several, in one atomic commit (the last of a key wins)."""
        if not artifacts:
            return []
        now = datetime.now(timezone.utc).isoformat()
        rows = {
            (a.video_id, a.kind, a.key): dataclasses.replace(a, updated_at=now).to_row()
            for a in artifacts
        }
        self._merge("artifacts", list(rows.values()))
        return [Artifact.from_row(rows[(a.video_id, a.kind, a.key)]) for a in artifacts]

    def artifact(self, video_id: str, kind: ArtifactKind, key: str = "") -> Artifact | None:
        """The artefact ``(video_id, kind, key)``, or None."""
        check_kind(kind)
        where = f"video_id = {quote(video_id)} AND kind = {quote(kind)} AND key = {quote(key)}"
        rows = self._scan("artifacts", where)
        return Artifact.from_row(rows[0]) if rows else None

    def artifacts(self, video_id: str, kind: ArtifactKind | None = None) -> list[Artifact]:
        """A video's artefacts (of one kind, or all), ordered by kind and key."""
        where = f"video_id = {quote(video_id)}"
        if kind is not None:
            check_kind(kind)
            where += f" AND kind = {quote(kind)}"
        rows = self._scan("artifacts", where)
        return sorted((Artifact.from_row(r) for r in rows), key=lambda a: (a.kind, a.key))

    def delete_artifacts(
        self, video_id: str, kind: ArtifactKind, keys: Sequence[str] | None = None
    ) -> None:
        """Delete a video's artefacts of ``kind``: those with ``keys``, or all of them."""
        check_kind(kind)
        if (keys is not None and not keys) or not self.has_table("artifacts"):
            return
        where = f"video_id = {quote(video_id)} AND kind = {quote(kind)}"
        if keys is not None:
            where += " AND " + one_of("key", keys)
        with self.write_lock():
            self.table("artifacts").delete(where)

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
        """The stored artefact when ``producer`` and ``inputs_hash`` match, else a new one.

        ``build`` returns ``(text, data)``; it runs outside the write lock (it may call a model
        for seconds). Two callers missing at once both build and the last write wins, which is
        harmless: both built from the same producer and inputs.

        Returns:
            ``(artifact, built)``: ``built`` is True when ``build`` ran.
        """
        stored = self.artifact(video_id, kind, key)
        if stored is not None and (stored.producer, stored.inputs_hash) == (producer, inputs_hash):
            return stored, False
        text, data = build()
        made = Artifact(video_id, kind, key, text, data, producer, inputs_hash)
        return self.put_artifact(made), True

    def registry(self, video_id: str) -> dict[str, Any]:
        """The video's subject registry (subject id -> entry), ``{}`` when there is none."""
        stored = self.artifact(video_id, "registry")
        return stored.data if stored is not None else {}

    def global_summary(self, video_id: str) -> str:
        """The video's global summary text, ``""`` when there is none."""
        stored = self.artifact(video_id, "summary", GLOBAL_SUMMARY)
        return stored.text if stored is not None else ""

    # -- housekeeping ---------------------------------------------------------------------------

    def size_bytes(self) -> int:
        """Bytes the Library occupies (local Libraries only)."""
        if not self._local:
            raise LibraryError("size_bytes is only available for local Libraries")
        return sum(
            os.path.getsize(os.path.join(d, f))
            for d, _, files in os.walk(self._root)
            for f in files
        )
