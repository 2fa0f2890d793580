"""Libraries named by a ``file://`` URI (a local or shared-filesystem directory) behave exactly
like ones named by a path: every command, the same files, the same write lock."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from clirun import vidagent
from factories import video_record

from vidagent.exceptions import LibraryError
from vidagent.library import ClipRow, Library
from vidagent.library.store import local_library_path


def test_a_file_uri_and_its_path_are_one_library(tmp_path: Path) -> None:
    root = tmp_path / "shared lib"  # a space: the URI is percent-encoded
    by_uri = Library(root.as_uri())
    by_uri.put_clips("v1", [ClipRow("v1", 0, 0.0, 5.0, caption="a dog")])
    by_uri.use_embedding("clip_vectors", "fake:hash?dim=4", 4)
    clips = by_uri.clips("v1")
    by_uri.put_clip_vectors("v1", "fake:hash?dim=4", clips, np.eye(1, 4, dtype=np.float32))
    by_uri.put_video(video_record("v1", 5.0))

    assert (root / "manifest.json").is_file()
    assert (root / ".write.lock").exists()  # the inter-process file lock, as for a path
    by_path = Library(root)
    assert [v.video_id for v in by_path.list_videos()] == ["v1"]
    assert by_path.search_clips(np.eye(1, 4)[0])[0].clip.caption == "a dog"
    assert by_uri.size_bytes() == by_path.size_bytes() > 0


def test_a_file_uri_with_a_host_is_refused() -> None:
    with pytest.raises(LibraryError, match="local path"):
        local_library_path("file://fileserver/videos")
    assert local_library_path("s3://bucket/videos") is None
    assert local_library_path("/data/lib") == "/data/lib"


def test_every_command_works_on_a_file_uri_library(
    small_video: Path, tmp_path: Path, _isolated_home: Path, fake_env: dict[str, str]
) -> None:
    root = tmp_path / "shared lib"
    lib = ("--library", root.as_uri())

    def run(*args: str) -> str:
        out = vidagent(*lib, *args, home=_isolated_home, env=fake_env)
        assert out.returncode == 0, out.stderr
        return out.stdout

    indexed = json.loads(run("index", str(small_video), "--json"))
    assert (root / "manifest.json").is_file()
    assert not (_isolated_home / "library").exists()  # nothing went to the default Library
    listed = json.loads(run("list", "--json"))
    assert [v["name"] for v in listed] == ["small.mp4"]
    video_id = listed[0]["video_id"]
    assert indexed

    hits = json.loads(run("search", "all", "hello there", "--to", "00:00:04", "--json"))
    assert hits and all(h["t0"] < 4 for h in hits)

    asked = json.loads(
        run("ask", video_id, "What does the video show?", "-s", "retrieval", "--json")
    )
    assert asked["answer"]

    before = {r["name"]: r["rows_after"] for r in json.loads(run("library", "compact", "--json"))}
    after = {r["name"]: r["rows_after"] for r in json.loads(run("library", "compact", "--json"))}
    assert before == after and before["clips"] == 3  # 12 s in 5 s clips

    indexed_now = json.loads(run("library", "compact", "--ann-min-rows", "2", "--json"))
    vectors = next(r for r in indexed_now if r["name"] == "clip_vectors")
    assert "vector" in vectors["built"] and vectors["rows_after"] == 3
    assert json.loads((root / "manifest.json").read_text())["indexing"] == {"ann_min_rows": 2}
    assert json.loads(run("search", "all", "hello there", "--json"))  # with the index in place
    bad = vidagent(*lib, "library", "compact", "--older-than", "-1", home=_isolated_home)
    assert bad.returncode == 2 and "must be 0 or more" in bad.stderr

    by_path = vidagent("--library", str(root), "list", "--json", home=_isolated_home)
    assert [v["video_id"] for v in json.loads(by_path.stdout)] == [video_id]

    assert video_id in run("remove", "small.mp4")
    assert json.loads(run("list", "--json")) == []
    missing = vidagent(
        "--library",
        (tmp_path / "none").as_uri(),
        "search",
        "all",
        "x",
        home=_isolated_home,
        env=fake_env,
    )
    assert missing.returncode == 1 and missing.stderr.startswith("error: no Library at file://")


def test_a_library_that_cannot_be_read_says_why_not_that_there_is_none(
    tmp_path: Path, _isolated_home: Path
) -> None:
    # a newer or damaged Library was "no Library …; index a video first" to every read command
    root = tmp_path / "lib"
    Library(root).put_video(video_record("v" * 16))
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 99}))
    newer = vidagent("--library", str(root), "list", home=_isolated_home)
    assert newer.returncode == 1 and "has schema version 99, newer than" in newer.stderr
    (root / "manifest.json").write_text("{not json")
    damaged = vidagent("--library", str(root), "show", "v" * 16, home=_isolated_home)
    assert damaged.returncode == 1 and "manifest.json is damaged" in damaged.stderr
    # its manifest deleted, its tables there: said so (it was "no videos yet"), and an index
    # does not write a new manifest over the tables
    (root / "manifest.json").unlink()
    for command in (("list",), ("index", str(root / "none.mp4"))):
        gone = vidagent("--library", str(root), *command, home=_isolated_home)
        assert gone.returncode == 1, gone.stderr
        assert "holds a Library's tables (videos.lance) but no manifest.json" in gone.stderr
    assert not (root / "manifest.json").exists()
    # a location that cannot be one: one line, never "a bug"
    for uri, said in [
        ("foo://bar", "foo://bar: no Library location that can be opened (Unrecognized"),
        ("gs://", "gs://: names no bucket or folder"),
    ]:
        out = vidagent("--library", uri, "search", "all", "x", home=_isolated_home)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"error: {said}")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    out = vidagent("--library", str(a_file), "index", str(a_file), home=_isolated_home)
    assert out.returncode == 1 and "is a file, not a Library folder" in out.stderr
    typo = vidagent("--library", str(tmp_path / "nope"), "list", home=_isolated_home)
    assert typo.stderr.startswith(f"no videos yet: no Library at {tmp_path / 'nope'}")
