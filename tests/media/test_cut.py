"""Cutting a span out as its own MP4: exact to the frame (not the nearest keyframe), with its
audio, to the end of the video, and one frame for a span shorter than a frame."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidagent.media import frames_at, probe
from vidagent.media.cut import cut_span
from vidagent.media.synth import make_video, read_counter


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 s at 25 fps, a keyframe every 2 s, each frame's index drawn, a tone."""
    path = tmp_path_factory.mktemp("cut") / "src.mp4"
    make_video(path, duration=6, fps=25, size=(320, 180), counter=True, audio="tone", gop=50)
    return path


@pytest.mark.parametrize(
    ("t0", "t1", "first", "last"),
    [
        (2.5, 4.0, 62, 99),  # 2.5 s lies between frames 62 and 63: 62 is on screen then
        (0.0, 1.0, 0, 24),
        (5.2, 6.0, 130, 149),  # to the end of the video
        (3.0, 3.0, 75, 75),  # no length: the frame on screen at 3 s
    ],
)
def test_a_cut_starts_on_the_frame_on_screen_at_its_start(
    source: Path, tmp_path: Path, t0: float, t1: float, first: int, last: int
) -> None:
    cut = cut_span(source, t0, t1, tmp_path / "cut.mp4")
    info = probe(cut.path)
    shown = frames_at(info, [0.0, max(0.0, info.duration - 1e-3)])
    assert [read_counter(f) for f in shown] == [first, last]
    assert cut.frames == last - first + 1 and info.has_audio


def test_a_span_that_ends_before_it_starts_is_refused(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ends"):
        cut_span(source, 3.0, 2.0, tmp_path / "cut.mp4")
