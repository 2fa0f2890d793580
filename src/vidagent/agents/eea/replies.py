"""EEA's replies: the lenient readers of the reward model's, the query writer's and the policy's
JSON (spec B.7.6), and the schemas that constrain a local model's replies to the same forms."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from vidagent.agents.answer import extract_choice, option_letter


def json_value(text: str) -> Any:
    """The first JSON object or array in ``text`` (curly quotes normalised), or None."""
    text = text.translate(str.maketrans("’‘“”", "''\"\""))
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            try:
                return json.loads(text[start : end + 1])
            except json.JSONDecodeError:
                continue
    return None


def string_list(reply: str) -> list[str]:
    """Queries from a JSON array or a ``{"query1": ...}`` object (Table 10 asks for both)."""
    value = json_value(reply)
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return []
    return [str(v) for v in value if isinstance(v, (str, int, float))]


def parse_rewards(reply: str, ids: set[int]) -> dict[int, tuple[float, str]]:
    """``{"Segment 3": {"explanation": ..., "score": 40}}`` -> ``{3: (40.0, ...)}``, scores
    clamped to [0, 100]; keys that name no child are ignored."""
    value = json_value(reply)
    if not isinstance(value, dict):
        return {}
    out = {}
    for key, entry in value.items():
        found = re.search(r"-?\d+", str(key))
        if found is None or int(found.group()) not in ids:
            continue
        if isinstance(entry, dict):
            score, explanation = entry.get("score"), str(entry.get("explanation") or "")
        else:
            score, explanation = entry, ""
        value = to_number(score)
        if value is not None:
            out[int(found.group())] = (min(100.0, max(0.0, value)), explanation)
    return out


def to_number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    found = re.search(r"-?\d+(?:\.\d+)?", str(value or ""))
    return float(found.group()) if found else None


def parse_policy(reply: str, options: Sequence[str]) -> dict[str, Any] | None:
    """``{"segment": id}`` for a reply naming a segment (``{"Segment": 3}``, ``{Segment: 3}``),
    ``{"answer": text}`` for an answer, None for neither."""
    value = json_value(reply)
    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        if "segment" in lowered and to_number(lowered["segment"]) is not None:
            return {"segment": int(to_number(lowered["segment"]) or 0)}
        if "answer" in lowered and str(lowered["answer"]).strip():
            return answer_choice(str(lowered["answer"]), options)
    bare = re.search(r"\{\s*['\"]?segment['\"]?\s*:\s*(\d+)\s*\}", reply, re.IGNORECASE)
    if bare:
        return {"segment": int(bare.group(1))}
    if isinstance(value, dict):
        return None
    return answer_choice(reply, options)


def answer_choice(text: str, options: Sequence[str]) -> dict[str, Any] | None:
    text = text.strip()
    if options:
        return {"answer": text} if extract_choice(text, options) is not None else None
    return {"answer": text} if text else None


def answer_text(reply: str, options: Sequence[str]) -> str:
    choice = parse_policy(reply, options)
    return choice["answer"] if choice and "answer" in choice else reply.strip()


def reward_schema(ids: Sequence[int]) -> dict[str, Any]:
    entry = {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "score": {"type": "integer", "minimum": 0, "maximum": 100},
        },
        "required": ["explanation", "score"],
    }
    keys = [f"Segment {i}" for i in ids]
    return {"type": "object", "properties": {k: entry for k in keys}, "required": keys}


def policy_schema(leaves: Sequence[int], options: Sequence[str]) -> dict[str, Any]:
    answer: dict[str, Any] = {"type": "string"}
    if options:
        answer = {"type": "string", "enum": [option_letter(i) for i in range(len(options))]}
    answering = {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}
    if not leaves:
        return answering
    exploring = {
        "type": "object",
        "properties": {"Segment": {"type": "integer", "enum": sorted(leaves)}},
        "required": ["Segment"],
    }
    return {"anyOf": [exploring, answering]}
