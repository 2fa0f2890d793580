"""Cheap facts about a video file, and the typed errors for files that cannot be used.

:func:`probe` opens the container, decodes the first frame, and does one seek near the end to make
sure the file holds what its header promises. It never decodes the whole file, so it is safe to
call on every video before indexing.

Which error a bad file raises (all subclasses of :class:`~vidagent.exceptions.MediaError`):

============================================================  =======================
path missing, a directory, or not readable                    MediaNotFoundError
zero-byte file                                                EmptyMediaError
PyAV cannot open it and it has no known container signature   NotAVideoError
PyAV cannot open it but it starts like a media container      CorruptMediaError
opens, but has audio streams only                             AudioOnlyError
opens, but has no audio or video stream                       NotAVideoError
opens, but has no streams at all / zero duration / no frame   EmptyMediaError
index points past EOF, header promises more frames than the
data holds, or the tail cannot be reached or decoded          CorruptMediaError
============================================================  =======================

A zero-byte file is *empty* rather than *not a video*: the usual cause is a copy or download
that never wrote anything, and "empty" tells the user to look there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from vidagent.exceptions import (
    AudioOnlyError,
    CorruptMediaError,
    EmptyMediaError,
    MediaNotFoundError,
    NotAVideoError,
)

# Used when the container has no usable index (MPEG-TS, most Matroska files). It only steers
# the seek-or-decode-forward choice in decode.py, so a middling guess is good enough.
DEFAULT_KEYFRAME_INTERVAL = 5.0
# How many index entries to scan for keyframe flags: enough for several GOPs, cheap for long files.
_INDEX_SCAN = 4000


@dataclass(frozen=True)
class AudioStreamInfo:
    """One audio stream of a container.

    Attributes:
        index: Stream index in the container (pass it to ``extract_audio(stream_index=...)``).
        codec: Decoder name, e.g. ``"aac"``.
        sample_rate: Samples per second.
        channels: Channel count.
        language: ISO 639 code from the stream metadata, or ``""`` when absent or ``"und"``.
        default: flagged the default stream (the one a player plays, and the one
            :func:`~vidagent.media.audio.extract_audio` takes: the first flagged, else the first).
    """

    index: int
    codec: str
    sample_rate: int
    channels: int
    language: str
    default: bool = False


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`probe` learned about a video file.

    Attributes:
        path: The file, as given (not resolved).
        size_bytes: File size.
        container: Demuxer name, e.g. ``"mov,mp4,m4a,3gp,3g2,mj2"`` or ``"avi"``.
        duration: Seconds from the first frame to the end of the video stream.
        fps: Average frame rate.
        width: Display width in pixels, after rotation and sample aspect ratio.
        height: Display height in pixels, after rotation and sample aspect ratio.
        rotation: Degrees clockwise (0, 90, 180, 270) the coded frames must be turned for
            display, the convention of the legacy ``rotate`` tag. Decoders apply it.
        codec: Video decoder name, e.g. ``"h264"``.
        frame_count: Frame count from the header, or ``round(duration * fps)`` when absent.
        has_audio: Whether there is at least one audio stream.
        audio_streams: The audio streams, in container order.
        start_time: Presentation time of the first frame in seconds; every timestamp in the
            media API is relative to it, so ``t = 0`` is always the first frame.
        keyframe_interval: Estimated seconds between keyframes (from the container index, or
            ``DEFAULT_KEYFRAME_INTERVAL`` when there is none).
        stream_index: Index of the video stream that was probed.
        created_at: When the recording started, as the container's (or the video stream's)
            ``creation_time`` tag says, ISO-8601 in UTC (``2026-05-01T09:30:00Z``); ``""`` when
            there is none, it does not parse, or it is a placeholder (before 1971: encoders
            that know no time write the epoch).
    """

    path: str
    size_bytes: int
    container: str
    duration: float
    fps: float
    width: int
    height: int
    rotation: int
    codec: str
    frame_count: int
    has_audio: bool
    audio_streams: tuple[AudioStreamInfo, ...]
    start_time: float = 0.0
    keyframe_interval: float = DEFAULT_KEYFRAME_INTERVAL
    stream_index: int = 0
    created_at: str = ""


def probe(path: str | Path) -> VideoInfo:
    """Read a video's format, size, duration and streams, and check that it is whole.

    Args:
        path: A video file.

    Returns:
        The facts about the file.

    Raises:
        MediaNotFoundError: The path is missing, a directory, or unreadable.
        NotAVideoError: Not a media container, or no video stream.
        AudioOnlyError: A container with audio streams only.
        EmptyMediaError: A zero-byte file, no streams, zero duration, or no decodable frame.
        CorruptMediaError: Truncated or damaged (see the module docstring).
    """
    size = check_path(path)
    with open_media(path) as container:
        video = video_stream(path, container)
        start, rotation, coded = _first_frame(path, container, video)
        duration = _duration(path, container, video, start)
        fps = _fps(video, duration)
        _check_header_promise(path, video, duration, fps, size)
        keyframe_interval = _keyframe_interval(video, duration)
        if container.format.name != "hls":  # a watch's playlist: its windows are whole files,
            # and FFmpeg's HLS reader seeks on the playlist's clock, not the packets' (a seek to
            # the end found nothing: every watched stream was "truncated", its export empty)
            _check_tail(path, container, video, start, duration, keyframe_interval)
        width, height = _display_size(video, coded, rotation)
        audio = tuple(_audio_info(s) for s in container.streams.audio)
        return VideoInfo(
            path=str(path),
            size_bytes=size,
            container=container.format.name,
            duration=duration,
            fps=fps,
            width=width,
            height=height,
            rotation=rotation,
            codec=codec_name(video.codec_context),
            frame_count=video.frames or round(duration * fps),
            has_audio=bool(audio),
            audio_streams=audio,
            start_time=start,
            keyframe_interval=keyframe_interval,
            stream_index=video.index,
            created_at=creation_time(container.metadata, video.metadata),
        )


def creation_time(*tags: dict[str, str]) -> str:
    """The first ``creation_time`` tag among ``tags`` that reads as a real time, as ISO-8601 in
    UTC; ``""`` when none does (see :attr:`VideoInfo.created_at`)."""
    from datetime import datetime, timezone

    for found in tags:
        text = found.get("creation_time", "").strip()
        if not text:
            continue
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            continue
        when = when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when
        if when.year < 1971:  # the epoch: an encoder that did not know the time
            continue
        when = when.astimezone(timezone.utc)
        spec = "seconds" if when.microsecond == 0 else "milliseconds"
        return when.isoformat(timespec=spec).replace("+00:00", "Z")
    return ""


def check_path(path: str | Path) -> int:
    """Return the size of a readable regular file, or raise the matching media error."""
    p = Path(path)
    if not p.exists():
        raise MediaNotFoundError(path, "no such file")
    if p.is_dir():
        raise MediaNotFoundError(path, "is a directory, not a video file")
    try:
        with open(p, "rb"):
            pass
    except OSError as exc:  # PermissionError, or a file that vanished meanwhile
        raise MediaNotFoundError(path, f"cannot be read ({exc.strerror or exc})") from exc
    size = p.stat().st_size
    if size == 0:
        raise EmptyMediaError(path, "zero-byte file")
    return size


@contextmanager
def open_media(path: str | Path) -> Iterator[av.container.InputContainer]:
    """Open a media file with PyAV, turning open failures into typed media errors.

    Raises:
        MediaNotFoundError: The file cannot be read.
        NotAVideoError: Not a media file (no known container signature).
        CorruptMediaError: Starts like a known container but cannot be opened.
    """
    try:
        container = av.open(str(path), metadata_errors="ignore")
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        raise MediaNotFoundError(path, f"cannot be read ({exc})") from exc
    except av.error.FFmpegError as exc:
        kind = sniff_container(path)
        if kind is None:
            raise NotAVideoError(path, "not a video file") from exc
        raise CorruptMediaError(path, f"truncated or corrupt {kind} file ({exc.strerror})") from exc
    try:
        yield container
    finally:
        container.close()


def video_stream(
    path: str | Path, container: av.container.InputContainer
) -> av.video.stream.VideoStream:
    """Return the first real video stream, or raise the error that says why there is none."""
    for stream in container.streams.video:
        # Cover art in music files is a one-frame "video" stream flagged as an attached picture.
        if not stream.disposition & av.stream.Disposition.attached_pic:
            return stream
    if container.streams.audio:
        raise AudioOnlyError(path, "audio only, no video stream")
    if len(container.streams) == 0:
        raise EmptyMediaError(path, "container holds no streams (zero duration)")
    raise NotAVideoError(path, "no video stream")


_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (4, b"ftyp", "MP4/QuickTime"),
    (4, b"moov", "QuickTime"),
    (4, b"mdat", "QuickTime"),
    (4, b"wide", "QuickTime"),
    (4, b"free", "QuickTime"),
    (0, b"RIFF", "RIFF (AVI/WAV)"),
    (0, b"\x1a\x45\xdf\xa3", "Matroska/WebM"),
    (0, b"OggS", "Ogg"),
    (0, b"\x00\x00\x01\xba", "MPEG-PS"),
    (0, b"\x00\x00\x01\xb3", "MPEG video"),
    (0, b"\x00\x00\x00\x01", "H.264/HEVC elementary stream"),
    (0, b"FLV", "FLV"),
    (0, b"\x30\x26\xb2\x75\x8e\x66\xcf\x11", "ASF/WMV"),
    (0, b"\x06\x0e\x2b\x34", "MXF"),
    (0, b".RMF", "RealMedia"),
    (0, b"ID3", "MP3"),
    (0, b"fLaC", "FLAC"),
)


def sniff_container(path: str | Path) -> str | None:
    """Name the container family from the file's first bytes, or ``None`` if unknown."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    for offset, magic, name in _SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return name
    # MPEG-TS has no magic string: a sync byte every 188 bytes.
    if len(head) >= 377 and head[0] == head[188] == head[376] == 0x47:
        return "MPEG-TS"
    return None


def first_frame_time(path: str | Path) -> float | None:
    """The time (seconds) of the first video frame, ``t = 0`` of the media API (as
    :func:`probe`'s ``start_time``); ``None`` for a file with no video stream."""
    with open_media(path) as container:
        try:
            video = video_stream(path, container)
        except (AudioOnlyError, NotAVideoError, EmptyMediaError):
            return None
        return _first_frame(path, container, video)[0]


def _first_frame(
    path: str | Path, container: av.container.InputContainer, video: av.video.stream.VideoStream
) -> tuple[float, int, tuple[int, int]]:
    """Decode the first frame: its time, the rotation it carries, and its coded (w, h).

    Packets before the first keyframe that the decoder rejects are passed over
    (:func:`lead_in_rejected`): a stream cut before its keyframe starts where a player starts,
    at that keyframe."""
    frame, lead_in, passed = None, True, 0
    try:
        for packet in container.demux(video):  # its last, empty packet flushes the decoder
            lead_in = lead_in and not packet.is_keyframe
            try:
                frames = packet.decode()
            except av.error.InvalidDataError:
                if lead_in_rejected(packet.is_keyframe, lead_in):
                    passed += 1
                    continue
                raise
            if frames:
                frame = frames[0]
                break
    except av.error.FFmpegError as exc:
        raise CorruptMediaError(path, f"first frame cannot be decoded ({exc.strerror})") from exc
    if frame is None and passed:
        raise CorruptMediaError(
            path, f"cut before a keyframe, and none follows: {passed} pictures, none decodable"
        )
    if frame is None:
        raise EmptyMediaError(path, "no decodable video frame")
    start = float(frame.time) if frame.time is not None else _stream_start(video)
    return start, _rotation(frame.rotation, video.metadata), (frame.width, frame.height)


def lead_in_rejected(keyframe: bool, lead_in: bool) -> bool:
    """Whether a packet the decoder rejected is the lead-in of a stream cut before its first
    keyframe: ``lead_in`` (no keyframe demuxed and no frame decoded yet in this pass), and not
    a keyframe itself. Such a file (a recording or a transport stream cut anywhere but at a
    keyframe) holds pictures whose parameter sets and references went with the cut; H.264
    rejects each until the next keyframe brings them, and a player starts there. The media
    API's ``t = 0`` is then that keyframe's frame. A rejected keyframe, or a picture after one,
    is damage."""
    return lead_in and not keyframe


def time_base(stream: av.stream.Stream) -> Fraction:
    """The stream's time base; demuxers always set one, the fallback only satisfies the type."""
    return stream.time_base or Fraction(1, 90000)


def _stream_start(video: av.video.stream.VideoStream) -> float:
    if video.start_time is None:
        return 0.0
    return float(video.start_time * time_base(video))


def _rotation(frame_rotation: float, metadata: dict[str, str]) -> int:
    # PyAV reports the display matrix counter-clockwise; we store clockwise, like 'rotate'.
    degrees = -round(frame_rotation or 0)
    if degrees == 0 and metadata.get("rotate", "").lstrip("-").isdigit():
        degrees = int(metadata["rotate"])
    return round(degrees / 90.0) * 90 % 360


def _duration(
    path: str | Path,
    container: av.container.InputContainer,
    video: av.video.stream.VideoStream,
    start: float,
) -> float:
    """Seconds of video after the first frame, preferring the video stream's own duration."""
    seconds: float | None = None
    if video.duration and video.time_base:
        seconds = float(video.duration * video.time_base) - (start - _stream_start(video))
    elif (tag := _tag_seconds(video.metadata.get("DURATION", ""))) is not None:
        # Matroska's per-track tag, which FFmpeg writes as the track's end on the file's clock:
        # a video that starts after its audio has that much less of it
        seconds = tag - start
    elif container.duration:
        seconds = container.duration / av.time_base - (start - _container_start(container))
    if seconds is None or seconds <= 0:
        raise EmptyMediaError(path, "zero duration")
    return seconds


def _container_start(container: av.container.InputContainer) -> float:
    return (container.start_time or 0) / av.time_base


def _tag_seconds(tag: str) -> float | None:
    """Parse a Matroska ``DURATION`` tag such as ``"00:01:02.500000000"``."""
    parts = tag.split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])
    except ValueError:
        return None


def _fps(video: av.video.stream.VideoStream, duration: float) -> float:
    for rate in (video.average_rate, video.guessed_rate, video.base_rate):
        if rate:
            return float(rate)
    if video.frames:
        return video.frames / duration
    return 25.0  # a rate-less stream: any plausible value keeps frame_count an estimate


def _display_size(
    video: av.video.stream.VideoStream, coded: tuple[int, int], rotation: int
) -> tuple[int, int]:
    width, height = coded
    sar = video.sample_aspect_ratio
    if sar and sar != Fraction(1) and sar > 0:
        width = round(width * sar / 2) * 2  # anamorphic: stretch to square pixels
    return (height, width) if rotation in (90, 270) else (width, height)


def _audio_info(stream: av.audio.stream.AudioStream) -> AudioStreamInfo:
    language = stream.metadata.get("language", "")
    ctx = stream.codec_context
    return AudioStreamInfo(
        index=stream.index,
        codec=codec_name(ctx),
        sample_rate=int(ctx.sample_rate or stream.rate or 0),
        channels=int(ctx.channels or 0),
        language="" if language == "und" else language,
        default=bool(stream.disposition & av.stream.Disposition.default),
    )


def codec_name(ctx: av.codec.context.CodecContext) -> str:
    """The format's name (``av1``, ``mp3``), not its decoder's (``libdav1d``, ``mp3float``)."""
    codec = ctx.codec
    return str(getattr(codec, "canonical_name", "") or ctx.name)


def _keyframe_interval(video: av.video.stream.VideoStream, duration: float) -> float:
    """Mean keyframe spacing from the first entries of the index (cheap even for long files)."""
    entries = video.index_entries
    n = min(len(entries), _INDEX_SCAN)
    if n < 2 or not video.time_base:
        return DEFAULT_KEYFRAME_INTERVAL
    scanned = [entries[i] for i in range(n)]
    keyframes = sum(1 for e in scanned if e.is_keyframe)
    if n < len(entries) or keyframes < n:
        # A per-packet index (MP4, AVI): keyframes are flagged among ordinary frames.
        span = float((scanned[-1].timestamp - scanned[0].timestamp) * video.time_base)
        if n == len(entries):
            span = max(span, duration)
        return max(span / max(keyframes, 1), 1e-3)
    # Every entry is a keyframe (Matroska cues): an upper bound, as cues may skip keyframes.
    return max(duration / n, 1e-3)


def _check_header_promise(
    path: str | Path, video: av.video.stream.VideoStream, duration: float, fps: float, size: int
) -> None:
    """Compare what the header promises with what the file can hold, without decoding."""
    entries = video.index_entries
    if len(entries) and entries[len(entries) - 1].pos > size:
        raise CorruptMediaError(path, "truncated or corrupt: the index points past the end of file")
    promised = video.frames / fps if video.frames and fps else 0.0
    if promised > 1.2 * duration + 1.0:
        raise CorruptMediaError(
            path,
            f"truncated or corrupt: the header promises {promised:.1f} s "
            f"but the data holds {duration:.1f} s",
        )


def _check_tail(
    path: str | Path,
    container: av.container.InputContainer,
    video: av.video.stream.VideoStream,
    start: float,
    duration: float,
    keyframe_interval: float,
) -> None:
    """Seek near the end: packets must reach the claimed end, and a keyframe there must decode.

    One seek (two when the first lands between keyframes with none after it, as imprecise
    MPEG-TS seeks can) plus at most a keyframe interval of demuxing; only the keyframe is
    decoded, so it stays cheap.
    """
    slack = max(2.0, 0.05 * duration)
    target = start + max(0.0, duration - slack)
    for back in (0.0, 4 * keyframe_interval):
        at = max(start, target - back)
        reached, keyframe_seen = _tail_reach(path, container, video, at, target)
        if reached >= target and (keyframe_seen or back > 0):
            # Without any keyframe even after backing off, the packets are there but we cannot
            # verify them cheaply; the full decode during indexing will tell.
            return
        if reached < target:
            raise CorruptMediaError(
                path,
                f"truncated or corrupt: the header promises {duration:.1f} s "
                f"but the data ends at {max(reached - start, 0.0):.1f} s",
            )


def _tail_reach(
    path: str | Path,
    container: av.container.InputContainer,
    video: av.video.stream.VideoStream,
    at: float,
    target: float,
) -> tuple[float, bool]:
    """Seek to ``at`` and demux until ``target``: how far the packets reach, and whether a
    keyframe was found (it must then decode, or the file is corrupt)."""
    reached, keyframe_seen, decoded = -1.0, False, False  # -1: no packet at all
    try:
        container.seek(int(at / time_base(video)), stream=video, backward=True)
        for packet in container.demux(video):
            if packet.pts is not None:
                reached = max(reached, float(packet.pts * time_base(video)))
            keyframe_seen = keyframe_seen or packet.is_keyframe
            if keyframe_seen and not decoded:
                decoded = bool(packet.decode())  # B-frame reordering may delay the first one
            if decoded and reached >= target:
                return reached, True
    except av.error.FFmpegError as exc:
        raise CorruptMediaError(
            path, f"truncated or corrupt near the end ({exc.strerror})"
        ) from exc
    if keyframe_seen and not decoded:
        raise CorruptMediaError(path, "truncated or corrupt: no frame decodes near the end")
    return reached, keyframe_seen
