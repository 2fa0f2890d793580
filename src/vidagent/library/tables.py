"""The one owner of a Library's tables: the LanceDB connection, the table handles, the write
lock and the manifest that says what the tables hold.

Every part of a :class:`~vidagent.library.Library` (its rows, artefacts, vectors, entity graph
and indexes) reads and writes through one :class:`Tables`, so there is one place that opens
tables, one lock every write takes, one copy of the manifest in the process, and one write path
(:meth:`Tables.merge`) that keeps the indexes up to date by the manifest's index policy. The
locking and commit rules are described in :mod:`vidagent.library.store`.

**Cache sizes.** The connection's LanceDB session caches index pages (ANN partitions, BTREE
pages) and table metadata (manifests, fragment lists, file footers) for the life of the
process, each an LRU bounded in bytes. Every commit makes a new version of its table, and with
``read_consistency_interval=0`` the next read opens that version and caches its metadata (and
an index rebuilt by the commit caches anew); the entries of older versions stay until the
bound evicts them. Under LanceDB's defaults (6 GiB of index, 1 GiB of metadata) a server that
indexes while it answers grew by every version it had read: ~13 KiB of metadata per commit in
a loop of writes and reads (``benchmarks/lance_cache.py``), 161 MiB in the 10-minute soak of
the HTTP API, outside Python's heap. The bounds here (:data:`~vidagent.config.
LIBRARY_INDEX_CACHE_MIB`, :data:`~vidagent.config.LIBRARY_METADATA_CACHE_MIB`; the settings
``library_index_cache_mib`` and ``library_metadata_cache_mib``) keep the indexes of a
1,000-hour Library and the current versions' metadata, and stop the growth there.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyarrow import fs as pafs

from vidagent.config import LIBRARY_INDEX_CACHE_MIB, LIBRARY_METADATA_CACHE_MIB
from vidagent.exceptions import LibraryError, VidagentError, storage_error
from vidagent.library.filters import quote
from vidagent.library.hot import HotVideos
from vidagent.library.indexing import FILTER_COLUMNS, IndexPolicy, ensure_indexes
from vidagent.library.locking import LOCK_FILE, WriteLock, lock_for
from vidagent.library.manifest import Manifest, check_supported, read_manifest, write_manifest
from vidagent.library.schema import TABLES, VECTOR_KEYS

#: How new tables are written. Lance file format 2.1, not LanceDB 0.40's default 2.2: reading
#: a video's 720 clip rows (11 string columns) took 3.2 ms from 2.1 files and 7.2 ms from 2.2
#: ones, one row 4.4 ms against 9.0, on the same rows at 720,000 clips (vectors read alike);
#: that read is the larger part of a video's first search and of every search across all
#: videos (docs/scaling.md). A table keeps the format it was created with.
NEW_TABLE_OPTIONS = {"new_table_data_storage_version": "2.1"}

#: Set in a child forked from a process that had connected to a Library (see
#: :func:`refuse_after_fork`).
_state = {"connected": False, "forked": False}


def _after_fork_in_child() -> None:
    _state["forked"] = _state["connected"]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def refuse_after_fork() -> None:
    """Refuse to use LanceDB in a process forked from one that had used it.

    LanceDB's runtime (its threads, and the locks they held at the fork) does not survive
    ``fork()``; LanceDB resets what it can and warns that "a small chance of deadlock remains".
    Measured on these cores, 39 forked children each reading a video from a Library their parent
    had read: 1 hung with the parent idle, and with a parent thread reading at the fork 6 of 39
    hung or crashed (SIGSEGV), whether the child used the parent's Library or opened its own.
    A clear error beats a worker that hangs one time in thirty; vidagent's own worker pool starts
    its processes with ``spawn``.

    Raises:
        LibraryError: this process is such a fork.
    """
    if _state["forked"]:
        raise LibraryError(
            "this process was forked from one that had opened a Library, and LanceDB cannot be "
            "used safely after fork() (it may hang): start worker processes with "
            "multiprocessing's 'spawn' or 'forkserver' method"
        )


def together(calls: Sequence[Awaitable[Any]]) -> list[Any]:
    """The results of LanceDB's async ``calls``, awaited at once in one hand-over to LanceDB's
    event loop.

    The calls must be made of handles opened beforehand: a synchronous LanceDB call inside
    one waits on the loop it runs on, for ever.

    LanceDB's synchronous API hands each call to that loop's thread and waits for it (about
    0.15 ms a call on these cores); queries from two Python threads still queue there one after
    the other. Handed over together (``asyncio.gather`` over the tables' async handles,
    ``LanceTable._table`` in the pinned LanceDB 0.40) they run at once in LanceDB's threads.
    """
    import asyncio

    from lancedb.background_loop import LOOP

    refuse_after_fork()

    async def gather() -> list[Any]:
        return list(await asyncio.gather(*calls))

    got: list[Any] = LOOP.run(gather())  # type: ignore[no-untyped-call]
    return got


def read(*queries: Any) -> list[pa.Table]:
    """The results of LanceDB's synchronous query builders (``table.search()...``), as Arrow, in
    one hand-over to LanceDB's event loop (:func:`together`).

    Each query is turned into its async form by LanceDB's own conversion, the one its
    synchronous ``to_arrow`` runs, so it returns the same rows. That conversion and the async
    handle are private in the pinned LanceDB 0.40 (``pyproject.toml``: ``<0.41``);
    ``tests/library/test_scale.py`` compares the two for scans and vector queries, so a change
    there fails a test rather than a search. The synchronous call makes
    about six more round trips to the loop per query (one per batch, and the table's schema
    four times to look for blob columns, which vidagent's tables do not have: ``TABLES``); at
    720,000 clips that cost 0.5 ms of a 10 ms ANN query and 0.8 ms of the 5 ms read of its
    hits' clip rows (docs/scaling.md).
    """
    return together(
        [q._table._table._sync_query_to_async(q.to_query_object()).to_arrow() for q in queries]
    )


@dataclass(frozen=True)
class Snapshot:
    """What :meth:`Tables.snapshot` read in one hand-over to LanceDB."""

    #: table -> (version, row count), of the tables that exist
    versions: dict[str, tuple[int, int]]
    #: table -> the rows read, as Arrow
    rows: dict[str, pa.Table]


def local_library_path(uri: str) -> str | None:
    """The directory of a local Library (a path or a ``file://`` URI); None for object stores."""
    if uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise LibraryError(f"{uri}: a file:// URI names a local path (file:///dir/library)")
        return unquote(parsed.path)
    return None if "://" in uri else uri


def split_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of a Library URI (a local path or an object-store URI)."""
    if "://" not in uri:
        path = Path(uri).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise LibraryError(f"{uri} is a file, not a Library folder (--library, VIDAGENT_HOME)")
        return pafs.LocalFileSystem(), str(path)
    try:
        fs, found = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, OSError, ValueError) as e:  # a scheme unknown, a bucket not found
        raise LibraryError(f"{uri}: no Library location that can be opened ({e})") from None
    if not str(found).strip("/"):
        raise LibraryError(f"{uri}: names no bucket or folder (s3://bucket/library)")
    return fs, str(found)


class Tables:
    """A Library location's LanceDB tables, opened once, the lock its writes take and its
    manifest.

    Args:
        uri: a directory path, a ``file://`` URI or an object-store URI (see ``Library``).
        storage_options: LanceDB's object-store options.
        index_cache_mib: the bound of LanceDB's index cache for this Library, in MiB.
        metadata_cache_mib: the bound of its metadata cache, in MiB (see the module).

    Attributes:
        uri: the location as given.
        local: whether it is a local directory (it then has a file lock).
        fs: the ``pyarrow`` filesystem of the location; ``root`` its path there.
        hot: recently searched videos (:mod:`vidagent.library.hot`), shared by the parts.
        manifest: the manifest as this process last read or wrote it; set when the Library
            opens (:meth:`read_manifest`, then creation or migration).
    """

    def __init__(
        self,
        uri: str,
        *,
        storage_options: dict[str, str] | None = None,
        index_cache_mib: int = LIBRARY_INDEX_CACHE_MIB,
        metadata_cache_mib: int = LIBRARY_METADATA_CACHE_MIB,
    ) -> None:
        self.uri = uri
        self.cache_mib = (index_cache_mib, metadata_cache_mib)
        local_path = local_library_path(uri)
        self.local = local_path is not None
        self.fs, self.root = split_uri(local_path or uri)
        self._lock: WriteLock = lock_for(
            self.root if self.local else uri,
            os.path.join(self.root, LOCK_FILE) if self.local else None,
        )
        self._storage_options = storage_options
        self._handles: dict[str, Any] = {}
        self._session: Any = None  # LanceDB's, made with the connection
        self.hot = HotVideos()
        self.manifest: Manifest

    @cached_property
    def _db(self) -> Any:
        # Connected on first use: connecting makes a local directory, and opening a Library
        # that is not there with create=False must leave nothing behind.
        from vidagent.library.lance import import_lancedb

        lancedb = import_lancedb()
        refuse_after_fork()
        _state["connected"] = True
        # Interval 0: every read sees the latest commit, other processes' too (store.py); the
        # caches are bounded (see the module).
        index_mib, metadata_mib = self.cache_mib
        self._session = lancedb.Session(
            index_cache_size_bytes=index_mib << 20, metadata_cache_size_bytes=metadata_mib << 20
        )
        return lancedb.connect(
            self.root if self.local else self.uri,
            read_consistency_interval=timedelta(0),
            storage_options=self._storage_options,
            session=self._session,
        )

    def cache_bytes(self) -> int:
        """Bytes held now by the LanceDB caches of this Library (0 before it is first read)."""
        if "_db" not in self.__dict__:
            return 0
        return int(self._session.size_bytes)

    def cache_entries(self) -> int:
        """Entries held now by the LanceDB caches of this Library (approximate)."""
        if "_db" not in self.__dict__:
            return 0
        return int(self._session.approx_num_items)

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the write lock (re-entrant) around a read and the write that depends on it.

        Every write runs inside it, so this is where the system's refusals (a full disk, a
        denied permission, a read-only filesystem; the lock file's own creation included)
        become a :class:`~vidagent.exceptions.StorageError` naming the Library's folder.

        Raises:
            StorageError: the system refused the write; the Library is as it was before it.
        """
        try:
            with self._lock.hold():
                yield
        except VidagentError:
            raise
        except Exception as e:
            refused = storage_error(e, self.root if self.local else self.uri)
            if refused is None:
                raise
            raise refused from e

    # -- manifest -------------------------------------------------------------------------------

    def read_manifest(self) -> Manifest | None:
        """The manifest on disk now, as is (None: there is no Library here yet)."""
        return read_manifest(self.fs, self.root)

    def reload_manifest(self) -> Manifest:
        """Read the manifest from disk again (another process may have changed it).

        Raises:
            LibraryVersionError: a newer vidagent has migrated the Library meanwhile.
        """
        fresh = self.read_manifest()
        if fresh is not None:
            check_supported(fresh, self.uri)
            for name in set(self.manifest.embeddings) | set(fresh.embeddings):
                if self.manifest.embeddings.get(name) != fresh.embeddings.get(name):
                    self._handles.pop(name, None)  # dropped and re-made by another process
            self.manifest = fresh
        return self.manifest

    def save_manifest(self, manifest: Manifest | None = None) -> None:
        """Write ``manifest`` (default: the one held) as the Library's manifest, as is."""
        with self.write_lock():
            if manifest is not None:
                self.manifest = manifest
            write_manifest(self.fs, self.root, self.manifest)

    def update_manifest(self, change: Callable[[Manifest], None]) -> Manifest:
        """Apply ``change`` to the manifest as it is on disk now, and write it, under the lock."""
        with self.write_lock():
            manifest = self.reload_manifest()
            change(manifest)
            write_manifest(self.fs, self.root, manifest)
            return manifest

    def set_sampling(self, **settings: Any) -> None:
        """Record the sampling settings stored rows were made with."""
        with self.write_lock():
            if {k: self.reload_manifest().sampling.get(k) for k in settings} != settings:
                self.update_manifest(lambda m: m.sampling.update(settings))

    def index_policy(self) -> IndexPolicy:
        """The index policy: defaults, with the manifest's overrides."""
        return IndexPolicy.from_manifest(self.manifest.indexing)

    # -- tables ---------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of the tables that exist now (another process may have added some)."""
        refuse_after_fork()
        return list(self._db.list_tables().tables)

    def has(self, name: str) -> bool:
        """Whether the table ``name`` exists."""
        return name in self._handles or name in self.names()

    def table(self, name: str, schema: pa.Schema | None = None) -> Any:
        """The LanceDB table ``name``, created empty with ``schema`` when missing."""
        refuse_after_fork()
        handle = self._handles.get(name)
        if handle is None and name in self.names():
            try:
                handle = self._db.open_table(name)
            except ValueError:  # listed, but its creator (another process) has not committed
                handle = None
        if handle is None:
            with self.write_lock():
                # exist_ok: another process may have made it since the listing above.
                schema = schema or TABLES[name][0]
                handle = self._db.create_table(
                    name,
                    schema=schema,
                    exist_ok=True,
                    storage_options={**(self._storage_options or {}), **NEW_TABLE_OPTIONS},
                )
        self._handles[name] = handle
        return handle

    def drop(self, name: str) -> None:
        """Delete the table ``name`` and its rows, if it exists."""
        with self.write_lock():
            self._handles.pop(name, None)
            if name in self.names():
                self._db.drop_table(name)

    def scan(self, name: str, where: str) -> list[dict[str, Any]]:
        """The rows of ``name`` matching ``where`` (none when the table does not exist)."""
        if not self.has(name):
            return []
        (found,) = read(self.table(name).search().where(where).limit(None))
        rows: list[dict[str, Any]] = found.to_pylist()
        return rows

    def snapshot(
        self,
        names: Sequence[str] = (),
        where: str = "",
        columns: Mapping[str, list[str] | None] | None = None,
    ) -> Snapshot:
        """Each existing table's ``(version, row count)`` among ``names``, and the rows matching
        ``where`` of each table in ``columns`` (``None``: every column; a missing table reads
        as empty), all asked in one hand-over (:func:`together`): the tables at once, each
        table's version before its rows.

        A video's vectors and clip rows at 144,000 clips took 2.9 ms this way against 5.5 ms
        through the synchronous calls in two Python threads, and asking the versions in the
        same hand-over saves the 0.4 ms of one more (docs/scaling.md).
        """
        columns = columns or {}
        present = [name for name in names if self.has(name)]
        # Tables are opened here, in the caller's thread: opening one is a synchronous LanceDB
        # call, which waits on the event loop and so must never run on it (it would wait on
        # itself).
        handles = {n: self.table(n)._table for n in [*present, *columns] if self.has(n)}

        async def rows(name: str) -> pa.Table:
            wanted = columns[name]
            if name not in handles:
                empty = TABLES[name][0].empty_table()
                return empty if wanted is None else empty.select(wanted)
            query = handles[name].query().where(where)
            return await (query if wanted is None else query.select(wanted)).to_arrow()

        async def one(name: str) -> tuple[tuple[int, int] | None, pa.Table | None]:
            """One table's (version, row count) and rows. Its version is read before its rows
            are, so a cache keyed on that version never holds rows older than the key (a
            commit in between makes the rows newer, and the next version check empties it)."""
            if name not in present:
                return None, await rows(name)
            version = await handles[name].version()
            if name not in columns:
                return (version, await handles[name].count_rows()), None
            count, got = await asyncio.gather(handles[name].count_rows(), rows(name))
            return (version, count), got

        asked = list(dict.fromkeys([*present, *columns]))
        got = dict(zip(asked, together([one(name) for name in asked]), strict=True))
        versions = {n: state for n, (state, _) in got.items() if state is not None}
        return Snapshot(versions, {n: got[n][1] for n in columns})

    def merge(
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
            self.maintain(name)

    def append(self, name: str, data: pa.Table) -> None:
        """Add rows in one commit without matching keys (the bulk path: the rows must be new)."""
        with self.write_lock():
            self.table(name, data.schema).add(data)
            self.maintain(name)

    def maintain(self, name: str, *, retrain: bool = False) -> list[str]:
        """Build the indexes the index policy calls for on ``name`` now (after every write)."""
        if name not in FILTER_COLUMNS:
            return []
        with self.write_lock():
            return ensure_indexes(self.table(name), name, self.index_policy(), retrain=retrain)

    def size_bytes(self) -> int:
        """Bytes the tables and manifest occupy (local Libraries only)."""
        if not self.local:
            raise LibraryError("size_bytes is only available for local Libraries")
        return sum(
            os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(self.root) for f in files
        )
