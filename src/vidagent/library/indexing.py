"""Indexes over the Library's tables: when they are built, how searches use them, compaction.

A small Library is searched exactly: a brute-force scan of the filtered rows (a few thousand
cosine distances take well under a millisecond). Past :attr:`IndexPolicy.scalar_min_rows` rows a
table gets BTREE indexes on its filter columns (``video_id``, and ``t0``/``t1`` where it has
them), so per-video and time-range filters read a few pages instead of the whole column. Past
:attr:`IndexPolicy.ann_min_rows` rows a vector table also gets LanceDB's ANN index (IVF_RQ by
default): searches across many videos probe ``nprobes`` partitions and re-rank
``refine_factor * k`` candidates with the stored vectors, so the scores returned are exact
cosine similarities and results keep the brute-force path's shape. Searches confined to few
rows (one video, a handful of videos, up to :attr:`IndexPolicy.exact_max_rows`) stay exact
even then: they are a matrix product over those videos' vectors, read through the scalar index
on first use and cached in the process after (:mod:`vidagent.library.hot`).

Rows written after an index was built are not lost to search: LanceDB scans unindexed rows
exactly and merges them with the index's candidates. They are folded into the index (LanceDB's
``optimize``: compaction, incremental index update, pruning of old versions) after a write that
leaves more than :attr:`IndexPolicy.reindex_fraction` of a table unindexed, and by
``vidagent library compact``. Incremental updates keep the partitions trained on the first
rows; ``compact --retrain`` rebuilds the ANN index from scratch (sensible after the Library has
grown ten-fold).

The policy is stored in the manifest (``indexing``), so every process sharing a Library builds
the same indexes; index builds and optimizes run under the Library's write lock. This module is
the how: the policy and the LanceDB calls. Every write maintains indexes through the table owner
(:meth:`~vidagent.library.tables.Tables.maintain`); the Library's
:class:`~vidagent.library.indexes.Indexes` part changes the policy and compacts.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

#: table -> columns that searches filter on (a BTREE index each once the table is big enough)
FILTER_COLUMNS: dict[str, tuple[str, ...]] = {
    "clip_vectors": ("video_id", "t0", "t1"),
    "frame_vectors": ("video_id",),
    "clips": ("video_id",),
    "frames": ("video_id",),
    "transcript": ("video_id",),
}
#: tables searched by vector across videos (the ANN index is built on their ``vector`` column)
ANN_TABLES = ("clip_vectors",)
#: rows per IVF partition the ANN index is built with
PARTITION_ROWS = 4096


@dataclass(frozen=True)
class IndexPolicy:
    """When indexes are built and how the ANN index is searched (manifest ``indexing``).

    Defaults come from ``benchmarks/scale.py`` on a 2-core machine (docs/scale-out.md, docs/scaling.md):
    below 100,000 clip vectors an exact search across all videos takes a few milliseconds, so an
    ANN index (with its recall loss and build time) buys nothing there.
    """

    #: rows a vector table holds before its ANN index is built
    ann_min_rows: int = 100_000
    #: rows a table holds before its filter columns get scalar (BTREE) indexes
    scalar_min_rows: int = 20_000
    #: ``IVF_RQ`` (RaBitQ codes: no codebook to train, built in seconds), ``IVF_SQ``,
    #: ``IVF_PQ`` (its codebook training took over 10 minutes at 100,000 rows on 2 busy
    #: cores) or ``IVF_HNSW_SQ``
    ann_type: str = "IVF_RQ"
    #: bits per dimension of the IVF_RQ codes. 4, not RaBitQ's 1: at 720,000 clips 1-bit codes
    #: ordered candidates so roughly that recall@16 stayed at 0.915-0.951 even re-ranking 8-16 x k
    #: of them, while 4-bit codes order them almost exactly (re-ranking 2 x k reached what the
    #: probed partitions hold, 0.976-0.983 with 48 probes), for a 4x larger index (156 MB) and
    #: a 25-47 s build on busy cores instead of 10-32 s (docs/scaling.md)
    rq_bits: int = 4
    #: IVF partitions probed per query: 48 of 175 at 720,000 clips. What the probes miss is the
    #: recall left once the codes order candidates well (32 probes: 0.954-0.963)
    nprobes: int = 48
    #: candidates re-ranked with the stored vectors, as a multiple of ``k``. 2 with 4-bit codes;
    #: 1-bit codes (``rq_bits`` 1) need about 8 for the same recall
    refine_factor: int = 2
    #: a filtered search expected to match at most this many rows is exact (index bypassed)
    exact_max_rows: int = 50_000
    #: fold unindexed rows into the indexes when they exceed this fraction of indexed ones
    reindex_fraction: float = 0.1

    @classmethod
    def from_manifest(cls, indexing: dict[str, Any]) -> IndexPolicy:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in indexing.items() if k in known})


@dataclass
class TableReport:
    """What :func:`optimize_table` did to one table."""

    name: str
    rows_before: int
    rows_after: int
    versions_before: int
    versions_after: int
    indexes: list[str] = field(default_factory=list)
    built: list[str] = field(default_factory=list)


def _index_config(policy: IndexPolicy, rows: int, dim: int) -> Any:
    from lancedb.index import IvfHnswSq, IvfPq, IvfRq, IvfSq

    # About 4,096 rows a partition: k-means training grows with the square of the partition
    # count, and probing 32 partitions of 4,096 rows each stays a few milliseconds.
    partitions = max(1, rows // PARTITION_ROWS)
    kinds = {"IVF_RQ": IvfRq, "IVF_SQ": IvfSq, "IVF_HNSW_SQ": IvfHnswSq, "IVF_PQ": IvfPq}
    if policy.ann_type not in kinds:
        raise ValueError(f"unknown ann_type {policy.ann_type!r}; use one of {', '.join(kinds)}")
    if policy.ann_type == "IVF_RQ":
        return IvfRq(distance_type="cosine", num_partitions=partitions, num_bits=policy.rq_bits)
    return kinds[policy.ann_type](distance_type="cosine", num_partitions=partitions)


#: ``ann_type`` -> the index type LanceDB lists for it
LISTED_TYPES = {"IVF_RQ": "IvfRq", "IVF_SQ": "IvfSq", "IVF_HNSW_SQ": "IvfHnswSq", "IVF_PQ": "IvfPq"}


def ann_matches(index: Any, policy: IndexPolicy) -> bool:
    """Whether a built ANN index is of the policy's type (and, for IVF_RQ, its code bits).

    The policy's ``nprobes`` and ``refine_factor`` are chosen for its own index type: a 1-bit
    IVF_RQ index built under an earlier policy, searched with the re-rank depth chosen for
    4-bit codes, would lose recall, so such an index is rebuilt.
    """
    if index.index_type != LISTED_TYPES.get(policy.ann_type):
        return False
    if policy.ann_type != "IVF_RQ":
        return True
    bits = (index.index_details or {}).get("compression", {}).get("num_bits")
    return bits is None or int(bits) == policy.rq_bits


def index_names(table: Any) -> dict[str, Any]:
    """The table's indexes by the column each covers."""
    return {ix.columns[0]: ix for ix in table.list_indices()}


def ensure_indexes(
    table: Any, name: str, policy: IndexPolicy, *, retrain: bool = False
) -> list[str]:
    """Build the indexes ``policy`` calls for on ``table`` and fold in unindexed rows when due.

    Callers hold the Library's write lock. Returns the columns whose index was (re)built.
    """
    from lancedb.index import BTree

    rows = table.count_rows()
    existing = index_names(table)
    built = []
    if rows >= policy.scalar_min_rows:
        for column in FILTER_COLUMNS.get(name, ()):
            if column not in existing:
                table.create_index(column, config=BTree(), replace=True)
                built.append(column)
    stale = "vector" in existing and not ann_matches(existing["vector"], policy)
    if (
        name in ANN_TABLES
        and rows >= policy.ann_min_rows
        and ("vector" not in existing or retrain or stale)
    ):
        dim = table.schema.field("vector").type.list_size
        table.create_index("vector", config=_index_config(policy, rows, dim), replace=True)
        built.append("vector")
    if existing and not built:
        unindexed = max(ix.num_unindexed_rows or 0 for ix in existing.values())
        indexed = min(ix.num_indexed_rows or 0 for ix in existing.values())
        if unindexed > policy.reindex_fraction * max(indexed, 1):
            table.optimize()  # compaction + incremental index update; keeps 7 days of versions
    return built


def optimize_table(
    table: Any, name: str, policy: IndexPolicy, *, older_than: timedelta, retrain: bool = False
) -> TableReport:
    """Compact ``table``, build or update its indexes and prune versions older than
    ``older_than`` (callers hold the write lock). Rows are never changed: compaction rewrites
    files, not data."""
    rows_before, versions_before = table.count_rows(), len(table.list_versions())
    built = ensure_indexes(table, name, policy, retrain=retrain)
    with warnings.catch_warnings():  # LanceDB warns about 0; the caller asked for it knowingly
        warnings.simplefilter("ignore", UserWarning)
        table.optimize(cleanup_older_than=older_than)
    return TableReport(
        name,
        rows_before,
        table.count_rows(),
        versions_before,
        len(table.list_versions()),
        sorted(index_names(table)),
        built,
    )


def vector_query(
    table: Any, vector: np.ndarray, where: str | None, k: int, policy: IndexPolicy, *, exact: bool
) -> Any:
    """A cosine-distance query for the ``k`` rows nearest ``vector`` matching ``where``.

    ``exact`` bypasses the ANN index (a scan of the prefiltered rows); otherwise the index is
    probed, when there is one, and its candidates re-ranked with the stored vectors. Only
    ``video_id``, ``clip_index`` and ``_distance`` are returned: the vectors and the other
    columns are not needed by the caller, and returning them cost ~3 ms a query at 720,000
    rows (docs/scaling.md).
    """
    query = table.search(np.asarray(vector, np.float32).reshape(-1)).distance_type("cosine")
    if where:
        query = query.where(where, prefilter=True)
    query = query.select(["video_id", "clip_index", "_distance"]).limit(k)
    if exact:
        return query.bypass_vector_index()
    return query.nprobes(policy.nprobes).refine_factor(policy.refine_factor)
