from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from factories import video_record

from vidagent.exceptions import EmbeddingMismatchError, LibraryVersionError, VideoNotFoundError
from vidagent.library import ClipRow, FrameRow, Library, ShotRow, content_id
from vidagent.library import manifest as manifest_mod


def clips(video_id: str, n: int, caption: str = "") -> list[ClipRow]:
    return [
        ClipRow(video_id, i, 5.0 * i, 5.0 * (i + 1), caption=f"{caption} {i}") for i in range(n)
    ]


def add(
    lib: Library, video_id: str, n: int = 3, caption: str = "clip", name: str = "a.mp4"
) -> None:
    lib.put_clips(video_id, clips(video_id, n, caption))
    lib.put_video(video_record(video_id, 5.0 * n, name))


def test_content_id_follows_bytes_not_names(tmp_path: Path) -> None:
    a = tmp_path / "a.mp4"
    a.write_bytes(b"x" * 3_000_000)
    b = tmp_path / "renamed.mkv"
    shutil.copy(a, b)
    c = tmp_path / "c.mp4"
    c.write_bytes(b"x" * 2_999_999 + b"y")
    assert content_id(a) == content_id(b)
    assert content_id(a) != content_id(c)
    assert len(content_id(a)) == 16


def test_a_copied_or_moved_file_is_the_video_it_holds(small_video: Path, tmp_path: Path) -> None:
    from vidagent.config import load_settings
    from vidagent.ingest.structure import index_structure

    settings = load_settings({"cache": "off"}, env={})
    lib = Library(tmp_path / "lib")
    talk = tmp_path / "talk.mp4"
    shutil.copy(small_video, talk)
    vid = index_structure(lib, talk, settings).video.video_id
    copy = tmp_path / "copy.mp4"
    shutil.copy(talk, copy)
    assert lib.resolve(str(copy)) == vid  # a copy under another name is the same video
    index_structure(lib, copy, settings)  # reused: the recorded file is still there, and kept
    assert lib.get_video(vid).source == str(talk.resolve())
    with pytest.raises(VideoNotFoundError):
        lib.resolve(str(tmp_path / "nowhere.mp4"))

    moved = tmp_path / "moved" / "renamed.mp4"
    moved.parent.mkdir()
    talk.rename(moved)
    index_structure(lib, moved, settings)  # the recorded file is gone: this one is the source
    video = lib.get_video("renamed.mp4")
    assert (video.video_id, video.source) == (vid, str(moved.resolve()))


def test_add_get_list_remove(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    add(lib, "aaaa1111", 3, name="first.mp4")
    add(lib, "bbbb2222", 2, name="second.mp4")
    lib.put_frames("aaaa1111", [FrameRow("aaaa1111", t, 32, 18, b"jpeg%d" % t) for t in range(15)])
    lib.put_shots("aaaa1111", [ShotRow("aaaa1111", 0, 0.0, 9.0), ShotRow("aaaa1111", 1, 9.0, 15.0)])

    reopened = Library(tmp_path / "lib")
    assert [v.name for v in reopened.list_videos()] == ["first.mp4", "second.mp4"]
    assert reopened.get_video("aaaa").video_id == "aaaa1111"  # unique prefix
    assert reopened.get_video("second.mp4").video_id == "bbbb2222"  # file name
    assert [c.caption for c in reopened.clips("aaaa1111")] == ["clip 0", "clip 1", "clip 2"]
    assert [f.t for f in reopened.frames("aaaa1111", 3, 5)] == [3.0, 4.0, 5.0]
    assert [(s.t0, s.t1) for s in reopened.shots("aaaa1111")] == [(0.0, 9.0), (9.0, 15.0)]

    assert reopened.get_video("a").video_id == "aaaa1111"
    with pytest.raises(VideoNotFoundError, match="'a' is too short an id prefix here"):
        reopened.remove_video("a")  # `vidagent remove 5` took whichever id began with 5
    assert reopened.get_video("aaa").video_id == "aaaa1111"  # not removed
    reopened.remove_video("aaaa")
    assert [v.video_id for v in reopened.list_videos()] == ["bbbb2222"]
    assert reopened.clips("aaaa1111") == [] and reopened.frames("aaaa1111") == []
    assert len(reopened.clips("bbbb2222")) == 2  # the other video is untouched
    # every front end shows the message as it is: it names the videos there, not a command
    with pytest.raises(VideoNotFoundError, match="no video .*; its videos: 'second.mp4'$"):
        reopened.get_video("aaaa1111")


def test_a_video_is_found_by_a_relative_path_to_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ingest stores a video's source resolved; the path a user indexed it by, relative to
    where they stand, names it too (`vidagent search clips/a.mp4 ...`)."""
    lib = Library(tmp_path / "lib")
    (tmp_path / "clips").mkdir()
    record = dataclasses.replace(
        video_record("aaaa1111", 15.0, "a.mp4"), source=str(tmp_path / "clips" / "a.mp4")
    )
    lib.put_clips("aaaa1111", clips("aaaa1111", 3, "clip"))
    lib.put_video(record)
    monkeypatch.chdir(tmp_path)
    assert lib.resolve("clips/a.mp4") == "aaaa1111"
    assert lib.resolve("./clips/../clips/a.mp4") == "aaaa1111"
    for unknown in ("other/a.mp4", "a\x00b", "~nobody-here/a.mp4"):
        with pytest.raises(VideoNotFoundError, match="no video"):
            lib.resolve(unknown)


def test_a_file_that_is_there_names_itself_before_another_of_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two videos called base.mp4, in two folders: in one of them, "base.mp4" is that file (it
    # was "ambiguous" to show, search and remove, though ask took it as the file it is)
    lib = Library(tmp_path / "lib")
    for vid, folder in (("aaaa1111", "here"), ("bbbb2222", "there")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "base.mp4").write_bytes(vid.encode())
        source = str(tmp_path / folder / "base.mp4")
        lib.put_video(dataclasses.replace(video_record(vid, 15.0, "base.mp4"), source=source))
    monkeypatch.chdir(tmp_path / "there")
    assert lib.resolve("base.mp4") == "bbbb2222"
    monkeypatch.chdir(tmp_path)  # no such file here: the name is both
    with pytest.raises(VideoNotFoundError, match="several"):
        lib.resolve("base.mp4")
    # a copy elsewhere is found by its content
    copy = tmp_path / "copy.mp4"
    shutil.copy(tmp_path / "here" / "base.mp4", copy)
    lib.put_video(dataclasses.replace(video_record(content_id(copy), 15.0, "base.mp4"),
                                      source=str(tmp_path / "gone" / "base.mp4")))  # fmt: skip
    monkeypatch.chdir(tmp_path / "here")
    assert lib.resolve("base.mp4") == "aaaa1111"  # its own path first


def test_a_video_is_found_by_its_file_name_without_the_extension(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    for vid, name in (
        ("aaaa1111", "garden.mp4"),
        ("bbbb2222", "talk.mp4"),
        ("cccc3333", "talk.avi"),
    ):
        lib.put_video(video_record(vid, 15.0, name))
    assert lib.resolve("garden") == "aaaa1111"
    with pytest.raises(VideoNotFoundError, match="several"):
        lib.resolve("talk")  # talk.mp4 and talk.avi
    with pytest.raises(VideoNotFoundError, match="no video"):
        lib.resolve("gard")


def test_ambiguous_prefix_is_refused(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    add(lib, "abc1", 1)
    add(lib, "abc2", 1)
    with pytest.raises(VideoNotFoundError, match="several"):
        lib.resolve("abc")


def test_rewriting_a_video_replaces_its_rows_exactly(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    add(lib, "v1", 4, "old")
    add(lib, "v2", 2, "other")
    add(lib, "v1", 3, "new")  # fewer clips now: the stale fourth must go
    assert [c.caption for c in lib.clips("v1")] == ["new 0", "new 1", "new 2"]
    assert [c.caption for c in lib.clips("v2")] == ["other 0", "other 1"]


def test_vector_search_filters_by_video_and_time(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    add(lib, "v1", 4)
    add(lib, "v2", 4)
    lib.use_embedding("clip_vectors", "fake:hash", 4)
    eye = np.eye(4, dtype=np.float32)
    lib.put_clip_vectors("v1", "fake:hash", lib.clips("v1"), eye)
    lib.put_clip_vectors("v2", "fake:hash", lib.clips("v2"), eye[::-1].copy())

    hits = lib.search_clips(eye[2], k=2)
    assert {(h.clip.video_id, h.clip.clip_index) for h in hits} == {("v1", 2), ("v2", 1)}
    assert hits[0].score == pytest.approx(1.0)

    only_v2 = lib.search_clips(eye[2], video_ids=["v2"], k=1)
    assert [(h.clip.video_id, h.clip.clip_index) for h in only_v2] == [("v2", 1)]

    # Clips overlapping [12, 18] are 2 (10-15) and 3 (15-20); nearest to e0 among them in v1 is 2 or 3.
    windowed = lib.search_clips(eye[0], video_ids=["v1"], t_from=12, t_to=18, k=4)
    assert sorted(h.clip.clip_index for h in windowed) == [2, 3]


def test_vectors_of_another_model_are_refused_and_switching_resets(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    add(lib, "v1", 2)
    lib.use_embedding("clip_vectors", "fake:hash?dim=4", 4)
    lib.put_clip_vectors("v1", "fake:hash?dim=4", lib.clips("v1"), np.eye(2, 4, dtype=np.float32))
    with pytest.raises(EmbeddingMismatchError):
        lib.put_clip_vectors("v1", "other:model", lib.clips("v1"), np.eye(2, 4, dtype=np.float32))
    with pytest.raises(EmbeddingMismatchError):
        lib.put_clip_vectors(
            "v1", "fake:hash?dim=4", lib.clips("v1"), np.eye(2, 8, dtype=np.float32)
        )

    assert lib.use_embedding("clip_vectors", "other:model", 8) is True
    assert lib.search_clips(np.ones(8)) == []  # old vectors are gone, never mixed with new ones
    manifest = json.loads((tmp_path / "lib" / "manifest.json").read_text())
    assert manifest["embeddings"]["clip_vectors"] == {"spec": "other:model", "dim": 8}


def test_newer_library_is_refused_untouched(tmp_path: Path) -> None:
    Library(tmp_path / "lib")
    path = tmp_path / "lib" / "manifest.json"
    data = json.loads(path.read_text())
    data["schema_version"] = manifest_mod.SCHEMA_VERSION + 1
    path.write_text(json.dumps(data))
    with pytest.raises(LibraryVersionError, match="newer"):
        Library(tmp_path / "lib")
    assert json.loads(path.read_text()) == data


def test_pending_migrations_run_in_order_and_are_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = Library(tmp_path / "lib")
    add(lib, "v1", 2)
    ran: list[int] = []

    def add_language_column(library: Library) -> None:
        ran.append(1)
        table = library.table("clips")
        if "language" not in table.schema.names:
            table.add_columns({"language": "'en'"})

    current = manifest_mod.SCHEMA_VERSION
    monkeypatch.setattr(manifest_mod, "SCHEMA_VERSION", current + 1)
    monkeypatch.setitem(manifest_mod.MIGRATIONS, current, add_language_column)
    upgraded = Library(tmp_path / "lib")
    assert ran == [1]
    Library(tmp_path / "lib")
    assert ran == [1]  # recorded: not run twice
    manifest = json.loads((tmp_path / "lib" / "manifest.json").read_text())
    assert manifest["schema_version"] == current + 1
    assert upgraded.table("clips").to_arrow().column("language").to_pylist() == ["en", "en"]
    assert [c.caption for c in upgraded.clips("v1")] == ["clip 0", "clip 1"]


WRITER = """
import sys
from vidagent.library import ClipRow, Library, VideoRecord
lib = Library(sys.argv[1])
gen = 0
while True:
    gen += 1
    for vid in ("v1", "v2"):
        n = 40 + gen % 7
        lib.put_clips(vid, [ClipRow(vid, i, 5.0 * i, 5.0 * i + 5, caption=f"gen{gen}") for i in range(n)])
        lib.put_video(VideoRecord(vid, "/x", vid, 1, 5.0 * n, 25.0, 64, 64, 0, "h264", False, "t", {"gen": gen, "n": n}))
    print(gen, flush=True)
"""


def test_sigkill_mid_write_leaves_a_readable_consistent_library(tmp_path: Path) -> None:
    uri = tmp_path / "lib"
    add(Library(uri), "keep", 3, "untouched")
    for delay in (0.4, 0.9, 1.3, 1.7, 2.2):
        with subprocess.Popen(  # leaving the block closes the pipe and reaps the process
            [sys.executable, "-c", WRITER, str(uri)], stdout=subprocess.PIPE, text=True
        ) as proc:
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        lib = Library(uri)
        assert [c.caption for c in lib.clips("keep")] == [
            "untouched 0",
            "untouched 1",
            "untouched 2",
        ]
        for v in lib.list_videos():
            if v.video_id == "keep":
                continue
            rows = lib.clips(v.video_id)
            # Each table commit is atomic: one generation per table, never a mix or a duplicate.
            assert len({c.caption for c in rows}) == 1
            assert sorted(c.clip_index for c in rows) == list(range(len(rows)))
            # The video row is written after its clips, so clips are at least as new as the listing.
            assert int(rows[0].caption[3:]) >= v.stages["gen"]


def test_new_clips_drop_the_old_clips_vectors(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    add(lib, "v1", 4)
    lib.use_embedding("clip_vectors", "fake:hash", 4)
    lib.put_clip_vectors("v1", "fake:hash", lib.clips("v1"), np.eye(4, dtype=np.float32))
    lib.put_clips("v1", [ClipRow("v1", 0, 0.0, 4.0), ClipRow("v1", 1, 4.0, 8.0)])  # re-cut
    assert lib.clip_vector_hashes("v1") == {}
    assert lib.search_clips(np.eye(4, dtype=np.float32)[0]) == []
