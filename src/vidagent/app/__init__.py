"""The application layer: a :class:`Session` composes ingest, search, agents and benchmarks and
returns typed results with one JSON form; every front end is a thin shell over it.

Module functions (:func:`ask`, :func:`search`) are one-call conveniences that open a Session
for the configured settings and close it afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.app.asking import AskPlan
from vidagent.app.results import AskResult, SearchHit
from vidagent.app.session import Session
from vidagent.app.window import TimeWindow

if TYPE_CHECKING:
    from vidagent.agents.base import Answer, ToolMode
    from vidagent.budget import Budget
    from vidagent.config import Settings
    from vidagent.library import ClipHit, Library
    from vidagent.models.client import Models
    from vidagent.trace import Event

__all__ = ["AskPlan", "AskResult", "SearchHit", "Session", "TimeWindow", "ask", "search"]


def ask(
    videos: str | Path | Sequence[str | Path],
    question: str,
    *,
    options: Sequence[str] = (),
    strategy: str | None = None,
    settings: Settings | None = None,
    library: Library | str | Path | None = None,
    models: Models | None = None,
    budget: Budget | None = None,
    trace: str | Path | bool = True,
    on_event: Callable[[Event], None] | None = None,
    tool_mode: ToolMode = "auto",
    progress: bool = False,
    window: TimeWindow | None = None,
    **strategy_options: Any,
) -> Answer:
    """Answer a question about one or more videos (see :meth:`Session.ask`); ``strategy``
    defaults as there: ``dvd`` with a model endpoint, else the ``retrieval`` baseline.

    Returns:
        The :class:`~vidagent.agents.base.Answer`; ``answer.trace`` holds the run's events.
    """
    with Session(settings, library=library, models=models) as session:
        plan = session.plan_ask(
            videos,
            question,
            options=options,
            strategy=strategy,
            budget=budget,
            trace=trace,
            tool_mode=tool_mode,
            progress=progress,
            strategy_options=strategy_options,
            window=window,
        )
        result = plan.run(on_event)
    assert result.answer is not None
    return result.answer


def search(
    library: Library | str | None,
    query: str,
    *,
    videos: Sequence[str] | None = None,
    t_from: float | None = None,
    t_to: float | None = None,
    top: int = 10,
    settings: Settings | None = None,
    models: Models | None = None,
    window: TimeWindow | None = None,
) -> list[ClipHit]:
    """Clips most similar to ``query`` in meaning, best first (see :meth:`Session.search`)."""
    with Session(settings, library=library, models=models) as session:
        hits = session.search(
            query, videos=videos, t_from=t_from, t_to=t_to, top=top, window=window
        )
    return [h.hit for h in hits]
