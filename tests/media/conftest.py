"""Synthetic videos shared by the media tests, generated once per session (about 2 s)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from vidagent.media.synth import make_audio_only, make_video

FPS = 25


@dataclass(frozen=True)
class Synth:
    """A generated video and what it was generated with."""

    path: Path
    duration: float
    fps: int
    size: tuple[int, int]
    cuts: list[float]


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def counter_video(media_dir: Path) -> Synth:
    """12 s, 320x240, frame counter drawn in, 3 shots, short GOP, 440 Hz tone."""
    path = media_dir / "counter.mp4"
    cuts = make_video(
        path,
        duration=12,
        fps=FPS,
        size=(320, 240),
        shots=3,
        gop=50,
        counter=True,
        audio="tone",
        text_overlays=[(1.0, 3.0, "HELLO")],
    )
    return Synth(path, 12.0, FPS, (320, 240), cuts)


@pytest.fixture(scope="session")
def shots_video(media_dir: Path) -> Synth:
    """16 s, 256x144, 8 shots of 2 s with moving content, no audio."""
    path = media_dir / "shots.mp4"
    cuts = make_video(path, duration=16, fps=FPS, size=(256, 144), shots=8, gop=250)
    return Synth(path, 16.0, FPS, (256, 144), cuts)


@pytest.fixture(scope="session")
def rotated_video(media_dir: Path) -> Synth:
    """2 s, coded 320x240 with a 90-degree clockwise display rotation and a frame counter."""
    path = media_dir / "rotated.mp4"
    make_video(path, duration=2, fps=FPS, size=(320, 240), counter=True, rotation=90)
    return Synth(path, 2.0, FPS, (320, 240), [])


@pytest.fixture(scope="session")
def audio_only(media_dir: Path) -> dict[str, Path]:
    """2 s of 440 Hz in an .m4a (AAC) and a .wav (PCM)."""
    return {ext: make_audio_only(media_dir / f"tone.{ext}", duration=2.0) for ext in ("m4a", "wav")}
