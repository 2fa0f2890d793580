"""The media layer: probe, decode, segment and extract audio from video files.

It knows nothing of models or the Library: it turns files into numbers (``VideoInfo``,
frames as ``(N, H, W, 3) uint8`` RGB arrays, ``TimeSpan`` lists, 16 kHz waveforms) and raises
the typed ``MediaError`` subclasses of :mod:`vidagent.exceptions` for files it cannot use.
"""

from __future__ import annotations

from vidagent.media.audio import audio_spans, extract_audio, iter_audio
from vidagent.media.decode import (
    Size,
    encode_jpeg,
    frames_at,
    iter_frames,
    iter_sampled_frames,
    output_size,
    sample_grid,
)
from vidagent.media.probe import AudioStreamInfo, VideoInfo, probe
from vidagent.media.segment import (
    ShotDetector,
    TimeSpan,
    content_score,
    detect_shots,
    to_hsv,
    uniform_clips,
)

__all__ = [
    "AudioStreamInfo",
    "ShotDetector",
    "Size",
    "TimeSpan",
    "VideoInfo",
    "audio_spans",
    "content_score",
    "detect_shots",
    "encode_jpeg",
    "extract_audio",
    "frames_at",
    "iter_audio",
    "iter_frames",
    "iter_sampled_frames",
    "output_size",
    "probe",
    "sample_grid",
    "to_hsv",
    "uniform_clips",
]
