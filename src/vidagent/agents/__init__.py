"""Agents: strategies that answer questions by calling tools over the index.

:mod:`.base` holds the one loop (budgets, tool calling, forced answer, trace); each strategy is a
module (``dvd``, ...). :func:`ask` is the front door: it indexes what is missing and runs one.
"""

from __future__ import annotations

from vidagent.agents.answer import extract_choice, format_options
from vidagent.agents.base import Agent, Answer, Question
from vidagent.budget import Budget
from vidagent.trace import Trace

__all__ = ["Agent", "Answer", "Budget", "Question", "Trace", "extract_choice", "format_options"]
