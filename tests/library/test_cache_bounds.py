"""LanceDB's caches of an open Library are bounded by two settings (library/tables.py).

Every commit makes a new table version and the next read opens it, caching its metadata; with
LanceDB's own bounds (GiB) a long-running process kept every version it read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from factories import INDEX_SPECS, video_record

from vidagent.app import Session
from vidagent.config import load_settings
from vidagent.library import Library
from vidagent.library.schema import ClipRow


def rewrite(lib: Library, times: int) -> None:
    """Rewrite one video's clips and vectors ``times`` times, reading after each, as a server
    that indexes while it answers does."""
    lib.use_embedding("clip_vectors", "fake:hash", 8)
    lib.put_video(video_record("v0", duration=50.0))
    rng = np.random.default_rng(0)
    for n in range(times):
        clips = [ClipRow("v0", i, 5.0 * i, 5.0 * i + 5, caption=f"{n}") for i in range(10)]
        vectors = rng.standard_normal((10, 8)).astype(np.float32)
        lib.put_clips("v0", clips)
        lib.put_clip_vectors("v0", "fake:hash", clips, vectors)
        lib.list_videos()
        lib.search_clips(vectors[0], k=3)


def test_the_metadata_cache_stays_within_its_bound_as_versions_pile_up(tmp_path: Path) -> None:
    unbounded = Library(tmp_path / "a", metadata_cache_mib=1024)
    rewrite(unbounded, 30)
    assert unbounded.tables.cache_bytes() > 1.2 * 2**20  # each version read adds its metadata
    bounded = Library(tmp_path / "b", metadata_cache_mib=1)
    rewrite(bounded, 30)
    assert 0.5 * 2**20 < bounded.tables.cache_bytes() <= 1.1 * 2**20
    assert [c.caption for c in bounded.clips("v0")] == ["29"] * 10  # reads still see the latest


def test_the_settings_size_the_caches_of_the_sessions_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIDAGENT_LIBRARY_METADATA_CACHE_MIB", "2")
    settings = load_settings({**INDEX_SPECS, "library": str(tmp_path / "lib")})
    assert (settings.library_index_cache_mib, settings.library_metadata_cache_mib) == (256, 2)
    with Session(settings) as session:
        assert session.library.tables.cache_mib == (256, 2)
    assert Library(tmp_path / "other").tables.cache_mib == (256, 32)  # the defaults
