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

Every worker holds one session core (models loaded once per worker, not per task) on the same
Library, written through its process-safe write path. Remote endpoints are limited across all
workers by one :class:`~vidagent.app.executors.gate.EndpointGate` (a named Ray actor, or a
manager process for the pool). The driver shows one progress bar for the whole run and is the
only writer of a benchmark's run folder rows. The interface and the helpers the executors share
are in :mod:`~vidagent.app.executors.base`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from vidagent.app.executors.base import (
    TICK,
    TICK_S,
    Executor,
    library_location,
    progress_bar,
    worker_settings,
)
from vidagent.exceptions import ConfigError

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
