"""Row types of the Library and the Arrow schemas of its tables.

Dataclasses are the values code passes around; ``*_SCHEMA`` are what LanceDB stores. Keep the
two in step: a new column needs a migration in :mod:`vidagent.library.manifest`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

import pyarrow as pa


@dataclass(frozen=True)
class VideoRecord:
    """One video in the Library. ``stages`` maps a stage name to what produced it and when."""

    video_id: str
    source: str
    name: str
    size_bytes: int
    duration: float
    fps: float
    width: int
    height: int
    rotation: int
    codec: str
    has_audio: bool
    added_at: str
    stages: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["stages"] = json.dumps(self.stages, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> VideoRecord:
        values = {f.name: row[f.name] for f in fields(cls)}
        values["stages"] = json.loads(values["stages"] or "{}")
        return cls(**values)


@dataclass(frozen=True)
class ClipRow:
    """A uniform clip ``[t0, t1)`` and what the ingest stages found in it.

    Each stage's output sits beside the fingerprint of what produced it (``*_model``: the model
    spec, plus a prompt hash for prompted stages); an empty fingerprint means "not done yet".
    """

    video_id: str
    clip_index: int
    t0: float
    t1: float
    caption: str = ""
    caption_model: str = ""
    subjects: str = "[]"  # JSON list of subject ids present in the clip
    transcript: str = ""
    transcript_model: str = ""
    ocr_text: str = ""
    ocr_model: str = ""
    detections: str = "[]"  # JSON list of {"t", "label", "box", "score"}
    detect_model: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ClipRow:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class FrameRow:
    """A sampled frame kept as a small JPEG for fast browsing."""

    video_id: str
    t: float
    width: int
    height: int
    jpeg: bytes

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> FrameRow:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class ShotRow:
    video_id: str
    shot_index: int
    t0: float
    t1: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ShotRow:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class TranscriptSegment:
    """A speech segment; ``words`` is a JSON list of ``[t0, t1, word, probability]``."""

    video_id: str
    segment_index: int
    t0: float
    t1: float
    text: str
    words: str = "[]"
    model: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TranscriptSegment:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


#: What a derived artefact is; one table holds them all, told apart by ``(kind, key)``.
ArtifactKind = Literal["summary", "registry", "browse", "context", "graph", "training"]
ARTIFACT_KINDS: frozenset[str] = frozenset(get_args(ArtifactKind))
#: ``key`` of a video's global summary (``kind="summary"``).
GLOBAL_SUMMARY = "global"


def check_kind(kind: str) -> None:
    """Raise ValueError for a kind outside :data:`ArtifactKind` (a programming error)."""
    if kind not in ARTIFACT_KINDS:
        raise ValueError(
            f"unknown artifact kind {kind!r}; kinds: {', '.join(sorted(ARTIFACT_KINDS))}"
        )


@dataclass(frozen=True)
class Artifact:
    """Something derived from a video and kept beside it: a summary, the subject registry, ...

    One row per ``(video_id, kind, key)``. ``producer`` and ``inputs_hash`` fingerprint what made
    it and what it was made from, so it is redone exactly when either changes (see
    :meth:`~vidagent.library.store.Library.memo`).

    Attributes:
        video_id: the video it belongs to.
        kind: what it is: ``"summary"`` (key ``"global"``: the global summary), ``"registry"``
            (the subject registry, one per video, key ``""``), ``"browse"`` (a cached
            global-browse answer, key = a hash of its request), ``"context"`` (a built agent
            context such as ``"videoagent2:4s@1fps"``), ``"graph"`` (key ``""``: which rows of
            the ``entities`` and ``relations`` tables are the video's entity graph, ``data``
            ``{"graph_id", "nodes", "edges", "notes"}``), ``"training"``.
        key: which one of its kind; ``""`` for one-per-video kinds.
        text: its text, when it has one.
        data: its structured payload, a JSON-able dict (the Library stores and parses it).
        producer: fingerprint of what made it (model spec, prompt hashes).
        inputs_hash: fingerprint of what it was made from.
        updated_at: ISO 8601 time of the write, set by the Library.
    """

    video_id: str
    kind: ArtifactKind
    key: str = ""
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    producer: str = ""
    inputs_hash: str = ""
    updated_at: str = ""

    def to_row(self) -> dict[str, Any]:
        """The stored row.

        Raises:
            ValueError: an unknown kind.
            TypeError: ``data`` is not a dict of JSON-able values.
        """
        check_kind(self.kind)
        if not isinstance(self.data, dict):
            raise TypeError(f"artifact data must be a dict, not {type(self.data).__name__}")
        try:
            data = json.dumps(self.data, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as e:
            raise TypeError(f"artifact data of {self.kind}:{self.key} is not JSON-able: {e}") from e
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "data": data}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Artifact:
        values = {f.name: row[f.name] for f in fields(cls)}
        values["data"] = json.loads(values["data"] or "{}")
        return cls(**values)


@dataclass(frozen=True)
class ClipHit:
    """A vector-search result: the clip and its cosine similarity to the query."""

    clip: ClipRow
    score: float


VIDEOS_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("name", pa.string()),
        pa.field("size_bytes", pa.int64()),
        pa.field("duration", pa.float64()),
        pa.field("fps", pa.float64()),
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("rotation", pa.int32()),
        pa.field("codec", pa.string()),
        pa.field("has_audio", pa.bool_()),
        pa.field("added_at", pa.string()),
        pa.field("stages", pa.string()),
    ]
)

CLIPS_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("clip_index", pa.int32(), nullable=False),
        pa.field("t0", pa.float64()),
        pa.field("t1", pa.float64()),
        pa.field("caption", pa.string()),
        pa.field("caption_model", pa.string()),
        pa.field("subjects", pa.string()),
        pa.field("transcript", pa.string()),
        pa.field("transcript_model", pa.string()),
        pa.field("ocr_text", pa.string()),
        pa.field("ocr_model", pa.string()),
        pa.field("detections", pa.string()),
        pa.field("detect_model", pa.string()),
    ]
)

TRANSCRIPT_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("segment_index", pa.int32(), nullable=False),
        pa.field("t0", pa.float64()),
        pa.field("t1", pa.float64()),
        pa.field("text", pa.string()),
        pa.field("words", pa.string()),
        pa.field("model", pa.string()),
    ]
)

# ``data`` is the payload as a JSON string: Lance has no schemaless column, and payloads differ
# by kind. Only Artifact.to_row/from_row see the string; callers get and give dicts.
ARTIFACTS_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("data", pa.string()),
        pa.field("producer", pa.string()),
        pa.field("inputs_hash", pa.string()),
        pa.field("updated_at", pa.string()),
    ]
)

FRAMES_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("t", pa.float64(), nullable=False),
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("jpeg", pa.binary()),
    ]
)

SHOTS_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("shot_index", pa.int32(), nullable=False),
        pa.field("t0", pa.float64()),
        pa.field("t1", pa.float64()),
    ]
)


# The entity graph (AVI; :mod:`vidagent.library.graph_tables`). ``graph_id`` names one written
# graph of a video: a new graph's rows are added beside the old ones and the video's ``"graph"``
# artefact is switched to them before the old rows go, so a failed write never loses a graph.
ENTITIES_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("graph_id", pa.string(), nullable=False),
        pa.field("node_id", pa.string(), nullable=False),
        pa.field("node_index", pa.int32()),  # the graph's node order
        pa.field("kind", pa.string()),  # human | event | super
        pa.field("name", pa.string()),
        pa.field("attributes", pa.list_(pa.string())),
        pa.field("timeline", pa.string()),  # JSON [[t0, t1], ...] seconds
        pa.field("actions", pa.string()),  # JSON [{"action", "t0", "t1"}, ...]
        pa.field("clips", pa.list_(pa.int32())),
        pa.field("members", pa.list_(pa.string())),
        pa.field("name_vector", pa.list_(pa.float32())),  # embed role, any dimension
        pa.field("freq_raw", pa.float64()),
        pa.field("freq", pa.float64()),
        pa.field("degree", pa.float64()),
        pa.field("betweenness", pa.float64()),
        pa.field("centrality", pa.float64()),
        pa.field("producer", pa.string()),  # the graph stage's fingerprint
        pa.field("created_at", pa.string()),
    ]
)

RELATIONS_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("graph_id", pa.string(), nullable=False),
        pa.field("edge_index", pa.int32(), nullable=False),
        pa.field("src", pa.string()),
        pa.field("dst", pa.string()),
        pa.field("kind", pa.string()),  # interaction | participant | member_of
        pa.field("relation", pa.string()),
        pa.field("t0", pa.float64()),  # null: the extractor gave no time
        pa.field("t1", pa.float64()),
        pa.field("participants", pa.list_(pa.string())),
        pa.field("producer", pa.string()),
        pa.field("created_at", pa.string()),
    ]
)


def vectors_schema(dim: int) -> pa.Schema:
    """Clip vectors of one embedding model; times are copied in so filters need no join."""
    return pa.schema(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("clip_index", pa.int32(), nullable=False),
            pa.field("t0", pa.float64()),
            pa.field("t1", pa.float64()),
            pa.field("text_hash", pa.string()),  # of the text embedded: changed text is redone
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def frame_vectors_schema(dim: int) -> pa.Schema:
    """Frame vectors of one image-text model, one row per stored thumbnail (by its time)."""
    return pa.schema(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("t", pa.float64(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


#: table name -> (schema, key columns that identify a row within the table)
TABLES: dict[str, tuple[pa.Schema, tuple[str, ...]]] = {
    "videos": (VIDEOS_SCHEMA, ("video_id",)),
    "clips": (CLIPS_SCHEMA, ("video_id", "clip_index")),
    "frames": (FRAMES_SCHEMA, ("video_id", "t")),
    "shots": (SHOTS_SCHEMA, ("video_id", "shot_index")),
    "transcript": (TRANSCRIPT_SCHEMA, ("video_id", "segment_index")),
    "artifacts": (ARTIFACTS_SCHEMA, ("video_id", "kind", "key")),
    "entities": (ENTITIES_SCHEMA, ("video_id", "graph_id", "node_id")),
    "relations": (RELATIONS_SCHEMA, ("video_id", "graph_id", "edge_index")),
}
#: vector table -> its key columns (its schema depends on the model's dimension)
VECTOR_KEYS: dict[str, tuple[str, ...]] = {
    "clip_vectors": ("video_id", "clip_index"),
    "frame_vectors": ("video_id", "t"),
}
