"""The command line as a user runs it: a real process, real files, one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def vidagent(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIDAGENT_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "vidagent", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_info_lists_every_role_and_the_library(_isolated_home: Path) -> None:
    out = vidagent("info", "--json", home=_isolated_home)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert set(info["roles"]) == {"llm", "vlm", "embed", "image_embed", "asr", "ocr", "detector"}
    assert info["roles"]["detector"]["usable"] is True
    assert info["library"] == str(_isolated_home / "library")


def test_flags_override_the_environment(_isolated_home: Path) -> None:
    env_out = vidagent("--llm", "openai:flag-model", "info", "--json", home=_isolated_home)
    assert json.loads(env_out.stdout)["roles"]["llm"]["spec"] == "openai:flag-model"


def test_bad_spec_is_one_line_and_exit_1(_isolated_home: Path) -> None:
    out = vidagent("--llm", "nonsense", "info", home=_isolated_home)
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "provider:model" in out.stderr
    assert "Traceback" not in out.stderr


def test_index_prints_structure_and_is_idempotent(small_video: Path, _isolated_home: Path) -> None:
    first = vidagent("index", str(small_video), "--json", home=_isolated_home)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["clips"] == 3  # 12 s in 5 s clips: 0-5, 5-10, 10-12
    assert report["frames"] == 12  # one thumbnail per second
    assert report["shots"] == 3 and not report["reused"]

    again = json.loads(vidagent("index", str(small_video), "--json", home=_isolated_home).stdout)
    assert again["reused"] and again["video_id"] == report["video_id"]
    listed = json.loads(vidagent("list", "--json", home=_isolated_home).stdout)
    assert [v["video_id"] for v in listed] == [report["video_id"]]

    text = vidagent("index", str(small_video), home=_isolated_home).stdout
    assert "3 shots, 3 clips of 5 s, 12 thumbnails" in text and "00:00:12" in text


def test_bad_files_among_good_ones(small_video: Path, tmp_path: Path, _isolated_home: Path) -> None:
    notes = tmp_path / "notes.mp4"
    notes.write_text("this is not a video\n")
    half = tmp_path / "half.mp4"
    half.write_bytes(small_video.read_bytes()[: small_video.stat().st_size // 2])
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    good = tmp_path / "good.mp4"
    shutil.copy(small_video, good)

    vidagent("index", str(good), home=_isolated_home)
    before = (_isolated_home / "library" / "manifest.json").read_text()
    out = vidagent("index", str(notes), str(half), str(empty), str(tmp_path / "missing.mp4"), str(good), home=_isolated_home)
    assert out.returncode == 1
    errors = out.stderr.strip().splitlines()
    assert len(errors) == 4 and all(line.startswith("error: ") for line in errors)
    assert "notes.mp4" in errors[0] and "half.mp4" in errors[1] and "missing.mp4" in errors[3]
    assert "already indexed" in out.stdout  # the good file still went through
    listed = json.loads(vidagent("list", "--json", home=_isolated_home).stdout)
    assert [v["name"] for v in listed] == ["good.mp4"]
    assert (_isolated_home / "library" / "manifest.json").read_text() == before


def test_remove_by_name(small_video: Path, _isolated_home: Path) -> None:
    vidagent("index", str(small_video), home=_isolated_home)
    out = vidagent("remove", small_video.name, home=_isolated_home)
    assert out.returncode == 0 and out.stdout.startswith("removed ")
    assert json.loads(vidagent("list", "--json", home=_isolated_home).stdout) == []
    missing = vidagent("remove", small_video.name, home=_isolated_home)
    assert missing.returncode == 1 and "no video" in missing.stderr


@pytest.mark.parametrize("args", [["probe", "/nonexistent/x.mp4"], ["index", "/nonexistent/*.mp4"]])
def test_nothing_to_read_is_a_clear_error(args: list[str], _isolated_home: Path) -> None:
    out = vidagent(*args, home=_isolated_home)
    assert out.returncode != 0 and out.stderr.strip() and "Traceback" not in out.stderr
