"""Citations a person can check: every answer's cited spans checked against the index, for
every strategy, in one place (:meth:`vidagent.agents.base.Agent.run` calls :func:`verify` on
the answer the strategy returned, before it is recorded).

Each label states what was checked and nothing more (:data:`~vidagent.trace.CITATION_LABELS`):
the claim's key words are said or shown here (``found``, with the quote at its own time), part
of them are (``partial``), none of what the index holds here matches (``not-found``), or the
claim is about what is seen and no vision model is configured (``unchecked``). Where a reader is
configured, the critic adds its verdict on whether each moment answers the question
(:mod:`vidagent.agents.critic`).

- :mod:`.claims`: the claims an answer makes and each one's key words;
- :mod:`.pieces`: what the index holds inside a span, each piece at its own time;
- :mod:`.check`: labels, quotes, the vision pass and the abstention verdict;
- :mod:`.rules`: named facts about a moment, recorded as notes (a registry);
- :mod:`.lexicon`: the word lists questions are read with, per language.

The checker takes explicit inputs (the question, the answer, the index, the embedder and a
frame looker) and no run: it can check a saved answer again (``benchmarks/citations.py
--recheck``).
"""

from __future__ import annotations

from vidagent.agents.citations.check import verify

__all__ = ["verify"]
