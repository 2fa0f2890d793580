"""Reading AgentCVR master replies: the one JSON object, and final answers in each task's format.

Split from :mod:`vidagent.agents.cvr.protocol` (which re-exports these names) to keep modules
short. Pure Python.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

AnswerFormat = Literal["letter", "letters", "order", "interval", "text"]
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class CvrFormatError(ValueError):
    """The master's reply is not one valid action; the message is a one-line reason."""


def strip_think(text: str) -> str:
    """``text`` without ``<think>...</think>`` (and without an unclosed think's opening part)."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    return text.strip()


def _json_objects(text: str) -> list[str]:
    """Top-level ``{...}`` spans, brace-balanced, ignoring braces inside strings."""
    spans, depth, start, in_str, escape = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def extract_json(text: str) -> dict[str, Any]:
    """The one JSON object of a reply: the whole reply, a fenced block, or one ``{...}`` in it.

    Raises:
        CvrFormatError: no object, an object that is not valid JSON, or more than one.
    """
    body = strip_think(text)
    fenced = re.findall(r"```(?:json)?\s*(.*?)```", body, flags=re.DOTALL)
    if len(fenced) == 1:
        body = fenced[0].strip()
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        spans = _json_objects(body)
        if not spans:
            raise CvrFormatError("the reply holds no JSON object") from None
        if len(spans) > 1:
            raise CvrFormatError(
                f"the reply holds {len(spans)} JSON objects; output only one"
            ) from None
        try:
            doc = json.loads(spans[0])
        except json.JSONDecodeError as e:
            raise CvrFormatError(
                f"the reply is not valid JSON ({e.msg}, character {e.pos})"
            ) from None
    if not isinstance(doc, dict):
        raise CvrFormatError("the reply must be one JSON object with action, thought and params")
    return doc


def number_param(value: Any, name: str) -> float:
    if isinstance(value, bool):
        raise CvrFormatError(f"{name} must be a number, not {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise CvrFormatError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(out):
        raise CvrFormatError(f"{name} must be a finite number")
    return out


def _letter(value: Any, count: int) -> str:
    text = value[0] if isinstance(value, list) and len(value) == 1 else value
    if not isinstance(text, str):
        raise CvrFormatError('final_answer must be one option letter, e.g. "C"')
    body = re.sub(r"^option\s+", "", text.strip(), flags=re.IGNORECASE)
    found = re.fullmatch(r"\(?([A-Za-z])\)?(?:[.):]\s*.*)?", body, flags=re.DOTALL)
    if not found:
        raise CvrFormatError(f"final_answer must be one option letter, not {text[:40]!r}")
    letter = found.group(1).upper()
    if LETTERS.index(letter) >= count:
        raise CvrFormatError(
            f"final_answer {letter!r} is not an option (A to {LETTERS[count - 1]})"
        )
    return letter


def _letters(value: Any, count: int) -> str:
    if isinstance(value, list):
        parts = [str(v) for v in value]
    elif isinstance(value, str):
        parts = [p for p in re.split(r"[\s,;/&+]+|\band\b", value.strip()) if p]
        if len(parts) == 1 and parts[0].isalpha():
            parts = list(parts[0])
    else:
        parts = []
    letters = sorted({_letter(p, count) for p in parts}) if parts else []
    if not letters:
        raise CvrFormatError('final_answer must be option letters, e.g. "AC"')
    if count <= len(LETTERS) and len(letters) == count and count > 1:
        raise CvrFormatError("select 1 to 3 options, not all of them")
    return "".join(letters)


def _order(value: Any, n: int) -> str:
    if isinstance(value, list):
        text = "->".join(str(v) for v in value)
    elif isinstance(value, str):
        text = value
    else:
        text = ""
    compact = re.sub(r"\s+", "", text)
    if not re.fullmatch(r"\d+(->\d+)+", compact):
        raise CvrFormatError('final_answer must be numbers and arrows only, e.g. "3->1->2"')
    numbers = [int(p) for p in compact.split("->")]
    if sorted(numbers) != list(range(1, n + 1)):
        raise CvrFormatError(f"final_answer must order each of the clips 1 to {n} once")
    return compact


def _interval_answer(value: Any) -> str:
    if isinstance(value, str):
        numbers = re.findall(r"\d+(?:\.\d+)?", value)
        value = [float(x) for x in numbers] if len(numbers) == 2 else None
    if not isinstance(value, list) or len(value) != 2:
        raise CvrFormatError("final_answer must be a [start, end] list of seconds")
    start, end = sorted(number_param(v, "final_answer") for v in value)
    if start == end or start < 0:
        raise CvrFormatError("final_answer must be a [start, end] interval with start < end")
    return json.dumps([start, end])


def normalise_answer(
    value: Any,
    fmt: AnswerFormat,
    *,
    videos: Sequence[object],
    options: Sequence[str] | None = None,
) -> str:
    """A ``final_answer`` in the task's written form: ``"C"``, ``"AC"``, ``"3->1->2"``,
    ``"[53.2, 57.8]"`` or the text.

    Raises:
        CvrFormatError: the answer does not fit the format.
    """
    if value is None:
        raise CvrFormatError("answer needs a final_answer")
    if fmt == "letter":
        return _letter(value, len(options) if options else len(LETTERS))
    if fmt == "letters":
        return _letters(value, len(options) if options else len(videos))
    if fmt == "order":
        return _order(value, len(videos))
    if fmt == "interval":
        return _interval_answer(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if not text.strip():
        raise CvrFormatError("final_answer is empty")
    if re.fullmatch(r"\s*\(?[A-Za-z]\)?\.?\s*", text):
        raise CvrFormatError("final_answer must be a descriptive paragraph, not a single letter")
    return text.strip()
