"""Row types of the Library and the Arrow schemas of its tables.

Dataclasses are the values code passes around; ``*_SCHEMA`` are what LanceDB stores. Keep the
two in step: a new column needs a migration in :mod:`vidagent.library.manifest`.

Structured columns are JSON strings (Lance has no schemaless column); each has a typed reader
here, so no caller parses them by hand. Two of the ``clips`` columns came with schema version 3:

- ``ocr_lines``: the distinct lines of ``ocr_text`` (same lines, same order) with the first and
  last time of the sampled frames each was read in, ``[{"text", "t0", "t1"}, ...]``; a line read
  in one frame has ``t0 == t1``. Written by the read_text stage in the same commit as
  ``ocr_text``. ``"[]"`` beside a non-empty ``ocr_text`` means "not recorded" (OCR done before
  version 3): :meth:`ClipRow.ocr_line_times` then gives each line the clip's bounds.
- ``facts``: what the perception describer measured for its caption
  (:class:`DescriberFacts`), written in the same commit as the caption. ``"{}"`` means none:
  the caption is a vision-language model's, or the describer's from before version 3
  (:meth:`ClipRow.describer_facts` returns None; re-indexing writes them, see
  :mod:`vidagent.ingest.caption`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, NamedTuple, get_args

import pyarrow as pa


@dataclass(frozen=True)
class VideoRecord:
    """One video in the Library. ``stages`` maps a stage name to what produced it and when;
    ``recorded_at`` is when the recording started (ISO-8601, schema version 4: the container's
    ``creation_time`` or the ``--started-at`` given at indexing), ``""`` when unknown."""

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
    recorded_at: str = ""

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["stages"] = json.dumps(self.stages, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> VideoRecord:
        values = {f.name: row[f.name] for f in fields(cls)}
        values["stages"] = json.loads(values["stages"] or "{}")
        values["recorded_at"] = values["recorded_at"] or ""
        return cls(**values)


class OcrLine(NamedTuple):
    """An on-screen line and the first and last time (seconds) of the frames it was read in."""

    text: str
    t0: float
    t1: float


@dataclass(frozen=True)
class DescriberFacts:
    """What the perception describer measured for one clip's caption (the ``facts`` column).

    A field is None (or empty) when the describer did not measure it: ``people`` and ``faces``
    when detection had not run, ``lines`` when OCR had not, ``speech`` when the clip was not
    transcribed (or captions do not see transcripts), the picture fields when the clip had no
    thumbnail. Every sentence here is a sentence of the caption, verbatim.

    Attributes:
        people: most people in view in one sampled frame (the count the caption states).
        faces: most faces in view in one sampled frame.
        objects: the same count for the detector's other labels (``{"dog": 1}``).
        lines: the readable on-screen lines the caption quotes, in order.
        colours: the picture's dominant named colours with their mean shares, largest first.
        brightness: ``"dark"``, ``"dim"``, ``"mid"`` or ``"bright"``.
        brightness_level: the mean grey level of the thumbnails, 0-1.
        motion: ``"static"``, ``"little motion"``, ``"moderate motion"`` or ``"strong motion"``
            (None: one thumbnail per shot, nothing to compare).
        motion_level: the mean change between consecutive same-shot thumbnails, 0-1.
        cuts: times (seconds) of the shot cuts inside the clip.
        speech: the transcript the caption quotes (``""``: transcribed, nothing said).
        picture: the whole-frame statistics sentence (``"Picture: mostly ..."``).
        report: the caption's sentences that report something found (people seen, the picture,
            the cuts), in caption order; not the label, the quotes of speech and on-screen text
            (their own columns hold them) or sentences of absence ("No speech.").
    """

    people: int | None = None
    faces: int | None = None
    objects: dict[str, int] = field(default_factory=dict)
    lines: tuple[str, ...] | None = None
    colours: tuple[tuple[str, float], ...] = ()
    brightness: str | None = None
    brightness_level: float | None = None
    motion: str | None = None
    motion_level: float | None = None
    cuts: tuple[float, ...] = ()
    speech: str | None = None
    picture: str = ""
    report: tuple[str, ...] = ()

    def picture_values(self) -> list[str]:
        """The picture's measured values as words: its colours, the largest as ``mostly …``,
        then its brightness and motion (``["mostly green", "yellow", "dim", "static"]``)."""
        names = [name for name, _ in self.colours]
        values = [f"mostly {names[0]}", *names[1:]] if names else []
        return values + [v for v in (self.brightness, self.motion) if v]

    def values(self) -> list[str]:
        """What was measured, as words, without the caption's own wording (its label, ``in
        view``, ``One continuous shot``, ``No on-screen text``): the counts with their nouns
        (``6 people``, ``1 faces``, ``1 dog``) and :meth:`picture_values`. The lines read and
        the speech are left out: their own columns hold them."""
        counts = [(self.people, "people"), (self.faces, "faces")]
        counts += [(n, label) for label, n in self.objects.items()]
        return [f"{n} {noun}" for n, noun in counts if n] + self.picture_values()

    def to_json(self) -> str:
        """The stored form: a JSON object of the measured fields only."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name in _UNSET_WHEN_EMPTY and not value):
                continue  # not measured
            out[f.name] = [list(v) for v in value] if f.name == "colours" else value
        return json.dumps(out, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DescriberFacts | None:
        """The facts of a stored ``facts`` value; None for ``"{}"`` (none recorded).

        Keys this version does not know (a later one's facts) are left out.

        Raises:
            ValueError: ``text`` is not a JSON object.
        """
        data = json.loads(text or "{}")
        if not isinstance(data, dict):  # a bad stored value, like json's own ValueError
            raise ValueError(f"describer facts must be a JSON object, not {text[:40]!r}")  # noqa: TRY004
        if not data:
            return None
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for key in ("lines", "cuts", "report"):
            if key in values:
                values[key] = tuple(values[key])
        if "colours" in values:
            values["colours"] = tuple((str(n), float(s)) for n, s in values["colours"])
        return cls(**values)


#: Facts stored only when the describer found something (an empty ``lines``, ``cuts`` or
#: ``report`` is a measurement: none).
_UNSET_WHEN_EMPTY = frozenset({"objects", "colours", "picture"})


@dataclass(frozen=True)
class ClipRow:
    """A uniform clip ``[t0, t1)`` and what the ingest stages found in it.

    Each stage's output sits beside the fingerprint of what produced it (``*_model``: the model
    spec, plus a prompt hash for prompted stages); an empty fingerprint means "not done yet".
    ``ocr_lines`` and ``facts`` are JSON strings; read them with :meth:`ocr_line_times` and
    :meth:`describer_facts` (module docstring).
    """

    video_id: str
    clip_index: int
    t0: float
    t1: float
    caption: str = ""
    caption_model: str = ""
    facts: str = "{}"  # JSON object of DescriberFacts; "{}": none (a VLM's caption)
    subjects: str = "[]"  # JSON list of subject ids present in the clip
    transcript: str = ""
    transcript_model: str = ""
    ocr_text: str = ""
    ocr_lines: str = "[]"  # JSON list of {"text", "t0", "t1"}, the lines of ocr_text
    ocr_model: str = ""
    detections: str = "[]"  # JSON list of {"t", "label", "box", "score"}
    detect_model: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ClipRow:
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    @property
    def ocr_times_recorded(self) -> bool:
        """Whether ``ocr_lines`` holds the lines' frame times (False: OCR ran before schema
        version 3, and :meth:`ocr_line_times` gives the clip's bounds)."""
        return self.ocr_lines not in ("", "[]") or not self.ocr_text.strip()

    def ocr_line_times(self) -> list[OcrLine]:
        """The clip's on-screen lines with the times of the frames they were read in, in the
        order of ``ocr_text``; each line over the whole clip where those times are not
        recorded."""
        if not self.ocr_times_recorded:
            lines = (" ".join(x.split()) for x in self.ocr_text.splitlines())
            return [OcrLine(x, self.t0, self.t1) for x in lines if x]
        return [
            OcrLine(str(d["text"]), float(d["t0"]), float(d["t1"]))
            for d in json.loads(self.ocr_lines or "[]")
        ]

    def describer_facts(self) -> DescriberFacts | None:
        """What the perception describer measured for the caption; None when nothing is
        recorded (a vision-language model's caption, or a describer's from before schema
        version 3)."""
        return DescriberFacts.from_json(self.facts)


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
    """A speech segment; ``words`` is a JSON list of ``[t0, t1, word, probability]``.

    ``speaker`` is the diarization stage's label (``"S1"``, ``"S2"``, … numbered by first
    appearance; :mod:`vidagent.ingest.speakers`), ``""`` where it has not run (schema version 5
    added the column). The names a user gives the labels live in the video's ``"speakers"``
    artefact, key ``"names"``.
    """

    video_id: str
    segment_index: int
    t0: float
    t1: float
    text: str
    words: str = "[]"
    model: str = ""
    speaker: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TranscriptSegment:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


#: How a word the ASR split off the one before it begins (``"£40"`` then ``",000"``; ``"3"``
#: then ``".5"``): such a word is written on to the word before, not after a space; so is a
#: word after an opening bracket.
GLUED = tuple(",.:;%)?!")


def spoken(words: Iterable[str]) -> str:
    """Transcript words (:attr:`TranscriptSegment.words`' third fields, stored without the
    ASR's leading spaces) as the text that was said: joined by spaces, except a word that
    continues the one before it (:data:`GLUED`), so ``["About", "£40", ",000"]`` reads
    ``"About £40,000"`` as the segment's own text does."""
    text = ""
    for word in words:
        word = word.strip()
        if word:
            glued = not text or word.startswith(GLUED) or text.endswith("(")
            text += word if glued else f" {word}"
    return text


#: What a derived artefact is; one table holds them all, told apart by ``(kind, key)``.
ArtifactKind = Literal[
    "summary", "registry", "browse", "context", "graph", "training", "speakers", "batch"
]
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
            ``{"graph_id", "nodes", "edges", "notes"}``), ``"training"``, ``"speakers"`` (key
            ``""``: the diarization stage's result, ``data`` ``{"speakers": {label: {"seconds",
            "segments"}}}``; key ``"names"``: the names a user gave the labels, ``data``
            ``{label: name}``), ``"batch"`` (key = the stage: the OpenAI batches an ingest stage
            submitted, ``data`` ``{"inputs", "batches": [{"id", "ids"}]}``, so a rerun polls
            them instead of submitting again; :meth:`~vidagent.models.client.Client.chat_batch`).
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
        pa.field("recorded_at", pa.string()),
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
        # Version 3 (last, where the migration adds them to an older Library's table):
        pa.field("ocr_lines", pa.string()),
        pa.field("facts", pa.string()),
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
        # Version 5: the diarization stage's label, "" where it has not run.
        pa.field("speaker", pa.string()),
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
