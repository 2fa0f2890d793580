"""probe(): numbers match what was generated; every kind of bad file raises its typed error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vidagent.exceptions import (
    AudioOnlyError,
    CorruptMediaError,
    EmptyMediaError,
    MediaError,
    MediaNotFoundError,
    NotAVideoError,
)
from vidagent.media import extract_audio, frames_at, iter_sampled_frames, probe
from vidagent.media.synth import (
    make_head_cut,
    make_truncated,
    make_video,
    make_zero_duration,
    read_counter,
)


def test_probe_reports_what_was_encoded(counter_video):
    info = probe(counter_video.path)
    assert info.path == str(counter_video.path)
    assert info.size_bytes == counter_video.path.stat().st_size
    assert "mp4" in info.container
    assert info.duration == pytest.approx(12.0, abs=1 / 25)
    assert info.fps == pytest.approx(25.0)
    assert (info.width, info.height) == (320, 240)
    assert info.rotation == 0
    assert info.codec == "h264"
    assert info.frame_count == 300
    assert info.has_audio
    (audio,) = info.audio_streams
    assert (audio.codec, audio.sample_rate, audio.channels) == ("aac", 44100, 2)
    assert 0 < info.keyframe_interval <= 2.0 + 1e-6  # GOP of 50 frames at 25 fps


def test_probe_without_audio(shots_video):
    info = probe(shots_video.path)
    assert not info.has_audio
    assert info.audio_streams == ()


def test_rotation_swaps_display_size(rotated_video):
    info = probe(rotated_video.path)
    assert info.rotation == 90
    assert (info.width, info.height) == (240, 320)


@pytest.mark.parametrize(
    "suffix,codec", [(".mkv", "libx264"), (".avi", "mpeg4"), (".ts", "libx264")]
)
def test_other_containers(tmp_path, suffix, codec):
    path = tmp_path / f"clip{suffix}"
    make_video(path, duration=3, fps=25, size=(160, 120), codec=codec, audio="tone")
    info = probe(path)
    assert info.duration == pytest.approx(3.0, abs=0.1)
    assert (info.width, info.height, info.fps) == (160, 120, 25.0)
    assert info.has_audio


def test_missing_path(tmp_path):
    with pytest.raises(MediaNotFoundError, match="no such file"):
        probe(tmp_path / "nope.mp4")


def test_directory(tmp_path):
    with pytest.raises(MediaNotFoundError, match="directory"):
        probe(tmp_path)


def test_unreadable_file(tmp_path, counter_video):
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod 000 does not stop root from reading the file")
    path = tmp_path / "locked.mp4"
    path.write_bytes(counter_video.path.read_bytes())
    path.chmod(0)
    with pytest.raises(MediaNotFoundError, match="cannot be read"):
        probe(path)


def test_text_file_renamed_mp4(tmp_path):
    path = tmp_path / "notes.mp4"
    path.write_text("these are meeting notes, not a video\n" * 50)
    with pytest.raises(NotAVideoError, match="not a video file") as err:
        probe(path)
    assert type(err.value) is NotAVideoError
    assert err.value.path == str(path)


def test_zero_byte_file_is_empty(tmp_path):
    # Decision: a zero-byte file is EmptyMediaError (an unfinished copy), not NotAVideoError.
    path = tmp_path / "empty.mp4"
    path.touch()
    with pytest.raises(EmptyMediaError, match="zero-byte"):
        probe(path)


def test_zero_duration_container_is_empty(tmp_path):
    path = make_zero_duration(tmp_path / "zero.mp4")
    assert path.stat().st_size > 0
    with pytest.raises(EmptyMediaError):
        probe(path)


@pytest.mark.parametrize("ext", ["m4a", "wav"])
def test_audio_only(audio_only, ext):
    with pytest.raises(AudioOnlyError, match="audio only"):
        probe(audio_only[ext])


@pytest.mark.parametrize(
    "suffix,codec,faststart",
    [
        (".mp4", "libx264", False),  # index at the end: the cut file cannot be opened at all
        (".mp4", "libx264", True),  # index first: it opens, but points past the end of file
        (".mkv", "libx264", False),  # the header's duration is more than the data holds
        (".avi", "mpeg4", False),  # the header's frame count is more than the data holds
    ],
)
def test_truncated_at_half_is_corrupt(tmp_path, suffix, codec, faststart):
    whole = tmp_path / f"whole{suffix}"
    make_video(
        whole,
        duration=10,
        fps=25,
        size=(320, 240),
        shots=2,
        gop=50,
        codec=codec,
        faststart=faststart,
    )
    cut = make_truncated(whole, tmp_path / f"cut{suffix}", 0.5)
    probe(whole)  # the intact file is fine
    with pytest.raises(CorruptMediaError, match="truncated or corrupt"):
        probe(cut)


def test_every_entry_point_raises_typed_errors(tmp_path, audio_only):
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n" * 20)
    for call in (
        lambda p: frames_at(p, [0.0]),
        lambda p: next(iter_sampled_frames(p)),
        extract_audio,
    ):
        with pytest.raises(MediaNotFoundError):
            call(tmp_path / "missing.mp4")
        with pytest.raises(NotAVideoError):
            call(text)
    with pytest.raises(AudioOnlyError):
        frames_at(audio_only["m4a"], [0.0])


def test_errors_carry_path_and_reason(tmp_path):
    path: Path = tmp_path / "gone.mp4"
    with pytest.raises(MediaError) as err:
        probe(path)
    assert err.value.path == str(path)
    assert str(err.value) == f"{path}: no such file"


def test_codecs_are_named_as_formats_not_as_their_decoders(tmp_path):
    # MP3 audio is decoded by "mp3float", AV1 by "libdav1d": probe and show named the decoder
    import av
    import numpy as np

    path = tmp_path / "mp3.mkv"
    with av.open(str(path), "w") as out:
        video = out.add_stream("mpeg4", rate=10)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound = out.add_stream("libmp3lame", rate=44100, layout="mono")
        for k in range(10):
            picture = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), "rgb24")
            picture.pts = k
            out.mux(video.encode(picture))
        silence = av.AudioFrame.from_ndarray(np.zeros((1, 1152), np.float32), "fltp", "mono")
        silence.sample_rate = 44100
        for k in range(30):
            silence.pts = k * 1152
            out.mux(sound.encode(silence))
        out.mux(video.encode(None))
        out.mux(sound.encode(None))
    info = probe(path)
    assert info.codec == "mpeg4" and [a.codec for a in info.audio_streams] == ["mp3"]


def test_a_stream_cut_before_its_keyframe_starts_at_the_next_one(tmp_path):
    # A player starts such a file at its next keyframe; probe refused it ("first frame cannot
    # be decoded"): each picture before that keyframe lacks the parameter sets the cut took.
    whole = tmp_path / "whole.ts"
    make_video(whole, duration=20, fps=25, size=(320, 240), gop=250, counter=True)
    cut = make_head_cut(whole, tmp_path / "cut.ts")
    info = probe(cut)
    keyframe = 250  # the next keyframe: frame 250, 10 s after the first
    assert info.duration == pytest.approx(20 - keyframe / 25, abs=0.05)
    assert info.start_time - probe(whole).start_time == pytest.approx(keyframe / 25, abs=0.05)
    (first,) = frames_at(cut, [0.0])
    assert read_counter(first) == keyframe
    sampled = [read_counter(rgb) for _, rgb in iter_sampled_frames(cut, fps=1)]
    assert sampled == [keyframe + 25 * k for k in range(10)]


def test_a_stream_cut_with_no_keyframe_after_is_refused_saying_so(tmp_path):
    whole = tmp_path / "whole.ts"
    make_video(whole, duration=4, fps=25, size=(320, 240), gop=250)  # one keyframe, cut off
    cut = make_head_cut(whole, tmp_path / "cut.ts")
    with pytest.raises(CorruptMediaError, match="cut before a keyframe, and none follows"):
        probe(cut)


def test_the_structure_pass_of_a_stream_cut_before_its_keyframe(tmp_path):
    # The cut's decode from the file's first packet met 249 rejected pictures, past the 100
    # a damaged file may have: "decoding failed".
    from vidagent.config import load_settings
    from vidagent.ingest.structure import index_structure
    from vidagent.library import Library

    whole = tmp_path / "whole.ts"
    make_video(whole, duration=20, fps=25, size=(320, 240), gop=250, shots=2)
    cut = make_head_cut(whole, tmp_path / "cut.ts")
    settings = load_settings({"home": tmp_path / "home", "cache": "off"}, env={})
    report = index_structure(Library(settings.library_uri), cut, settings)
    assert report.clips == 2 and report.frames == 10  # 10 s at 1 fps, in two 5 s clips
