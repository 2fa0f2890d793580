"""Synthetic media for tests and benchmarks.

Shipped in the package (not under ``tests/``) because the benchmarks and the test suite both
generate their inputs with it. Everything is encoded with PyAV, so no ``ffmpeg`` binary is needed.

A synthetic video is a sequence of equal-length *shots*. Each shot has its own hue and a
low-frequency texture that pans, plus a bouncing disc, so consecutive frames differ (real motion
for the codec and for shot detection) while a cut changes the whole picture. Options add text
overlays, a sine tone, a display-rotation tag and a *frame counter*: the frame index written as
16 black/white cells along the bottom edge, which :func:`read_counter` decodes again, so tests can
check exactly which frame a decoder returned.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import cv2
import numpy as np

COUNTER_BITS = 16
_AUDIO_RATE = 44100
_AAC_FRAME = 1024


def make_video(
    path: str | Path,
    *,
    duration: float,
    fps: int = 25,
    size: tuple[int, int] = (640, 360),
    shots: int = 1,
    text_overlays: Sequence[tuple[float, float, str]] = (),
    audio: Literal["tone"] | None = None,
    tone_hz: float = 440.0,
    gop: int = 250,
    codec: str = "libx264",
    preset: str = "veryfast",
    counter: bool = False,
    rotation: int = 0,
    faststart: bool = False,
    audio_duration: float | None = None,
    creation_time: str = "",
    still_shots: Sequence[int] = (),
) -> list[float]:
    """Encode a synthetic video and return its true shot boundaries.

    Args:
        path: Output file; the container follows the suffix (``.mp4``, ``.mkv``, ``.avi`` ...).
        duration: Length in seconds.
        fps: Frame rate (constant).
        size: ``(width, height)`` of the coded frames; both must be even for yuv420p.
        shots: Number of equal-length shots separated by hard cuts.
        text_overlays: ``(t0, t1, text)`` triples drawn large and centred while ``t0 <= t < t1``.
        audio: ``None`` for no audio, or ``"tone"`` for a stereo sine at ``tone_hz``.
        tone_hz: Frequency of the tone.
        gop: Maximum keyframe interval in frames.
        codec: Video encoder; falls back to ``"mpeg4"`` when ``libx264`` is not built in.
        preset: x264 speed preset (ignored by other encoders).
        counter: Draw the frame index (see :func:`read_counter`) and a red corner marker.
        rotation: Display rotation in degrees clockwise (0, 90, 180 or 270), written as the
            container's display matrix; frames are coded unrotated.
        faststart: MP4/MOV only: put the index (``moov``) before the data, as web videos do.
        audio_duration: seconds of tone (default: as long as the picture); longer makes a file
            whose audio outlasts its picture, as some screen and phone recorders write.
        creation_time: the container's ``creation_time`` tag (ISO-8601), as cameras write it.
        still_shots: indices of shots drawn as a still picture (no pan, no disc), as a slide
            or a locked-off camera on an empty room; text overlays and the counter still show.

    Returns:
        Times in seconds of the first frame of every shot after the first (``shots - 1`` values).
    """
    if audio not in (None, "tone"):
        raise ValueError(f"audio must be None or 'tone', got {audio!r}")
    n_frames = max(1, round(duration * fps))
    starts = [round(i * n_frames / shots) for i in range(shots)]
    options = {"movflags": "+faststart"} if faststart else {}
    container = av.open(str(path), "w", options=options)
    if creation_time:
        container.metadata["creation_time"] = creation_time
    try:
        video = _add_video_stream(container, codec, fps, size, gop, preset, rotation)
        tone = _add_audio_stream(container, path) if audio == "tone" else None
        frames = _render_frames(n_frames, fps, size, starts, text_overlays, counter, still_shots)
        for rgb in frames:  # (H, W, 3) uint8
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        if tone is not None:
            _encode_tone(container, tone, audio_duration or n_frames / fps, tone_hz)
    finally:
        container.close()
    return [s / fps for s in starts[1:]]


def make_vfr(
    path: str | Path,
    *,
    segments: Sequence[tuple[float, float]] = ((2.0, 25.0), (3.0, 2.0), (2.0, 25.0)),
    size: tuple[int, int] = (320, 180),
    counter: bool = True,
) -> list[float]:
    """Encode a variable-frame-rate video (as phones record when the light drops): each
    ``(seconds, fps)`` segment at its own rate, timestamps in milliseconds. Returns each
    frame's time.
    """
    times: list[float] = []
    at = 0.0
    for seconds, fps in segments:
        n = max(1, round(seconds * fps))
        times += [at + i / fps for i in range(n)]
        at += n / fps
    container = av.open(str(path), "w")
    try:
        stream = _add_video_stream(container, "libx264", 25, size, 250, "veryfast", 0)
        stream.codec_context.time_base = Fraction(1, 1000)
        frames = _render_frames(len(times), 25, size, [0], (), counter)
        for t, rgb in zip(times, frames, strict=True):  # (H, W, 3) uint8
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = round(t * 1000), Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    finally:
        container.close()
    return times


def make_audio_only(path: str | Path, *, duration: float = 2.0, tone_hz: float = 440.0) -> Path:
    """Write a file holding a sine tone and no video stream (``.m4a``, ``.wav``, ``.mka`` ...)."""
    container = av.open(str(path), "w")
    try:
        stream = _add_audio_stream(container, path)
        _encode_tone(container, stream, duration, tone_hz)
    finally:
        container.close()
    return Path(path)


def make_truncated(src: str | Path, dst: str | Path, fraction: float = 0.5) -> Path:
    """Copy the first ``fraction`` of ``src``'s bytes to ``dst``, like an interrupted download."""
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[: int(len(data) * fraction)])
    return Path(dst)


def make_head_cut(src: str | Path, dst: str | Path) -> Path:
    """Copy an MPEG-TS file without its head, cut one transport packet after its first video
    packet began, like a recording joined mid-stream: what is left opens with pictures that
    need the lost keyframe and its parameter sets, up to the next keyframe."""
    data = Path(src).read_bytes()
    with av.open(str(src)) as container:
        starts = [p.pos for p in container.demux(video=0) if p.pos is not None and p.pos >= 0]
    cut = (starts[0] // TS_PACKET + 1) * TS_PACKET
    Path(dst).write_bytes(data[cut:])
    return Path(dst)


#: Bytes in an MPEG transport stream packet.
TS_PACKET = 188


def make_zero_duration(path: str | Path, size: tuple[int, int] = (64, 64)) -> Path:
    """Write a well-formed container header that holds no frames at all."""
    container = av.open(str(path), "w")
    try:
        _add_video_stream(container, "libx264", 25, size, 250, "veryfast", 0)
        # Without this the muxer never starts and the file would simply be zero bytes long.
        container.start_encoding()
    finally:
        container.close()
    return Path(path)


def copy_with_suffix(src: str | Path, dst: str | Path) -> Path:
    """Copy a file under another name, e.g. to disguise a text file as ``.mp4``."""
    return Path(shutil.copyfile(src, dst))


def read_counter(rgb: np.ndarray) -> int:
    """Decode the frame index drawn by ``make_video(counter=True)``.

    Works on frames scaled to any size down to about 64 px wide, since it samples the centre of
    each cell. Expects the frame in coded (unrotated) orientation.

    Args:
        rgb: One frame.  # (H, W, 3) uint8

    Returns:
        The frame index.
    """
    h, w = rgb.shape[:2]
    strip = rgb[h - max(2, h // 10) : h - max(1, h // 40)].mean(axis=(0, 2))  # (W,)
    cell = w / COUNTER_BITS
    value = 0
    for bit in range(COUNTER_BITS):
        lo, hi = int((bit + 0.3) * cell), math.ceil((bit + 0.7) * cell)
        if strip[lo:hi].mean() > 127:
            value |= 1 << bit
    return value


def _add_video_stream(
    container: av.container.OutputContainer,
    codec: str,
    fps: int,
    size: tuple[int, int],
    gop: int,
    preset: str,
    rotation: int,
) -> av.video.stream.VideoStream:
    if codec == "libx264" and "libx264" not in av.codecs_available:
        codec = "mpeg4"
    options = {"preset": preset} if codec == "libx264" else {}
    stream = container.add_stream(codec, rate=Fraction(fps), options=options)
    assert isinstance(stream, av.video.stream.VideoStream)  # narrows the type for mypy
    stream.width, stream.height = size
    stream.pix_fmt = "yuv420p"
    stream.codec_context.gop_size = gop
    # PyAV defaults encoders to slice threading, which makes x264 cut every frame into slices;
    # frame threading gives one slice per frame, like a typical ffmpeg or camera encode.
    stream.codec_context.thread_type = "FRAME"
    if rotation % 360:
        # PyAV takes counter-clockwise degrees; ours are clockwise like the legacy 'rotate' tag.
        stream.set_display_rotation((-rotation) % 360)
    return stream


def _add_audio_stream(
    container: av.container.OutputContainer, path: str | Path
) -> av.audio.stream.AudioStream:
    codec = "pcm_s16le" if str(path).lower().endswith(".wav") else "aac"
    stream = container.add_stream(codec, rate=_AUDIO_RATE, layout="stereo")
    assert isinstance(stream, av.audio.stream.AudioStream)  # narrows the type for mypy
    return stream


def _encode_tone(
    container: av.container.OutputContainer,
    stream: av.audio.stream.AudioStream,
    duration: float,
    tone_hz: float,
) -> None:
    total = round(duration * _AUDIO_RATE)
    fmt = stream.codec_context.format.name if stream.codec_context.format else "fltp"
    for start in range(0, total, _AAC_FRAME):
        n = min(_AAC_FRAME, total - start)
        t = (start + np.arange(n)) / _AUDIO_RATE
        wave = (0.3 * np.sin(2 * np.pi * tone_hz * t)).astype(np.float32)  # (n,)
        planar = np.stack([wave, wave])  # (2, n) float32
        if fmt == "s16":
            data = (planar.T.reshape(1, -1) * 32767).astype(np.int16)  # (1, 2n) interleaved
            frame = av.AudioFrame.from_ndarray(data, format="s16", layout="stereo")
        else:
            frame = av.AudioFrame.from_ndarray(planar, format="fltp", layout="stereo")
        frame.sample_rate = _AUDIO_RATE
        frame.pts = start
        container.mux(stream.encode(frame))
    container.mux(stream.encode(None))


def _render_frames(
    n_frames: int,
    fps: int,
    size: tuple[int, int],
    starts: Sequence[int],
    text_overlays: Sequence[tuple[float, float, str]],
    counter: bool,
    still_shots: Sequence[int] = (),
) -> Iterator[np.ndarray]:
    w, h = size
    shot_of = np.searchsorted(np.asarray(starts), np.arange(n_frames), side="right") - 1
    backgrounds: dict[int, np.ndarray] = {}
    for k in range(n_frames):
        shot = int(shot_of[k])
        if shot not in backgrounds:
            backgrounds = {shot: _scene_background(shot, w, h)}  # keep one scene in memory
        local = 0 if shot in still_shots else k - starts[shot]
        rgb = _pan(backgrounds[shot], local, w, h, shot)  # (H, W, 3) uint8
        if shot not in still_shots:
            _draw_disc(rgb, local, shot)
        t = k / fps
        for t0, t1, text in text_overlays:
            if t0 <= t < t1:
                _draw_text(rgb, text)
        if counter:
            _draw_counter(rgb, k)
        yield rgb


def _scene_background(shot: int, w: int, h: int) -> np.ndarray:
    """A (2H, 2W, 3) uint8 RGB texture with a hue of its own, twice the frame size for panning."""
    rng = np.random.default_rng(shot)
    hue = int((shot * 0.61803398875 % 1.0) * 180)  # golden-ratio steps keep hues far apart
    coarse = rng.integers(0, 256, size=(max(2, h // 12), max(2, w // 12)), dtype=np.uint8)
    value = cv2.resize(coarse, (2 * w, 2 * h), interpolation=cv2.INTER_CUBIC)  # (2H, 2W)
    hsv = np.empty((2 * h, 2 * w, 3), np.uint8)
    hsv[..., 0] = hue
    hsv[..., 1] = 140 + (shot * 37) % 100
    hsv[..., 2] = (value // 2 + 70).astype(np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)


def _pan(background: np.ndarray, local: int, w: int, h: int, shot: int) -> np.ndarray:
    # A slow diagonal pan whose direction depends on the shot: steady motion within a shot.
    speed = 1 + shot % 3
    x = (local * speed) % w
    y = (local * speed // 2) % h
    return np.array(background[y : y + h, x : x + w])


def _draw_disc(rgb: np.ndarray, local: int, shot: int) -> None:
    h, w = rgb.shape[:2]
    phase = local / 25.0 + shot
    cx = int(w / 2 + w / 3 * math.sin(phase * 1.3))
    cy = int(h / 2 + h / 3 * math.cos(phase * 0.9))
    colour = tuple(int(c) for c in np.random.default_rng(shot + 1000).integers(0, 256, 3))
    cv2.circle(rgb, (cx, cy), max(4, min(w, h) // 10), colour, thickness=-1)


def _draw_text(rgb: np.ndarray, text: str) -> None:
    h, w = rgb.shape[:2]
    font = cv2.FONT_HERSHEY_SIMPLEX
    scale = 1.0
    (tw, th), _ = cv2.getTextSize(text, font, scale, 2)
    scale = min(0.8 * w / max(tw, 1), 0.25 * h / max(th, 1))  # large, but inside the frame
    thick = max(2, round(scale * 2.5))
    (tw, th), _ = cv2.getTextSize(text, font, scale, thick)
    org = ((w - tw) // 2, (h + th) // 2 - h // 10)
    cv2.putText(rgb, text, org, font, scale, (0, 0, 0), thick + 4, cv2.LINE_AA)  # outline
    cv2.putText(rgb, text, org, font, scale, (255, 255, 255), thick, cv2.LINE_AA)


def _draw_counter(rgb: np.ndarray, index: int) -> None:
    h, w = rgb.shape[:2]
    top = h - max(2, h // 8)
    cell = w / COUNTER_BITS
    for bit in range(COUNTER_BITS):
        on = 255 if (index >> bit) & 1 else 0
        rgb[top:, int(bit * cell) : int((bit + 1) * cell)] = on
    side = max(4, min(w, h) // 8)
    rgb[:side, :side] = (255, 0, 0)  # red marker at the coded top-left, to check rotation
