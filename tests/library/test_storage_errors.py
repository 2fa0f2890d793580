"""A write the system refuses is an operational error, not a bug: a full disk, a read-only
filesystem and a denied permission each end ``vidagent index`` with one line naming the
folder and what to do, and the Library keeps every row it held.

The full and read-only disks are real: a small tmpfs mounted for the test (root only, so the
tests skip with that reason elsewhere). The denied permission is ext4's immutable attribute,
which refuses even root (``chattr +i``).
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clirun import vidagent
from factories import INDEX_SPECS

from vidagent.exceptions import StorageError, storage_error
from vidagent.library import Library
from vidagent.media.synth import make_video

ENV = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs: room for one small video's Library and little more."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    where = tmp_path / "disk"
    where.mkdir()
    mounted = _run("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(where))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield where
    _run("umount", "-l", str(where))


def _snapshot(root: Path) -> dict[str, Any]:
    """What a user reads back from a Library: every video, clip, frame and vector."""
    lib = Library(root, create=False)
    out: dict[str, Any] = {}
    for v in lib.list_videos():
        out[v.video_id] = {
            "stages": sorted(v.stages),
            "clips": [
                (c.clip_index, c.t0, c.t1, c.caption, c.transcript) for c in lib.clips(v.video_id)
            ],
            "frames": [(f.t, len(f.jpeg)) for f in lib.frames(v.video_id)],
            "vectors": sorted(lib.clip_vector_hashes(v.video_id)),
        }
    return out


def _index(library: Path, video: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return vidagent("--library", str(library), "index", str(video), "--json", home=home, env=ENV)


def _fill(disk: Path) -> Path:
    """Write a file until the disk is full; it is the space given back later."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return filler


def _one_line_error(out: subprocess.CompletedProcess[str], folder: Path, says: str) -> None:
    assert out.returncode == 1, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr  # no progress noise, no traceback
    assert lines[0].startswith(f"error: {folder}: {says}")
    assert "a bug" not in lines[0] and "Traceback" not in out.stderr


@pytest.fixture
def videos(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "first.mp4", tmp_path / "second.mp4"
    make_video(first, duration=6, shots=2, size=(160, 96), audio="tone")
    make_video(second, duration=20, shots=3, size=(320, 180), audio="tone", tone_hz=660.0)
    return first, second


def test_a_full_disk_is_named_and_the_library_keeps_its_rows(
    small_disk: Path, videos: tuple[Path, Path], _isolated_home: Path
) -> None:
    library = small_disk / "library"
    first, second = videos
    assert _index(library, first, _isolated_home).returncode == 0
    before = _snapshot(library)
    filler = _fill(small_disk)

    out = _index(library, second, _isolated_home)
    _one_line_error(out, library, "no space left on the device (disk full); free space there")

    filler.unlink()  # space again: the Library holds exactly what it held, and indexes on
    assert _snapshot(library) == before
    again = _index(library, second, _isolated_home)
    assert again.returncode == 0, again.stderr
    after = _snapshot(library)
    assert after[next(iter(before))] == before[next(iter(before))]
    assert len(after) == 2


def test_an_evidence_bundle_written_to_a_full_disk_is_named(
    small_disk: Path, videos: tuple[Path, Path], tmp_path: Path, _isolated_home: Path
) -> None:
    from vidagent.trace import Answered, Citation, RunStarted, Trace

    library = tmp_path / "library"  # the Library has room; the bundle's folder has none
    first, _ = videos
    indexed = _index(library, first, _isolated_home)
    assert indexed.returncode == 0, indexed.stderr
    vid = json.loads(indexed.stdout)["video_id"]
    trace = Trace(tmp_path / "answer.jsonl")
    trace.emit(RunStarted(0.0, "retrieval", "What happens?", [], [], {}, {}))
    cited = Citation(vid, 1.0, 3.0, [1.0, 3.0], "unchecked", 0.0, "", "", 0)
    trace.emit(Answered(1.0, "Something.", None, True, False, "", None, [], citations=[cited]))
    trace.close()
    filler = _fill(small_disk)
    bundle = small_disk / "bundle"
    out = vidagent(
        "--library",
        str(library),
        "export",
        str(trace.path),
        "-o",
        str(bundle),
        home=_isolated_home,
        env=ENV,
    )
    _one_line_error(out, bundle, "no space left on the device (disk full); free space there")
    filler.unlink()


def test_a_read_only_library_is_named_and_still_readable(
    small_disk: Path, videos: tuple[Path, Path], _isolated_home: Path
) -> None:
    library = small_disk / "library"
    first, second = videos
    assert _index(library, first, _isolated_home).returncode == 0
    before = _snapshot(library)
    remounted = _run("mount", "-o", "remount,ro", str(small_disk))
    assert remounted.returncode == 0, remounted.stderr

    out = _index(library, second, _isolated_home)
    _one_line_error(out, library, "the filesystem is read-only; remount it read-write")
    listed = vidagent("--library", str(library), "list", "--json", home=_isolated_home, env=ENV)
    assert listed.returncode == 0, listed.stderr
    assert [v["name"] for v in json.loads(listed.stdout)] == ["first.mp4"]
    assert _snapshot(library) == before


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Path]:
    """A folder no process may write in, root included (ext4's immutable attribute)."""
    folder = tmp_path / "locked"
    folder.mkdir()
    if shutil.which("chattr") is None or _run("chattr", "+i", str(folder)).returncode != 0:
        pytest.skip("this filesystem has no immutable attribute (chattr +i)")
    yield folder
    _run("chattr", "-i", str(folder))


def test_a_denied_permission_is_named_and_nothing_is_written(
    immutable: Path, videos: tuple[Path, Path], _isolated_home: Path
) -> None:
    library = immutable / "library"
    out = _index(library, videos[0], _isolated_home)
    _one_line_error(out, library, "permission denied; make the folder writable by this user")
    assert not library.exists()


def test_errors_wrapped_by_lance_are_read_by_their_number() -> None:
    lance = RuntimeError(
        "lance error: LanceError(IO): No space left on device (os error 28), "
        "lance-file-13.0.0/src/writer/structural.rs:258:9"
    )
    found = storage_error(lance, "/data/library")
    assert isinstance(found, StorageError) and found.errno == errno.ENOSPC and found.disk_full
    assert str(found).startswith("/data/library: no space left on the device")
    wrapped = ValueError("commit failed")
    wrapped.__cause__ = OSError(errno.EROFS, "Read-only file system", "/mnt/lib/manifest.json")
    assert str(storage_error(wrapped)).startswith("/mnt/lib: the filesystem is read-only")
    assert pickle.loads(pickle.dumps(found)).errno == errno.ENOSPC  # from a pool or Ray worker
    assert storage_error(RuntimeError("lance error: not found (os error 2)")) is None
    assert storage_error(OSError(errno.ENOENT, "No such file")) is None


def test_the_http_api_answers_a_full_disk_with_507_naming_the_folder(
    small_disk: Path, videos: tuple[Path, Path], _isolated_home: Path
) -> None:
    from fastapi.testclient import TestClient

    from vidagent.config import load_settings
    from vidagent.server.app import create_app

    library = small_disk / "library"
    first, second = videos
    assert _index(library, first, _isolated_home).returncode == 0
    before = _snapshot(library)
    settings = load_settings({**INDEX_SPECS, "library": str(library)})
    filler = _fill(small_disk)
    app = create_app(settings, media_roots=[first.parent])
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as api:
        removed = api.delete("/api/videos/first.mp4")
        assert removed.status_code == 507, removed.text
        assert removed.json()["detail"].startswith(f"{library}: no space left on the device")
        job = api.post("/api/videos", json={"path": second.name}).json()
        for _ in range(600):  # the job's end, not a time limit: it ends within seconds
            state = api.get(f"/api/jobs/{job['job_id']}").json()
            if state["state"] not in ("queued", "running"):
                break
            time.sleep(0.1)
        assert state["state"] == "failed"
        assert state["error"].startswith(f"{library}: no space left on the device")
    filler.unlink()
    assert _snapshot(library) == before


def test_an_upload_to_a_full_disk_is_a_507_naming_its_folder(
    small_disk: Path, videos: tuple[Path, Path], _isolated_home: Path
) -> None:
    # Not a Library write: the upload's own file, refused by the system in the middle.
    from fastapi.testclient import TestClient

    from vidagent.config import load_settings
    from vidagent.server.app import create_app

    settings = load_settings({**INDEX_SPECS, "library": str(_isolated_home / "library")})
    media = small_disk / "media"
    media.mkdir()
    _fill(small_disk)
    app = create_app(settings, media_roots=[media])
    api = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    with api, videos[1].open("rb") as f:
        sent = api.post("/api/videos/upload", files={"file": ("second.mp4", f, "video/mp4")})
    assert sent.status_code == 507, sent.text
    assert sent.json()["detail"].startswith(f"{media / 'uploads'}: no space left on the device")
    assert not [p for p in (media / "uploads").rglob("*") if p.is_file()]  # no partial file left


def test_a_full_disk_under_a_named_output_says_to_give_another_o(
    small_disk: Path, videos: tuple[Path, Path], _isolated_home: Path, tmp_path: Path
) -> None:
    # It named "the disk" and told the user to give another --library or --home, and a sheet
    # left a truncated PNG behind
    library = tmp_path / "library"  # on a disk with room: only the outputs go to the full one
    assert _index(library, videos[0], _isolated_home).returncode == 0
    _fill(small_disk)
    out = vidagent("--library", str(library), "sheet", "first", "-o", str(small_disk / "s.png"),
                   home=_isolated_home, env=ENV)  # fmt: skip
    full = "no space left on the device (disk full); free space there, or give another -o"
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [f"error: {small_disk / 's.png'}: {full}"]
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # no half image


def test_a_read_only_output_folder_says_to_give_another_o(
    small_disk: Path, videos: tuple[Path, Path], _isolated_home: Path, tmp_path: Path
) -> None:
    # a sheet said to remount the Library's filesystem or copy the Library: removing its
    # unwritten part file failed too on the read-only disk, and that error was the one shown
    library = tmp_path / "library"
    assert _index(library, videos[0], _isolated_home).returncode == 0
    remounted = _run("mount", "-o", "remount,ro", str(small_disk))
    assert remounted.returncode == 0, remounted.stderr
    out = vidagent("--library", str(library), "sheet", "first", "-o", str(small_disk / "s.png"),
                   home=_isolated_home, env=ENV)  # fmt: skip
    assert out.returncode == 1
    readonly = "the filesystem is read-only; give another -o"
    assert out.stderr.strip().splitlines() == [f"error: {small_disk / 's.png'}: {readonly}"]


def test_a_refused_trace_or_subtitle_file_says_to_give_another_of_its_option(
    immutable: Path, videos: tuple[Path, Path], _isolated_home: Path, tmp_path: Path
) -> None:
    # they told the user to give another --library or --home, which would not have helped
    library = tmp_path / "library"
    assert _index(library, videos[0], _isolated_home).returncode == 0
    denied = "permission denied; give another {}, or make the folder writable by this user"
    trace = immutable / "t.jsonl"
    out = vidagent("--library", str(library), "ask", "first", "What is shown?", "-s", "retrieval",
                   "--trace", str(trace), home=_isolated_home, env=ENV)  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines() == [f"error: {immutable}: {denied.format('--trace')}"]
    out = vidagent("--library", str(library), "show", "first", "--srt", "-o",
                   str(immutable / "s.srt"), home=_isolated_home, env=ENV)  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [f"error: {immutable}: {denied.format('-o')}"]
