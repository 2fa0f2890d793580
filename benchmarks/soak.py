"""A soak of the HTTP API: several clients mixing indexing, search, ask and cancel against one
``vidagent serve`` process for a bounded time, its model endpoint injecting faults; then the
Library is checked against a clean index, and the server's memory and status codes reported.

Setup (everything on loopback, in a temporary folder): ``--videos`` generated clips (12-24 s,
160x96, a tone, burned-in text), a fault-injecting OpenAI-compatible endpoint
(``tests/faultserver.py``) that serves the ``llm`` role, and ``vidagent serve`` started as its
own process (so its resident memory is its own) with the fake index models of the tests for the
other roles. The endpoint answers like a small agent model (DVD's clip_search, then answer;
plain text for captions and summaries) and, while the soak runs, fails on purpose: of every 100
chat requests about 8 get HTTP 500, 8 a 429 (``Retry-After: 0``), 5 a malformed body and 5
a slow reply (0.5-2 s). The client layer retries them (``max_retries`` 3, backoff 0.05-0.2 s);
a request that fails on every try ends its job, which is what the soak wants to see happen
without a 500 from the API.

Traffic: ``--clients`` threads, each looping until ``--minutes`` pass over: index a clip
(``POST /api/videos``; a quarter of them cancelled 0-2 s later), search (``POST /api/search``),
ask (``POST /api/ask`` with dvd, eea or videoagent2, then its events read to ``end``; a fifth
cancelled mid-way), and listing (``GET /api/videos``, ``/api/jobs``). Every status code is
counted. After the traffic the faults stop, every clip is indexed once more (finishing what a
cancel or a failed request left) and the server is stopped with SIGTERM.

Checks, printed as figures: requests by status (and each 5xx with its path: there must be
none); the server's resident memory (VmRSS) once every clip is indexed, at the end of the
warm-up (the first ``--warmup`` minutes of traffic), at its peak after it and at the end, with
the growth after the warm-up (at most ``--max-growth`` MiB, else the soak fails); and the
Library against a clean index of the same clips made by ``vidagent index`` in a fresh home with
the same specs and a fault-free endpoint: per video the clips (every column), frames, shots,
transcript segments and clip vectors, with no row lost or duplicated. Ask-time caches
(artefacts a strategy memoises) are not index rows and are not compared. Exit code 1 when a
check fails.

    .venv/bin/python benchmarks/soak.py [--minutes 3] [--warmup 1] [--clients 6] [--videos 4]
        [--seed 0] [--max-growth 20] [--lance-defaults]
    nice .venv/bin/python benchmarks/soak.py --minutes 30 --warmup 5   # the issue's soak

``--lance-defaults`` runs the server with LanceDB's own cache bounds (6 GiB of index, 1 GiB
of metadata) in place of vidagent's (``library_index_cache_mib``,
``library_metadata_cache_mib``), to see the growth they bound.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

STRATEGIES = ("dvd", "eea", "videoagent2")
QUERIES = ["HELLO", "text on screen", "a red shot", "a tone", "the end"]


class FaultyModel:
    """The ``gate`` of a :class:`FaultServer`: useful replies, and faults while ``faults`` is set."""

    def __init__(self, seed: int) -> None:
        self.faults = threading.Event()
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any) -> Any:
        from faultserver import Behaviour

        with self._lock:
            roll, delay = self._rng.random(), self._rng.uniform(0.5, 2.0)
        kind = "ok"
        if self.faults.is_set():
            kind = next((k for k, p in _FAULTS if roll < p), "ok")
        with self._lock:
            self.counts[kind] += 1
        if kind == "500":
            return Behaviour(status=500, body={"error": {"message": "soak: injected 500"}})
        if kind == "429":
            return Behaviour(
                status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0"}
            )
        if kind == "malformed":
            return Behaviour(raw=b'{"choices": [', headers={"Content-Type": "application/json"})
        return Behaviour(body=_reply(body), delay=delay if kind == "slow" else 0.0)


_FAULTS = [("500", 0.08), ("429", 0.16), ("malformed", 0.21), ("slow", 0.26)]


def _reply(body: Any) -> dict[str, Any]:
    from faultserver import completion

    if not isinstance(body, dict) or not body.get("tools"):
        return completion("A short test video with text on screen.")
    names = {t["function"]["name"] for t in body["tools"]}
    answered = any(m.get("role") == "assistant" for m in body.get("messages", []))
    if "clip_search" in names and not answered:
        name, args = "clip_search", {"event_description": "HELLO"}
    elif "answer" in names:
        name, args = "answer", {"answer": "B"}
    else:
        return completion("B")
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return completion("", tool_calls=[call])


#: LanceDB's own cache bounds in MiB (index, metadata): what a connection gets without a session.
LANCE_DEFAULTS = {
    "VIDAGENT_LIBRARY_INDEX_CACHE_MIB": "6144",
    "VIDAGENT_LIBRARY_METADATA_CACHE_MIB": "1024",
}


def environment(home: Path, endpoint: str) -> dict[str, str]:
    """The variables of a server or CLI process: fake index models, the faulty llm."""
    from factories import INDEX_SPECS

    env = {k: v for k, v in os.environ.items() if not k.startswith("VIDAGENT_")}
    env |= {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env |= {
        "VIDAGENT_HOME": str(home),
        "VIDAGENT_LLM": "openai:soak-model",
        "VIDAGENT_OPENAI_BASE_URL": endpoint,
        "VIDAGENT_OPENAI_API_KEY": "sk-soak",
        "VIDAGENT_MAX_RETRIES": "3",
        "VIDAGENT_BACKOFF_BASE": "0.05",
        "VIDAGENT_BACKOFF_MAX": "0.2",
        "PYTHONPATH": str(ROOT / "src"),
    }
    return env


def make_clips(folder: Path, n: int) -> list[Path]:
    from vidagent.media.synth import make_video

    folder.mkdir(parents=True)
    clips = []
    for i in range(n):
        path = folder / f"clip{i}.mp4"
        make_video(
            path,
            duration=12 + 4 * (i % 4),
            fps=10,
            size=(160, 96),
            shots=2 + i % 3,
            text_overlays=[(2.0, 6.0, f"HELLO {i}")],
            audio="tone",
            tone_hz=300.0 + 60 * i,
        )
        clips.append(path)
    return clips


def rss_kib(pid: int) -> int:
    """The resident memory of process ``pid`` in KiB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Clients:
    """The traffic: each thread picks an action at random until the deadline."""

    def __init__(self, base: str, clips: list[Path], seed: int) -> None:
        self.base, self.clips, self.seed = base, clips, seed
        self.statuses: Counter[int] = Counter()
        self.errors: list[str] = []  # 5xx and transport failures, with the request
        self.actions: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _record(self, method: str, path: str, response: Any) -> Any:
        with self._lock:
            self.statuses[response.status_code] += 1
            if response.status_code >= 500:
                self.errors.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
        return response

    def call(self, client: Any, method: str, path: str, **kw: Any) -> Any:
        try:
            return self._record(method, path, client.request(method, self.base + path, **kw))
        except httpx.HTTPError as e:  # a dropped connection is as bad as a 500
            with self._lock:
                self.errors.append(f"{method} {path}: {type(e).__name__}: {e}")
            return None

    def run(self, n: int, deadline: float) -> None:
        threads = [threading.Thread(target=self._loop, args=(i, deadline)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _loop(self, i: int, deadline: float) -> None:
        rng = random.Random(self.seed * 1000 + i)
        with httpx.Client(timeout=120) as client:
            while time.monotonic() < deadline:
                roll = rng.random()
                action = (
                    "index"
                    if roll < 0.2
                    else "search"
                    if roll < 0.5
                    else "ask"
                    if roll < 0.8
                    else "list"
                )
                with self._lock:
                    self.actions[action] += 1
                getattr(self, action)(client, rng)

    def index(self, client: Any, rng: random.Random) -> None:
        r = self.call(client, "POST", "/api/videos", json={"path": rng.choice(self.clips).name})
        if r is not None and r.status_code == 202 and rng.random() < 0.25:
            time.sleep(rng.uniform(0, 2))
            self.call(client, "DELETE", f"/api/jobs/{r.json()['job_id']}")

    def _ids(self, client: Any) -> list[str]:
        r = self.call(client, "GET", "/api/videos")
        return [v["video_id"] for v in r.json()["videos"]] if r is not None and r.is_success else []

    def search(self, client: Any, rng: random.Random) -> None:
        ids = self._ids(client)
        videos = [rng.choice(ids)] if ids and rng.random() < 0.5 else None
        body = {"query": rng.choice(QUERIES), "videos": videos, "top": 5}
        self.call(client, "POST", "/api/search", json=body)

    def ask(self, client: Any, rng: random.Random) -> None:
        ids = self._ids(client)
        if not ids:
            return
        body = {
            "videos": [rng.choice(ids)],
            "question": "What text appears?",
            "options": ["BYE", "HELLO"],
            "strategy": rng.choice(STRATEGIES),
        }
        r = self.call(client, "POST", "/api/ask", json=body)
        if r is None or r.status_code != 202:
            return
        job = r.json()["job_id"]
        cancel = rng.random() < 0.2
        try:
            with client.stream("GET", f"{self.base}/api/jobs/{job}/events") as events:
                self._record("GET", "/api/jobs/{id}/events", events)
                for line in events.iter_lines():
                    if cancel and line.startswith("event: "):
                        self.call(client, "DELETE", f"/api/jobs/{job}")
                        cancel = False
                    if line == "event: end":
                        return
        except httpx.HTTPError as e:
            with self._lock:
                self.errors.append(f"GET /api/jobs/{job}/events: {type(e).__name__}: {e}")

    def list(self, client: Any, rng: random.Random) -> None:
        self.call(client, "GET", rng.choice(["/api/videos", "/api/jobs"]))


def wait_jobs(base: str, kind: str | None = None, timeout: float = 600) -> list[dict[str, Any]]:
    """Wait until no job is queued or running; the jobs."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = httpx.get(f"{base}/api/jobs", timeout=60).json()["jobs"]
        if all(j["state"] not in ("queued", "running") for j in jobs):
            return [j for j in jobs if kind is None or j["kind"] == kind]
        if time.monotonic() > deadline:
            raise RuntimeError("jobs still running after the soak")
        time.sleep(0.5)


def library_rows(root: Path) -> dict[str, Any]:
    """Every index row of the Library per video name, sorted by key; raises on a duplicate."""
    from vidagent.library import Library
    from vidagent.library.filters import quote
    from vidagent.library.schema import TABLES, VECTOR_KEYS

    lib = Library(root, create=False)
    out: dict[str, Any] = {}
    for v in lib.list_videos():
        rows: dict[str, Any] = {"stages": sorted(v.stages)}
        for table in ("clips", "frames", "shots", "transcript", "clip_vectors"):
            keys = TABLES[table][1] if table in TABLES else VECTOR_KEYS[table]
            found = lib.tables.scan(table, f"video_id = {quote(v.video_id)}")
            found.sort(key=lambda r: tuple(r[k] for k in keys))
            if len({tuple(r[k] for k in keys) for r in found}) != len(found):
                raise AssertionError(f"{v.name}: duplicated {table} rows")
            rows[table] = found
        out[v.name] = rows
    return out


def compare(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Differences between the soaked and the clean Library, one line each."""
    problems = [f"{name}: missing" for name in sorted(set(want) - set(got))]
    problems += [f"{name}: not in the clean index" for name in sorted(set(got) - set(want))]
    for name in sorted(set(got) & set(want)):
        for part in want[name]:
            if got[name][part] != want[name][part]:
                problems.append(f"{name}: {part} differ")
    return problems


def start_server(
    home: Path, media: Path, endpoint: str, extra: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "vidagent", "serve", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--media-root", str(media)]
    log = (home.parent / "server.log").open("wb")  # a pipe nobody reads would fill and block
    env = environment(home, endpoint) | extra
    proc = subprocess.Popen(cmd, env=env, stderr=log, stdout=log)
    log.close()
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/api/health", timeout=2).is_success:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="traffic time (bounded: ≤ 30)")
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="minutes of traffic before memory is judged"
    )
    parser.add_argument(
        "--max-growth", type=float, default=20.0, help="MiB the memory may grow after warm-up"
    )
    parser.add_argument(
        "--lance-defaults", action="store_true", help="LanceDB's own cache bounds (see above)"
    )
    parser.add_argument(
        "--metadata-cache-mib", type=int, help="the server's library_metadata_cache_mib"
    )
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    minutes = min(max(args.minutes, 0.1), 30.0)
    warmup = min(max(args.warmup, 0.0), minutes / 2)

    from faultserver import FaultServer

    model = FaultyModel(args.seed)
    endpoint = FaultServer()
    endpoint.gate = model
    endpoint.start()
    with tempfile.TemporaryDirectory(prefix="vidagent-soak-") as tmp:
        clips = make_clips(Path(tmp) / "media", args.videos)
        extra = dict(LANCE_DEFAULTS) if args.lance_defaults else {}
        if args.metadata_cache_mib:
            extra["VIDAGENT_LIBRARY_METADATA_CACHE_MIB"] = str(args.metadata_cache_mib)
        home, media = Path(tmp) / "home", Path(tmp) / "media"
        proc, base = start_server(home, media, endpoint.base_url, extra)
        started = time.monotonic()
        try:
            # Warm-up: every clip indexed once without faults, so the memory baseline holds
            # the loaded models and a populated Library.
            for clip in clips:
                httpx.post(f"{base}/api/videos", json={"path": clip.name}, timeout=60)
            wait_jobs(base)
            rss = [rss_kib(proc.pid)]  # one a second from here
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.wait(1.0):
                    rss.append(rss_kib(proc.pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            model.faults.set()
            clients = Clients(base, clips, args.seed)
            traffic = time.monotonic()
            clients.run(args.clients, traffic + minutes * 60)
            traffic_samples = len(rss)
            model.faults.clear()
            jobs = wait_jobs(base)
            for clip in clips:  # finish what a cancel or a failed request left
                httpx.post(f"{base}/api/videos", json={"path": clip.name}, timeout=60)
            final = wait_jobs(base, "index")[: len(clips)]
            sampling.set()
            sampler.join()
            rss.append(rss_kib(proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        soaked = library_rows(Path(tmp) / "home" / "library")

        clean_home = Path(tmp) / "clean"
        done = subprocess.run(
            [sys.executable, "-m", "vidagent", "index", str(Path(tmp) / "media"), "--json"],
            env=environment(clean_home, endpoint.base_url),
            capture_output=True,
            text=True,
            check=False,
        )
        endpoint.stop()
        if done.returncode != 0:
            print(f"the clean index failed: {done.stderr.strip()}")
            return 1
        problems = compare(soaked, library_rows(clean_home / "library"))

    states = Counter(j["state"] for j in jobs)
    failed_final = [j for j in final if j["state"] != "done"]
    total = sum(clients.statuses.values())
    print(
        f"soak: {minutes:g} min of traffic, {args.clients} clients, {args.videos} clips, "
        f"{os.cpu_count()} CPUs; {time.monotonic() - started:.0f} s in all"
    )
    print(f"actions: {dict(sorted(clients.actions.items()))}")
    print(f"requests: {total}; by status {dict(sorted(clients.statuses.items()))}")
    print(f"endpoint replies: {dict(sorted(model.counts.items()))}")
    print(f"jobs during the soak: {dict(sorted(states.items()))}")
    mib = [r / 1024 for r in rss]
    warm = min(round(warmup * 60), traffic_samples - 1)  # the sample at the warm-up's end
    after = mib[warm:traffic_samples]
    growth = after[-1] - after[0]
    print(
        f"server memory (VmRSS, MiB): indexed {mib[0]:.0f}; after {warmup:g} min of warm-up "
        f"{after[0]:.0f}; then peak {max(after):.0f}, end of traffic {after[-1]:.0f}: "
        f"growth after warm-up {growth:+.1f} over {(len(after) - 1) / 60:.1f} min "
        f"(limit {args.max_growth:+g}); after the final indexing {mib[-1]:.0f}"
    )
    print("  each minute of traffic: " + ", ".join(f"{m:.0f}" for m in mib[:traffic_samples:60]))
    bounds = "LanceDB's defaults" if args.lance_defaults else "vidagent's"
    print(f"  LanceDB cache bounds: {bounds}; server settings {extra or 'default'}")
    print(f"5xx or dropped requests: {len(clients.errors)}")
    for line in clients.errors[:10]:
        print(f"  {line}")
    counts: Counter[str] = Counter()
    for rows in soaked.values():
        counts.update({table: len(found) for table, found in rows.items() if table != "stages"})
    print(f"library: {len(soaked)} videos, rows {dict(counts)}")
    print(f"library vs clean index: {'identical' if not problems else '; '.join(problems)}")
    if failed_final:
        print(f"final index jobs not done: {[j['error'] for j in failed_final]}")
    grew = growth > args.max_growth
    return 1 if clients.errors or problems or failed_final or grew else 0


if __name__ == "__main__":
    sys.exit(main())
