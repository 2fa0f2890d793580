"""Row types of the Library and the Arrow schemas of its tables.

Dataclasses are the values code passes around; ``*_SCHEMA`` are what LanceDB stores. Keep the
two in step: a new column needs a migration in :mod:`vidagent.library.manifest`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

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


@dataclass(frozen=True)
class Summary:
    """A per-video artefact keyed by ``kind``: ``"global"`` summary text, ``"registry"`` (the
    subject registry as JSON in ``data``), and so on. ``model`` fingerprints what made it and
    ``inputs_hash`` what it was made from, so it is redone only when either changes."""

    video_id: str
    kind: str
    text: str = ""
    data: str = "{}"
    model: str = ""
    inputs_hash: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Summary:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


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

SUMMARIES_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("data", pa.string()),
        pa.field("model", pa.string()),
        pa.field("inputs_hash", pa.string()),
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


#: table name -> (schema, key columns that identify a row within the table)
TABLES: dict[str, tuple[pa.Schema, tuple[str, ...]]] = {
    "videos": (VIDEOS_SCHEMA, ("video_id",)),
    "clips": (CLIPS_SCHEMA, ("video_id", "clip_index")),
    "frames": (FRAMES_SCHEMA, ("video_id", "t")),
    "shots": (SHOTS_SCHEMA, ("video_id", "shot_index")),
    "transcript": (TRANSCRIPT_SCHEMA, ("video_id", "segment_index")),
    "summaries": (SUMMARIES_SCHEMA, ("video_id", "kind")),
}
VECTOR_KEYS = ("video_id", "clip_index")
