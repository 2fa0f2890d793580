"""``--executor ray``: index videos and ask benchmark questions on a Ray cluster.

One actor per worker (``num_cpus=1`` each; as many as the cluster has CPUs unless ``--jobs``
says), each holding one Session, so models load once per actor. The driver keeps one task in
flight per actor and hands the next file or question to whichever actor finishes first
(``ray.wait``), so uneven videos balance themselves.

A killed worker: actors are created with ``max_restarts`` and ``max_task_retries``, so Ray
restarts the actor and runs its cut-off task again; the tasks are idempotent (see
:mod:`vidagent.app.executors.workers`). A task that still fails after the retries becomes that
video's error (or, for a question, an error row that a resume asks again) and its actor is
replaced; the run goes on.

Remote endpoints are limited across the cluster by one :class:`~vidagent.app.executors.gate.
EndpointGate` in a named, detached actor (``vidagent-endpoint-gate`` in namespace
``vidagent``): every driver and actor on the cluster shares it.

On a multi-machine cluster the video files, the Library (a shared path or an object store URI)
and, for benchmarks, the run folder must be reachable at the same paths from every node, and
every node needs vidagent installed (a ``runtime_env`` may ship it).

Ray is imported only here, when this executor starts.
"""

from __future__ import annotations

import logging
import socket
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.app.executors.base import (
    TICK,
    TICK_S,
    Executor,
    library_location,
    progress_bar,
    worker_settings,
)
from vidagent.exceptions import BackendMissingError, UserError

if TYPE_CHECKING:
    from vidagent.app.benchmarks import RunConfig
    from vidagent.app.core import SessionCore
    from vidagent.app.results import IndexReport
    from vidagent.bench.base import Sample

#: Restarts of a dead actor, and retries of the task it was running.
RETRIES = 3

#: ``ray.init`` options of a local cluster this executor starts. Ray runs its workers at
#: niceness 15 by default (to keep its own daemons responsive), which on a shared machine makes
#: the work itself a background job: beside two busy processes at niceness 0, indexing three
#: short videos took 108-129 s on 2 cores against 18 s idle, where the same work without Ray
#: slows by the share of the cores it gets. Workers here run at the driver's priority, as the
#: sequential and ``pool`` executors do. A cluster joined by ``--address`` keeps its own setting.
LOCAL_CLUSTER: dict[str, Any] = {
    "include_dashboard": False,
    "_system_config": {"worker_niceness": 0},
}


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BackendMissingError("ray (for --executor ray)", "ray") from None
    return ray


def _check_reachable(address: str | None) -> None:
    """Fail at once for ``HOST:PORT`` or ``ray://HOST:PORT`` that nothing answers on, where
    ``ray.init`` would retry for minutes.

    Raises:
        OSError: no TCP connection within 5 seconds.
    """
    if not address or address in ("auto", "local"):
        return
    host, _, port = address.split("://")[-1].rstrip("/").rpartition(":")
    if not port.isdigit():
        return  # not host:port: let Ray read it
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
        pass


class RayExecutor(Executor):
    """Workers as Ray actors.

    Args:
        address: a cluster to join (``auto``, ``ray://host:10001``, ``host:6379``); None joins
            the one this process already started, else starts a local cluster.
        workers: actors (default: the cluster's CPUs).
        rates: requests per second by remote endpoint (``"*"``: every one), cluster-wide.
        init: more keyword arguments of ``ray.init`` when this executor starts Ray (tests).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        rates: Mapping[str, float] | None = None,
        init: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(workers, rates)
        self.address = address
        self._init = dict(init or {})
        self._started = False
        self._gate: Any = None

    def start(self, wanted: int | None = None) -> int:
        ray = require_ray()
        from vidagent.app.executors.gate import GATE_NAME, NAMESPACE, EndpointGate

        if not ray.is_initialized():
            options: dict[str, Any] = {
                "namespace": NAMESPACE,
                "log_to_driver": False,
                "logging_level": logging.ERROR,
            }
            if self.address is None:  # a local cluster of our own
                options |= LOCAL_CLUSTER | self._init
            try:
                _check_reachable(self.address)
                ray.init(address=self.address, **options)
            except OSError as e:  # ConnectionError included
                raise UserError(f"cannot reach the Ray cluster at {self.address}: {e}") from None
            self._started = True
        if self._gate is None:
            self._gate = (
                ray.remote(EndpointGate)
                .options(
                    name=GATE_NAME,
                    namespace=NAMESPACE,
                    lifetime="detached",
                    get_if_exists=True,
                    num_cpus=0,
                    max_restarts=-1,
                    max_task_retries=-1,
                )
                .remote()
            )
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # An actor takes a CPU: more than the cluster has would wait forever to be placed.
        self.workers = min(cpus, self.requested or wanted or cpus)
        return self.workers

    def index(
        self,
        session: SessionCore,
        paths: Sequence[str | Path],
        *,
        stages: Sequence[str] | None = None,
        progress: bool = False,
        overrides: Mapping[str, Any] | None = None,
    ) -> Iterator[IndexReport]:
        ray = require_ray()
        from vidagent.app.executors.workers import IndexWorker, Tally
        from vidagent.app.results import IndexReport

        files = [str(Path(p).expanduser().resolve()) for p in paths]
        self.start(len(files))
        args = (worker_settings(session, overrides), library_location(session))

        def failed(item: tuple[Any, ...], why: str) -> IndexReport:
            return IndexReport(Path(item[0]), error=f"{item[0]}: {why}")

        tally = ray.remote(Tally).options(num_cpus=0).remote()

        def add(clips: int) -> None:  # in the worker; nothing waits on it
            tally.add.remote(clips)

        bar = progress_bar(len(files), "indexing", "video", progress)
        with bar:
            items = [(f, stages) for f in files]
            for report in self._map(IndexWorker, args, "index", items, failed, {"tally": add}):
                stages_done, clips = ray.get(tally.read.remote())
                bar.set_postfix(stages=stages_done, clip_stages=clips, workers=self.workers)
                if report is not TICK:
                    bar.update()
                    yield report
        ray.kill(tally)

    def answer(
        self,
        config: RunConfig,
        session: SessionCore,
        out: Path,
        samples: Sequence[Sample],
        progress: bool = False,
    ) -> Iterator[dict[str, Any]]:
        from vidagent.app.executors.workers import QuestionWorker

        self.start(len(samples))
        args = (config, session.settings, library_location(session), str(Path(out).resolve()))

        def failed(item: tuple[Any, ...], why: str) -> dict[str, Any]:
            sample = item[0]  # as a failed question's row in the thread pool: asked on resume
            return {
                "id": sample.id,
                "prediction": None,
                "parsed": None,
                "score": None,
                "correct": False if sample.answer is not None else None,
                "error": why,
                "latency_s": None,
                "trace": None,
                "finished_at": None,
            }

        bar = progress_bar(len(samples), "questions", "q", progress)
        with bar:
            for row in self._map(QuestionWorker, args, "answer", [(s,) for s in samples], failed):
                if row is not TICK:
                    bar.update()
                    yield row

    def _map(
        self,
        cls: type,
        args: tuple[Any, ...],
        method: str,
        items: Sequence[tuple[Any, ...]],
        failed: Callable[[tuple[Any, ...], str], Any],
        more: Mapping[str, Any] | None = None,
    ) -> Iterator[Any]:
        """``worker.method(*item)`` for every item on the actors, results as they finish, and
        :data:`TICK` every :data:`TICK_S` seconds without one."""
        ray = require_ray()
        from ray.exceptions import RayActorError, RayTaskError

        from vidagent.app.executors.gate import ray_gate_calls

        actor_class = ray.remote(cls).options(
            num_cpus=1, max_restarts=RETRIES, max_task_retries=RETRIES
        )
        gate = ray_gate_calls(self._gate)

        def make() -> Any:
            return actor_class.remote(*args, gate=gate, rates=self.rates, **(more or {}))

        actors = [make() for _ in range(min(self.workers, len(items)))]
        self.pids = ray.get([a.pid.remote() for a in actors])  # they are up: models load lazily
        queue, running = deque(items), {}

        def submit(slot: int) -> None:
            item = queue.popleft()
            running[getattr(actors[slot], method).remote(*item)] = (slot, item)

        for slot in range(len(actors)):
            submit(slot)
        try:
            while running:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=TICK_S)
                if not ready:
                    yield TICK
                    continue
                slot, item = running.pop(ready[0])
                ref = ready[0]
                try:
                    result = ray.get(ref)
                except RayActorError as e:  # died more than RETRIES times: give up on this item
                    actors[slot] = make()
                    result = failed(
                        item, f"its worker died {RETRIES + 1} time(s) ({type(e).__name__})"
                    )
                except RayTaskError as e:
                    if isinstance(e.cause, UserError):
                        raise e.cause from None
                    result = failed(item, f"{type(e.cause).__name__}: {e.cause}")
                yield result
                if queue:
                    submit(slot)
        finally:
            for actor in actors:
                ray.kill(actor, no_restart=True)

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False
        self._gate = None
