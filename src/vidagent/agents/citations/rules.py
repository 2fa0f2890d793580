"""Named rules: facts about a cited moment that its label does not state, each recorded as a
note on the citation. A rule never changes a label or an abstention: a label says what was
checked (the claim's words here), and a rule adds something else a person can confirm by
playing the span.

Every rule is registered in :data:`RULES` with where it came from and its test; its effect is
measured once on a part of ``benchmarks/citations.py``'s question set written after it
(``--rules``), and a rule stays only where its note is on wrong answers' citations more often
than on right ones' there.

The five label-demoting rules fitted on the first six parts of the question set (a bare value
on screen among its rivals, a span saying less of the claim than another, an option said away
from the question's words, speech for a question about what is shown, an option said before
another for a question about the last) are gone: each made a moment where the option's words
are said ``weak`` for reasons the label did not state, and on the parts written after them
they did not generalise (docs/strategies/index.md, "Checked citations").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidagent.agents.citations.claims import held

if TYPE_CHECKING:
    from vidagent.agents.citations.pieces import Piece
    from vidagent.agents.types import Claim


@dataclass(frozen=True)
class Rule:
    """A named fact about a cited moment.

    Attributes:
        name: the note's name, as it opens the note.
        origin: where the rule came from.
        test: the test that pins it.
        note: the note for ``(claim, piece)``, or None where the rule says nothing.
    """

    name: str
    origin: str
    test: str
    note: Callable[[Claim, Piece], str | None]


def other_option_here(claim: Claim, piece: Piece) -> str | None:
    """Another option's key words are all said or shown in the same piece: the moment holds
    more than one option, so it does not tell them apart."""
    here = held(piece.holds)
    pairs = zip(claim.others, claim.rivals, strict=False)
    others = [o for o, rival in pairs if rival and rival <= here]
    if not others:
        return None
    return "other-option-here: " + "; ".join(f'"{o}"' for o in others) + " is here too"


RULES: tuple[Rule, ...] = (
    Rule(
        "other-option-here",
        "stop 40's rival rule (an option the video also says among its rivals), kept as a fact "
        "rather than a demotion",
        "tests/agents/test_citations.py::test_a_moment_holding_another_option_says_so",
        other_option_here,
    ),
)


def notes(claim: Claim, piece: Piece) -> list[str]:
    """Every registered rule's note on ``piece`` cited for ``claim``."""
    return [n for rule in RULES if (n := rule.note(claim, piece)) is not None]
