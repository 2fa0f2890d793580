"""Agents: strategies that answer questions by calling tools over the index.

:mod:`.base` holds the immutable :class:`Agent` and how a run ends; :mod:`.run` one question's
state and the loop's machinery (steps, budgets, tool calls, events); :mod:`.actions` the
JSON-action protocol; each strategy is a module (``dvd``, ``videoagent2``), registered in
:mod:`.strategies`. The front door is the application layer (:func:`vidagent.app.ask`,
:class:`vidagent.app.Session`), which indexes what a strategy reads and runs it.
"""

from __future__ import annotations

from vidagent.agents.answer import extract_choice, format_options
from vidagent.agents.base import Agent, Answer, Question
from vidagent.budget import Budget
from vidagent.trace import Trace

__all__ = ["Agent", "Answer", "Budget", "Question", "Trace", "extract_choice", "format_options"]
