"""One benchmark question asked into a row.

:class:`VideoIndex` indexes each video a run needs once, whichever thread asks first;
:class:`QuestionRun` asks a question in the benchmark's form for the strategy, parses the answer
and scores it with the benchmark's own scorer, and records a failure in the row and in
``errors.log``. The run (:mod:`~vidagent.app.benchmarks.runner`) writes the rows; an executor's
worker returns them to the run that started it.
"""

from __future__ import annotations

import threading
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.app.asking import prepare
from vidagent.app.core import SessionCore
from vidagent.app.indexing import index_file
from vidagent.bench.answers import jsonable, parse_prediction
from vidagent.bench.rundir import ERRORS, TRACES, trace_name
from vidagent.exceptions import MediaError, UserError

if TYPE_CHECKING:
    from vidagent.agents.base import Agent, Answer, IndexPlan, Question
    from vidagent.bench.base import Benchmark, Sample


#: What every row records of its question's cost: frames sent (looked at by tools), the prompt
#: (input) and completion (output) tokens and their sum, model calls, steps, money and the
#: agent's seconds; ``latency_s``, ``capped`` and ``error`` are set on every row besides.
COST_FIELDS = (
    "steps",
    "frames",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "tokens",
    "cost_usd",
    "agent_seconds",
)


class VideoIndex:
    """Videos indexed into the run's Library at most once, from any thread.

    One video is indexed at a time, so two questions on one video never index it twice: a
    thread asking for a video another is indexing waits and gets its id. A video that cannot
    be indexed keeps its error, raised again for every question on it.
    """

    def __init__(self, session: SessionCore, plan: IndexPlan) -> None:
        self.session = session
        self.plan = plan
        self._lock = threading.Lock()
        self._done: dict[Path, str | MediaError] = {}

    def ensure(self, path: Path) -> str:
        """The video id of ``path``, indexed first through the strategy's plan if needed.

        Raises:
            MediaError: the file cannot be used as a video.
        """
        key = Path(path).resolve()
        with self._lock:
            if key not in self._done:
                result = index_file(self.session, key, plan=self.plan)
                self._done[key] = result.error or result.video.video_id  # type: ignore[union-attr]
            found = self._done[key]
        if isinstance(found, MediaError):
            raise found
        return found


class QuestionRun:
    """Asks a benchmark's questions with one agent into rows, from any number of threads.

    Args:
        bench: the benchmark (its prompt, answer parser and scorer).
        session: the Library and models the agent reads.
        agent: the strategy's agent (each question keeps its state in its own run).
        index: the run's videos, indexed once each.
        out: the run folder: each question's trace goes to ``traces/``, failures to
            ``errors.log``.
    """

    def __init__(
        self, bench: Benchmark, session: SessionCore, agent: Agent, index: VideoIndex, out: Path
    ) -> None:
        self.bench, self.session, self.agent = bench, session, agent
        self.index, self.out = index, out
        self._log_lock = threading.Lock()

    def row(self, sample: Sample) -> dict[str, Any]:
        """Ask one question; its row (a failure recorded in it, a UserError raised)."""
        from vidagent.trace import Trace

        trace = self.out / TRACES / trace_name(sample.id)
        # Every row names what it cost, a failed question's too (None: not known).
        row: dict[str, Any] = {"id": sample.id} | dict.fromkeys(COST_FIELDS)
        started = time.monotonic()
        try:
            question = self._question(sample)
            answer = self.agent.run(question, Trace(trace))
            row.update(self._answered(sample, answer))
            if row["error"] is not None:
                self._log_error(sample.id, row["error"])
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001 - one question's failure must not end a long run
            row.update(
                prediction=None,
                parsed=None,
                correct=None,
                score=None,
                capped=None,
                error=error_text(e),
            )
            row["correct"] = False if sample.answer is not None else None
            self._log_error(sample.id, e)
        row["latency_s"] = round(time.monotonic() - started, 3)
        row["trace"] = f"{TRACES}/{trace.name}" if trace.is_file() else None
        row["finished_at"] = utc_now()
        return row

    def _question(self, sample: Sample) -> Question:
        """The question the agent is asked: the benchmark's own form for the strategy where it
        has one (``strategy_question``: CrossVid's clips and frame folders for ``cvr``), else
        the sample's videos indexed, its question and options."""
        from vidagent.agents.base import Question

        special = getattr(self.bench, "strategy_question", None)
        if special is not None:
            asked = special(sample, self.agent.name, self.index.ensure)
            if asked is not None:
                return asked  # type: ignore[no-any-return]
        ids = [self.index.ensure(p) for p in sample.videos]
        prepare(self.session, self.agent, ids)
        choice = sample.task == "choice" and bool(sample.options)
        ground = getattr(self.bench, "GROUNDING", False)
        return Question(
            sample.question if choice or ground else self.bench.prompt(sample),
            tuple(ids),
            tuple(sample.options) if choice else (),
            "ground" if ground else "answer",
        )

    def _answered(self, sample: Sample, answer: Answer) -> dict[str, Any]:
        parsed = parse_prediction(sample, answer)
        correct, score = self._score(sample, parsed)
        totals = answer.trace.totals if answer.trace is not None else None
        row: dict[str, Any] = {
            "prediction": answer.text,
            "parsed": jsonable(parsed),
            "correct": correct,
            "score": score,
            "letter": answer.letter,
            "forced": answer.forced,
            "reason": answer.reason,
            # a budget (frames, tokens, seconds, money) or the step limit ended the search
            "capped": answer.reason.startswith("budget:") or answer.reason == "max_steps",
            "confidence": answer.confidence,
            "evidence": [e.to_list() for e in answer.evidence],
        }
        if answer.verification is not None:  # recorded, never applied: see Agent(published=)
            v = answer.verification
            row.update(
                abstained=v.abstained,
                unverified=v.unverified,
                support=round(v.support, 3),
                citations=[c.label for c in v.citations],
            )
        if totals is not None:
            row.update(
                steps=totals.steps,
                frames=totals.frames,
                model_calls=totals.model_calls,
                input_tokens=totals.input_tokens,
                output_tokens=totals.output_tokens,
                tokens=totals.input_tokens + totals.output_tokens,
                # None: a model of the run has no known price (the report says "no price")
                cost_usd=None if totals.unpriced else round(totals.cost_usd, 6),
                agent_seconds=round(totals.seconds, 3),
            )
        # A model that failed for good (an outage past the retries) gave a forced answer; the
        # row counts as failed so that a resume asks the question again.
        row["error"] = f"model error: {answer.note}" if answer.reason == "model_error" else None
        return row

    def _score(self, sample: Sample, parsed: Any) -> tuple[bool | None, float | None]:
        """Full marks, and the fraction of points, by the benchmark's own scorer."""
        if sample.answer is None:
            return None, None
        try:
            (outcome,) = self.bench.score([sample], {sample.id: parsed})
        except UserError:  # open answers need a judge: the report scores them
            return None, None
        return outcome.earned >= outcome.possible, round(outcome.earned / outcome.possible, 6)

    def _log_error(self, sample_id: str, error: Exception | str) -> None:
        text = (
            error
            if isinstance(error, str)
            else "".join(traceback.format_exception(type(error), error, error.__traceback__))
        )
        with self._log_lock, (self.out / ERRORS).open("a", encoding="utf-8") as f:
            f.write(f"--- {utc_now()} {sample_id}\n{text}")


def error_text(e: Exception) -> str:
    """An error as one row field: its type and message."""
    return f"{type(e).__name__}: {e}".strip()


def utc_now() -> str:
    """Now, in UTC, as ISO 8601 seconds (the times of rows and sessions)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
