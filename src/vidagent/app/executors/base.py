"""What every executor shares: the :class:`Executor` interface the application layer calls, and
the helpers the pool and Ray executors build their workers with (the settings and Library
location workers open, the driver's one progress bar)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.exceptions import ConfigError

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.app.benchmarks import RunConfig
    from vidagent.app.core import SessionCore
    from vidagent.app.results import IndexReport
    from vidagent.bench.base import Sample
    from vidagent.config import Settings

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
