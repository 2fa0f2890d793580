"""Memory of the other long-running processes: ``vidagent mcp`` over HTTP, and ``bench run``.

Each is started as its own process (so its resident memory is its own) with the tests' fake
index models and an ``llm`` on a loopback OpenAI-compatible endpoint (``tests/faultserver.py``,
answering like a small agent model: DVD's clip_search, then an answer; no faults). Its resident
memory (VmRSS) is sampled every second; the figures are the memory once the work has started,
at the end of the warm-up, at its peak after it and at the end, and the growth after warm-up.

* ``mcp``: ``vidagent mcp --transport http`` over a Library of ``--videos`` generated clips,
  and ``--clients`` MCP clients (the SDK's, over streamable HTTP) calling ``list_videos``,
  ``search``, ``ask`` (dvd) and ``get_frames``, and now and then ``index_video`` (a commit) of
  a clip, until ``--minutes`` pass; the first ``--warmup`` minutes are the warm-up.
* ``bench``: ``vidagent bench run nextqa`` of ``--questions`` questions (a NExT-QA-style
  ``val.csv`` over the generated clips, ``benchmarks/bench_throughput.py``) with DVD at
  ``--concurrency``; the warm-up is its first ``--warmup-questions`` rows.

Exit code 1 when the growth after warm-up passes ``--max-growth`` MiB or work failed::

    .venv/bin/python benchmarks/long_running.py mcp --minutes 10 --warmup 3
    .venv/bin/python benchmarks/long_running.py bench --questions 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from soak import FaultyModel, environment, make_clips, rss_kib  # noqa: E402

TOKEN = "long-running-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sampler:
    """VmRSS of ``pid`` every second, in MiB, with the time of each sample."""

    def __init__(self, pid: int) -> None:
        self.pid, self.samples = pid, []  # [(seconds since start, MiB)]
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                kib = rss_kib(self.pid)
            except (FileNotFoundError, ProcessLookupError):
                return
            self.samples.append((time.monotonic() - self._started, kib / 1024))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def report(self, warm_at: float, limit: float, what: str) -> bool:
        """Print the figures; whether the growth after ``warm_at`` s is within ``limit``."""
        mib = [m for _, m in self.samples]
        after = [m for t, m in self.samples if t >= warm_at] or mib[-1:]
        growth = after[-1] - after[0]
        print(
            f"{what} memory (VmRSS, MiB): first {mib[0]:.0f}; after warm-up ({warm_at:.0f} s) "
            f"{after[0]:.0f}; then peak {max(after):.0f}, end {after[-1]:.0f}: growth after "
            f"warm-up {growth:+.1f} over {(len(after) - 1) / 60:.1f} min (limit {limit:+g})"
        )
        print("  each minute: " + ", ".join(f"{m:.0f}" for m in mib[::60]))
        return growth <= limit


def run_mcp(args: argparse.Namespace, tmp: Path, endpoint: str) -> bool:
    home, media = tmp / "home", tmp / "media"
    clips = make_clips(media, args.videos)
    env = environment(home, endpoint) | {"VIDAGENT_TOKEN": TOKEN}
    subprocess.run(
        [sys.executable, "-m", "vidagent", "index", str(media), "--no-progress"],
        env=env,
        check=True,
        capture_output=True,
    )
    port = free_port()
    log = (tmp / "mcp.log").open("wb")
    cmd = [sys.executable, "-m", "vidagent", "mcp", "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--media-root", str(media)], env=env, stdout=log, stderr=log)
    log.close()
    deadline = time.monotonic() + 120
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"vidagent mcp did not start: {(tmp / 'mcp.log').read_text()}")
        time.sleep(0.2)
    sampler = Sampler(proc.pid)
    counts: dict[str, int] = {}
    errors: list[str] = []
    try:
        asyncio.run(_mcp_clients(args, port, [c.name for c in clips], counts, errors))
    finally:
        sampler.stop()
        proc.terminate()
        proc.wait(timeout=60)
    print(
        f"mcp: {args.minutes:g} min, {args.clients} clients, {args.videos} clips; calls "
        f"{dict(sorted(counts.items()))}; errors {len(errors)}"
    )
    for line in errors[:5]:
        print(f"  {line}")
    ok = sampler.report(args.warmup * 60, args.max_growth, "vidagent mcp")
    return ok and not errors


async def _mcp_clients(
    args: argparse.Namespace, port: int, names: list[str], counts: dict[str, int], errors: list[str]
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    deadline = time.monotonic() + args.minutes * 60
    url = f"http://127.0.0.1:{port}/mcp"

    async def one(i: int) -> None:
        rng = random.Random(i)
        timeout = httpx2.Timeout(30, read=300)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            while time.monotonic() < deadline:
                roll, name = rng.random(), rng.choice(names)
                if roll < 0.05:
                    tool, arguments = "index_video", {"path": name}
                elif roll < 0.35:
                    tool, arguments = "search", {"query": rng.choice(["HELLO", "a tone"])}
                elif roll < 0.7:
                    question = {"question": "What text appears?", "options": ["BYE", "HELLO"]}
                    tool, arguments = "ask", {**question, "videos": [name]}
                elif roll < 0.85:
                    tool, arguments = "get_frames", {"video": name, "times": [1, 3], "size": 64}
                else:
                    tool, arguments = "list_videos", {}
                got = await client.call_tool(tool, arguments)
                counts[tool] = counts.get(tool, 0) + 1
                if got.is_error:
                    errors.append(f"{tool}: {json.dumps(arguments)}: {got.content}")

    await asyncio.gather(*(one(i) for i in range(args.clients)))


def run_bench(args: argparse.Namespace, tmp: Path, endpoint: str) -> bool:
    from bench_throughput import make_benchmark

    data = make_benchmark(tmp, args.questions)
    out = tmp / "run"
    env = environment(tmp / "home", endpoint)
    cmd = [sys.executable, "-m", "vidagent", "bench", "run", "nextqa", "--data", str(data)]
    cmd += ["--videos", str(data / "videos"), "-j", str(args.concurrency), "--out", str(out)]
    log = (tmp / "bench.log").open("wb")
    proc = subprocess.Popen([*cmd, "--quiet", "--json"], env=env, stdout=log, stderr=log)
    log.close()
    sampler = Sampler(proc.pid)
    warm_at: float | None = None
    rows = out / "predictions.jsonl"
    while proc.poll() is None:
        if warm_at is None and rows.exists():
            with rows.open("rb") as f:
                if sum(1 for _ in f) >= args.warmup_questions:
                    warm_at = sampler.samples[-1][0] if sampler.samples else 0.0
        time.sleep(0.5)
    sampler.stop()
    answered = sum(1 for _ in rows.open()) if rows.exists() else 0
    print(
        f"bench run: {answered} of {args.questions} questions answered (dvd, -j "
        f"{args.concurrency}) in {sampler.samples[-1][0]:.0f} s; exit {proc.returncode}"
    )
    if proc.returncode != 0:
        print((tmp / "bench.log").read_text()[-2000:])
    ok = sampler.report(warm_at or 0.0, args.max_growth, "vidagent bench run")
    return ok and proc.returncode == 0 and answered == args.questions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["mcp", "bench"])
    parser.add_argument("--minutes", type=float, default=10.0, help="mcp: traffic time")
    parser.add_argument("--warmup", type=float, default=3.0, help="mcp: warm-up minutes")
    parser.add_argument("--clients", type=int, default=4, help="mcp: concurrent clients")
    parser.add_argument("--videos", type=int, default=4, help="mcp: clips in the Library")
    parser.add_argument("--questions", type=int, default=1000, help="bench: questions")
    parser.add_argument("--warmup-questions", type=int, default=200, help="bench: warm-up rows")
    parser.add_argument("--concurrency", type=int, default=4, help="bench: questions at once")
    parser.add_argument("--max-growth", type=float, default=20.0, help="MiB after warm-up")
    args = parser.parse_args()

    from faultserver import FaultServer

    endpoint = FaultServer()
    endpoint.gate = FaultyModel(0)  # its faults stay off: useful replies only
    endpoint.start()
    print(f"{os.cpu_count()} CPUs; llm: a loopback OpenAI-compatible endpoint")
    try:
        with tempfile.TemporaryDirectory(prefix="vidagent-long-") as tmp:
            run = run_mcp if args.what == "mcp" else run_bench
            ok = run(args, Path(tmp), endpoint.base_url)
    finally:
        endpoint.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
