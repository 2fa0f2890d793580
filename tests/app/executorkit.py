"""Shared by the executor tests: three small generated videos and a per-clip row count."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidagent.library import Library

CLIPS = 3  # a 12 s video in 5 s clips


def make_videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three 12 s videos of different content (so three video ids)."""
    from vidagent.media.synth import make_video

    folder = tmp_path_factory.mktemp("videos")
    paths = [folder / f"v{i}.mp4" for i in range(3)]
    for i, path in enumerate(paths):
        make_video(path, duration=12, size=(160, 96), fps=10, audio="tone", tone_hz=300 + 100 * i)
    return paths


def clip_rows(library: Library, video_id: str, table: str) -> list[int]:
    """Every row of a video in a table, duplicates included, by clip index."""
    rows = library.table(table).search().where(f"video_id = '{video_id}'").to_list()
    return sorted(int(r["clip_index"]) for r in rows)
