"""Many videos at once: `vidagent index A B` one after the other against `--jobs 2`.

Two videos composed from the real clips (``benchmarks/_compose.py``; ``--minutes`` long, and one
more second for the second, so that they are two videos, not one file twice) are indexed with
the offline defaults into a fresh home each way, by the ``vidagent`` command in a fresh process.
While it runs, the resident memory of the command and all its descendants is summed every 0.5 s
(``/proc``). Printed per way: wall seconds, the realtime factor (video seconds over wall seconds)
and per core, the peak of the summed memory, and the most any one process held. The CPU and the
load average are printed beside them.

    .venv/bin/python benchmarks/ingest_jobs.py [--minutes 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def tree_rss(root: int) -> tuple[int, int]:
    """(summed, largest) resident KiB of ``root`` and its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid = int(entry.name)
        children.setdefault(int(fields.get("PPid", "0").strip()), []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, largest, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        largest = max(largest, rss.get(pid, 0))
        todo += children.get(pid, [])
    return total, largest


def run(videos: list[Path], jobs: int) -> tuple[float, int, int]:
    """Index ``videos`` with ``--jobs``; (wall seconds, peak summed KiB, peak single KiB)."""
    home = tempfile.mkdtemp(prefix="vidagent-jobs-")
    args = [str(ROOT / ".venv" / "bin" / "vidagent"), "--home", home, "index", *map(str, videos)]
    if jobs > 1:
        args += ["--jobs", str(jobs)]
    started = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks = [0, 0]

    def sample() -> None:
        while process.poll() is None:
            total, largest = tree_rss(process.pid)
            peaks[0], peaks[1] = max(peaks[0], total), max(peaks[1], largest)
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = process.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"vidagent index failed: {err.strip().splitlines()[-1:]}")
    return wall, peaks[0], peaks[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    args = parser.parse_args()
    from _compose import long_video
    from _cpu import describe

    from vidagent.media import probe

    videos = [long_video(args.minutes * 60), long_video(args.minutes * 60 + 1)]
    seconds = sum(probe(v).duration for v in videos)
    print(describe())
    print(f"{len(videos)} videos, {seconds:.0f} s of video in all; {os.cpu_count()} cores")
    print(
        f"{'way':<10} {'wall s':>7} {'rt x':>6} {'rt x/core':>9} {'peak sum MiB':>13} {'one MiB':>8}"
    )
    for jobs in (1, 2):
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        wall, total, largest = run(videos, jobs)
        label = "sequential" if jobs == 1 else f"--jobs {jobs}"
        cores = os.cpu_count() or 1
        print(
            f"{label:<10} {wall:7.1f} {seconds / wall:6.1f} {seconds / wall / cores:9.1f} "
            f"{total / 1024:13.0f} {largest / 1024:8.0f}   (load {load} at start)"
        )


if __name__ == "__main__":
    main()
