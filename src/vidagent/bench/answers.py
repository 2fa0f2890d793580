"""Agent answers in the form each benchmark's scorer takes.

A multiple-choice answer is the option the agent's own extractor found
(:func:`vidagent.agents.answer.extract_choice`: strict, never a guess). The other forms are read
from the answer's text, as leniently as a reader would and no further: several option letters
(CrossVid's multi-select), an order of item numbers (``"2->3->1"``), an interval (the first two
times, in seconds or ``HH:MM:SS``), or free text. What cannot be read is ``None``: unanswered.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from vidagent.agents.answer import LETTERS
from vidagent.bench.base import Sample
from vidagent.timecode import parse_time

if TYPE_CHECKING:
    from vidagent.agents.base import Answer


def parse_prediction(sample: Sample, answer: Answer) -> Any:
    """The answer in the form the benchmark's scorer takes, or ``None`` when it names none.

    A choice is the option the agent's extractor found; several letters (``multi``), an order
    (``"2->3->1"``) and an interval (the first two times, in seconds or ``HH:MM:SS``) are read
    from the text; an open answer is the text itself.
    """
    if sample.task == "choice" and sample.options:
        return answer.choice
    text = re.sub(r"[*_`#]", "", answer.text).strip()
    if sample.task == "multi":
        return _letters(text, len(sample.options))
    if sample.task == "order":
        m = re.search(r"\d+(?:\s*(?:->|→|>|,)\s*\d+)+", text)
        return tuple(int(n) for n in re.findall(r"\d+", m.group(0))) if m else None
    if sample.task == "interval":
        return read_interval(text)
    return text or None


def _letters(text: str, n: int) -> tuple[int, ...] | None:
    valid = LETTERS[:n]
    if not valid:
        return None
    found = re.findall(rf"\(([{valid}])\)", text)
    if not found:
        m = re.search(
            rf"(?i:answers?|options?)\s*(?i:is|are)?\s*[:=]?\s*"
            rf"([{valid}](?:\s*(?:,|&|/|\band\b|\s)\s*[{valid}])*)(?![A-Za-z])",
            text,
        )
        whole = re.fullmatch(rf"([{valid}](?:\s*(?:,|&|/|\band\b|\s)?\s*[{valid}])*)\.?", text)
        said = m or whole
        found = re.findall(rf"[{valid}]", said.group(1)) if said else []
    return tuple(sorted({valid.index(c) for c in found})) or None


_TIME = re.compile(r"\d+(?::\d{1,2}){1,2}(?:\.\d+)?|\d+(?:\.\d+)?")


def read_interval(text: str) -> tuple[float, float] | None:
    """The first two times in ``text`` (seconds or ``HH:MM:SS``) as ``(start, end)``, in order."""
    times = [parse_time(t) for t in _TIME.findall(text)[:2]]
    return (min(times), max(times)) if len(times) == 2 else None


def jsonable(value: Any) -> Any:
    """Tuples as lists, for a JSON row (the prediction readers turn them back into tuples)."""
    return [jsonable(v) for v in value] if isinstance(value, tuple) else value
