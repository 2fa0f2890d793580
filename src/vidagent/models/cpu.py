"""The cores this process can get, so local models size their thread pools to them.

A local model that splits one computation over threads (llama.cpp, a BLAS product, an OpenVINO
or CTranslate2 graph) waits at a barrier after every step for its slowest thread, and its waiting
threads spin. With more threads than free cores, one thread is off its core for a scheduler
slice at each step and the others spin through it: beside one busy process on 2 cores a query
embedding on OpenBLAS's 2 threads took about 1,000 ms against 23 ms on one thread, and a
SmolLM2 call ran for minutes. Fewer threads than cores costs little by comparison; more than free
cores costs everything. Two numbers, measured here:

- :func:`cpu_share`, the cores this process *may* use: the smallest of ``OMP_NUM_THREADS`` (a
  process pool or Ray worker sets it to its share; a user may too), the CPUs of its affinity mask
  (``os.sched_getaffinity``: ``taskset``, a container's cpuset) and its cgroup's CPU quota
  (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, rounded up). Pools of
  independent workers (OCR, detection) size themselves from it: independent single-threaded
  workers share busy cores fairly and never wait for each other.
- :func:`cpu_free`, the cores of that share that are *free now*: the share less the cores that
  other processes kept busy over a recent window, rounded to the nearest core, at least 1. The
  busy time is the whole machine's (``/proc/stat``) less this process's own CPU time over the
  same window (``time.process_time``), so this process's own threads never count as load. The
  window is the time since the last measurement when that is between :data:`MIN_WINDOW` and
  :data:`STALE` seconds (no waiting: a model that runs call after call is measured over its own
  previous call); otherwise a probe waits :data:`PROBE` seconds. Computations that wait at
  barriers (llama.cpp, OpenVINO's and torch's intra-op pools, BLAS on large products) take it.

Where ``/proc/stat`` cannot be read (macOS, Windows), :func:`cpu_free` is the share. This
process's own other work is never load either: a process that runs several models at once
(ingest's overlapped stages) divides its share among them itself (Whisper takes half). Other
processes' demand beyond what they got is not seen: beside a busy process that our threads
crowded, it got less than a core, and the estimate rounds to the nearer whole core (2 cores,
our 2 threads and one busy loop: it got about 0.7 cores, free is 1.3, so 1).

:func:`blas_threads` sets the BLAS pools of this process (OpenBLAS, MKL, BLIS: numpy's
products) through ``threadpoolctl``, :func:`torch_threads` torch's; :func:`quiet_openmp` asks GNU and Intel OpenMP runtimes to
sleep rather than spin while they wait, and must run before the library that loads them.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["blas_threads", "cpu_free", "cpu_quota", "cpu_share", "quiet_openmp", "torch_threads"]

#: Seconds a probe waits when there is no recent measurement to compare with.
PROBE = 0.1
#: A window shorter than this (seconds) holds too few of ``/proc/stat``'s 10 ms ticks: the last
#: answer stands.
MIN_WINDOW = 0.25
#: A measurement older than this (seconds) says nothing of now: probe afresh.
STALE = 2.0

_CGROUP = Path("/sys/fs/cgroup")


def cpu_quota(root: Path = _CGROUP, proc_cgroup: Path = Path("/proc/self/cgroup")) -> int | None:
    """Whole cores this process's cgroup may use (its quota rounded up), or None without one.

    cgroup v2 writes ``"<quota> <period>"`` or ``"max <period>"`` in ``cpu.max`` of the
    process's group (``/proc/self/cgroup``'s ``0::<path>``); v1 writes ``cpu.cfs_quota_us``
    (``-1``: none) and ``cpu.cfs_period_us`` under ``cpu/``.
    """
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    own = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
    places = [root / own[0].lstrip("/")] if own else []
    for place in [*places, root]:
        try:
            quota, period = (place / "cpu.max").read_text().split()[:2]
        except (OSError, ValueError):
            continue
        if quota == "max":
            return None
        return _cores(quota, period)
    try:
        quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
        period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return None if quota.startswith("-") else _cores(quota, period)


def _cores(quota: str, period: str) -> int | None:
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def cpu_share() -> int:
    """The cores this process may use (module docstring): the smallest of ``OMP_NUM_THREADS``,
    the affinity mask and the cgroup quota, at least 1."""
    limits = [os.cpu_count() or 1]
    asked = os.environ.get("OMP_NUM_THREADS", "").strip()
    if asked.isdigit() and int(asked) > 0:
        limits.append(int(asked))
    if hasattr(os, "sched_getaffinity"):
        limits.append(len(os.sched_getaffinity(0)))
    quota = cpu_quota()
    if quota is not None:
        limits.append(quota)
    return max(1, min(limits))


@dataclass(frozen=True)
class Sample:
    """One reading: when, the machine's busy and total CPU seconds, and this process's."""

    at: float
    busy: float
    total: float
    own: float


def read_proc_stat(path: Path = Path("/proc/stat")) -> tuple[float, float] | None:
    """(busy, total) CPU seconds of the whole machine since boot, or None where unreadable.

    Busy is everything but idle and iowait; the first line (``cpu``) sums every CPU in ticks
    of ``SC_CLK_TCK``.
    """
    try:
        with path.open() as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = sum(ticks) / tick
    return total - (ticks[3] + ticks[4]) / tick, total


def free_cores(before: Sample, after: Sample, share: int) -> int:
    """Cores of ``share`` that other processes left free between two readings: the machine's
    cores less those busy with other processes' work over the window (the machine's busy cores
    less this process's), rounded to the nearest core, at least 1 and at most ``share``."""
    wall = after.at - before.at
    if wall <= 0 or after.total <= before.total:
        return share
    cores = (after.total - before.total) / wall  # the machine's CPUs as the kernel counts them
    busy = (after.busy - before.busy) / (after.total - before.total) * cores
    others = max(0.0, busy - (after.own - before.own) / wall)
    return max(1, min(share, math.floor(cores - others + 0.5)))


class _Meter:
    """:func:`cpu_free`'s state: the last reading and the last answer, under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: Sample | None = None
        self.answer: int | None = None

    def read(self) -> Sample | None:
        stat = read_proc_stat()
        if stat is None:
            return None
        return Sample(time.monotonic(), stat[0], stat[1], time.process_time())

    def free(self, share: int) -> int:
        with self.lock:
            now = self.read()
            if now is None:
                return share
            last = self.last
            if last is not None and now.at - last.at < MIN_WINDOW and self.answer is not None:
                return min(share, self.answer)
            if last is None or now.at - last.at > STALE:
                time.sleep(PROBE)
                last, now = now, self.read() or now
            self.last, self.answer = now, free_cores(last, now, share)
            return self.answer


_METER = _Meter()


def cpu_free(share: int | None = None) -> int:
    """The cores of ``share`` (default :func:`cpu_share`) that no other process is using now,
    at least 1 (module docstring). May wait :data:`PROBE` seconds; thread-safe."""
    return _METER.free(share or cpu_share())


def quiet_openmp() -> None:
    """Ask the OpenMP runtimes loaded after this call to sleep while they wait, not spin:
    ``OMP_WAIT_POLICY=PASSIVE`` (GNU and Intel) and ``KMP_BLOCKTIME=0`` (Intel; its default
    spins 200 ms after each parallel region). A value the user set is kept. Call it before
    importing llama.cpp, torch or CTranslate2; a runtime already loaded keeps its settings."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("KMP_BLOCKTIME", "0")


#: glibc's ``mallopt`` parameter number of ``M_ARENA_MAX``.
_M_ARENA_MAX = -8


def limit_malloc_arenas() -> None:
    """Let glibc's allocator keep one arena per core of :func:`cpu_share` (at least 2), not its
    default of eight per core, in this process (``mallopt``) and in those it starts
    (``MALLOC_ARENA_MAX``, which a value the user set overrides). Each thread that allocates
    while another holds an arena gets one of its own, and an arena keeps what its threads
    freed: ingest's threads (decoders, OCR engines, detectors, Whisper, LanceDB's runtime) held
    400 MB more that way over an hour of video (peak 2.35 GB against 1.94 GB, the same CPU
    time). Elsewhere than on glibc this does nothing."""
    arenas = os.environ.setdefault("MALLOC_ARENA_MAX", str(max(2, cpu_share())))
    if not sys.platform.startswith("linux") or not arenas.isdigit():
        return
    try:
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, int(arenas))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return


def torch_threads() -> None:
    """Size torch's intra-op pool (one per process) to the cores free now, where torch is
    loaded; the transformers adapters call it at each request."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    n = cpu_free()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


_BLAS: Any = None
_BLAS_LOCK = threading.Lock()


def blas_threads(n: int) -> None:
    """Size this process's BLAS pools (numpy's products) to ``n`` threads, if they differ.

    The pools are one per process, so the last caller's size holds for every thread until the
    next call: callers that run at once only change one another's speed, never a result. Without
    ``threadpoolctl`` the pools keep the size they were started with.
    """
    global _BLAS
    with _BLAS_LOCK:
        if _BLAS is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                _BLAS = ()
                return
            # The libraries loaded now (numpy's BLAS is, since callers hold numpy arrays).
            _BLAS = tuple(ThreadpoolController().select(user_api="blas").lib_controllers)
        for lib in _BLAS:
            if lib.num_threads != n:
                lib.set_num_threads(n)
