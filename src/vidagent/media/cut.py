"""A span of a video cut out as a playable MP4 of its own, exact to the span.

Copying packets can only start a cut on a keyframe, seconds away from the span asked for; a
cut here is re-encoded instead. The source is decoded from the keyframe before ``t0``, frames
before ``t0`` are dropped (but for the one on screen at ``t0``, which becomes the first frame),
and those up to ``t1`` are encoded with their own times relative to ``t0`` (a variable frame
rate survives). The audio of the same span is trimmed to the sample and encoded as AAC. The
picture is turned upright (the display rotation applied to the pixels) and scaled to at most
``max_side`` pixels on its long side, even dimensions, H.264 (MPEG-4 Part 2 where libx264 is
not built in) in yuv420p, so browsers and phones play it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from av.video.reformatter import Interpolation, VideoReformatter

from vidagent.exceptions import CorruptMediaError
from vidagent.media.probe import VideoInfo, open_media, probe, time_base

#: Timestamps of the cut's frames are kept in milliseconds.
_MS = Fraction(1, 1000)
_AAC_FRAME = 1024
#: Rates AAC encodes; audio at another rate is resampled to 48 kHz.
_AAC_RATES = frozenset({8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000})


@dataclass(frozen=True)
class Cut:
    """What :func:`cut_span` wrote.

    Attributes:
        path: the MP4 file.
        t0, t1: the span cut, in seconds of the source (clamped to the video).
        frames: video frames written.
        audio: whether the cut has an audio track.
        width, height: the picture's size.
    """

    path: Path
    t0: float
    t1: float
    frames: int
    audio: bool
    width: int
    height: int


def cut_span(
    source: str | Path | VideoInfo,
    t0: float,
    t1: float,
    out: str | Path,
    *,
    max_side: int = 1280,
) -> Cut:
    """Cut ``[t0, t1)`` (seconds from the first frame) of ``source`` into ``out`` (MP4).

    The span is clamped to the video; a span shorter than one frame keeps the frame on screen
    at ``t0``. The audio track is the source's first, when it has one.

    Raises:
        MediaError: the subclass :func:`~vidagent.media.probe.probe` raises for a file that
            cannot be used, or CorruptMediaError when decoding fails part way.
        ValueError: ``t1`` is before ``t0``.
    """
    info = source if isinstance(source, VideoInfo) else probe(source)
    if t1 < t0:
        raise ValueError(f"the span ends ({t1:.3f} s) before it starts ({t0:.3f} s)")
    t0 = min(max(0.0, float(t0)), max(0.0, info.duration - 1e-3))
    t1 = min(max(t0, float(t1)), info.duration)
    size = _even_size(info, max_side)
    out = Path(out)
    try:
        with open_media(info.path) as src, av.open(str(out), "w", format="mp4") as dst:
            writer = _Writer(dst, info, src, size)
            frames = writer.run(src, t0, t1)
    except av.error.FFmpegError as exc:
        raise CorruptMediaError(info.path, f"cutting failed ({exc.strerror})") from exc
    return Cut(out, t0, t1, frames, writer.audio_in is not None, *size)


def _even_size(info: VideoInfo, max_side: int) -> tuple[int, int]:
    scale = min(1.0, max_side / max(info.width, info.height))
    w = max(2, round(info.width * scale / 2) * 2)
    h = max(2, round(info.height * scale / 2) * 2)
    return w, h


class _Writer:
    """One pass over the source from the keyframe before ``t0``: video frames re-timed and
    encoded as they come, audio samples gathered and encoded at the end."""

    def __init__(
        self,
        dst: av.container.OutputContainer,
        info: VideoInfo,
        src: av.container.InputContainer,
        size: tuple[int, int],
    ) -> None:
        self.info, self.dst, self.size = info, dst, size
        self.video_in = next(s for s in src.streams.video if s.index == info.stream_index)
        self.video_in.thread_type = "AUTO"
        self.audio_in = src.streams.audio[0] if src.streams.audio else None
        codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
        rate = Fraction(info.fps).limit_denominator(1001) if info.fps > 0 else Fraction(25)
        options = {"preset": "veryfast", "crf": "20"} if codec == "libx264" else {}
        video = dst.add_stream(codec, rate=rate, options=options)
        assert isinstance(video, av.video.stream.VideoStream)  # narrows the type for mypy
        video.width, video.height = size
        video.pix_fmt = "yuv420p"
        video.codec_context.time_base = _MS
        self.video_out = video
        self.audio_out: av.audio.stream.AudioStream | None = None
        self.rate = 0
        if self.audio_in is not None:
            rate_in = self.audio_in.codec_context.sample_rate or 48000
            self.rate = rate_in if rate_in in _AAC_RATES else 48000
            audio = dst.add_stream("aac", rate=self.rate, layout="stereo")
            assert isinstance(audio, av.audio.stream.AudioStream)  # narrows the type for mypy
            self.audio_out = audio
        self.reformatter = VideoReformatter()
        self.resampler = av.AudioResampler(format="fltp", layout="stereo", rate=self.rate or None)
        self.samples: list[np.ndarray] = []  # (2, n) float32 each
        self.audio_start: float | None = None  # source time of the first gathered sample
        self.frames = 0
        self.last_pts = -1

    def run(self, src: av.container.InputContainer, t0: float, t1: float) -> int:
        base = float(time_base(self.video_in))
        src.seek(int((self.info.start_time + t0) / base), stream=self.video_in, backward=True)
        streams = [self.video_in] + ([self.audio_in] if self.audio_in is not None else [])
        held: av.VideoFrame | None = None  # the frame on screen before t0, until one at t0
        video_done, audio_done = False, self.audio_in is None
        for packet in src.demux(*streams):
            if packet.stream.type == "audio":
                if not audio_done:
                    audio_done = self._gather(packet, t1)
                continue
            if video_done:
                continue
            for frame in _decode(packet):
                t = self._time(frame, packet)
                if t < t0 - 1e-6:
                    held = frame
                    continue
                if held is not None and t > t0 + 1e-6:
                    self._encode(held, 0.0)  # on screen at t0: the cut's first frame
                held = None
                if t >= t1 and self.frames:
                    video_done = True
                    break
                self._encode(frame, t - t0)
            if video_done and audio_done:
                break
        if not video_done:  # the stream ended (or every frame came before t0)
            for frame in _decode(None, self.video_in):
                t = self._time(frame, None)
                if t < t1 or not self.frames:
                    self._encode(frame, max(0.0, t - t0))
            if held is not None and not self.frames:
                self._encode(held, 0.0)
        self.dst.mux(self.video_out.encode(None))
        self._write_audio(t0, t1)
        return self.frames

    def _time(self, frame: av.VideoFrame, packet: Any) -> float:
        if frame.time is not None:
            return float(frame.time) - self.info.start_time
        if packet is not None and packet.pts is not None:
            return float(packet.pts * time_base(self.video_in)) - self.info.start_time
        return self.last_pts / 1000 + 1 / max(self.info.fps, 1.0)

    def _encode(self, frame: av.VideoFrame, at: float) -> None:
        pts = max(round(at * 1000), self.last_pts + 1)  # strictly increasing, in ms
        rotation = self.info.rotation
        w, h = self.size
        coded = (h, w) if rotation in (90, 270) else (w, h)
        rgb: np.ndarray = self.reformatter.reformat(
            frame,
            width=coded[0],
            height=coded[1],
            format="rgb24",
            interpolation=Interpolation.AREA,
        ).to_ndarray()  # (h, w, 3) uint8, coded orientation
        if rotation:
            rgb = np.ascontiguousarray(np.rot90(rgb, k=-rotation // 90))  # (H, W, 3) upright
        out = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        out.pts, out.time_base = pts, _MS
        self.dst.mux(self.video_out.encode(out))
        self.frames += 1
        self.last_pts = pts

    def _gather(self, packet: Any, t1: float) -> bool:
        """Keep the packet's samples; True once they reach ``t1``."""
        for frame in _decode(packet):
            if frame.time is not None and self.audio_start is None:
                self.audio_start = float(frame.time) - self.info.start_time
            for out in self.resampler.resample(frame):
                self.samples.append(out.to_ndarray().astype(np.float32))  # (2, n)
            if frame.time is not None and float(frame.time) - self.info.start_time >= t1:
                return True
        return False

    def _write_audio(self, t0: float, t1: float) -> None:
        if self.audio_out is None:
            return
        gathered: np.ndarray = (
            np.concatenate(self.samples, axis=1) if self.samples else np.zeros((2, 0), np.float32)
        )  # (2, n) float32
        start = self.audio_start if self.audio_start is not None else t0
        lead = round((start - t0) * self.rate)  # > 0: the audio starts after t0
        if lead > 0:
            gathered = np.concatenate([np.zeros((2, lead), np.float32), gathered], axis=1)
        else:
            gathered = gathered[:, -lead:]
        wanted = max(1, round((t1 - t0) * self.rate))
        if gathered.shape[1] < wanted:  # the audio ends before the span: silence after it
            pad = np.zeros((2, wanted - gathered.shape[1]), np.float32)
            gathered = np.concatenate([gathered, pad], axis=1)
        gathered = np.ascontiguousarray(gathered[:, :wanted])  # (2, wanted) float32
        for at in range(0, wanted, _AAC_FRAME):
            chunk = np.ascontiguousarray(gathered[:, at : at + _AAC_FRAME])
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
            frame.sample_rate, frame.pts = self.rate, at
            frame.time_base = Fraction(1, self.rate)
            self.dst.mux(self.audio_out.encode(frame))
        self.dst.mux(self.audio_out.encode(None))


def _decode(packet: Any, stream: av.stream.Stream | None = None) -> list[Any]:
    """The packet's frames (a flush with ``packet`` None); a damaged packet gives none, and so
    does a flush of a decoder that the demuxer's own end-of-stream packet already flushed."""
    try:
        if packet is None:
            assert stream is not None
            context: Any = stream.codec_context
            return list(context.decode(None))
        return list(packet.decode())
    except (av.error.InvalidDataError, av.error.EOFError):
        return []
