"""Audio out of a media file, as the mono float waveform speech models expect."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
from av.audio.resampler import AudioResampler

from vidagent.exceptions import CorruptMediaError, NoAudioError
from vidagent.media.probe import check_path, open_media


def extract_audio(
    path: str | Path, sample_rate: int = 16000, stream_index: int | None = None
) -> np.ndarray:
    """Decode one audio stream, downmixed to mono and resampled.

    Sample 0 is aligned with the first video frame (``t = 0`` everywhere in the media API):
    audio that starts later is padded with silence, audio that starts earlier is trimmed. For
    an audio-only file, sample 0 is the first audio sample.

    Args:
        path: A video (or audio) file.
        sample_rate: Output rate in Hz; 16 kHz is what Whisper-style ASR models take.
        stream_index: Container stream index of the audio stream (see
            ``VideoInfo.audio_streams``); ``None`` picks the first audio stream.

    Returns:
        The waveform.  # (S,) float32 mono in [-1, 1]

    Raises:
        MediaNotFoundError, NotAVideoError, CorruptMediaError, EmptyMediaError: The file cannot
            be opened (see :mod:`vidagent.media.probe`).
        NoAudioError: There is no audio stream (or none with ``stream_index``).
    """
    check_path(path)
    with open_media(path) as container:
        stream = _audio_stream(path, container, stream_index)
        audio, first_time = _decode_mono(path, container, stream, sample_rate)
        origin = _video_origin(container)
    if origin is not None and first_time is not None:
        audio = _align(audio, round((first_time - origin) * sample_rate))
    # Resampling filters can overshoot slightly on full-scale input.
    return np.clip(audio, -1.0, 1.0, out=audio)


def _decode_mono(
    path: str | Path,
    container: av.container.InputContainer,
    stream: av.audio.stream.AudioStream,
    sample_rate: int,
) -> tuple[np.ndarray, float | None]:
    """Decode, downmix and resample; returns the waveform and its first timestamp.

    A packet the decoder rejects becomes silence of the packet's length, so one damaged frame
    (common at the start of AVI files) neither aborts extraction nor shifts later audio.
    """
    resampler = AudioResampler(format="flt", layout="mono", rate=sample_rate)
    chunks: list[np.ndarray] = []  # (n,) float32 pieces
    first_time: float | None = None
    decoded = failed = 0
    silence = 0.0  # seconds of silence inserted before the first decoded frame
    for packet in container.demux(stream):
        try:
            frames = packet.decode()
        except av.error.InvalidDataError:
            failed += 1
            seconds = float((packet.duration or 0) * packet.time_base) if packet.time_base else 0.0
            chunks.append(np.zeros(round(seconds * sample_rate), np.float32))
            silence += seconds if not decoded else 0.0
            continue
        for frame in frames:
            if first_time is None and frame.time is not None:
                first_time = float(frame.time) - silence
            decoded += 1
            chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(frame))
    chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(None))
    if failed and not decoded:
        raise CorruptMediaError(path, f"none of the {failed} audio packets can be decoded")
    audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)  # (S,) float32
    return audio, first_time


def _audio_stream(
    path: str | Path, container: av.container.InputContainer, stream_index: int | None
) -> av.audio.stream.AudioStream:
    streams = list(container.streams.audio)
    if not streams:
        raise NoAudioError(path, "no audio stream")
    if stream_index is None:
        return streams[0]
    for stream in streams:
        if stream.index == stream_index:
            return stream
    indices = ", ".join(str(s.index) for s in streams)
    raise NoAudioError(
        path, f"no audio stream with index {stream_index} (audio streams: {indices})"
    )


def _video_origin(container: av.container.InputContainer) -> float | None:
    """Start time in seconds of the first video stream (its first frame), if there is one."""
    for stream in container.streams.video:
        if stream.start_time is not None and stream.time_base:
            return float(stream.start_time * stream.time_base)
    return None


def _align(audio: np.ndarray, lead: int) -> np.ndarray:
    """Shift so sample 0 is the video's start: pad a positive lead, trim a negative one."""
    if lead > 0:
        return np.concatenate([np.zeros(lead, np.float32), audio])
    if lead < 0:
        return np.array(audio[-lead:])
    return audio
