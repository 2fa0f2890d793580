"""Where indexing and benchmark questions run: this process, a local process pool, or Ray.

- ``local`` (the default; no executor object): this process. :meth:`Session.index
  <vidagent.app.session.Session.index>` indexes one video after another, a benchmark's questions
  run on threads. ``sequential`` (the old name for ``index``) and ``threads`` (for ``bench run``)
  are accepted as aliases, so both commands take the same names.
- :class:`~vidagent.app.executors.pool.PoolExecutor` (``vidagent index --jobs N``): N worker
  processes on this machine, no Ray needed.
- :class:`~vidagent.app.executors.on_ray.RayExecutor` (``--executor ray [--address auto|
  ray://host:10001]``): one actor per worker on a Ray cluster (a local one is started when no
  address is given), retried by Ray when a worker dies.

The unit of work is a whole video, never a chunk of its clips: a video's stages write its rows in
per-video commits that replace stale rows (``put_clips`` drops the video's clip vectors), and
DVD's registry captions are a chain in which clip *i* reads the registry after clip *i - 1*, so
two workers on one video would undo or wait on each other. Long videos therefore parallelise
across videos, and within one video through each stage's own batching.

Every worker holds one session core (models loaded once per worker, not per task) on the same Library,
written through its process-safe write path. Remote endpoints are limited across all workers by
one :class:`~vidagent.app.executors.gate.EndpointGate` (a named Ray actor, or a manager process
for the pool). The driver shows one progress bar for the whole run and is the only writer of a
benchmark's run folder rows.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidagent.exceptions import ConfigError

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.app.benchmarks import RunConfig
    from vidagent.app.core import SessionCore
    from vidagent.app.results import IndexReport
    from vidagent.bench.base import Sample
    from vidagent.config import Settings

ExecutorKind = Literal["local", "pool", "ray"]
#: Older names of ``local``, still accepted: ``vidagent index`` called it ``sequential`` and
#: ``vidagent bench run`` called it ``threads``.
ALIASES: dict[str, ExecutorKind] = {"sequential": "local", "threads": "local"}
#: Every name ``--executor`` accepts: the kinds, then the aliases.
NAMES: tuple[str, ...] = ("local", "pool", "ray", *ALIASES)


def executor_kind(name: str) -> ExecutorKind:
    """The kind ``name`` (a kind or an alias) stands for.

    Raises:
        ConfigError: no such kind; the message lists them.
    """
    kind = ALIASES.get(name, name)
    if kind not in ("local", "pool", "ray"):
        raise ConfigError(f"unknown executor {name!r}; executors: local, pool, ray")
    return kind  # type: ignore[return-value]


#: What a worker loop yields when nothing finished for a while: time to refresh the progress.
TICK: Any = object()
#: Seconds between refreshes of the progress bar while workers are busy.
TICK_S = 0.5


class Executor:
    """Runs whole-video index tasks and benchmark questions on worker processes.

    Args:
        workers: worker processes (default: Ray's CPUs in the cluster, or 2 for a pool).
        rates: requests per second by remote endpoint (``"*"``: every one), across all workers.
    """

    name = "executor"

    def __init__(
        self, workers: int | None = None, rates: Mapping[str, float] | None = None
    ) -> None:
        if workers is not None and workers < 1:
            raise ConfigError(f"workers must be at least 1, not {workers}")
        self.requested = workers
        self.rates = dict(rates or {})
        self.workers = workers or 1
        #: Process ids of the workers as they started (tests kill them).
        self.pids: list[int] = []

    def start(self, wanted: int | None = None) -> int:
        """Connect or start what the workers need; returns how many workers will run."""
        raise NotImplementedError

    def index(
        self,
        session: SessionCore,
        paths: Sequence[str | Path],
        *,
        stages: Sequence[str] | None = None,
        progress: bool = False,
        overrides: Mapping[str, Any] | None = None,
    ) -> Iterator[IndexReport]:
        """Index each file on the workers, yielding a report per file as it finishes
        (``overrides``: index settings in place of the session's, a strategy's index plan)."""
        raise NotImplementedError

    def answer(
        self,
        config: RunConfig,
        session: SessionCore,
        out: Path,
        samples: Sequence[Sample],
        progress: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """Ask each question on the workers, yielding its row as it finishes (not written)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the workers this executor started."""

    def __enter__(self) -> Executor:  # noqa: PYI034 - not subclassed for the protocol
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def worker_settings(session: SessionCore, overrides: Mapping[str, Any] | None) -> Settings:
    """The settings workers index with: the session's, with a plan's ``overrides``."""
    settings = session.settings
    return settings.model_copy(update=dict(overrides)) if overrides else settings


def library_location(session: SessionCore) -> str:
    """The session's Library as every worker can open it: created here first (so workers do
    not race to create it), a local path made absolute."""
    uri = session.library.uri
    return uri if "://" in uri else str(Path(uri).expanduser().resolve())


def progress_bar(total: int, desc: str, unit: str, enabled: bool) -> tqdm:
    """The driver's one progress bar over every worker's finished tasks."""
    from tqdm import tqdm

    return tqdm(
        total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr, dynamic_ncols=True
    )


def make_executor(
    kind: str | None = None,
    *,
    jobs: int | None = None,
    address: str | None = None,
    rates: Mapping[str, float] | None = None,
) -> Executor | None:
    """The executor the CLI options name, or None to work in this process.

    Without a ``kind``: Ray when an ``address`` is given, a local pool of ``jobs`` processes
    when jobs > 1, else this process. With ``ray``, ``jobs`` is the number of actors. A kind
    may be given by an alias (:data:`ALIASES`).

    Raises:
        ConfigError: an unknown kind, jobs < 1, ``address`` without Ray, or jobs > 1 with
            ``local``.
    """
    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, not {jobs}")
    named = kind
    if kind is None:
        kind = "ray" if address else "pool" if (jobs or 1) > 1 else "local"
    kind = executor_kind(kind)
    if address and kind != "ray":
        raise ConfigError("--address names a Ray cluster; add --executor ray")
    if kind == "ray":
        from vidagent.app.executors.on_ray import RayExecutor

        return RayExecutor(address=address, workers=jobs, rates=rates)
    if kind == "pool":
        from vidagent.app.executors.pool import PoolExecutor

        return PoolExecutor(workers=jobs or 2, rates=rates)
    if (jobs or 1) > 1:
        raise ConfigError(
            f"--jobs {jobs} runs worker processes; it cannot be --executor {named or kind}"
        )
    return None


__all__ = [
    "ALIASES",
    "NAMES",
    "TICK",
    "TICK_S",
    "Executor",
    "ExecutorKind",
    "executor_kind",
    "library_location",
    "make_executor",
    "progress_bar",
    "worker_settings",
]
