"""Per-question budgets: steps, frames, tokens, seconds and money, and the meter that checks them.

When a budget runs out the loop does not fail: it stops searching and asks the model for a final
answer (one last call, which is allowed to go over). A model call under way when the time budget
runs out, or when the caller stops the run, is ended where its adapter can stop it
(:meth:`Meter.interrupt`, :mod:`vidagent.models.interrupt`). Defaults are generous for the papers'
settings (DVD: 15 steps, about 0.15 M tokens and $0.21 per question with o3; one global browse
looks at 250 frames and one frame inspection at up to 50).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from vidagent.exceptions import ConfigError


@dataclass(frozen=True)
class Budget:
    """Limits for one question; ``None`` means no limit.

    Attributes:
        steps: reasoning steps (model turns that may call tools); ``None``: the strategy's own
            limit (DVD 15, VideoAgent2 T = 5).
        frames: frames looked at by tools.
        tokens: input plus output tokens over every model call, tools' included.
        seconds: wall-clock time.
        cost_usd: money, from the configured prices.
    """

    steps: int | None = None
    frames: int | None = 2000
    tokens: int | None = 1_000_000
    seconds: float | None = 3600.0
    cost_usd: float | None = 5.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and not 0 < value < math.inf:  # nan too
                raise ConfigError(f"budget {f.name} must be a positive number, not {value}")

    def with_steps(self, default: int) -> Budget:
        """This budget with the strategy's step limit where none was given."""
        return self if self.steps is not None else dataclasses.replace(self, steps=default)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def spent(budget: str, used: float) -> str:
    """How much of ``budget`` was used, as printed: seconds to a tenth (not ``8.02035``)."""
    return f"{used:.1f}" if budget == "seconds" else f"{used:g}"


class BudgetExceeded(Exception):
    """Raised inside a run when a budget is spent; the loop turns it into a forced answer."""

    def __init__(self, budget: str, used: float, limit: float) -> None:
        super().__init__(f"{budget} budget exhausted ({spent(budget, used)} of {limit:g})")
        self.budget, self.used, self.limit = budget, used, limit


class Stopped(Exception):
    """Raised inside a run when its caller asked it to stop (``should_stop``); the run ends with
    the answer it has, its reason ``stopped``, and no further model call."""


class Meter:
    """What one run has spent so far, against its budget.

    Args:
        budget: the run's limits.
        should_stop: asked at every check; True stops the run there (:class:`Stopped`): how a
            caller (the HTTP API's cancel) ends a run without reaching into it.
    """

    def __init__(self, budget: Budget, should_stop: Callable[[], bool] | None = None) -> None:
        self.budget = budget
        self.should_stop = should_stop
        self.started = time.monotonic()
        self.steps = 0
        self.frames = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.model_calls = 0
        self._past_budgets = False  # a call allowed past every budget is under way

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def spent(self) -> dict[str, float]:
        return {
            "steps": self.steps,
            "frames": self.frames,
            "tokens": self.tokens,
            "seconds": self.seconds,
            "cost_usd": self.cost_usd,
        }

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` for the first budget that is spent.

        Steps are not checked here: ``steps`` counts the steps begun, and the step limit is the
        bound of the run's step loop (:meth:`vidagent.agents.run.Run.steps`), which ends with
        the strategy's own ``max_steps`` answer.

        Raises:
            Stopped: the caller asked the run to stop.
            BudgetExceeded: a budget is spent.
        """
        if self.should_stop is not None and self.should_stop():
            raise Stopped("stopped by the caller")
        for name, used in self.spent().items():
            if name == "steps":
                continue
            limit = getattr(self.budget, name)
            if limit is not None and used >= limit:
                raise BudgetExceeded(name, used, limit)

    @contextmanager
    def past_budgets(self) -> Iterator[None]:
        """A call allowed past every budget (a final answer, asked without :meth:`check`): the
        time budget does not end it while it runs (:meth:`interrupt`); a stop still does."""
        before, self._past_budgets = self._past_budgets, True
        try:
            yield
        finally:
            self._past_budgets = before

    def interrupt(self) -> None:
        """The check a model call asks while it runs (:mod:`vidagent.models.interrupt`): the
        caller's stop, and the time budget, except in a call allowed past it
        (:meth:`past_budgets`). Tokens and money are counted when a call ends, so only
        :meth:`check` sees them.

        Raises:
            Stopped: the caller asked the run to stop.
            BudgetExceeded: the time budget is spent.
        """
        if self.should_stop is not None and self.should_stop():
            raise Stopped("stopped by the caller")
        limit, used = self.budget.seconds, self.seconds
        if limit is not None and not self._past_budgets and used >= limit:
            raise BudgetExceeded("seconds", used, limit)
