"""boundary_detect's algorithm: similarity curves, their threshold run, two-pass sampling."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from tqdm import tqdm

from vidagent.config import load_settings
from vidagent.ingest.base import IngestContext
from vidagent.ingest.embed import Embed
from vidagent.ingest.structure import index_structure
from vidagent.library import Library
from vidagent.models.base import EmbedRequest, EmbedResponse
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter, hash_embed
from vidagent.tools.boundary import (
    CAP,
    Boundary,
    boundary_from_curve,
    caption_curve,
    frame_times,
    image_curve,
    locate,
    refine_range,
    smooth,
)

RGB = {"red": (220, 30, 30), "grey": (128, 128, 128)}


# ---------------------------------------------------------------------------------------------
# Curves


def test_smoothing_averages_neighbours_and_only_the_points_there_are_at_the_ends() -> None:
    assert np.allclose(smooth(np.array([3.0, 0, 0, 6, 0])), [1.5, 1, 2, 2, 3])
    assert np.allclose(smooth(np.array([1.0, 5.0]), window=1), [1, 5])
    assert smooth(np.zeros(0)).shape == (0,)


def test_a_bump_is_found_from_its_first_to_its_last_frame_above_the_threshold() -> None:
    times = [k / 2 for k in range(20)]  # 0 .. 9.5 s at 2 fps
    sims = [0.1] * 20
    for k in range(8, 14):  # 4.0 .. 6.5 s
        sims[k] = 0.9
    sims[11] = 1.0  # the peak, at 5.5 s
    sims[2] = 1.2  # one noisy frame at 1.0 s, higher than the event

    found = boundary_from_curve(times, sims)

    # smoothed: the spike drops to 0.47, the event's edges to 0.63, over θ = 0.1 + 0.6 * 0.833
    assert found == Boundary(4.0, 6.75, 5.5, 1.0, pytest.approx(0.6))
    # unsmoothed, the noise wins: one frame, half a step wide
    assert boundary_from_curve(times, sims, window=1) == Boundary(
        1.0, 1.25, 1.0, 1.2, pytest.approx(0.76)
    )
    # a given θ (a coarse pass's) replaces the curve's own, unless the curve never reaches it
    assert boundary_from_curve(times, sims, threshold=0.92).t_start == 5.0
    assert boundary_from_curve(times, sims, threshold=2.0).threshold == pytest.approx(0.6)


def test_a_flat_curve_is_the_whole_range() -> None:
    times = [10.0, 10.5, 11.0, 11.5]
    flat = boundary_from_curve(times, [0.3] * 4)
    assert flat == Boundary(10.0, 11.75, 10.0, 0.3, pytest.approx(0.3))


def test_a_one_frame_spike_has_a_width() -> None:
    times = [k / 2 for k in range(9)]
    sims = [0.0] * 9
    sims[4] = 1.0  # 2.0 s
    assert boundary_from_curve(times, sims, window=1) == Boundary(2.0, 2.25, 2.0, 1.0, 0.6)
    # smoothed, the spike is three equal frames; the peak is still the raw one
    spread = boundary_from_curve(times, sims)
    assert (spread.t_start, spread.t_end, spread.peak_t) == (1.5, 2.75, 2.0)


def test_a_single_point_and_mismatched_lengths() -> None:
    assert boundary_from_curve([3.0], [0.5]) == Boundary(3.0, 3.0, 3.0, 0.5, 0.5)
    with pytest.raises(ValueError, match="as many times as scores"):
        boundary_from_curve([1.0, 2.0], [0.5])
    with pytest.raises(ValueError):
        boundary_from_curve([], [])


# ---------------------------------------------------------------------------------------------
# Sampling


def test_a_short_range_is_every_2_fps_frame() -> None:
    assert frame_times(10.0, 12.0) == [10.0, 10.5, 11.0, 11.5]
    assert len(frame_times(0.0, 120.0)) == CAP  # exactly 2 minutes: still every frame
    assert frame_times(5.0, 5.0) == [5.0]


def test_a_long_range_is_sampled_coarsely_then_refined_at_2_fps_around_the_peak() -> None:
    t0, t1 = 0.0, 3600.0  # an hour: 7200 frames at 2 fps, 30x the cap
    coarse = frame_times(t0, t1)
    assert len(coarse) == CAP and coarse[1] - coarse[0] == 15.0

    def score(times: list[float]) -> np.ndarray:
        calls.append(times)
        t = np.asarray(times)
        return np.where((t >= 1000.0) & (t < 1040.0), 1.0, 0.0)  # a 40 s event

    calls: list[list[float]] = []
    found, scored = locate(score, t0, t1)

    assert len(calls) == 2 and scored == CAP + len(calls[1])
    fine = calls[1]
    assert fine[1] - fine[0] == 0.5 and fine[0] <= 1000.0 and fine[-1] >= 1040.0
    assert len(fine) <= CAP
    assert abs(found.t_start - 1000.0) <= 0.5 and abs(found.t_end - 1040.0) <= 0.5
    assert 1000.0 <= found.peak_t < 1040.0


def test_a_refined_window_is_capped_and_a_cut_edge_keeps_the_coarse_one() -> None:
    coarse = Boundary(100.0, 700.0, 400.0, 1.0, 0.5)  # a 10-minute run
    lo, hi = refine_range(coarse, 0.0, 3600.0, step=15.0)
    assert (lo, hi) == (340.0, 460.0)  # 2 minutes centred on the peak

    def score(times: list[float]) -> np.ndarray:
        t = np.asarray(times)  # a 10-minute event peaking at 400 s
        return np.where((t >= 100.0) & (t < 700.0), 1.0 + 0.5 * np.exp(-(((t - 400) / 60) ** 2)), 0)

    found, _ = locate(score, 0.0, 3600.0)
    # the fine window (340-460 s) lies inside the event: its edges are the coarse run's, two
    # coarse steps at most from the truth (one lost to smoothing); the peak is the fine one
    assert abs(found.t_start - 100.0) <= 30 and abs(found.t_end - 700.0) <= 30
    assert found.peak_t == 400.0


def test_a_short_range_is_scored_once() -> None:
    calls: list[list[float]] = []

    def score(times: list[float]) -> np.ndarray:
        calls.append(times)
        return np.arange(len(times), dtype=float)

    found, scored = locate(score, 0.0, 10.0)
    assert len(calls) == 1 and scored == 20 and found.peak_t == 9.5


# ---------------------------------------------------------------------------------------------
# Image curves on a video whose event span is known


class ColourEmbedder(FakeAdapter):
    """Images embed as their mean colour, texts as the colour they name: an image-text space in
    which a frame matches its colour's name exactly."""

    def embed(self, request: EmbedRequest) -> EmbedResponse:
        named = [next(w for w in text.split() if w in RGB) for text in request.texts]
        rows = [np.asarray(RGB[name], np.float32) for name in named]
        return EmbedResponse(np.stack([r / np.linalg.norm(r) for r in rows]))

    def embed_images(self, images: list[np.ndarray]) -> np.ndarray:
        rows = [rgb.reshape(-1, 3).mean(axis=0).astype(np.float32) for rgb in images]
        return np.stack([r / np.linalg.norm(r) for r in rows])


def colour_video(path: Path, *, red: tuple[float, float], duration: float = 10.0) -> Path:
    """Grey frames, red while ``red[0] <= t < red[1]``; 10 fps, 64x48."""
    fps, (w, h) = 10, (64, 48)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        for i in range(round(duration * fps)):
            name = "red" if red[0] <= i / fps < red[1] else "grey"
            rgb = np.full((h, w, 3), RGB[name], np.uint8)  # (H, W, 3) uint8
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        container.mux(stream.encode())
    return path


def test_an_image_curve_finds_a_known_event_within_one_frame(tmp_path: Path) -> None:
    video = colour_video(tmp_path / "red.mp4", red=(4.0, 7.0))
    models = Models.from_adapters({"image_embed": ColourEmbedder()})
    times = frame_times(0.0, 10.0)

    sims = image_curve(models, video, 64, 48, times, "a red screen")

    assert sims.shape == (20,) and sims.max() == pytest.approx(1.0, abs=0.01)
    found = boundary_from_curve(times, sims)
    assert abs(found.t_start - 4.0) <= 0.5 and abs(found.t_end - 7.0) <= 0.5
    assert 4.0 <= found.peak_t < 7.0
    assert image_curve(models, video, 64, 48, [], "red").shape == (0,)


def test_an_image_curve_runs_a_real_clip_model(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from clipkit import build_clip

    from vidagent.models.registry import create_adapter

    spec = f"clip:{build_clip(tmp_path / 'clip')}"
    settings = load_settings({"cache": "off", "image_embed": spec})
    adapter = create_adapter(spec, settings, "image_embed")
    models = Models.from_adapters({"image_embed": adapter}, settings)
    video = colour_video(tmp_path / "red.mp4", red=(1.0, 2.0), duration=3.0)
    times = frame_times(0.0, 3.0)

    sims = image_curve(models, video, 64, 48, times, "a red screen")

    assert sims.shape == (6,) and np.isfinite(sims).all() and (np.abs(sims) <= 1 + 1e-6).all()
    found = boundary_from_curve(times, sims)
    assert 0.0 <= found.t_start <= found.peak_t < found.t_end <= 3.0


# ---------------------------------------------------------------------------------------------
# The caption fallback


def test_a_caption_curve_scores_each_clip_at_its_midpoint(
    tmp_path: Path, small_video: Path
) -> None:
    settings = load_settings({"cache": "off", "embed": "fake:hash?dim=32"})
    library = Library(tmp_path / "lib")
    video = index_structure(library, small_video, settings).video
    captions = ["a red car", "blue boat", "green bus"]
    updates = [{"clip_index": i, "caption": c} for i, c in enumerate(captions)]
    library.update_clips(video.video_id, updates)
    models = Models.from_adapters({"embed": FakeAdapter("hash", {"dim": "32"})}, settings)
    ctx = IngestContext(library, models, settings, video, small_video)
    stage = Embed()
    stage.start()
    with tqdm(disable=True) as bar:
        stage.run(ctx, library.clips(video.video_id), bar)
    stage.flush(ctx)

    times, sims = caption_curve(library, models, video.video_id, 0.0, 12.0, "red car")

    assert times == [2.5, 7.5, 11.0]
    query = hash_embed("red car", 32)
    assert np.allclose(sims, [float(hash_embed(c, 32) @ query) for c in captions], atol=1e-5)
    found = boundary_from_curve(times, sims, window=1)
    assert (found.t_start, found.peak_t) == (2.5, 2.5) and found.t_end < 7.5  # one clip
    assert caption_curve(library, models, video.video_id, 5.0, 10.0, "red car")[0] == [7.5]
    assert caption_curve(library, models, video.video_id, 20.0, 30.0, "red car")[0] == []
