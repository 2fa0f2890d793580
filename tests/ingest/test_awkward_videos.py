"""No silent failures on awkward videos: a portrait phone video (rotated, taller than 2000
px), a clip shorter than a second, a video with no audio, a variable-frame-rate recording and a
video whose audio outlasts its picture each index and answer, with stored frames that are not
blank, upright, and spread over the whole duration by time."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import cv2
import numpy as np
import pytest
from factories import INDEX_SPECS

from vidagent.app import Session
from vidagent.config import load_settings
from vidagent.media import probe
from vidagent.media.cut import cut_span
from vidagent.media.synth import make_vfr, make_video


def _portrait(path: Path) -> None:
    # a phone held upright: 2400x1080 coded, turned 90 degrees for display (1080x2400)
    make_video(path, duration=3, fps=10, size=(2400, 1080), rotation=90, audio="tone")


def _short(path: Path) -> None:
    make_video(path, duration=0.4, fps=25, audio="tone")


def _silent(path: Path) -> None:
    make_video(path, duration=6, fps=25, size=(320, 180))


def _vfr(path: Path) -> None:
    make_vfr(path)  # 25 fps, then 2 fps for 3 s, then 25 fps again


def _long_audio(path: Path) -> None:
    make_video(path, duration=3, fps=25, size=(320, 180), audio="tone", audio_duration=12)


AWKWARD: dict[str, Callable[[Path], None]] = {
    "portrait": _portrait,
    "short": _short,
    "silent": _silent,
    "vfr": _vfr,
    "long-audio": _long_audio,
}


@pytest.mark.parametrize("kind", list(AWKWARD))
def test_an_awkward_video_indexes_and_answers_with_real_frames_over_its_whole_duration(
    kind: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{kind}.mp4"
    AWKWARD[kind](path)
    info = probe(path)
    settings = load_settings({**INDEX_SPECS, "home": str(tmp_path / "home")}, env={})
    with Session(settings, library=tmp_path / "lib") as session:
        (report,) = session.index([path])
        assert report.ok, report.error
        video = report.result.structure.video
        assert video.duration == pytest.approx(info.duration, abs=0.05)
        frames = session.library.frames(video.video_id)
        step = 1 / settings.sample_fps
        times = [f.t for f in frames]
        # sampling covers the whole picture by time: no gap longer than a sampling step,
        # none at either end
        assert times[0] <= step / 2 + 0.05, times
        assert info.duration - times[-1] <= step + 0.05, times
        assert all(b - a <= step + 0.05 for a, b in pairwise(times)), times
        for f in frames:
            rgb = cv2.imdecode(np.frombuffer(f.jpeg, np.uint8), cv2.IMREAD_COLOR)
            assert rgb is not None and rgb.std() > 10, f"blank frame at {f.t}"
            assert (rgb.shape[0] > rgb.shape[1]) == (info.height > info.width)
        clips = session.library.clips(video.video_id)
        assert clips[0].t0 == 0 and clips[-1].t1 == pytest.approx(info.duration, abs=0.05)
        (jpeg,) = session.frames(video.video_id, [info.duration / 2], size=512)
        looked = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        assert looked.std() > 10 and (looked.shape[0] > looked.shape[1]) == (
            info.height > info.width
        )
        answered = session.ask(path, "What is in the video?", strategy="retrieval", trace=False)
        assert answered.answer is not None and answered.answer.text.strip()
    # the middle of it cut out as evidence: upright, the span's length, its audio kept
    t0, t1 = info.duration * 0.25, info.duration * 0.75
    cut = probe(cut_span(info, t0, t1, tmp_path / "cut.mp4").path)
    assert (cut.height > cut.width) == (info.height > info.width)
    assert cut.duration == pytest.approx(t1 - t0, abs=0.6) and cut.has_audio == info.has_audio
