"""extract_audio(): 16 kHz mono float32 of the right length, with the tone that was encoded."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from vidagent.exceptions import CorruptMediaError, NoAudioError
from vidagent.media import extract_audio, probe


def peak_hz(audio: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    return float(np.argmax(spectrum) * rate / len(audio))


def test_video_audio_is_16k_mono_float(counter_video):
    audio = extract_audio(counter_video.path)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert len(audio) / 16000 == pytest.approx(counter_video.duration, abs=0.05)
    assert audio.min() >= -1.0 and audio.max() <= 1.0
    assert np.abs(audio).max() > 0.2  # a real signal, not silence
    assert peak_hz(audio[16000:48000], 16000) == pytest.approx(440, abs=2)


def test_other_sample_rate(counter_video):
    audio = extract_audio(counter_video.path, sample_rate=8000)
    assert len(audio) / 8000 == pytest.approx(counter_video.duration, abs=0.05)
    assert peak_hz(audio[8000:24000], 8000) == pytest.approx(440, abs=2)


@pytest.mark.parametrize("ext", ["m4a", "wav"])
def test_audio_only_files(audio_only, ext):
    audio = extract_audio(audio_only[ext])
    assert len(audio) / 16000 == pytest.approx(2.0, abs=0.05)
    assert peak_hz(audio, 16000) == pytest.approx(440, abs=2)


def test_pick_stream_by_index(counter_video):
    index = probe(counter_video.path).audio_streams[0].index
    assert len(extract_audio(counter_video.path, stream_index=index)) > 0
    with pytest.raises(NoAudioError, match="no audio stream with index 7"):
        extract_audio(counter_video.path, stream_index=7)


def test_video_without_audio(shots_video):
    with pytest.raises(NoAudioError, match="no audio stream"):
        extract_audio(shots_video.path)


def test_pieces_are_the_waveform_decoded_as_asked(counter_video, tmp_path):
    """iter_audio holds one decoded frame's samples at a time, and its pieces joined are
    extract_audio's waveform, also where the audio starts after the picture (a lead of
    silence) and where it is cut."""
    from vidagent.media import iter_audio
    from vidagent.media.synth import make_video

    late = tmp_path / "late.mp4"  # the tone outlasts the picture: the waveform runs past it
    make_video(late, duration=2.0, audio="tone", audio_duration=3.0)
    for path in (counter_video.path, late):
        pieces = iter_audio(path)
        first = next(pieces)
        assert len(first) <= 4096  # one AAC frame's worth, not the file
        rest = list(pieces)
        whole = np.concatenate([first, *rest])
        assert np.array_equal(whole, extract_audio(path))
        assert max(len(p) for p in rest) <= 4096


def test_spans_out_of_pieces_overlapping_or_past_the_end():
    """audio_spans cuts spans that overlap (speaker windows do) and spans past the end out of
    pieces of any size, exactly as slices of the whole waveform."""
    from vidagent.media import audio_spans

    rng = np.random.default_rng(2)
    audio = rng.standard_normal(16000 * 10).astype(np.float32)
    cuts = [0, *sorted(rng.integers(1, len(audio), 25)), len(audio)]
    pieces = [audio[a:b] for a, b in itertools.pairwise(cuts)]
    spans = [(0.0, 1.6), (1.2, 2.8), (1.5, 1.9), (4.0, 5.6), (5.0, 6.6), (9.5, 11.0), (12.0, 13.0)]
    got = list(audio_spans(iter(pieces), spans))
    assert len(got) == len(spans)
    for piece, (a, b) in zip(got, spans, strict=True):
        assert np.array_equal(piece, audio[round(a * 16000) : round(b * 16000)])


@pytest.mark.parametrize("lead_samples", [-150, -100, 0, 70])
def test_streamed_alignment_pads_or_trims_across_pieces(lead_samples):
    """Audio that starts before the picture is trimmed, after it padded, the cut falling inside
    a piece or on a piece's edge, and silence for damaged packets before the first decoded
    frame waits for the lead: the pieces are the whole waveform shifted once."""
    from vidagent.media.audio import _aligned

    rate = 1000
    pieces = [np.full(100, v, np.float32) for v in (1.0, 2.0, 3.0)]
    silence = np.zeros(40, np.float32)  # a damaged packet before anything decoded
    decoded = [(silence, None)] + [(p, 0.5) for p in pieces]  # first frame at 0.5 s
    origin = 0.5 - lead_samples / rate  # the picture's start
    whole = np.concatenate([silence, *pieces])
    expected = (
        np.concatenate([np.zeros(lead_samples, np.float32), whole])
        if lead_samples > 0
        else whole[-lead_samples:]
    )
    got = np.concatenate(list(_aligned(iter(decoded), origin, rate)))
    assert np.array_equal(got, expected)


RATE = 16000


def _tone(seconds: float) -> np.ndarray:
    t = np.arange(round(seconds * RATE)) / RATE
    return (0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)


def _quiet(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * RATE), np.float32)


def _mkv(
    path: Path,
    video_times: list[float],
    audio: list[tuple[float, np.ndarray]],
    before: np.ndarray | None = None,
) -> Path:
    """A Matroska file with grey 64x48 frames at ``video_times`` and mono PCM audio, each
    ``(start, samples)`` piece written in 20 ms frames from its start: timestamps as given,
    gaps and leads included, as a paused recorder or a camera writes them."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("mpeg4", rate=10)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        video.time_base = Fraction(1, 1000)
        first = None
        if before is not None:  # another audio stream first, not flagged default
            first = out.add_stream("pcm_s16le", rate=RATE, layout="mono")
            first.disposition = av.stream.Disposition(0)
        sound = out.add_stream("pcm_s16le", rate=RATE, layout="mono")
        if first is not None:
            sound.disposition = av.stream.Disposition.default
            pcm = (before * 32767).astype(np.int16).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = RATE, 0, Fraction(1, RATE)
            out.mux(first.encode(frame))
            out.mux(first.encode(None))
        items: list[tuple[float, np.ndarray | None]] = [(t, None) for t in video_times]
        for start, samples in audio:
            items += [(start + k / RATE, samples[k : k + 320]) for k in range(0, len(samples), 320)]
        for t, samples in sorted(items, key=lambda item: item[0]):
            if samples is None:
                picture = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 128, np.uint8), "rgb24")
                picture.pts, picture.time_base = round(t * 1000), Fraction(1, 1000)
                out.mux(video.encode(picture))
            else:
                pcm = (samples * 32767).astype(np.int16).reshape(1, -1)
                frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
                frame.sample_rate, frame.pts = RATE, round(t * RATE)
                frame.time_base = Fraction(1, RATE)
                out.mux(sound.encode(frame))
        out.mux(video.encode(None))
        out.mux(sound.encode(None))
    return path


def _loud(audio: np.ndarray) -> tuple[float, float]:
    found = np.flatnonzero(np.abs(audio) > 0.25)
    return found[0] / RATE, found[-1] / RATE


def test_a_gap_in_the_timestamps_is_silence_and_what_follows_stays_at_its_time(
    tmp_path: Path,
) -> None:
    # a recording paused from 3 s to 8 s; a tone at 9.0-9.5 s (it was placed at 4.0 s: the
    # samples joined end to end, so everything said after the pause was 5 s early)
    path = _mkv(
        tmp_path / "paused.mkv",
        [k / 10 for k in range(30)] + [8 + k / 10 for k in range(30)],
        [(0.0, _quiet(3.0)), (8.0, np.concatenate([_quiet(1.0), _tone(0.5), _quiet(1.5)]))],
    )
    audio = extract_audio(path)
    assert _loud(audio) == pytest.approx((9.0, 9.5), abs=0.01)
    assert len(audio) / RATE == pytest.approx(11.0, abs=0.03)


@pytest.mark.parametrize("clock", [0.0, 10.0])  # the file's clock from 0, and from 10 s
def test_matroska_video_that_starts_after_its_audio_keeps_words_with_the_pictures(
    tmp_path: Path, clock: float
) -> None:
    # the picture starts 2 s into the file; a tone 3.0 s into it is 1.0 s after the first
    # frame, the media API's t = 0 (the stream's own start said 0 in Matroska, and the speech
    # sat 2 s off the pictures; the file's probe read its track's end, a tag on the file's
    # clock, as its length)
    path = _mkv(
        tmp_path / "late.mkv",
        [clock + 2 + k / 10 for k in range(40)],
        [(clock, np.concatenate([_quiet(3.0), _tone(0.5), _quiet(2.5)]))],
    )
    info = probe(path)
    assert (info.start_time, info.duration) == pytest.approx((clock + 2.0, 4.0), abs=0.01)
    assert _loud(extract_audio(path)) == pytest.approx((1.0, 1.5), abs=0.01)


def test_the_audio_stream_flagged_default_is_the_one_transcribed(tmp_path: Path) -> None:
    # a silent first stream, the narration second and flagged default (as a player picks it):
    # the first was always taken, and the video "had no speech"
    path = _mkv(
        tmp_path / "two.mkv",
        [k / 10 for k in range(30)],
        [(0.0, np.concatenate([_quiet(1.0), _tone(0.5), _quiet(1.5)]))],
        before=_quiet(3.0),
    )
    assert [a.default for a in probe(path).audio_streams] == [False, True]
    assert _loud(extract_audio(path)) == pytest.approx((1.0, 1.5), abs=0.01)
    # probe says which one is transcribed, and where the index's t = 0 lies
    from clirun import vidagent

    shown = vidagent("probe", str(path), home=tmp_path / "home").stdout
    assert "audio     pcm_s16le 16000 Hz x1, pcm_s16le 16000 Hz x1 (transcribed)" in shown
    late = _mkv(tmp_path / "late.mkv", [2 + k / 10 for k in range(10)], [(0.0, _quiet(3.0))])
    shown = vidagent("probe", str(late), home=tmp_path / "home").stdout
    assert "starts    at 2.000 s of the file's clock (t = 0 here)" in shown


def _grey_ts(path: Path, pictures: int, audio: np.ndarray) -> Path:
    """MPEG-TS of ``pictures`` grey MPEG-4 frames at 10 a second, pictures first, then
    ``audio`` (mono float at :data:`RATE`) as AAC, muxed as its encoder gives it."""
    with av.open(str(path), "w", format="mpegts") as out:
        video = out.add_stream("mpeg4", rate=10)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound = out.add_stream("aac", rate=RATE, layout="mono")
        for k in range(pictures):
            picture = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 128, np.uint8), "rgb24")
            picture.pts = k
            out.mux(video.encode(picture))
        out.mux(video.encode(None))
        for k in range(0, len(audio), 1024):
            chunk = audio[None, k : k + 1024]
            frame = av.AudioFrame.from_ndarray(chunk, format="flt", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = RATE, k, Fraction(1, RATE)
            out.mux(sound.encode(frame))
        out.mux(sound.encode(None))
    return path


def test_a_wrapped_negative_first_audio_time_in_mpeg_ts_is_read_as_negative(
    tmp_path: Path,
) -> None:
    # AAC muxed into MPEG-TS after 14 s of pictures, as its encoder gave it: its first packet
    # at -0.064 s, written as 2**33 ticks less a little and read back at 95443.65 s: every
    # word lay 26 hours past the file's end, and the silence before it took transcription 45
    # times as long
    path = tmp_path / "wrapped.ts"
    audio = np.concatenate([_quiet(1.0), _tone(0.5), _quiet(12.5)])
    _grey_ts(path, 140, audio)
    with av.open(str(path)) as container:
        first = next(container.decode(audio=0))
        assert first.time is not None and first.time > 95000  # the wrapped first packet
    got = extract_audio(path)
    assert len(got) / RATE == pytest.approx(14.0, abs=0.1)
    assert _loud(got) == pytest.approx((1.0, 1.5), abs=0.03)


def _window_cut_in_its_audio(path: Path, cut_packets: int) -> Path:
    """A window as a watch stopped during a growing file's write leaves it: four pictures and
    its first ``cut_packets`` AAC packets, each cut to its first 8 bytes (in MPEG-TS, which
    joins audio packets, or in Matroska, which keeps each, as ``path``'s suffix says)."""
    whole = _grey_ts(path.with_name("whole.ts"), 4, _tone(1.0))
    with av.open(str(whole)) as source, av.open(str(path), "w") as out:
        streams = {s.index: out.add_stream_from_template(s) for s in source.streams}
        sounds = 0
        for packet in source.demux():
            if packet.dts is None:
                continue
            if packet.stream.type == "audio":
                sounds += 1
                if sounds > cut_packets:
                    continue
                short = av.Packet(bytes(packet)[:8])
                short.pts, short.dts, short.time_base = packet.pts, packet.dts, packet.time_base
                packet = short
            packet.stream = streams[packet.stream.index if packet.stream else 1]
            out.mux(packet)
    return path


def test_a_window_whose_only_audio_packet_was_cut_short_is_silent_not_corrupt(
    tmp_path: Path,
) -> None:
    # A watch stopped while a growing file was being written closes its last window on what it
    # read: here two pictures and one AAC packet cut short. That window was refused as corrupt
    # ("none of the 1 audio packets can be decoded"), and the stream kept a duration its clips
    # did not reach (seen once in a full test run).
    window = _window_cut_in_its_audio(tmp_path / "last.ts", cut_packets=1)
    assert probe(window).duration == pytest.approx(0.4)
    assert not np.any(extract_audio(window))
    # a track of which nothing decodes is still refused, in one line
    damaged = _window_cut_in_its_audio(tmp_path / "damaged.mkv", cut_packets=2)
    with pytest.raises(CorruptMediaError, match="none of the 2 audio packets can be decoded"):
        extract_audio(damaged)
