"""Degenerate replies: a small model stuck repeating one token or a few, cut early.

SmolLM2-135M given a long prompt sometimes answers ``{"plan": "1. 1. 1. 1. …`` until the token
cap: 512 tokens of nothing, each costing a decode step (on a busy 2-core machine, minutes).
:class:`RepetitionGuard` watches a reply as it grows and says when its tail is one short unit
repeated: the last :attr:`~RepetitionGuard.span` items are periodic with a period of at most
:attr:`~RepetitionGuard.longest_unit` items. Items are tokens (the llama.cpp adapter, 64 tokens
of units up to 8 tokens: at least 8 repeats of the unit) or characters (a streamed
OpenAI-compatible reply, whose tokens are not seen: 128 characters of units up to 16, since a
small model's loop is often one character a token). A reply
cut this way ends with ``finish_reason`` :data:`FINISH_REASON`, and its text is what was
generated up to the cut.

A sentence said over and over (``She finds online. And the writer who stories use ideas and.``,
14 tokens, written to the cap inside a JSON string) is a longer unit: the tail of
:attr:`~RepetitionGuard.long_span` items (2.5 spans: 160 tokens, 320 characters) periodic with
a period of at most :attr:`~RepetitionGuard.long_unit` items (4 units: 32 tokens, 64
characters) is cut too, so such a unit has been written at least 5 times.

Thresholds are set so that text a user could want is never cut: a markdown table's rule of 20
dashes, a list of a dozen equal numbers or an indented block stays well below 64 tokens of one
short unit, and a sentence or a table row said 4 times below 160 tokens of one long unit;
anything longer is a loop the model does not leave on its own (greedy decoding never does;
sampled decoding rarely, and then late).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

__all__ = ["FINISH_REASON", "RepetitionGuard"]

#: ``ChatResponse.finish_reason`` of a reply cut by a :class:`RepetitionGuard`.
FINISH_REASON = "repetition"


@dataclass
class RepetitionGuard:
    """Says when a growing sequence ends in ``span`` items of one unit of at most
    ``longest_unit`` items repeated (module docstring).

    Feed it the whole sequence so far (:meth:`degenerate`) or the items as they come
    (:meth:`add`); :attr:`tripped` stays True once it has said so.
    """

    span: int = 64
    longest_unit: int = 8
    #: The tail and the longest unit of the check for long units; 0: 2.5 spans, 4 units.
    long_span: int = 0
    long_unit: int = 0
    tripped: bool = False
    _items: list[Hashable] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.longest_unit <= self.span // 2:
            raise ValueError("longest_unit must be between 1 and half the span")
        self.long_span = self.long_span or self.span * 5 // 2
        self.long_unit = self.long_unit or self.longest_unit * 4
        if not self.longest_unit <= self.long_unit <= self.long_span // 2:
            raise ValueError("long_unit must be between longest_unit and half the long span")

    def degenerate(self, items: Sequence[Hashable]) -> bool:
        """Whether ``items`` (a whole reply so far) ends in a repeated unit."""
        if _periodic(items, self.span, 1, self.longest_unit) or _periodic(
            items, self.long_span, self.longest_unit + 1, self.long_unit
        ):
            self.tripped = True
            return True
        return False

    def add(self, items: Sequence[Hashable]) -> bool:
        """Append the next ``items`` (tokens, or the characters of a text delta) and say whether
        the reply so far is degenerate; keeps only the last ``long_span`` items."""
        self._items.extend(items)
        del self._items[: -max(self.span, self.long_span)]
        return self.degenerate(self._items)


def _periodic(items: Sequence[Hashable], span: int, shortest: int, longest: int) -> bool:
    """Whether the last ``span`` of ``items`` repeat with a period in [shortest, longest]."""
    if len(items) < span:
        return False
    tail = items[-span:]
    return any(
        all(tail[i] == tail[i - unit] for i in range(unit, span))
        for unit in range(shortest, longest + 1)
    )
