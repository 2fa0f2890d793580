"""The Library's derived artefacts: one row per ``(video_id, kind, key)`` in ``artifacts``.

An artefact is a typed :class:`~vidagent.library.schema.Artifact` (global summary, subject
registry, cached browse answers, agent contexts, the entity graph's pointer) whose ``data`` is a
dict; inside the table it is a JSON string column (Lance has no schemaless one) no caller sees.
Each carries its producer and a hash of its inputs, so :meth:`Artifacts.memo` rebuilds one only
when what made it changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from vidagent.library.filters import one_of, quote
from vidagent.library.schema import GLOBAL_SUMMARY, Artifact, ArtifactKind, check_kind
from vidagent.library.tables import Tables


class Artifacts:
    """A Library's artefacts, read and written through its :class:`Tables`."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def put(self, artifact: Artifact) -> Artifact:
        """Insert or replace the artefact with its ``(video_id, kind, key)``.

        Returns:
            The artefact as stored: ``updated_at`` set, ``data`` as it reads back.

        Raises:
            ValueError: an unknown kind. TypeError: ``data`` is not a JSON-able dict.
        """
        return self.put_many([artifact])[0]

    def put_many(self, artifacts: Sequence[Artifact]) -> list[Artifact]:
        """:meth:`put` for several, in one atomic commit (the last of a key wins)."""
        if not artifacts:
            return []
        now = datetime.now(timezone.utc).isoformat()
        rows = {
            (a.video_id, a.kind, a.key): dataclasses.replace(a, updated_at=now).to_row()
            for a in artifacts
        }
        self.tables.merge("artifacts", list(rows.values()))
        return [Artifact.from_row(rows[(a.video_id, a.kind, a.key)]) for a in artifacts]

    def get(self, video_id: str, kind: ArtifactKind, key: str = "") -> Artifact | None:
        """The artefact ``(video_id, kind, key)``, or None."""
        check_kind(kind)
        where = f"video_id = {quote(video_id)} AND kind = {quote(kind)} AND key = {quote(key)}"
        rows = self.tables.scan("artifacts", where)
        return Artifact.from_row(rows[0]) if rows else None

    def of(self, video_id: str, kind: ArtifactKind | None = None) -> list[Artifact]:
        """A video's artefacts (of one kind, or all), ordered by kind and key."""
        where = f"video_id = {quote(video_id)}"
        if kind is not None:
            check_kind(kind)
            where += f" AND kind = {quote(kind)}"
        rows = self.tables.scan("artifacts", where)
        return sorted((Artifact.from_row(r) for r in rows), key=lambda a: (a.kind, a.key))

    def delete(self, video_id: str, kind: ArtifactKind, keys: Sequence[str] | None = None) -> None:
        """Delete a video's artefacts of ``kind``: those with ``keys``, or all of them."""
        check_kind(kind)
        if (keys is not None and not keys) or not self.tables.has("artifacts"):
            return
        where = f"video_id = {quote(video_id)} AND kind = {quote(kind)}"
        if keys is not None:
            where += " AND " + one_of("key", keys)
        with self.tables.write_lock():
            self.tables.table("artifacts").delete(where)

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
        stored = self.get(video_id, kind, key)
        if stored is not None and (stored.producer, stored.inputs_hash) == (producer, inputs_hash):
            return stored, False
        text, data = build()
        made = Artifact(video_id, kind, key, text, data, producer, inputs_hash)
        return self.put(made), True

    def registry(self, video_id: str) -> dict[str, Any]:
        """The video's subject registry (subject id -> entry), ``{}`` when there is none."""
        stored = self.get(video_id, "registry")
        return stored.data if stored is not None else {}

    def global_summary(self, video_id: str) -> str:
        """The video's global summary text, ``""`` when there is none."""
        stored = self.get(video_id, "summary", GLOBAL_SUMMARY)
        return stored.text if stored is not None else ""
