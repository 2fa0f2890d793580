"""Live sources made in the tests (small MPEG-TS streams, files that grow over time) and the
check of the growing video a watch makes of them."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import av
import pytest

from vidagent.library import Library
from vidagent.media.synth import make_video


def clip(path: Path, seconds: float, size: tuple[int, int] = (160, 96)) -> Path:
    """The MP4 a stream is made of: H.264 (a keyframe every second, a frame counter) and AAC
    (a tone), 10 frames a second."""
    make_video(path, duration=seconds, fps=10, size=size, gop=10, audio="tone", counter=True)
    return path


def to_ts(source: Path, target: Path, audio_late: float = 0.0) -> None:
    """``source`` remuxed into MPEG-TS (the MP4 demuxer hands packets over in time order), its
    sound ``audio_late`` seconds after its pictures."""
    with av.open(str(source)) as src, av.open(str(target), "w", format="mpegts") as out:
        streams = {s.index: out.add_stream_from_template(s) for s in src.streams}
        for packet in src.demux():
            if packet.dts is not None and packet.time_base is not None:
                if packet.stream.type == "audio":
                    late = int(audio_late / packet.time_base)
                    packet.pts, packet.dts = packet.pts + late, packet.dts + late
                packet.stream = streams[packet.stream.index]
                out.mux(packet)


def ts_stream(path: Path, seconds: float, size: tuple[int, int] = (160, 96)) -> bytes:
    """A small MPEG-TS stream at ``path`` (its bytes returned): a keyframe every second, a
    frame counter, a tone, its audio and video interleaved as a live source sends them."""
    to_ts(clip(path.with_suffix(".mp4"), seconds, size), path)
    return path.read_bytes()


def grow(
    target: Path,
    data: bytes,
    pieces: int,
    pause: float,
    hold: float = 0.0,
    gate: threading.Event | None = None,
) -> threading.Thread:
    """Write ``data`` to ``target`` in ``pieces``, ``pause`` seconds apart, from a thread; two
    thirds in, once ``gate`` is set, ``hold`` seconds of nothing instead (a stall)."""

    def write() -> None:
        step = len(data) // pieces + 1
        with target.open("ab") as f:
            for k in range(pieces):
                f.write(data[k * step : (k + 1) * step])
                f.flush()
                if hold and k == pieces * 2 // 3:
                    assert gate is None or gate.wait(60)
                    time.sleep(hold)
                else:
                    time.sleep(pause)

    target.write_bytes(b"")
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def check_clips(library: Library, video_id: str, duration: float, gap: float = 0.02) -> None:
    """One row per clip, numbered 0..n-1, from 0 to the live edge, none overlapping and none
    more than ``gap`` seconds after the one before."""
    clips = library.clips(video_id)
    assert [c.clip_index for c in clips] == list(range(len(clips)))
    assert clips[0].t0 == 0.0
    for a, b in itertools.pairwise(clips):
        assert a.t1 - 0.02 <= b.t0 <= a.t1 + gap, (a, b)
    # said in full when it fails (seen once in a full run: duration 6.4, the last clip not
    # given): the clips' spans and the stored duration
    spans = [(c.t0, c.t1) for c in clips]
    assert clips[-1].t1 == pytest.approx(duration, abs=0.3), (spans, duration)
