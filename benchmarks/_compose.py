"""A long video composed from the real clips the tests use, for ``benchmarks/ingest.py --long``.

One *cycle* is re-encoded with PyAV at 640x360, 25 fps (H.264, keyframe every 10 s) with mono
AAC at 16 kHz, from, in order:

- ``wannaworktogether.mp4`` (180 s, English narration over animation),
- 60 s of silence over a still frame (the narration's last picture, held),
- ``vtest.avi`` (79.5 s, pedestrians, no audio: silence),
- ``Megamind.avi`` (11.3 s film trailer: faces, music, speech),
- ``countdown.mp4`` (8 s, a spoken countdown, "LIFT OFF!" on screen) and ``garden.mp4`` (60 s,
  three voices over text cards), where ``espeak-ng`` could make them (``benchmarks/clips.py``),
- 30 s of silence over black.

Each source is letterboxed into the frame; its frame rate is converted by holding the latest
frame. A video of any length is then cycles joined by copying packets (no second encode), the
last one cut where the length is reached. Files are cached under ``.cache/bench/``; nothing is
committed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
W, H, FPS, RATE = 640, 360, 25, 16000
#: (clip name, or None for a still; seconds of a still): the cycle's parts in order.
PARTS: list[tuple[str | None, float]] = [
    ("wannaworktogether.mp4", 0.0),
    (None, 60.0),  # the last picture held, no sound
    ("vtest.avi", 0.0),
    ("Megamind.avi", 0.0),
    ("countdown.mp4", 0.0),
    ("garden.mp4", 0.0),
    ("", 30.0),  # black, no sound
]


def long_video(seconds: float) -> Path:
    """A video of ``seconds`` (to the frame) made of whole cycles and a cut one; cached."""
    path = CACHE / f"long-{round(seconds)}s.mp4"
    if path.exists():
        return path
    cycle = _cycle()
    CACHE.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part.mp4")
    length = _length(cycle)
    with av.open(str(part), "w") as out:
        with av.open(str(cycle)) as src:
            streams = {s.index: out.add_stream_from_template(s) for s in src.streams}
        offset = 0.0
        while offset < seconds:
            with av.open(str(cycle)) as src:
                for packet in src.demux():
                    if packet.dts is None:
                        continue
                    tb = packet.time_base
                    shift = round(offset / tb)
                    if float(packet.dts * tb) + offset >= seconds:
                        continue
                    packet.dts += shift
                    packet.pts = (packet.pts or 0) + shift
                    packet.stream = streams[packet.stream.index]
                    out.mux(packet)
            offset += length
    part.rename(path)
    return path


def _length(path: Path) -> float:
    """Seconds from 0 to the end of the last packet of any stream, to the next frame: a
    cycle's offset in the joined file, so no stream's times run backwards at a join."""
    end = 0.0
    with av.open(str(path)) as src:
        for packet in src.demux():
            if packet.pts is not None:
                end = max(end, float((packet.pts + (packet.duration or 0)) * packet.time_base))
    return float(np.ceil(end * FPS + 1) / FPS)


def _cycle() -> Path:
    path = CACHE / "long-cycle.mp4"
    if path.exists():
        return path
    sys.path.insert(0, str(ROOT / "tests"))
    from realmedia import fetch_clip

    CACHE.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part.mp4")
    with av.open(str(part), "w") as out:
        video = out.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = W, H, "yuv420p"
        video.codec_context.gop_size = 10 * FPS
        video.options = {"preset": "veryfast", "crf": "23"}
        audio = out.add_stream("aac", rate=RATE)
        audio.layout = "mono"
        samples_out = 0
        frames_out = 0
        last = np.zeros((H, W, 3), np.uint8)
        for name, still in PARTS:
            if name:
                try:
                    source = fetch_clip(name)
                except (RuntimeError, KeyError) as e:
                    print(f"  {name} unavailable ({e}); left out of the cycle")
                    continue
                pictures, sound, seconds = _decode(source)
            else:
                picture = last if name is None else np.zeros((H, W, 3), np.uint8)
                pictures, sound, seconds = {0.0: picture}, np.zeros(0, np.int16), still
            n = round(seconds * FPS)
            times = sorted(pictures)
            k = 0
            for i in range(n):
                while k + 1 < len(times) and times[k + 1] <= i / FPS + 1e-6:
                    k += 1
                last = pictures[times[k]]
                frame = av.VideoFrame.from_ndarray(last, format="rgb24")
                frame.pts, frame.time_base = frames_out, Fraction(1, FPS)
                out.mux(video.encode(frame))
                frames_out += 1
            # Audio exactly as long as the picture: padded with silence or cut.
            want = round(n / FPS * RATE)
            track = np.zeros(want, np.int16)
            track[: min(want, len(sound))] = sound[:want]
            for at in range(0, want, 1024):
                chunk = track[at : at + 1024]
                frame = av.AudioFrame.from_ndarray(chunk[None, :], format="s16", layout="mono")
                frame.sample_rate, frame.pts = RATE, samples_out
                frame.time_base = Fraction(1, RATE)
                out.mux(audio.encode(frame))
                samples_out += len(chunk)
        out.mux(video.encode(None))
        out.mux(audio.encode(None))
    part.rename(path)
    return path


def _decode(path: Path) -> tuple[dict[float, np.ndarray], np.ndarray, float]:
    """A clip's letterboxed pictures by time (every frame), its mono 16 kHz samples, and its
    length in seconds."""
    pictures: dict[float, np.ndarray] = {}
    with av.open(str(path)) as src:
        stream = src.streams.video[0]
        start = None
        for frame in src.decode(stream):
            t = float(frame.pts * frame.time_base) if frame.pts is not None else 0.0
            start = t if start is None else start
            pictures[round(t - start, 4)] = _letterbox(frame.to_ndarray(format="rgb24"))
    sound = np.concatenate(list(_samples(path))) if _has_audio(path) else np.zeros(0, np.int16)
    seconds = max(max(pictures) + 1 / FPS, len(sound) / RATE) if pictures else len(sound) / RATE
    return pictures, sound, seconds


def _has_audio(path: Path) -> bool:
    with av.open(str(path)) as src:
        return bool(src.streams.audio)


def _samples(path: Path) -> Iterator[np.ndarray]:
    resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
    with av.open(str(path)) as src:
        stream = src.streams.audio[0]
        for packet in src.demux(stream):
            try:
                frames = packet.decode()
            except av.error.InvalidDataError:  # Megamind.avi's AC-3 has a damaged packet
                continue
            for frame in frames:
                for out in resampler.resample(frame):
                    yield out.to_ndarray().reshape(-1)
    for out in resampler.resample(None):
        yield out.to_ndarray().reshape(-1)


def _letterbox(rgb: np.ndarray) -> np.ndarray:
    h, w = rgb.shape[:2]
    scale = min(W / w, H / h)
    nw, nh = max(2, round(w * scale)), max(2, round(h * scale))
    canvas = np.zeros((H, W, 3), np.uint8)
    x, y = (W - nw) // 2, (H - nh) // 2
    canvas[y : y + nh, x : x + nw] = cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_AREA)
    return canvas


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        made = long_video(float(arg))
        print(made)
