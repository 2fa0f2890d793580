"""The Library manifest (``manifest.json``) and its migrations.

The manifest records what the tables mean: the schema version, the model spec and dimension of
every embedding table, prompt hashes and sampling settings. It is written atomically (a temporary
object, then a rename) through ``pyarrow.fs`` so the same code serves local directories and
object stores (``s3://``, ``gs://``).

The Library's table owner (:class:`~vidagent.library.tables.Tables`) holds the manifest in
memory and re-reads and writes it under the write lock.

Migrations: ``MIGRATIONS[v]`` upgrades a Library from version ``v`` to ``v + 1`` in place, and
must be safe to run again if it was interrupted. A step gets the opened Library and uses only
the public methods :class:`Upgradable` names. Opening a Library runs every pending migration
under the Library's write lock (so two processes opening an old Library migrate it once), then
records the new version. A Library written by a newer vidagent is refused, never rewritten.

Versions:

1. The first layout; derived artefacts in a ``summaries`` table keyed by ``(video_id, kind)``,
   told apart by kind strings (``"global"``, ``"registry"``, ``"event:<hash>"``,
   ``"videoagent2:<n>s@<fps>fps"``) with a JSON string ``data``.
2. ``summaries`` replaced by ``artifacts`` keyed by ``(video_id, kind, key)`` with a typed kind
   (:class:`~vidagent.library.schema.Artifact`); see :func:`summaries_to_artifacts`.
3. ``clips`` gains ``ocr_lines`` (each OCR line with the times of the frames it was read in) and
   ``facts`` (the perception describer's measurements beside its caption), filled with ``"[]"``
   and ``"{}"``: "not recorded" (:mod:`vidagent.library.schema`); see :func:`add_clip_facts`.
4. ``videos`` gains ``recorded_at``: when the recording started (ISO-8601; the container's
   ``creation_time`` or ``vidagent index --started-at``), ``""`` unknown; see
   :func:`add_recorded_at`.
5. ``transcript`` gains ``speaker`` (the diarization stage's label), filled with ``""``: "not
   labelled"; see :func:`add_transcript_speaker`.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

import pyarrow as pa
from pyarrow import fs as pafs

from vidagent.exceptions import LibraryError, LibraryVersionError
from vidagent.library.schema import TABLES, Artifact, ArtifactKind

SCHEMA_VERSION = 5
MANIFEST = "manifest.json"


@dataclass
class Manifest:
    schema_version: int = SCHEMA_VERSION
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    #: embedding table -> {"spec": model spec, "dim": dimension}
    embeddings: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: prompt file name -> sha256 of its text, for prompts whose output the Library stores
    prompts: dict[str, str] = field(default_factory=dict)
    #: sampling settings the stored rows were made with (clip_seconds, sample_fps, thumb_size)
    sampling: dict[str, Any] = field(default_factory=dict)
    #: index policy overrides (:class:`~vidagent.library.indexing.IndexPolicy` fields)
    indexing: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def read_manifest(filesystem: pafs.FileSystem, root: str) -> Manifest | None:
    """The manifest at ``root``; None where there is no Library.

    Raises:
        LibraryError: it is damaged, or it is gone from a folder that holds a Library's tables
            (it was "no Library here", and an index would have written a new one over them).
    """
    path = f"{root}/{MANIFEST}"
    if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
        listed = filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        tables = sorted(f.base_name for f in listed if f.base_name.endswith(".lance"))
        if tables:
            raise LibraryError(
                f"{root} holds a Library's tables ({', '.join(tables[:3])}"
                f"{', …' if len(tables) > 3 else ''}) but no {MANIFEST}: it was deleted or not "
                "copied with them; restore it from where the Library came from, or move the "
                "folder away to start a new Library"
            )
        return None
    with filesystem.open_input_stream(path) as f:
        text = f.read().decode("utf-8")
    try:
        return Manifest.from_json(text)
    except (json.JSONDecodeError, TypeError) as e:
        raise LibraryError(f"{path} is damaged ({e}); restore it or remove the Library") from None


def write_manifest(filesystem: pafs.FileSystem, root: str, manifest: Manifest) -> None:
    """Replace the manifest atomically: readers see the old one or the new one, never half."""
    filesystem.create_dir(root, recursive=True)
    tmp = f"{root}/.{MANIFEST}.{uuid.uuid4().hex}.tmp"
    try:
        with filesystem.open_output_stream(tmp) as f:
            f.write(manifest.to_json().encode("utf-8"))
        filesystem.move(tmp, f"{root}/{MANIFEST}")
    except OSError:  # a full disk, say: the old manifest stands; leave no half-written copy
        with contextlib.suppress(OSError):
            filesystem.delete_file(tmp)
        raise


def outdated(manifest: Manifest) -> bool:
    """Whether opening a Library with this manifest has migrations to run."""
    return manifest.schema_version < SCHEMA_VERSION


def check_supported(manifest: Manifest, uri: str) -> None:
    """Refuse a Library a newer vidagent wrote (its tables may have another shape).

    Raises:
        LibraryVersionError: the manifest's schema version is newer than this vidagent's.
    """
    if manifest.schema_version > SCHEMA_VERSION:
        raise LibraryVersionError(
            f"{uri} has schema version {manifest.schema_version}, newer than this "
            f"vidagent's {SCHEMA_VERSION}; upgrade vidagent to read it"
        )


# -- migrations ---------------------------------------------------------------------------------


class Upgradable(Protocol):
    """The public methods of :class:`~vidagent.library.Library` a migration step may use.

    A contract for steps, not a stub of the Library's insides: a step written now must still
    run against the Library of later versions, so steps keep to these few stable operations.
    It also keeps this module below ``store.py``, which imports it to open a Library; type
    checking proves the Library satisfies it where :func:`migrate` is called.
    """

    uri: str

    def has_table(self, name: str) -> bool: ...
    def table(self, name: str, schema: pa.Schema | None = None) -> Any: ...
    def drop_table(self, name: str) -> None: ...
    def put_artifacts(self, artifacts: Sequence[Artifact]) -> list[Artifact]: ...
    def save_manifest(self, manifest: Manifest | None = None) -> None: ...


def _artifact_of_summary(row: dict[str, Any]) -> Artifact:
    """A version-1 ``summaries`` row as an artefact (``kind`` strings become kind + key)."""
    old = str(row["kind"])
    kind: ArtifactKind = "summary"
    key = old
    if old == "registry":
        kind, key = "registry", ""
    elif old.startswith("event:"):
        kind, key = "browse", old.removeprefix("event:")
    elif old.startswith("videoagent2:"):
        kind = "context"
    try:
        payload = json.loads(row["data"] or "{}")
    except json.JSONDecodeError:
        payload = {"raw": row["data"]}  # kept, not lost: version 1 never validated it
    if not isinstance(payload, dict):
        payload = {"value": payload}
    return Artifact(
        video_id=str(row["video_id"]),
        kind=kind,
        key=key,
        text=row["text"] or "",
        data=payload,
        producer=row["model"] or "",
        inputs_hash=row["inputs_hash"] or "",
    )


def summaries_to_artifacts(library: Upgradable) -> None:
    """Version 1 -> 2: copy every ``summaries`` row into ``artifacts``, then drop ``summaries``.

    Kinds map as: ``"global"`` -> ``("summary", "global")``, ``"registry"`` ->
    ``("registry", "")``, ``"event:<h>"`` -> ``("browse", "<h>")``, ``"videoagent2:<rest>"``
    -> ``("context", "videoagent2:<rest>")``, any other ``k`` -> ``("summary", k)``. The JSON
    ``data`` becomes the payload dict (a non-object is kept as ``{"value": ...}``, invalid
    JSON as ``{"raw": text}``).

    Safe to run again: the copy is one commit merged by key (a rerun overwrites the same rows,
    never adds), and the old table is dropped only after that commit.
    """
    if not library.has_table("summaries"):
        return  # a fresh Library, or a run interrupted after the drop
    rows = library.table("summaries").to_arrow().to_pylist()
    library.put_artifacts([_artifact_of_summary(r) for r in rows])
    library.drop_table("summaries")


#: The ``clips`` columns of version 3 and the value the rows before it get ("not recorded").
CLIP_COLUMNS_V3 = {"ocr_lines": "[]", "facts": "{}"}


def add_clip_facts(library: Upgradable) -> None:
    """Version 2 -> 3: add ``ocr_lines`` and ``facts`` to ``clips``, every row ``"[]"`` / ``"{}"``.

    No row is rewritten by hand: LanceDB adds the columns in one commit, then makes them
    nullable as the current schema declares them (a literal's column starts ``not null``).
    Safe to run again: each step is skipped once done (a rerun after either commit finds the
    columns there, or nullable), and a Library with no ``clips`` table yet is left alone (the
    table is created later with the current schema).
    """
    if not library.has_table("clips"):
        return
    table = library.table("clips")
    have = set(table.schema.names)
    missing = {name: value for name, value in CLIP_COLUMNS_V3.items() if name not in have}
    if missing:
        table.add_columns({name: f"'{value}'" for name, value in missing.items()})
    declared = TABLES["clips"][0]
    for name in CLIP_COLUMNS_V3:
        if not table.schema.field(name).nullable and declared.field(name).nullable:
            table.alter_columns({"path": name, "nullable": True})


def add_recorded_at(library: Upgradable) -> None:
    """Version 3 -> 4: add ``recorded_at`` to ``videos``, every row ``""`` (unknown: re-indexing
    reads the container's creation time, ``--started-at`` sets it). Safe to run again, in the
    same two commits as :func:`add_clip_facts`; a Library with no ``videos`` table is left alone.
    """
    if not library.has_table("videos"):
        return
    table = library.table("videos")
    if "recorded_at" not in set(table.schema.names):
        table.add_columns({"recorded_at": "''"})
    declared = TABLES["videos"][0]
    if not table.schema.field("recorded_at").nullable and declared.field("recorded_at").nullable:
        table.alter_columns({"path": "recorded_at", "nullable": True})


def add_transcript_speaker(library: Upgradable) -> None:
    """Version 4 -> 5: add ``speaker`` to ``transcript``, every row ``""`` (not labelled).

    Like :func:`add_clip_facts`: one LanceDB commit adds the column, a second makes it nullable
    as the schema declares it; each is skipped once done, and a Library without a
    ``transcript`` table is left alone.
    """
    if not library.has_table("transcript"):
        return
    table = library.table("transcript")
    if "speaker" not in set(table.schema.names):
        table.add_columns({"speaker": "''"})
    if not table.schema.field("speaker").nullable:
        table.alter_columns({"path": "speaker", "nullable": True})


Migration = Callable[[Upgradable], None]
#: version v -> function that upgrades a Library from v to v + 1
MIGRATIONS: dict[int, Migration] = {
    1: summaries_to_artifacts,
    2: add_clip_facts,
    3: add_recorded_at,
    4: add_transcript_speaker,
}


def migrate(library: Upgradable, manifest: Manifest, target: int | None = None) -> Manifest:
    """Run pending migrations in order, recording the version after each one.

    Callers hold the Library's write lock and pass a manifest read under it.
    """
    target = SCHEMA_VERSION if target is None else target
    if manifest.schema_version > target:
        raise LibraryVersionError(
            f"{library.uri} has schema version {manifest.schema_version}, newer than this "
            f"vidagent's {target}; upgrade vidagent to read it"
        )
    while manifest.schema_version < target:
        step = MIGRATIONS.get(manifest.schema_version)
        if step is None:
            raise LibraryVersionError(f"no migration from schema version {manifest.schema_version}")
        step(library)
        manifest.schema_version += 1
        library.save_manifest(manifest)
    return manifest
