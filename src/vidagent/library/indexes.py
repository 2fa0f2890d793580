"""The Library's indexes part: its index policy, and compaction on request.

How indexes are built and when, and how searches use them, is :mod:`vidagent.library.indexing`;
every write keeps them up to date through the table owner
(:meth:`~vidagent.library.tables.Tables.maintain`). This part records policy overrides in the
manifest and runs ``vidagent library compact``.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from vidagent.library.indexing import IndexPolicy, TableReport, optimize_table
from vidagent.library.tables import Tables


class Indexes:
    """A Library's index policy and compaction, over its table owner."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def policy(self) -> IndexPolicy:
        """The Library's index policy (defaults, with the manifest's overrides): the one its
        writes maintain indexes by."""
        return self.tables.index_policy()

    def set_policy(self, **changes: Any) -> IndexPolicy:
        """Record index policy overrides (:class:`IndexPolicy` fields) in the manifest.

        Raises:
            ValueError: an unknown field.
        """
        unknown = set(changes) - {f.name for f in dataclasses.fields(IndexPolicy)}
        if unknown:
            raise ValueError(f"unknown index settings: {', '.join(sorted(unknown))}")
        self.tables.update_manifest(lambda m: m.indexing.update(changes))
        return self.policy()

    def compact(
        self, *, older_than: timedelta = timedelta(hours=1), retrain: bool = False
    ) -> list[TableReport]:
        """Compact every table, build or update its indexes and prune versions older than
        ``older_than``, under the write lock (rows are never changed).

        Readers in other processes take no lock, so versions younger than ``older_than`` are
        kept for any read still in flight on them; 0 removes every version but the latest.
        """
        with self.tables.write_lock():
            policy = self.policy()
            return [
                optimize_table(
                    self.tables.table(n), n, policy, older_than=older_than, retrain=retrain
                )
                for n in sorted(self.tables.names())
            ]
