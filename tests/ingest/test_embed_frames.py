"""The optional embed_frames stage: the Library's thumbnails embedded by the image_embed model.

Indexed from the generated 12 s video (12 thumbnails at 1 fps, clips 0-5, 5-10, 10-12) with
tiny random CLIP models (:mod:`clipkit`): one vector per thumbnail, nothing redone on a rerun,
everything redone for another model, only the missing frames after a crash, and nothing at all
(and no failure) without an image_embed model.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from clipkit import build_clip
from clirun import vidagent
from factories import INDEX_SPECS

from vidagent.config import load_settings
from vidagent.ingest import STAGES, estimate_path, index_video
from vidagent.ingest.describe import decode_jpeg
from vidagent.ingest.embed_frames import DISABLED
from vidagent.ingest.pipeline import stage_names
from vidagent.library import Library, content_id
from vidagent.models.client import Models

pytest.importorskip("torch")
pytest.importorskip("transformers")

ONLY = ("embed_frames",)


@pytest.fixture(scope="module")
def clip_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_clip(tmp_path_factory.mktemp("clip-a"))


@pytest.fixture(scope="module")
def clip_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_clip(tmp_path_factory.mktemp("clip-b"), seed=1, dim=6)


def index(video: Path, lib: Library, model: Path | None) -> list[tuple[str, int, str]]:
    """Index through embed_frames alone; what each stage did: (name, clips, note)."""
    spec = f"clip:{model}" if model else "none:"
    settings = load_settings({"cache": "off", "image_embed": spec})
    result = index_video(video, library=lib, settings=settings, stages=ONLY)
    return [(run.stage, run.clips, run.note) for run in result.stages]


def test_one_vector_per_thumbnail_then_nothing_left(
    small_video: Path, tmp_path: Path, clip_a: Path
) -> None:
    lib = Library(tmp_path / "lib")
    assert index(small_video, lib, clip_a) == [("embed_frames", 3, "12 frames embedded")]
    vid = content_id(small_video)
    thumbs = lib.frames(vid)
    times, vectors = lib.frame_vectors(vid)
    assert times.tolist() == [f.t for f in thumbs] and len(thumbs) == 12
    assert vectors.shape == (12, 8) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert lib.frame_vector_spec() == f"clip:{clip_a}"
    assert lib.get_video(vid).stages["embed_frames"]["model"] == f"clip:{clip_a}"
    # The vectors are the thumbnails' own, in time order.
    settings = load_settings({"cache": "off", "image_embed": f"clip:{clip_a}"})
    own = Models(settings).client("image_embed").embed_images([decode_jpeg(thumbs[6].jpeg)])
    assert np.allclose(own[0], vectors[6], atol=1e-5)
    assert not np.allclose(vectors[0], vectors[6], atol=1e-3)  # another shot, another vector

    assert index(small_video, lib, clip_a) == [("embed_frames", 0, "")]
    assert np.array_equal(lib.frame_vectors(vid)[1], vectors)


def test_another_model_re_embeds_every_frame(
    small_video: Path, tmp_path: Path, clip_a: Path, clip_b: Path
) -> None:
    lib = Library(tmp_path / "lib")
    index(small_video, lib, clip_a)
    assert index(small_video, lib, clip_b) == [("embed_frames", 3, "12 frames embedded")]
    times, vectors = lib.frame_vectors(content_id(small_video))
    assert lib.frame_vector_spec() == f"clip:{clip_b}"
    assert times.size == 12 and vectors.shape == (12, 6)


def test_a_rerun_after_a_crash_embeds_only_the_missing_frames(
    small_video: Path, tmp_path: Path, clip_a: Path
) -> None:
    lib = Library(tmp_path / "lib")
    index(small_video, lib, clip_a)
    vid = content_id(small_video)
    times, vectors = lib.frame_vectors(vid)
    # As if killed after the first checkpoint: only the frames at 0-4 s have vectors.
    lib.put_frame_vectors(vid, f"clip:{clip_a}", times[:5], vectors[:5])
    assert index(small_video, lib, clip_a) == [("embed_frames", 2, "7 frames embedded")]
    again, redone = lib.frame_vectors(vid)
    assert again.tolist() == times.tolist() and np.allclose(redone, vectors, atol=1e-5)


def test_without_an_image_embed_model_nothing_is_stored_and_nothing_fails(
    small_video: Path, tmp_path: Path
) -> None:
    lib = Library(tmp_path / "lib")
    assert index(small_video, lib, None) == [("embed_frames", 0, DISABLED)]
    assert lib.frame_vectors(content_id(small_video))[0].shape == (0,)
    assert lib.frame_vector_spec() is None
    assert lib.list_videos()[0].stages["embed_frames"]["note"] == DISABLED


def test_a_plain_index_leaves_it_out(small_video: Path, tmp_path: Path, clip_a: Path) -> None:
    assert "embed_frames" not in STAGES
    names = stage_names()
    assert names.index("embed") + 1 == names.index("embed_frames") < names.index("summarize")
    settings = load_settings({**INDEX_SPECS, "image_embed": f"clip:{clip_a}"})
    lib = Library(tmp_path / "lib")
    result = index_video(small_video, library=lib, settings=settings)
    assert [run.stage for run in result.stages] == list(STAGES)
    assert lib.frame_vector_spec() is None


def test_the_dry_run_counts_the_thumbnails(small_video: Path, clip_a: Path) -> None:
    settings = load_settings({"cache": "off", "image_embed": f"clip:{clip_a}"})
    row = estimate_path(small_video, settings, ONLY).stages[-1]
    assert (row.stage, row.role, row.frames, row.calls) == ("embed_frames", "image_embed", 12, 1)
    off = estimate_path(small_video, load_settings({"cache": "off"}), ONLY).stages[-1]
    assert (off.frames, off.calls, off.notes) == (0, 0, [DISABLED])


def test_the_command_line_runs_it_when_named(
    small_video: Path, _isolated_home: Path, clip_a: Path
) -> None:
    args = ("--image-embed", f"clip:{clip_a}", "index", str(small_video), "--json")
    named = vidagent(*args, "--stages", "embed_frames", home=_isolated_home)
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["stages"]["embed_frames"]["clips"] == 3
    lib = Library(_isolated_home / "library", create=False)
    assert lib.frame_vectors(content_id(small_video))[1].shape == (12, 8)
