"""What a model turn decided, and the JSON-action protocol for models without native tool calls.

In JSON-action mode the toolbox's protocol text (:meth:`vidagent.tools.Toolbox.protocol`) is
appended to the system prompt, the reply is constrained by :meth:`Toolbox.action_schema`
(llama.cpp compiles it into a grammar), and :func:`parse_action` reads it; a reply that is not
a valid action gets :func:`format_reminder` and another try.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

FORMAT_RETRIES = 3


@dataclass(frozen=True)
class Action:
    """One tool call the model decided on; ``arguments`` is what it wrote (JSON text or object)."""

    id: str
    name: str
    arguments: Any

    @classmethod
    def new(cls, name: str, arguments: Any) -> Action:
        """An action with a fresh call id (for calls a strategy makes itself)."""
        return cls(f"call_{uuid.uuid4().hex[:8]}", name, arguments)


@dataclass(frozen=True)
class Decision:
    """A model turn: its reasoning, the tool calls it made (none: it answered in text)."""

    thought: str
    actions: tuple[Action, ...]
    text: str


class FormatFailure(Exception):
    """The model gave no valid action after every format retry."""


class RepeatedFailure(Exception):
    """The model made the same failing call too many times; the run ends with an answer."""


class StepsSpent(Exception):
    """The step limit passed without an answer; the agent forces one (reason ``max_steps``)."""


def parse_action(text: str) -> Decision | str:
    """A :class:`Decision` from a JSON-action reply, or the problem to remind the model of."""
    try:
        data = json.loads(_json_part(text))
    except json.JSONDecodeError as e:
        return f"the reply is not valid JSON ({e.msg}, character {e.pos})"
    if not isinstance(data, dict):
        return "the reply must be a JSON object"
    action = data.get("action")
    if not isinstance(action, dict) or not isinstance(action.get("name"), str):
        return 'the reply has no "action" object with a "name"'
    arguments = action.get("arguments", {})
    thought = data.get("thought", "")
    return Decision(
        thought if isinstance(thought, str) else json.dumps(thought),
        (Action.new(action["name"], arguments),),
        text,
    )


def _json_part(text: str) -> str:
    """The outermost ``{…}`` of a reply that wrapped its JSON in prose or a code fence."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def format_reminder(problem: str, *, short: bool = False) -> str:
    """What the model is told after an invalid reply; ``short``: the reply was cut off, and the
    model is asked for a short one."""
    again = "Reply again, briefly, with" if short else "Reply again with"
    return (
        f"Your last reply was not a valid action: {problem}. {again} exactly one JSON "
        'object: {"thought": "...", "action": {"name": "<function name>", "arguments": {...}}}'
    )


def final_answer_schema() -> dict[str, Any]:
    """The reply of a forced final answer in JSON mode."""
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 400}},
        "required": ["answer"],
    }
