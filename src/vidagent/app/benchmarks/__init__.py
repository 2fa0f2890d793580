"""Benchmarks in the application layer: a strategy run over a benchmark into a resumable run
folder (:mod:`~vidagent.app.benchmarks.runner`, each question asked in
:mod:`~vidagent.app.benchmarks.questions`), predictions scored and run folders reported
(:mod:`~vidagent.app.benchmarks.scoring`), and the runs saved under the home listed
(:mod:`~vidagent.app.benchmarks.runs`). The benchmarks themselves (loaders, prompts, official
scorers) and the run folder's format are :mod:`vidagent.bench`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidagent.app.benchmarks.runner import (
    AGENT_ROLES,
    RunConfig,
    RunSummary,
    Workers,
    endpoint_limits,
    question_run,
    run_benchmark,
    run_ladder,
)
from vidagent.app.benchmarks.runs import RunInfo, list_runs, run_info, runs_folder
from vidagent.app.benchmarks.scoring import (
    JUDGED_BENCHMARKS,
    benchmarks,
    compare,
    judge,
    report,
    score,
)

if TYPE_CHECKING:
    # re-exported (PEP 484) for the front ends, which import the app only
    from vidagent.bench.base import Scores as Scores

__all__ = [
    "AGENT_ROLES",
    "JUDGED_BENCHMARKS",
    "RunConfig",
    "RunInfo",
    "RunSummary",
    "Workers",
    "benchmarks",
    "compare",
    "endpoint_limits",
    "judge",
    "list_runs",
    "question_run",
    "report",
    "run_benchmark",
    "run_info",
    "run_ladder",
    "runs_folder",
    "score",
]
