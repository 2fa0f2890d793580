"""``vidagent watch`` on a stream that arrives in real time: does indexing keep up, how soon is a
moment searchable, and does memory stay put as the stream runs.

The stream is the real narrated clip (``wannaworktogether.mp4``: 180 s, speech, on-screen text,
15 shots; the generated 10-minute clip where it cannot be had) played in a loop into a growing
MPEG-TS file at the pace its timestamps say (real time, or ``--speed`` times it). A
:class:`vidagent.app.watching.Watch` with the offline defaults (every stage ``vidagent index``
runs with no endpoint configured) reads it in windows of ``--window`` seconds.

Printed, with the CPU named (``benchmarks/_cpu.py``) and the load average (the machine may be
shared):

- each window: its stream time, the seconds indexing it took and its real-time factor;
- sustained speed: stream seconds indexed per wall second spent indexing (above 1: it keeps up,
  the margin is how far above), over the windows after the first (the first loads the models);
- delay: from the moment a window's last frame was written to the file to the moment its clips
  were searchable (the window event), median and worst, over every window but the last (which
  waits for the source to be given up for ended);
- memory: this process's resident set after 5 minutes of stream and at the end (``--minutes``).

Usage::

    python benchmarks/live.py --minutes 10
    python benchmarks/live.py --minutes 60 --window 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def source_clip() -> Path:
    """The real narrated clip, or the generated 10-minute one where it cannot be had."""
    from realmedia import fetch_clip

    try:
        return fetch_clip("wannaworktogether.mp4")
    except RuntimeError as e:
        print(f"real clip unavailable ({e}); using the generated one")
        from ingest import generated_clip

        return generated_clip()


def looped_stream(clip: Path, seconds: float, out: Path) -> list[tuple[float, int]]:
    """``clip`` played in a loop for ``seconds`` as one MPEG-TS file with running timestamps;
    returns ``(stream seconds, byte offset)`` pacing marks: the bytes a live source has sent
    by each time."""
    import av

    with av.open(str(out), "w", format="mpegts") as dst:
        streams: dict[int, Any] = {}
        done = 0.0
        while done < seconds:
            with av.open(str(clip)) as src:
                keep = [src.streams.video[0], *src.streams.audio[:1]]
                streams = streams or {s.index: dst.add_stream_from_template(s) for s in keep}
                length = float(src.duration or 0) / av.time_base
                for packet in src.demux(*keep):
                    if packet.dts is None or packet.time_base is None:
                        continue
                    if float(packet.dts * packet.time_base) + done >= seconds:
                        break
                    step = round(done / packet.time_base)
                    packet.pts = int(packet.pts or 0) + step
                    packet.dts = int(packet.dts) + step
                    packet.stream = streams[packet.stream.index]
                    dst.mux(packet)
            done += length
    # byte offsets: where each packet ends in the written file, read back in order
    with av.open(str(out)) as src:
        sent = [
            (float(p.dts * p.time_base), int(p.pos) + int(p.size))
            for p in src.demux()
            if p.dts is not None and p.pos is not None and p.time_base is not None
        ]
    return sorted(sent)


def play(marks: list[tuple[float, int]], data: Path, target: Path, speed: float) -> float:
    """Start writing ``data`` to ``target`` at the pace of ``marks``; returns the wall clock
    of stream second 0."""
    blob = data.read_bytes()
    start = time.monotonic() + 0.5

    def run() -> None:
        written = 0
        with target.open("ab") as f:
            for t, end in marks:
                wait = start + t / speed - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if end > written:
                    f.write(blob[written:end])
                    f.flush()
                    written = end
            f.write(blob[written:])

    target.write_bytes(b"")
    threading.Thread(target=run, daemon=True).start()
    return start


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="stream length")
    parser.add_argument("--window", type=float, default=30.0, help="watch window, seconds")
    parser.add_argument("--speed", type=float, default=1.0, help="times real time")
    args = parser.parse_args()
    from _cpu import describe

    from vidagent.app import Session
    from vidagent.config import load_settings

    print(describe())
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="vidagent-live-") as tmp:
        root = Path(tmp)
        clip = source_clip()
        data = root / "looped.ts"
        marks = looped_stream(clip, seconds, data)
        print(f"stream: {clip.name} looped to {args.minutes:g} min, windows of {args.window:g} s")
        settings = load_settings({"home": str(root / "home"), "library": str(root / "library")})
        rows: list[dict[str, Any]] = []
        memory: dict[str, float] = {}
        with Session(settings) as session:
            stages = session.default_stages()
            print(f"stages: {', '.join(stages)} (summary every 5 min); load {load()}")
            growing = root / "live.ts"
            start = play(marks, data, growing, args.speed)

            def on_event(event: dict[str, Any]) -> None:
                if event["event"] != "window":
                    return
                arrived = start + event["t1"] / args.speed
                row = {**event, "delay": time.monotonic() - arrived, "rss": rss_mib()}
                rows.append(row)
                rt = (event["t1"] - event["t0"]) / max(event["seconds"], 1e-9)
                print(
                    f"  {event['t0']:7.0f}-{event['t1']:5.0f} s  indexed in "
                    f"{event['seconds']:5.1f} s ({rt:4.1f}x real time)  searchable "
                    f"{row['delay']:5.1f} s after it arrived  rss {row['rss']:5.0f} MiB  "
                    f"load {load()}",
                    flush=True,
                )
                if event["t1"] >= 300 and "5 min" not in memory:
                    memory["5 min"] = row["rss"]

            session.watch(
                str(growing),
                on_event=on_event,
                window_seconds=args.window,
                stall_seconds=10,
                give_up_seconds=20,
            ).run()
        memory["end"] = rows[-1]["rss"] if rows else float("nan")
    steady = rows[1:] or rows  # the first window also loads the models
    indexed = sum(r["t1"] - r["t0"] for r in steady)
    spent = sum(r["seconds"] for r in steady)
    # the last window ends when the source is given up for ended, not at its next keyframe
    delays = [r["delay"] for r in rows[:-1]] or [r["delay"] for r in rows]
    print(
        f"\nsustained: {indexed / spent:.2f}x real time ({indexed:.0f} s of stream in {spent:.0f} s)"
    )
    print(f"searchable after: median {statistics.median(delays):.1f} s, worst {max(delays):.1f} s")
    five = memory.get("5 min", float("nan"))
    print(
        f"memory: {five:.0f} MiB after 5 min of stream, {memory['end']:.0f} MiB after "
        f"{args.minutes:g} min; load {load()}"
    )


if __name__ == "__main__":
    main()
