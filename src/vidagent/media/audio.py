"""Audio out of a media file, as the mono float waveform speech models expect."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import av
import numpy as np
from av.audio.resampler import AudioResampler

from vidagent.exceptions import CorruptMediaError, NoAudioError
from vidagent.media.probe import check_path, open_media

#: A jump in the audio's timestamps longer than this is a gap, filled with silence (frames are
#: 10-64 ms; encoders' priming and jitter stay well under it).
GAP_SECONDS = 0.1
#: MPEG-TS timestamps are 33 bits of a 90 kHz clock: a slightly negative one (an AAC encoder's
#: delay, muxed as it came) is stored as this many seconds less a little, and FFmpeg hands it
#: over so for a stream's first packet.
TS_WRAP = 2**33 / 90000
#: A track none of whose packets decode is corrupt, unless it has no more packets than this: a
#: live window cut while its last audio packet was still coming holds that packet alone, short
#: (a watch stopped during a growing file's write), and its sound is silence, not a reason to
#: refuse the window's pictures.
FRAGMENT_PACKETS = 1


def extract_audio(
    path: str | Path, sample_rate: int = 16000, stream_index: int | None = None
) -> np.ndarray:
    """Decode one audio stream, downmixed to mono and resampled.

    Sample 0 is aligned with the first video frame (``t = 0`` everywhere in the media API, the
    first decoded frame's time, as :func:`~vidagent.media.probe.probe` gives it): audio that
    starts later is padded with silence, audio that starts earlier is trimmed. A gap in the
    audio's timestamps (a recording paused, a discontinuity) is silence, so the samples after
    it stay at their times, as a player plays them. For an audio-only file, sample 0 is the
    first audio sample. An hour is 230 MB at 16 kHz: where
    a long file need not be held at once, :func:`iter_audio` gives the same samples in pieces.

    Args:
        path: A video (or audio) file.
        sample_rate: Output rate in Hz; 16 kHz is what Whisper-style ASR models take.
        stream_index: Container stream index of the audio stream (see
            ``VideoInfo.audio_streams``); ``None`` picks the one a player plays: the first
            flagged default, else the first (it was always the first: a file whose narration
            was its second, default stream had its first stream, a tone, transcribed).

    Returns:
        The waveform.  # (S,) float32 mono in [-1, 1]

    Raises:
        MediaNotFoundError, NotAVideoError, CorruptMediaError, EmptyMediaError: The file cannot
            be opened (see :mod:`vidagent.media.probe`).
        NoAudioError: There is no audio stream (or none with ``stream_index``).
    """
    pieces = list(iter_audio(path, sample_rate, stream_index))
    return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)


def iter_audio(
    path: str | Path, sample_rate: int = 16000, stream_index: int | None = None
) -> Iterator[np.ndarray]:
    """:func:`extract_audio`'s waveform in consecutive pieces, decoded as they are asked for,
    so that memory does not grow with the file's length (the pieces joined are that waveform,
    sample for sample). The file is checked, and its stream chosen, at the first ``next``.

    Yields:
        The next samples.  # (n,) float32 mono in [-1, 1]
    """
    check_path(path)
    origin = _video_origin(path)
    with open_media(path) as container:
        stream = _audio_stream(path, container, stream_index)
        decoded = _decode_mono(path, container, stream, sample_rate, origin)
        for piece in _aligned(decoded, origin, sample_rate):
            # Resampling filters can overshoot slightly on full-scale input.
            yield np.clip(piece, -1.0, 1.0, out=piece)


def audio_spans(
    pieces: Iterable[np.ndarray], spans: Sequence[tuple[float, float]], sample_rate: int = 16000
) -> Iterator[np.ndarray]:
    """The samples of each span ``(t0, t1)`` in seconds, out of a waveform given in consecutive
    pieces (:func:`iter_audio`), holding only what a span still to come may need: spans must
    come in order of their starts and may overlap. A span past the waveform's end is cut
    short (or empty).

    Yields:
        Each span's samples, in order.  # (S,) float32
    """
    source = iter(pieces)
    held = np.zeros(0, np.float32)
    start = 0  # the sample held[0] is
    for k, (a, b) in enumerate(spans):
        lo, hi = round(a * sample_rate), round(b * sample_rate)
        more = [held]
        end = start + len(held)
        while end < hi:
            piece = next(source, None)
            if piece is None:
                break
            more.append(piece)
            end += len(piece)
        held = np.concatenate(more) if len(more) > 1 else held
        yield held[max(lo - start, 0) : max(hi - start, 0)]
        # Later spans start at the next one's start or after: what lies before it is done.
        nxt = round(spans[k + 1][0] * sample_rate) if k + 1 < len(spans) else end
        drop = min(max(nxt - start, 0), len(held))
        held, start = held[drop:], start + drop


def _aligned(
    decoded: Iterator[tuple[np.ndarray, float | None]], origin: float | None, sample_rate: int
) -> Iterator[np.ndarray]:
    """Shift so sample 0 is the video's start: pad a positive lead, trim a negative one. The
    lead is known at the first decoded frame (``first_time``); the silence of damaged packets
    before it waits until then."""
    waiting: list[np.ndarray] = []
    trim: int | None = None  # samples still to drop from the front; None before the lead
    for piece, first_time in decoded:
        if trim is None:
            waiting.append(piece)
            if first_time is None:
                continue
            lead = round((first_time - origin) * sample_rate) if origin is not None else 0
            if lead > 0:
                yield np.zeros(lead, np.float32)
            trim = max(0, -lead)
            pieces, waiting = waiting, []
        else:
            pieces = [piece]
        for p in pieces:
            if trim:
                cut = min(trim, len(p))
                p, trim = p[cut:], trim - cut
            if len(p):
                yield p
    yield from (p for p in waiting if len(p))  # nothing was ever decoded: no lead to apply


def _decode_mono(
    path: str | Path,
    container: av.container.InputContainer,
    stream: av.audio.stream.AudioStream,
    sample_rate: int,
    origin: float | None = None,
) -> Iterator[tuple[np.ndarray, float | None]]:
    """Decode, downmix and resample; yields each piece with the waveform's first timestamp
    (None until a frame has been decoded).

    A packet the decoder rejects becomes silence of the packet's length, so one damaged frame
    (common at the start of AVI files) neither aborts extraction nor shifts later audio; a
    track none of whose packets decode is corrupt (:data:`FRAGMENT_PACKETS`). A frame
    that starts more than :data:`GAP_SECONDS` after the previous one ended is preceded by
    silence up to its time (the samples were joined end to end, and everything said after a
    paused recording was placed that much early).
    """
    resampler = AudioResampler(format="flt", layout="mono", rate=sample_rate)
    first_time: float | None = None
    decoded = failed = 0
    silence = 0.0  # seconds of silence inserted before the first decoded frame
    expected: float | None = None  # where the next frame should start (seconds)

    def time_of(frame: av.AudioFrame) -> float | None:
        # half a wrap ahead of the picture is a wrapped negative time (its first packet was
        # placed 26 hours on: every word of the file lay past its end, unsaid, and the silence
        # before it took transcription 45 times as long)
        if frame.time is None:
            return None
        t = float(frame.time)
        return t - TS_WRAP if origin is not None and t - origin > TS_WRAP / 2 else t

    for packet in container.demux(stream):
        try:
            frames = packet.decode()
        except av.error.InvalidDataError:
            failed += 1
            seconds = float((packet.duration or 0) * packet.time_base) if packet.time_base else 0.0
            silence += seconds if not decoded else 0.0
            expected = None if expected is None else expected + seconds
            yield np.zeros(round(seconds * sample_rate), np.float32), first_time
            continue
        for frame in frames:
            t = time_of(frame)
            if first_time is None and t is not None:
                first_time = t - silence
            decoded += 1
            if t is not None:
                gap = t - expected if expected is not None else 0.0
                if gap > GAP_SECONDS:  # what the resampler holds goes first, then the gap
                    for f in resampler.resample(None):
                        yield f.to_ndarray().reshape(-1), first_time
                    resampler = AudioResampler(format="flt", layout="mono", rate=sample_rate)
                    missing, piece = round(gap * sample_rate), 60 * sample_rate
                    for k in range(0, missing, piece):  # in pieces: a long gap is no huge array
                        yield np.zeros(min(piece, missing - k), np.float32), first_time
                expected = t
            if expected is not None:
                expected += frame.samples / (frame.sample_rate or sample_rate)
            for f in resampler.resample(frame):
                yield f.to_ndarray().reshape(-1), first_time
    for f in resampler.resample(None):
        yield f.to_ndarray().reshape(-1), first_time
    if failed > FRAGMENT_PACKETS and not decoded:
        raise CorruptMediaError(path, f"none of the {failed} audio packets can be decoded")


def _audio_stream(
    path: str | Path, container: av.container.InputContainer, stream_index: int | None
) -> av.audio.stream.AudioStream:
    streams = list(container.streams.audio)
    if not streams:
        raise NoAudioError(path, "no audio stream")
    if stream_index is None:  # the one a player plays: the one flagged default, else the first
        flagged = [s for s in streams if s.disposition & av.stream.Disposition.default]
        return (flagged or streams)[0]
    for stream in streams:
        if stream.index == stream_index:
            return stream
    indices = ", ".join(str(s.index) for s in streams)
    raise NoAudioError(
        path, f"no audio stream with index {stream_index} (audio streams: {indices})"
    )


def _video_origin(path: str | Path) -> float | None:
    """The time of the video's first frame (seconds), as :func:`probe` takes it; ``None`` for
    a file without video. (A stream's ``start_time`` is not it where the container keeps one
    for all streams: a Matroska video starting 5 s after its audio said 0, and the speech was
    placed 5 s off the pictures.)"""
    from vidagent.media.probe import first_frame_time

    return first_frame_time(path)
