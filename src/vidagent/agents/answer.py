"""Multiple-choice answers: option letters, and extracting the chosen option from free text.

:func:`extract_choice` is deliberately strict about ambiguity: when the text names two different
options, or none, it returns ``None`` and the answer is recorded as unparsable. It never guesses
(DVD's v2 changelog reports a parser bug on parenthesised answers that cost accuracy; the
benchmarks' strict scores count an unparsable answer as wrong).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_letter(index: int) -> str:
    """``0 -> "A"``."""
    return LETTERS[index]


def format_options(options: Sequence[str]) -> str:
    """Options one per line as ``(A) text``, the form the papers' prompts use."""
    return "\n".join(f"({option_letter(i)}) {text}" for i, text in enumerate(options))


#: How a grounding task (an event to find in time) reads as a question, for strategies
#: without a grounding mode of their own.
GROUND_QUESTION = (
    'When does this happen in the video: "{event}"? Answer with its start and end time in seconds.'
)


def question_with_options(question: str, options: Sequence[str]) -> str:
    """The question followed by its lettered options (nothing added when there are none)."""
    return f"{question}\n{format_options(options)}" if options else question


def _normalise(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def extract_choice(text: str, options: Sequence[str]) -> int | None:
    """The option a free-text answer chooses, or ``None`` when it names none or several.

    Accepted, in order of precedence: an explicit marker (``Answer: (C)``, ``the answer is C``,
    ``Option C``, ``Best option: C``); a reply that starts with a letter (``C``, ``(C)``,
    ``C.``, ``C) text``, ``**C**``); exactly one parenthesised letter anywhere (``... so (C)``);
    the text of exactly one option. Letters beyond the number of options do not count.

    Args:
        text: what the model wrote.
        options: the option texts, in letter order.
    """
    if not options:
        return None
    valid = LETTERS[: len(options)]
    clean = re.sub(r"[*_`#]", "", text).strip()
    marker = re.findall(
        rf"\b(?i:answer|option|choice)(?:\s+(?i:is))?\s*[:=]?\s*\(?([{valid}])\)?(?![A-Za-z0-9])",
        clean,
    )
    chosen = set(marker)
    if len(chosen) == 1:
        return valid.index(chosen.pop())
    if chosen:
        return None
    brackets = set(re.findall(rf"\(([{valid}])\)", clean))
    start = re.match(rf"^\(?([{valid}])\)?(?:$|[.):,\s])", clean)
    if start and not _is_article(clean, start):
        return valid.index(start.group(1)) if brackets <= {start.group(1)} else None
    if len(brackets) == 1:
        return valid.index(brackets.pop())
    if brackets:
        return None
    return _by_option_text(clean, options)


def _is_article(text: str, match: re.Match[str]) -> bool:
    """``A man walks`` starts with the article A, not option A."""
    return (
        match.group(0).rstrip() == "A"
        and not text.startswith("(")
        and bool(re.match(r"^A\s+[a-z]", text))
    )


def _by_option_text(text: str, options: Sequence[str]) -> int | None:
    """The one option whose normalised text appears in ``text`` (the longest when nested)."""
    said = f" {_normalise(text)} "
    found = [i for i, o in enumerate(options) if _normalise(o) and f" {_normalise(o)} " in said]
    # "a red car" also contains option "car": keep options not contained in another match.
    kept = [
        i
        for i in found
        if not any(j != i and _normalise(options[i]) in _normalise(options[j]) for j in found)
    ]
    return kept[0] if len(kept) == 1 else None
