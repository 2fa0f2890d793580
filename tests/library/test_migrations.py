"""Schema migrations: 1 -> 2, the ``summaries`` table becomes typed ``artifacts``; 2 -> 3, clips
gain ``ocr_lines`` and ``facts``; 3 -> 4, videos gain ``recorded_at``; 4 -> 5, transcript
segments gain ``speaker``.

Old Libraries are written by hand with the table definitions of their version frozen below, so
the tests keep meaning "a Library an older vidagent wrote" whatever the current schema becomes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from vidagent.library import ClipRow, Library
from vidagent.library import manifest as manifest_mod
from vidagent.library.lance import import_lancedb
from vidagent.library.schema import (
    CLIPS_SCHEMA,
    TRANSCRIPT_SCHEMA,
    VIDEOS_SCHEMA,
    TranscriptSegment,
)

lancedb = import_lancedb()  # as the Library imports it: without the REST client's __init__

# -- version 1, as vidagent 0.1 wrote it --------------------------------------------------------

V1_VIDEOS_SCHEMA = pa.schema(
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
V1_CLIPS_SCHEMA = pa.schema(
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
V1_SUMMARIES_SCHEMA = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("data", pa.string()),
        pa.field("model", pa.string()),
        pa.field("inputs_hash", pa.string()),
    ]
)

REGISTRY = {"subject_1": {"name": "Ann", "appearance": ["red"], "first_clip": 0}}
LEVELS = {"levels": [[{"t0": 0.0, "t1": 10.0, "text": "part"}]]}
BROWSE = {"query": "who enters?", "frames": 250, "height": 360}
CONTEXT = {"segments": [[0.0, 4.0, "a man"], [4.0, 8.0, "a dog"]]}


def summary(
    vid: str, kind: str, text: str, data: str, model: str = "m", inputs: str = "h"
) -> dict[str, Any]:
    return {
        "video_id": vid,
        "kind": kind,
        "text": text,
        "data": data,
        "model": model,
        "inputs_hash": inputs,
    }


SUMMARY_ROWS = [
    summary("v1", "global", "The video.", json.dumps(LEVELS), "llm|p1", "c1"),
    summary("v1", "registry", "", json.dumps(REGISTRY), "vlm|p2", "2"),
    summary("v1", "event:0123456789abcdef", "Ann enters.", json.dumps(BROWSE), "vlm", "p3"),
    summary("v1", "videoagent2:4s@1fps", "S", json.dumps(CONTEXT), "vlm|llm", "st"),
    summary("v2", "global", "Other video.", "{}"),
    summary("v2", "notes", "free text", "[1, 2]"),  # a kind this code never wrote
    summary("v2", "registry", "", "not json"),
]
#: (video_id, kind, key) -> (text, data, producer, inputs_hash) expected after the migration
EXPECTED = {
    ("v1", "summary", "global"): ("The video.", LEVELS, "llm|p1", "c1"),
    ("v1", "registry", ""): ("", REGISTRY, "vlm|p2", "2"),
    ("v1", "browse", "0123456789abcdef"): ("Ann enters.", BROWSE, "vlm", "p3"),
    ("v1", "context", "videoagent2:4s@1fps"): ("S", CONTEXT, "vlm|llm", "st"),
    ("v2", "summary", "global"): ("Other video.", {}, "m", "h"),
    ("v2", "summary", "notes"): ("free text", {"value": [1, 2]}, "m", "h"),
    ("v2", "registry", ""): ("", {"raw": "not json"}, "m", "h"),
}


def video_row(vid: str, added: str) -> dict[str, Any]:
    return {
        "video_id": vid,
        "source": f"/videos/{vid}.mp4",
        "name": f"{vid}.mp4",
        "size_bytes": 1000,
        "duration": 10.0,
        "fps": 25.0,
        "width": 640,
        "height": 360,
        "rotation": 0,
        "codec": "h264",
        "has_audio": True,
        "added_at": added,
        "stages": json.dumps({"structure": {"sampling": {"clip_seconds": 5}}}),
    }


def clip_row(vid: str, i: int) -> dict[str, Any]:
    return {
        "video_id": vid,
        "clip_index": i,
        "t0": 5.0 * i,
        "t1": 5.0 * i + 5,
        "caption": f"{vid} clip {i}",
        "caption_model": "vlm|p2",
        "subjects": "[]",
        "transcript": "",
        "transcript_model": "",
        "ocr_text": "",
        "ocr_model": "",
        "detections": "[]",
        "detect_model": "",
    }


def write_v1_library(root: Path) -> None:
    db = lancedb.connect(root)
    videos = [video_row("v1", "2026-01-01"), video_row("v2", "2026-01-02")]
    clips = [clip_row(v, i) for v in ("v1", "v2") for i in range(2)]
    db.create_table("videos", data=pa.Table.from_pylist(videos, schema=V1_VIDEOS_SCHEMA))
    db.create_table("clips", data=pa.Table.from_pylist(clips, schema=V1_CLIPS_SCHEMA))
    summaries = pa.Table.from_pylist(SUMMARY_ROWS, schema=V1_SUMMARIES_SCHEMA)
    db.create_table("summaries", data=summaries)
    manifest = {
        "schema_version": 1,
        "created_at": "2026-01-01T00:00:00+00:00",
        "embeddings": {},
        "prompts": {},
        "sampling": {"clip_seconds": 5},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))


def disk_version(root: Path) -> int:
    return int(json.loads((root / "manifest.json").read_text())["schema_version"])


def assert_migrated(root: Path) -> None:
    lib = Library(root)
    assert lib.manifest.schema_version == manifest_mod.SCHEMA_VERSION == disk_version(root)
    assert lib.manifest.sampling == {"clip_seconds": 5}  # the rest of the manifest is kept
    assert not lib.has_table("summaries")
    assert [v.video_id for v in lib.list_videos()] == ["v1", "v2"]
    assert lib.get_video("v1").stages == {"structure": {"sampling": {"clip_seconds": 5}}}
    for vid in ("v1", "v2"):
        assert [c.caption for c in lib.clips(vid)] == [f"{vid} clip 0", f"{vid} clip 1"]
        assert {(c.ocr_lines, c.facts) for c in lib.clips(vid)} == {("[]", "{}")}  # version 3
        assert lib.get_video(vid).recorded_at == ""  # version 4: not known
    rows = lib.table("artifacts").to_arrow().to_pylist()
    keys = Counter((r["video_id"], r["kind"], r["key"]) for r in rows)
    assert keys == Counter(list(EXPECTED))  # every row, each exactly once
    for (vid, kind, key), (text, data, producer, inputs) in EXPECTED.items():
        artifact = lib.artifact(vid, kind, key)  # type: ignore[arg-type]
        assert artifact is not None
        assert (artifact.text, artifact.data) == (text, data)
        assert (artifact.producer, artifact.inputs_hash) == (producer, inputs)
        assert artifact.updated_at
    assert lib.registry("v1") == REGISTRY and lib.global_summary("v1") == "The video."


def test_a_version_1_library_is_migrated_without_losing_a_row(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    write_v1_library(root)
    assert_migrated(root)
    assert_migrated(root)  # opening again changes nothing


def test_an_interrupted_migration_completes_without_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lib"
    write_v1_library(root)

    class Killed(Exception):
        pass

    def killed_before_the_drop(self: Library, name: str) -> None:
        raise Killed(name)

    # The copy commits, then the process dies before dropping the old table.
    monkeypatch.setattr(Library, "drop_table", killed_before_the_drop)
    with pytest.raises(Killed):
        Library(root)
    monkeypatch.undo()
    assert disk_version(root) == 1
    db = lancedb.connect(root)
    assert db.open_table("artifacts").count_rows() == len(EXPECTED)
    assert db.open_table("summaries").count_rows() == len(SUMMARY_ROWS)

    assert_migrated(root)


def test_a_migration_killed_after_the_drop_still_records_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lib"
    write_v1_library(root)

    def killed_before_recording(self: Library, manifest: object = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Library, "save_manifest", killed_before_recording)
    with pytest.raises(KeyboardInterrupt):
        Library(root)
    monkeypatch.undo()
    assert disk_version(root) == 1 and "summaries" not in lancedb.connect(root).list_tables().tables

    assert_migrated(root)


OPEN = "import sys; from vidagent.library import Library; Library(sys.argv[1]); print('ok')"


def test_two_processes_opening_an_old_library_migrate_it_once(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    write_v1_library(root)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outputs]
    assert_migrated(root)


# -- version 2 -> 3 -------------------------------------------------------------------------------

#: Version 2 kept the version-1 ``videos`` and ``clips`` tables.
V2_CLIPS_SCHEMA = V1_CLIPS_SCHEMA
V2_CLIPS = [
    {
        **clip_row("v1", 0),
        "caption": "[perception describer: measured facts, not a vision-language model] "
        'No people detected. On-screen text: "OPEN DAY". One continuous shot. No speech.',
        "caption_model": "perception:describer|facts=read_text+detect",
        "ocr_text": "OPEN DAY\nx7",
        "ocr_model": "rapidocr:pp-ocr",
    },
    clip_row("v1", 1),
]


def write_v2_library(root: Path) -> None:
    db = lancedb.connect(root)
    db.create_table("videos", data=pa.Table.from_pylist([video_row("v1", "2026-01-01")]))
    db.create_table("clips", data=pa.Table.from_pylist(V2_CLIPS, schema=V2_CLIPS_SCHEMA))
    manifest = {"schema_version": 2, "created_at": "2026-01-01T00:00:00+00:00"}
    (root / "manifest.json").write_text(json.dumps(manifest))


def assert_v2_migrated(root: Path) -> None:
    lib = Library(root)
    assert lib.manifest.schema_version == manifest_mod.SCHEMA_VERSION == disk_version(root)
    clips = lib.clips("v1")
    assert [c.clip_index for c in clips] == [0, 1]  # no row lost, none twice
    stored = {k: v for k, v in clips[0].__dict__.items() if k not in ("ocr_lines", "facts")}
    assert stored == V2_CLIPS[0]  # every version-2 value as it was
    # Not recorded: the lines fall back to the clip's bounds, the describer's facts to None.
    assert not clips[0].ocr_times_recorded
    assert clips[0].ocr_line_times() == [("OPEN DAY", 0.0, 5.0), ("x7", 0.0, 5.0)]
    assert clips[0].describer_facts() is None and clips[1].ocr_line_times() == []
    table = lib.table("clips")
    assert table.schema == CLIPS_SCHEMA.remove_metadata()  # as a new Library's, nullability too
    # The new columns take writes like any other.
    lib.update_clips("v1", [{"clip_index": 1, "ocr_lines": '[{"text": "A", "t0": 6, "t1": 7}]'}])
    assert lib.clips("v1")[1].ocr_line_times() == [("A", 6.0, 7.0)]
    lib.update_clips("v1", [{"clip_index": 1, "ocr_lines": "[]"}])


def test_a_version_2_library_gains_the_clip_facts_columns(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    write_v2_library(root)
    assert_v2_migrated(root)
    assert_v2_migrated(root)  # opening again changes nothing


def test_a_version_2_migration_killed_between_its_commits_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lib"
    write_v2_library(root)

    def killed(self: object, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    # Killed after the columns were added, before they were made nullable ...
    monkeypatch.setattr(lancedb.table.LanceTable, "alter_columns", killed)
    with pytest.raises(KeyboardInterrupt):
        Library(root)
    monkeypatch.undo()
    assert disk_version(root) == 2
    assert {"ocr_lines", "facts"} <= set(lancedb.connect(root).open_table("clips").schema.names)
    # ... and after both, before the version was recorded.
    monkeypatch.setattr(Library, "save_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        Library(root)
    monkeypatch.undo()
    assert disk_version(root) == 2

    assert_v2_migrated(root)


def test_a_version_2_library_without_clips_is_migrated(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"schema_version": 2}))
    lib = Library(root)
    assert lib.manifest.schema_version == manifest_mod.SCHEMA_VERSION
    assert not lib.has_table("clips")
    lib.put_clips("v1", [ClipRow("v1", 0, 0.0, 5.0, ocr_text="A", ocr_lines="[]")])
    assert lib.clips("v1")[0].ocr_line_times() == [("A", 0.0, 5.0)]


def write_v3_library(root: Path) -> None:
    """Version 3: the current tables but ``videos`` without ``recorded_at``."""
    db = lancedb.connect(root)
    v3 = pa.schema([f for f in VIDEOS_SCHEMA if f.name != "recorded_at"])
    db.create_table("videos", data=pa.Table.from_pylist([video_row("v1", "2026-01-01")], schema=v3))
    manifest = {"schema_version": 3, "created_at": "2026-01-01T00:00:00+00:00"}
    (root / "manifest.json").write_text(json.dumps(manifest))


def test_a_version_3_library_gains_recorded_at_and_takes_a_recording_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    root = tmp_path / "lib"
    write_v3_library(root)

    def killed(self: object, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    # killed after the column was added, before it was made nullable: the next open completes
    monkeypatch.setattr(lancedb.table.LanceTable, "alter_columns", killed)
    with pytest.raises(KeyboardInterrupt):
        Library(root)
    monkeypatch.undo()
    assert disk_version(root) == 3
    for _ in range(2):  # opening again changes nothing
        lib = Library(root)
        assert lib.manifest.schema_version == manifest_mod.SCHEMA_VERSION == disk_version(root)
        assert lib.get_video("v1").recorded_at == ""
        assert lib.table("videos").schema == VIDEOS_SCHEMA.remove_metadata()
    lib.put_video(replace(lib.get_video("v1"), recorded_at="2026-05-01T09:30:00Z"))
    assert Library(root).get_video("v1").recorded_at == "2026-05-01T09:30:00Z"


# -- version 4 -> 5 -------------------------------------------------------------------------------

V4_TRANSCRIPT_SCHEMA = pa.schema(
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
V4_TRANSCRIPT = [
    {
        "video_id": "v1",
        "segment_index": i,
        "t0": 2.0 * i,
        "t1": 2.0 * i + 1.5,
        "text": f" line {i}",
        "words": "[]",
        "model": "faster-whisper:tiny.en",
    }
    for i in range(3)
]


def write_v4_library(root: Path) -> None:
    """Version 4: the current tables but ``transcript`` without ``speaker``."""
    db = lancedb.connect(root)
    db.create_table(
        "videos", data=pa.Table.from_pylist([video_row("v1", "2026-01-01")], schema=VIDEOS_SCHEMA)
    )
    db.create_table(
        "transcript", data=pa.Table.from_pylist(V4_TRANSCRIPT, schema=V4_TRANSCRIPT_SCHEMA)
    )
    manifest = {"schema_version": 4, "created_at": "2026-01-01T00:00:00+00:00"}
    (root / "manifest.json").write_text(json.dumps(manifest))


def assert_v4_migrated(root: Path) -> None:
    lib = Library(root)
    assert lib.manifest.schema_version == 5 == disk_version(root)
    segments = lib.transcript("v1")
    assert [s.segment_index for s in segments] == [0, 1, 2]  # no row lost, none twice
    assert [{k: v for k, v in s.__dict__.items() if k != "speaker"} for s in segments] == (
        V4_TRANSCRIPT
    )
    assert {s.speaker for s in segments} == {""}  # not labelled
    assert lib.table("transcript").schema == TRANSCRIPT_SCHEMA.remove_metadata()
    # The column takes writes like any other, and reads back.
    labelled = [TranscriptSegment(**{**s.__dict__, "speaker": "S1"}) for s in segments]
    lib.put_transcript("v1", labelled)
    assert {s.speaker for s in lib.transcript("v1")} == {"S1"}
    lib.put_transcript("v1", segments)


def test_a_version_4_library_gains_the_speaker_column(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    write_v4_library(root)
    assert_v4_migrated(root)
    assert_v4_migrated(root)  # opening again changes nothing


def test_a_version_4_migration_killed_between_its_commits_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lib"
    write_v4_library(root)

    def killed(self: object, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(lancedb.table.LanceTable, "alter_columns", killed)
    with pytest.raises(KeyboardInterrupt):
        Library(root)
    monkeypatch.undo()
    assert disk_version(root) == 4
    assert "speaker" in lancedb.connect(root).open_table("transcript").schema.names
    assert_v4_migrated(root)


def test_the_current_version_has_a_migration_from_every_older_one() -> None:
    assert sorted(manifest_mod.MIGRATIONS) == list(range(1, manifest_mod.SCHEMA_VERSION))
