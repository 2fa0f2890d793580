"""Agents: strategies that answer questions by calling tools over the index.

The shared runtime: :mod:`.types` the values every part of it imports (``Question``,
``Answer``, ``Verification``) and the one mapping from an answer to its trace event;
:mod:`.base` the immutable :class:`Agent`, the :class:`~.run.RunPolicy` it computes once per
question, and how a run ends; :mod:`.run` one question's state and the loop's machinery (steps,
budgets, tool calls, events); :mod:`.actions` the JSON-action protocol; :mod:`.answer` reading a
choice out of a reply; :mod:`.evidence` the retrieval pass that scores options by what the index
finds; :mod:`.citations` the citation checker; :mod:`.critic` the reader of cited moments;
:mod:`.looker` the frame looker both share; and :mod:`.strategies` the registry of strategy
names. Each strategy is a subpackage holding its
decisions, not plumbing: :mod:`.dvd`, :mod:`.videoagent2`, :mod:`.eea`, :mod:`.avi`, :mod:`.cvr`,
:mod:`.retrieval`.

An agent reads the index only through tools and its :class:`~vidagent.tools.index.IndexView`
(``tests/test_layers.py`` checks that no module here imports the Library, ingest or media, or
reads a ``.library``). The front door is the application layer (:func:`vidagent.app.ask`,
:class:`vidagent.app.Session`), which indexes what a strategy reads and runs it.
"""

from __future__ import annotations

from vidagent.agents.answer import extract_choice, format_options
from vidagent.agents.base import Agent, Answer, Question
from vidagent.budget import Budget
from vidagent.trace import Trace

__all__ = ["Agent", "Answer", "Budget", "Question", "Trace", "extract_choice", "format_options"]
