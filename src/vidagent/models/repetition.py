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
14 tokens, written to the cap inside a JSON string) is a longer unit, and so is a block of
lines (EEA's query prompt answered with ``[`` and then the prompt's own lines, 33 tokens, to the
1,024-token cap): a unit longer than the short ones and of at most
:attr:`~RepetitionGuard.long_unit` items (by default 8 short units: 64 tokens; a streamed
reply's guard takes 256 characters, as 33 tokens of such a line are 131-163 characters) is cut
once it has been written :data:`LONG_REPEATS` (5) times in a row, and the repeats fill at least
:attr:`~RepetitionGuard.long_span` items (2.5 spans: 160 tokens, 320 characters).

Thresholds are set so that text a user could want is never cut: a markdown table's rule of 20
dashes, a list of a dozen equal numbers or an indented block stays well below 64 tokens of one
short unit, and a sentence, a table row or a paragraph said 4 times is not cut at all;
anything longer is a loop the model does not leave on its own (greedy decoding never does;
sampled decoding rarely, and then late).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

__all__ = ["FINISH_REASON", "LONG_REPEATS", "RepetitionGuard"]

#: ``ChatResponse.finish_reason`` of a reply cut by a :class:`RepetitionGuard`.
FINISH_REASON = "repetition"
#: How many times in a row a long unit is written before it is cut.
LONG_REPEATS = 5


@dataclass
class RepetitionGuard:
    """Says when a growing sequence ends in ``span`` items of one unit of at most
    ``longest_unit`` items repeated (module docstring).

    Feed it the whole sequence so far (:meth:`degenerate`) or the items as they come
    (:meth:`add`); :attr:`tripped` stays True once it has said so.
    """

    span: int = 64
    longest_unit: int = 8
    #: The shortest tail and the longest unit of the check for long units; 0: 2.5 spans and
    #: 8 times ``longest_unit``.
    long_span: int = 0
    long_unit: int = 0
    tripped: bool = False
    _items: list[Hashable] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.longest_unit <= self.span // 2:
            raise ValueError("longest_unit must be between 1 and half the span")
        self.long_span = self.long_span or self.span * 5 // 2
        self.long_unit = self.long_unit or self.longest_unit * 8
        if self.long_unit < self.longest_unit:
            raise ValueError("long_unit must be at least longest_unit")

    def degenerate(self, items: Sequence[Hashable]) -> bool:
        """Whether ``items`` (a whole reply so far) ends in a repeated unit."""
        short = _periodic(items, 1, self.longest_unit, lambda _unit: self.span)
        if short or _periodic(
            items,
            self.longest_unit + 1,
            self.long_unit,
            lambda unit: max(self.long_span, LONG_REPEATS * unit),
        ):
            self.tripped = True
            return True
        return False

    def add(self, items: Sequence[Hashable]) -> bool:
        """Append the next ``items`` (tokens, or the characters of a text delta) and say whether
        the reply so far is degenerate; keeps only the items the checks can look at."""
        self._items.extend(items)
        del self._items[: -self.window]
        return self.degenerate(self._items)

    @property
    def window(self) -> int:
        """The most items of a reply's end the checks look at."""
        return max(self.span, self.long_span, LONG_REPEATS * self.long_unit)


def _periodic(
    items: Sequence[Hashable], shortest: int, longest: int, tail: Callable[[int], int]
) -> bool:
    """Whether the last ``tail(unit)`` of ``items`` repeat with a period of ``unit`` items,
    for a unit in [shortest, longest]. The tail is compared from its end, where a reply that
    is not looping differs first."""
    end = len(items)
    for unit in range(shortest, longest + 1):
        span = tail(unit)
        if end >= span and all(
            items[i] == items[i - unit] for i in range(end - 1, end - span + unit - 1, -1)
        ):
            return True
    return False
