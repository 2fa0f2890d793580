"""What runs inside a worker process: one session core (so one model hub, models loaded once)
for every task the worker is given. Plain classes: a Ray actor wraps them, a process pool keeps one
per process.

Every task is idempotent, which is what makes a retry after a killed worker safe:

- indexing a video again skips what its stages already wrote (each stage's per-clip
  fingerprints), and every write replaces the video's rows by key (``merge_insert`` under the
  Library's write lock), so a clip written before the kill is neither lost nor written twice;
- a question's row is returned to the driver, which alone appends it to the run folder, so a
  question cut off by a kill has no row until its retry returns one (its trace file is rewritten
  from the start).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.app.core import SessionCore
from vidagent.app.indexing import index_file, index_report
from vidagent.app.results import IndexReport

if TYPE_CHECKING:
    from vidagent.app.benchmarks import RunConfig
    from vidagent.bench.base import Sample
    from vidagent.config import Settings

#: A gate reached by the worker: ``(acquire, release)`` callables, or None for the hub's own
#: per-process limiter.
GateCalls = tuple[Any, Any] | None


def worker_session(
    settings: Settings, library: str, gate: GateCalls, rates: Mapping[str, float]
) -> SessionCore:
    """A session core on ``library`` whose hub asks ``gate`` before every remote request."""
    session = SessionCore(settings, library=library)
    if gate is not None:
        from vidagent.app.executors.gate import GatedLimiter

        # Before any client exists: clients take the hub's limiter when they are made.
        session.models.limiter = GatedLimiter(settings, gate[0], gate[1], rates)
    return session


class Tally:
    """Stages and clips finished so far by every worker: one instance in a Ray actor or a
    manager process, which workers add to and the driver's progress bar reads."""

    def __init__(self) -> None:
        self._stages = self._clips = 0

    def add(self, clips: int) -> None:
        """One stage ended, having processed ``clips`` clips."""
        self._stages += 1
        self._clips += clips

    def read(self) -> tuple[int, int]:
        """``(stages, clips)`` so far."""
        return self._stages, self._clips


class IndexWorker:
    """Indexes whole videos into one Library, one at a time, with models loaded once."""

    def __init__(
        self,
        settings: Settings,
        library: str,
        gate: GateCalls = None,
        rates: Mapping[str, float] | None = None,
        tally: Callable[[int], Any] | None = None,
    ) -> None:
        from vidagent.ingest.speed import RUNS

        self.session = worker_session(settings, library, gate, rates or {})
        self._tally = tally
        RUNS.beside_others()  # its runs contend with the other workers': they teach no speed

    def pid(self) -> int:
        return os.getpid()

    def index(self, path: str, stages: Sequence[str] | None) -> IndexReport:
        """Index ``path`` (resuming what an earlier, killed attempt left) and report it; each
        stage's clips go to the tally as the stage ends."""
        tally = self._tally
        on_stage = (lambda run: tally(run.clips)) if tally is not None else None
        result = index_file(self.session, path, stages=stages, on_stage=on_stage)
        if result.error is not None:  # as text: MediaError does not pickle
            return IndexReport(Path(path), error=str(result.error))
        return index_report(self.session, Path(path), result)

    def close(self) -> None:
        self.session.close()


class QuestionWorker:
    """Answers a benchmark's questions into one run folder with one agent and hub."""

    def __init__(
        self,
        config: RunConfig,
        settings: Settings,
        library: str,
        out: str,
        gate: GateCalls = None,
        rates: Mapping[str, float] | None = None,
    ) -> None:
        from vidagent.app.benchmarks import question_run  # bench modules: question workers only

        self.session = worker_session(settings, library, gate, rates or {})
        self.run = question_run(config, self.session, Path(out))

    def pid(self) -> int:
        return os.getpid()

    def answer(self, sample: Sample) -> dict[str, Any]:
        """The question's row (its error inside); a UserError is raised."""
        return self.run.row(sample)

    def close(self) -> None:
        self.session.close()
