"""Real clips from Debian packages (fetched once into .cache/media; skipped without apt).

The shot counts are pinned against PySceneDetect 0.7.2 run on the same clip: its
AdaptiveDetector finds 4 shots (cuts at 90.56, 126.46 and 143.64 s) and its ContentDetector 15.
The clip is a motion-graphics animation whose cuts are mostly animated transitions spread over
several frames, which the adaptive ratio discounts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from vidagent.exceptions import NoAudioError
from vidagent.media import detect_shots, extract_audio, frames_at, iter_sampled_frames, probe

pytestmark = pytest.mark.realmedia

_spec = importlib.util.spec_from_file_location(
    "realmedia", Path(__file__).resolve().parents[1] / "realmedia.py"
)
assert _spec is not None and _spec.loader is not None
realmedia = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(realmedia)


@pytest.fixture(scope="module")
def wanna() -> Path:
    return realmedia.get_clip("wannaworktogether.mp4")


@pytest.fixture(scope="module")
def vtest() -> Path:
    return realmedia.get_clip("vtest.avi")


@pytest.fixture(scope="module")
def megamind() -> Path:
    return realmedia.get_clip("Megamind.avi")


def test_probe_wannaworktogether(wanna):
    info = probe(wanna)
    assert info.duration == pytest.approx(180.25, abs=0.05)
    assert info.fps == pytest.approx(29.97, abs=0.01)
    assert (info.width, info.height, info.rotation, info.codec) == (480, 352, 0, "h264")
    assert info.frame_count == 5402
    (audio,) = info.audio_streams
    assert (audio.codec, audio.sample_rate, audio.channels, audio.language) == (
        "aac",
        44100,
        2,
        "eng",
    )


def test_probe_vtest(vtest):
    info = probe(vtest)
    assert info.duration == pytest.approx(79.5)
    assert (info.fps, info.width, info.height, info.frame_count) == (10.0, 768, 576, 795)
    assert info.codec == "msmpeg4v3" and info.container == "avi"
    assert not info.has_audio


def test_probe_megamind(megamind):
    info = probe(megamind)
    assert info.duration == pytest.approx(11.2, abs=0.1)
    assert info.fps == pytest.approx(23.976, abs=0.01)
    assert (info.width, info.height) == (720, 528)
    assert [a.codec for a in info.audio_streams] == ["ac3"]


@pytest.mark.parametrize("clip,count", [("wannaworktogether.mp4", 181), ("vtest.avi", 80)])
def test_one_fps_sampling(clip, count):
    path = realmedia.get_clip(clip)
    samples = list(iter_sampled_frames(path, fps=1.0, size=160))
    assert len(samples) == count
    assert [t for t, _ in samples] == list(range(count))
    assert len({f.tobytes() for _, f in samples}) > count * 0.8  # real, changing frames


def test_seek_and_sequential_decode_agree(wanna):
    times = [3.0, 47.5, 100.2, 179.0]
    seek = frames_at(wanna, times, size=240, strategy="seek").astype(int)
    sequential = frames_at(wanna, times, size=240, strategy="sequential").astype(int)
    assert np.abs(seek - sequential).mean() < 1.0


def test_shots_match_pyscenedetect(wanna):
    adaptive = detect_shots(wanna)
    content = detect_shots(wanna, method="content")
    print(f"\nwannaworktogether.mp4: {len(adaptive)} adaptive shots, {len(content)} content shots")
    assert [s.t0 for s in adaptive[1:]] == pytest.approx([90.56, 126.46, 143.64], abs=0.07)
    assert 10 <= len(content) <= 22


def test_audio_length(wanna):
    audio = extract_audio(wanna)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert len(audio) / 16000 == pytest.approx(probe(wanna).duration, abs=0.1)
    assert np.sqrt(np.mean(audio**2)) > 0.01  # narration and music, not silence


def test_damaged_first_audio_packet_is_tolerated(megamind):
    # The first AC-3 packet of this file does not decode; it becomes silence.
    audio = extract_audio(megamind)
    assert len(audio) / 16000 == pytest.approx(11.26, abs=0.05)


def test_vtest_has_no_audio(vtest):
    with pytest.raises(NoAudioError):
        extract_audio(vtest)
