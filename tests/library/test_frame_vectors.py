"""Frame vectors in the Library: bound to one model like clip vectors, and gone with their frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from factories import video_record

from vidagent.exceptions import EmbeddingMismatchError
from vidagent.library import FrameRow, Library

SPEC = "clip:/models/a"


def unit(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)  # (N, D)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def frames(video_id: str, n: int) -> list[FrameRow]:
    return [FrameRow(video_id, float(t), 32, 18, b"jpeg%d" % t) for t in range(n)]


def library_with(tmp_path: Path, *videos: str, n: int = 5) -> Library:
    lib = Library(tmp_path / "lib")
    lib.use_embedding("frame_vectors", SPEC, 4)
    for i, vid in enumerate(videos):
        lib.put_frames(vid, frames(vid, n))
        lib.put_frame_vectors(vid, SPEC, [float(t) for t in range(n)], unit(n, seed=i))
        lib.put_video(video_record(vid, float(n)))
    return lib


def test_vectors_come_back_in_time_order_with_their_times(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    assert lib.frame_vector_spec() is None
    times, vectors = lib.frame_vectors("aaaa")
    assert times.shape == (0,) and vectors.shape == (0, 0)
    lib.use_embedding("frame_vectors", SPEC, 4)
    made = unit(3)
    lib.put_frame_vectors("aaaa", SPEC, [2.0, 0.0, 1.0], made)
    times, vectors = Library(tmp_path / "lib").frame_vectors("aaaa")
    assert times.dtype == np.float64 and times.tolist() == [0.0, 1.0, 2.0]
    assert vectors.dtype == np.float32 and np.array_equal(vectors, made[[1, 2, 0]])
    assert lib.frame_vector_spec() == SPEC
    assert lib.frame_vectors("bbbb")[0].shape == (0,)


def test_putting_replaces_the_videos_vectors_unless_told_to_keep_them(tmp_path: Path) -> None:
    lib = library_with(tmp_path, "aaaa", "bbbb")
    lib.put_frame_vectors("aaaa", SPEC, [0.0, 1.0], unit(2, seed=7))
    assert lib.frame_vectors("aaaa")[0].tolist() == [0.0, 1.0]
    lib.put_frame_vectors("aaaa", SPEC, [1.0, 2.0], unit(2, seed=8), replace=False)
    times, vectors = lib.frame_vectors("aaaa")
    assert times.tolist() == [0.0, 1.0, 2.0]
    assert np.array_equal(vectors[1:], unit(2, seed=8))  # 1.0 updated in place, 2.0 added
    assert lib.frame_vectors("bbbb")[0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # untouched


def test_another_model_or_length_is_refused_and_switching_resets(tmp_path: Path) -> None:
    lib = library_with(tmp_path, "aaaa")
    with pytest.raises(EmbeddingMismatchError, match="use_embedding\\('frame_vectors'"):
        lib.put_frame_vectors("aaaa", "clip:/models/b", [0.0], unit(1))
    with pytest.raises(EmbeddingMismatchError):
        lib.put_frame_vectors("aaaa", SPEC, [0.0], unit(1, dim=6))
    with pytest.raises(ValueError, match="2 times but 1 vectors"):
        lib.put_frame_vectors("aaaa", SPEC, [0.0, 1.0], unit(1))
    assert lib.use_embedding("frame_vectors", SPEC, 4) is False  # same model: kept
    assert lib.frame_vectors("aaaa")[0].size == 5
    assert lib.use_embedding("frame_vectors", "clip:/models/b", 6) is True
    assert lib.frame_vector_spec() == "clip:/models/b"
    assert lib.frame_vectors("aaaa")[0].size == 0
    assert lib.manifest.embeddings.get("clip_vectors") is None  # the clip vectors' binding apart


def test_new_frames_or_removing_the_video_delete_its_vectors(tmp_path: Path) -> None:
    lib = library_with(tmp_path, "aaaa", "bbbb")
    lib.put_frames("aaaa", frames("aaaa", 4))  # re-sampled thumbnails: the old vectors are stale
    assert lib.frame_vectors("aaaa")[0].size == 0
    assert lib.frame_vectors("bbbb")[0].size == 5
    lib.remove_video("bbbb")
    assert lib.frame_vectors("bbbb")[0].size == 0
    assert lib.frame_vector_spec() == SPEC  # the binding outlives the videos
