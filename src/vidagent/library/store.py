"""The Library: a LanceDB-backed, versioned on-disk index of many videos.

On-disk layout of a Library at ``<uri>`` (a directory, or an object-store URI)::

    <uri>/
      manifest.json          schema version, embedding spec + dim per vector table, prompt
                             hashes, sampling settings (see manifest.py)
      .write.lock            local Libraries: the inter-process write lock (empty file)
      videos.lance/          one row per video: source, probe facts, per-stage status (JSON)
      clips.lance/           one row per uniform clip: t0, t1, caption (and the perception
                             describer's facts), transcript, OCR text (and each line's frame
                             times), detections, subjects (schema.py)
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

**One table owner, composed parts.** A :class:`Library` is a façade over parts that each hold
one idea, all reading and writing through one :class:`~vidagent.library.tables.Tables` (the
LanceDB connection, the table handles, the write lock, the manifest, the write path that
maintains indexes):

==========================  ========================================================
``library.tables``          the owner (tables.py): connection, handles, lock, manifest
``library.rows``            videos, clips, frames, shots, transcript (rows.py)
``library.derived``         derived artefacts (artifacts.py)
``library.vectors``         clip and frame vectors, clip search (vectors.py)
``library.graph``           AVI entity graphs (graph_tables.py)
``library.indexes``         index policy and compaction (indexes.py, indexing.py)
==========================  ========================================================

Each part is built over the owner and the parts below it, never over the Library, and no
module of this package imports one that imports it back. The Library's methods delegate to the
parts: callers keep one object and one surface. Migration steps (manifest.py) get the opened
Library itself, through the few public methods its ``Upgradable`` protocol names.

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
:meth:`Library.write_lock` (the table owner's), held for one logical write: an in-process
``threading.RLock`` shared by every Library object on the location (re-entrant: nested writes
do not deadlock) plus, for local Libraries, an exclusive ``fcntl.flock`` on ``<root>/.write.lock``
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

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from vidagent.config import LIBRARY_INDEX_CACHE_MIB, LIBRARY_METADATA_CACHE_MIB
from vidagent.exceptions import NoLibraryError, UserError
from vidagent.library.artifacts import Artifacts
from vidagent.library.graph import EntityGraph
from vidagent.library.graph_tables import Graphs
from vidagent.library.indexes import Indexes
from vidagent.library.indexing import IndexPolicy, TableReport
from vidagent.library.manifest import Manifest, check_supported, migrate, outdated
from vidagent.library.rows import REMOVE_PREFIX, Rows, content_id
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
from vidagent.library.tables import Tables, local_library_path
from vidagent.library.vectors import Vectors

#: one indexing of a video at a time in this process (:meth:`Library.indexing`), by
#: (Library URI, video id); the lock file does it between processes
_INDEXING: dict[tuple[str, str], threading.Lock] = {}
_INDEXING_GUARD = threading.Lock()

__all__ = ["Library", "content_id", "local_library_path"]


class Library:
    """An index of videos on disk, safe to share between threads and processes (module doc).

    Opening creates it if needed and runs pending migrations. Its methods delegate to its parts
    (module doc), each of which is also reachable as an attribute.

    Args:
        uri: a directory path, a ``file://`` URI (a local or shared-filesystem directory, with
            the file lock), or an object-store URI such as ``s3://bucket/videos``.
        create: create the Library when there is none at ``uri`` (else raise LibraryError).
        storage_options: LanceDB's object-store options (credentials, endpoint, region); by
            default they come from the environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``).
        index_cache_mib: the bound of LanceDB's index cache (ANN partitions, BTREE pages).
        metadata_cache_mib: the bound of LanceDB's metadata cache; both are held for the
            Library's life (see :mod:`vidagent.library.tables`, "Cache sizes").
    """

    def __init__(
        self,
        uri: str | Path,
        *,
        create: bool = True,
        storage_options: dict[str, str] | None = None,
        index_cache_mib: int = LIBRARY_INDEX_CACHE_MIB,
        metadata_cache_mib: int = LIBRARY_METADATA_CACHE_MIB,
    ) -> None:
        self.uri = str(uri)
        self.tables = Tables(
            self.uri,
            storage_options=storage_options,
            index_cache_mib=index_cache_mib,
            metadata_cache_mib=metadata_cache_mib,
        )
        self.rows = Rows(self.tables)
        self.derived = Artifacts(self.tables)
        self.vectors = Vectors(self.tables, self.rows)
        self.graph = Graphs(self.tables, self.derived)
        self.indexes = Indexes(self.tables)
        self._open(create)

    def _open(self, create: bool) -> None:
        """Read the manifest; create the Library, or run pending migrations, under the lock."""
        manifest = self.tables.read_manifest()
        if manifest is None and not create:
            raise NoLibraryError(f"no Library at {self.uri}")
        if manifest is not None and not outdated(manifest):
            check_supported(manifest, self.uri)  # an up-to-date Library opens without the lock
            self.tables.manifest = manifest
            return
        with self.write_lock():
            # Read again under the lock: another process may have created or migrated it.
            manifest = self.tables.read_manifest()
            if manifest is None:
                manifest = Manifest()
                self.tables.save_manifest(manifest)
            self.tables.manifest = manifest
            self.tables.manifest = migrate(self, manifest)

    def __repr__(self) -> str:
        return f"Library({self.uri!r})"

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the write lock (re-entrant) around a read and the write that depends on it.

        Every write method takes it itself. Keep it short: never call a model while holding it.
        """
        with self.tables.write_lock():
            yield

    @contextmanager
    def indexing(self, video_id: str) -> Iterator[None]:
        """Index ``video_id`` alone: held around a whole pipeline run, waiting while another
        thread or process indexes the same video (two at once each wrote their stages' rows, and
        the later transcript dropped the speaker labels the other had set). The one that waited
        then finds the stages done. A local Library locks ``indexing/<id>.lock`` in its folder
        (the system lets it go when a process dies); another only this process's threads.
        """
        import fcntl

        with _INDEXING_GUARD:
            lock = _INDEXING.setdefault((self.uri, video_id), threading.Lock())
        with lock:
            if not self.tables.local:
                yield
                return
            path = Path(self.tables.root) / "indexing" / f"{video_id}.lock"
            with self.write_lock():  # the folder's creation refused: a StorageError
                path.parent.mkdir(exist_ok=True)
            with path.open("a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    # -- manifest -------------------------------------------------------------------------------

    @property
    def manifest(self) -> Manifest:
        """The manifest as this process last read or wrote it."""
        return self.tables.manifest

    def reload_manifest(self) -> Manifest:
        """Read the manifest from disk again (another process may have changed it).

        Raises:
            LibraryVersionError: a newer vidagent has migrated the Library meanwhile.
        """
        return self.tables.reload_manifest()

    def save_manifest(self, manifest: Manifest | None = None) -> None:
        """Write ``manifest`` (default: this object's) as the Library's manifest, as is."""
        self.tables.save_manifest(manifest)

    def update_manifest(self, change: Callable[[Manifest], None]) -> Manifest:
        """Apply ``change`` to the manifest as it is on disk now, and write it, under the lock."""
        return self.tables.update_manifest(change)

    def set_sampling(self, **settings: Any) -> None:
        """Record the sampling settings stored rows were made with."""
        self.tables.set_sampling(**settings)

    # -- tables ---------------------------------------------------------------------------------

    def _table_names(self) -> list[str]:
        return self.tables.names()

    def has_table(self, name: str) -> bool:
        """Whether the table ``name`` exists (for migrations and housekeeping)."""
        return self.tables.has(name)

    def table(self, name: str, schema: pa.Schema | None = None) -> Any:
        """The LanceDB table ``name``, created empty with ``schema`` when missing."""
        return self.tables.table(name, schema)

    def drop_table(self, name: str) -> None:
        """Delete the table ``name`` and its rows, if it exists (for migrations)."""
        self.tables.drop(name)

    def size_bytes(self) -> int:
        """Bytes the Library occupies (local Libraries only)."""
        return self.tables.size_bytes()

    # -- videos and their rows (rows.py) --------------------------------------------------------

    def put_video(self, record: VideoRecord) -> None:
        """Insert or update a video's row (call after its other rows are written)."""
        self.rows.put_video(record)

    def list_videos(self) -> list[VideoRecord]:
        """Every listed video, oldest first."""
        return self.rows.list_videos()

    def listed_ids(self, among: Sequence[str] | None = None) -> list[str]:
        """Ids of the listed videos (only those in ``among`` when given)."""
        return self.rows.listed_ids(among)

    def resolve(self, ref: str) -> str:
        """A full video id from an id, a unique id prefix, a file name or a source path."""
        return self.rows.resolve(ref)

    def get_video(self, ref: str) -> VideoRecord:
        """The video ``ref`` names (see :meth:`resolve`)."""
        return self.rows.get_video(ref)

    def window(self, video_id: str) -> tuple[float, float] | None:
        """The time window reads of ``video_id`` are cut to: None, the whole video (a
        :class:`~vidagent.library.window.WindowedLibrary` cuts them to one)."""
        return None

    def has_video(self, video_id: str) -> bool:
        """Whether the video is listed."""
        return self.rows.has_video(video_id)

    def remove_video(self, ref: str) -> str:
        """Delete a video and all its rows (artefacts included); returns its id.

        Raises:
            UserError: the video is being indexed (by this process or another, :meth:`indexing`):
                removed under it, the indexing went on to report success for a video that was
                gone (or stored some of its rows again).
        """
        video_id = self.rows.resolve(ref, shortest_prefix=REMOVE_PREFIX)
        with self._not_indexing(video_id):
            return self.rows.remove_video(video_id)

    @contextmanager
    def _not_indexing(self, video_id: str) -> Iterator[None]:
        """Hold :meth:`indexing`'s lock of ``video_id`` if no one holds it, else refuse."""
        import fcntl

        with _INDEXING_GUARD:
            lock = _INDEXING.setdefault((self.uri, video_id), threading.Lock())
        busy = UserError(
            f"{video_id} is being indexed now; stop that first (or let it finish), then remove it"
        )
        if not lock.acquire(blocking=False):
            raise busy
        try:
            path = Path(self.tables.root) / "indexing" / f"{video_id}.lock"
            if not self.tables.local or not path.is_file():
                yield
                return
            with path.open("a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise busy from None
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            lock.release()

    def set_stage(self, video_id: str, stage: str, info: dict[str, Any]) -> VideoRecord:
        """Record that ``stage`` finished for a video, with what produced it."""
        return self.rows.set_stage(video_id, stage, info)

    def put_clips(self, video_id: str, clips: Sequence[ClipRow]) -> None:
        """Make ``clips`` the video's clips. Its clip vectors belong to the old clips: dropped."""
        self.rows.put_clips(video_id, clips)

    def update_clips(self, video_id: str, updates: Sequence[dict[str, Any]]) -> None:
        """Set some columns of existing clips, in one atomic commit (a stage's checkpoint)."""
        self.rows.update_clips(video_id, updates)

    def clips(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[ClipRow]:
        """A video's clips (those overlapping ``[t0, t1]`` when given), in clip order."""
        return self.rows.clips(video_id, t0, t1)

    def clip_rows(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ClipRow]:
        """The clips with these ``(video_id, clip_index)`` keys, read in one query."""
        return self.rows.clip_rows(keys)

    def put_frames(self, video_id: str, frames: Sequence[FrameRow]) -> None:
        """Make ``frames`` the video's thumbnails (its frame vectors are dropped)."""
        self.rows.put_frames(video_id, frames)

    def frames(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[FrameRow]:
        """A video's thumbnails (those in ``[t0, t1]`` when given), in time order."""
        return self.rows.frames(video_id, t0, t1)

    def put_shots(self, video_id: str, shots: Sequence[ShotRow]) -> None:
        """Make ``shots`` the video's shots."""
        self.rows.put_shots(video_id, shots)

    def shots(self, video_id: str) -> list[ShotRow]:
        """A video's shots, in order."""
        return self.rows.shots(video_id)

    def put_transcript(self, video_id: str, segments: Sequence[TranscriptSegment]) -> None:
        """Make ``segments`` the video's transcript."""
        self.rows.put_transcript(video_id, segments)

    def transcript(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[TranscriptSegment]:
        """A video's speech segments (those overlapping ``[t0, t1]`` when given), in order."""
        return self.rows.transcript(video_id, t0, t1)

    def add_rows(
        self,
        video_id: str,
        *,
        clips: Sequence[ClipRow] = (),
        frames: Sequence[FrameRow] = (),
        shots: Sequence[ShotRow] = (),
        transcript: Sequence[TranscriptSegment] = (),
    ) -> None:
        """Add rows to a video, keeping its others (a live stream's new window); see
        :meth:`Rows.add_rows`."""
        self.rows.add_rows(video_id, clips=clips, frames=frames, shots=shots, transcript=transcript)

    def drop_span(self, video_id: str, t0: float, t1: float | None = None) -> None:
        """Delete a video's rows (and vectors) that start in ``[t0, t1)`` (None: on)."""
        self.rows.drop_span(video_id, t0, t1)

    # -- artefacts (artifacts.py) ---------------------------------------------------------------

    def put_artifact(self, artifact: Artifact) -> Artifact:
        """Insert or replace the artefact with its ``(video_id, kind, key)``; returns it as
        stored. See :meth:`Artifacts.put`."""
        return self.derived.put(artifact)

    def put_artifacts(self, artifacts: Sequence[Artifact]) -> list[Artifact]:
        """:meth:`put_artifact` for several, in one atomic commit (the last of a key wins)."""
        return self.derived.put_many(artifacts)

    def artifact(self, video_id: str, kind: ArtifactKind, key: str = "") -> Artifact | None:
        """The artefact ``(video_id, kind, key)``, or None."""
        return self.derived.get(video_id, kind, key)

    def artifacts(self, video_id: str, kind: ArtifactKind | None = None) -> list[Artifact]:
        """A video's artefacts (of one kind, or all), ordered by kind and key."""
        return self.derived.of(video_id, kind)

    def delete_artifacts(
        self, video_id: str, kind: ArtifactKind, keys: Sequence[str] | None = None
    ) -> None:
        """Delete a video's artefacts of ``kind``: those with ``keys``, or all of them."""
        self.derived.delete(video_id, kind, keys)

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
        """The stored artefact when ``producer`` and ``inputs_hash`` match, else one ``build``
        makes; returns ``(artifact, built)``. See :meth:`Artifacts.memo`."""
        return self.derived.memo(
            video_id, kind, key, producer=producer, inputs_hash=inputs_hash, build=build
        )

    def registry(self, video_id: str) -> dict[str, Any]:
        """The video's subject registry (subject id -> entry), ``{}`` when there is none."""
        return self.derived.registry(video_id)

    def global_summary(self, video_id: str) -> str:
        """The video's global summary text, ``""`` when there is none."""
        return self.derived.global_summary(video_id)

    # -- vectors (vectors.py) -------------------------------------------------------------------

    def use_embedding(self, table: str, spec: str, dim: int) -> bool:
        """Bind an embedding table to a model; a different model empties it first. Returns
        True when the table was reset."""
        return self.vectors.use_embedding(table, spec, dim)

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
        """Store one vector per clip, (N, D) float32, made by the model ``spec``."""
        self.vectors.put_clip_vectors(video_id, spec, clips, vectors, text_hashes, replace=replace)

    def clip_vector_hashes(self, video_id: str) -> dict[int, str]:
        """``clip_index -> text_hash`` of the vectors stored for a video."""
        return self.vectors.clip_vector_hashes(video_id)

    def clip_vectors_by_text(self, video_id: str, spec: str) -> dict[str, np.ndarray]:
        """``text_hash -> vector`` (D,) of a video's stored clip vectors made by ``spec``."""
        return self.vectors.clip_vectors_by_text(video_id, spec)

    def put_frame_vectors(
        self,
        video_id: str,
        spec: str,
        times: Sequence[float] | np.ndarray,
        vectors: np.ndarray,
        *,
        replace: bool = True,
    ) -> None:
        """Store one vector per thumbnail at ``times``, (N, D) float32, made by ``spec``."""
        self.vectors.put_frame_vectors(video_id, spec, times, vectors, replace=replace)

    def frame_vectors(self, video_id: str) -> tuple[np.ndarray, np.ndarray]:
        """A video's frame vectors: ``(times, vectors)``, (N,) and (N, D), in time order."""
        return self.vectors.frame_vectors(video_id)

    def frame_vector_spec(self) -> str | None:
        """The spec of the model the Library's frame vectors are made with (None: none yet)."""
        return self.vectors.frame_vector_spec()

    def search_clips(
        self,
        vector: np.ndarray,
        *,
        video_ids: Sequence[str] | None = None,
        t_from: float | None = None,
        t_to: float | None = None,
        k: int = 10,
    ) -> list[ClipHit]:
        """The ``k`` clips nearest to ``vector`` (cosine), among videos and a time range."""
        return self.vectors.search_clips(vector, video_ids=video_ids, t_from=t_from, t_to=t_to, k=k)

    # -- entity graphs (graph_tables.py) --------------------------------------------------------

    def put_entity_graph(
        self,
        video_id: str,
        graph: EntityGraph,
        producer: str,
        inputs_hash: str = "",
        *,
        before_switch: Callable[[], None] | None = None,
    ) -> str:
        """Make ``graph`` the video's entity graph; returns its ``graph_id``."""
        return self.graph.put_entity_graph(
            video_id, graph, producer, inputs_hash, before_switch=before_switch
        )

    def entity_graph(self, video_id: str) -> EntityGraph | None:
        """The video's entity graph, or None when its graph stage never ran."""
        return self.graph.entity_graph(video_id)

    # -- indexes (indexes.py) -------------------------------------------------------------------

    def append(self, name: str, data: pa.Table) -> None:
        """The bulk path: add rows of videos not yet in the Library in one commit, unchecked.

        For loaders that make many videos' rows at once (benchmarks/scale.py): no key is
        matched, so the caller guarantees the rows are new; write the ``videos`` rows last, as
        every write does. Indexes are maintained as after any write.
        """
        self.tables.append(name, data)

    def index_policy(self) -> IndexPolicy:
        """The Library's index policy (defaults, with the manifest's overrides)."""
        return self.indexes.policy()

    def set_index_policy(self, **changes: Any) -> IndexPolicy:
        """Record index policy overrides (:class:`IndexPolicy` fields) in the manifest."""
        return self.indexes.set_policy(**changes)

    def compact(
        self, *, older_than: timedelta = timedelta(hours=1), retrain: bool = False
    ) -> list[TableReport]:
        """Compact every table, build or update its indexes and prune versions older than
        ``older_than``, under the write lock (rows are never changed)."""
        return self.indexes.compact(older_than=older_than, retrain=retrain)
