"""Tools: typed functions whose signature and docstring become the JSON schema models see.

A tool is a plain function ``fn(ctx: ToolContext, <arguments>) -> Observation`` with a
Google-style docstring. :func:`tool` checks it when it is registered (types, argument docs,
context, return type) and fails there with a :class:`TypeError`, never mid-run. Calling a
:class:`Tool` validates the model's raw arguments with pydantic; numbers and strings outside the
schema's bounds (``minimum``/``maximum``, ``maxLength``) are clamped into them and the
observation says so (:attr:`Observation.adjusted`); anything else that does not validate comes
back as an error :class:`Observation` the model can fix.

Whose fault an error is decides where it goes (see :mod:`vidagent.exceptions`): a
:class:`~vidagent.exceptions.ToolInputError`, :class:`~vidagent.exceptions.LibraryError` or
:class:`~vidagent.exceptions.MediaError` raised by the body is the call's problem and comes
back to the model, and so does a :class:`~vidagent.exceptions.ProviderError` of a model the
tool called (a refusal, a rejected request: the agent may try something else). Anything else,
``ValueError`` included, is our bug and propagates.

:class:`Toolbox` holds the tools an agent offers and builds what models without native tool
calling get instead: the JSON-action protocol text and its JSON schema
(:meth:`Toolbox.protocol`, :meth:`Toolbox.action_schema`).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import math
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, overload

import pydantic
from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema

from vidagent.exceptions import (
    LibraryError,
    MediaError,
    ProviderError,
    ToolInputError,
    VideoNotFoundError,
)
from vidagent.models.base import ToolSpec
from vidagent.timecode import parse_time
from vidagent.tools.options import ToolOptions

if TYPE_CHECKING:
    from vidagent.budget import Meter
    from vidagent.library import Library
    from vidagent.models.client import Models
    from vidagent.trace import Trace

# Raised by a tool body, these are the call's to fix: they come back as an error observation.
FIXABLE_ERRORS: tuple[type[Exception], ...] = (ToolInputError, LibraryError, MediaError)


@dataclass(frozen=True)
class Evidence:
    """A span of a video that an observation rests on, in seconds."""

    video_id: str
    t0: float
    t1: float

    def to_list(self) -> list[Any]:
        """``[video_id, t0, t1]``, the form traces and JSON bodies hold."""
        return [self.video_id, self.t0, self.t1]


@dataclass(frozen=True)
class Observation:
    """What a tool tells the model: text, plus what it rests on and what it cost.

    Attributes:
        text: The text the model reads.
        confidence: The tool's own confidence in ``[0, 1]``, when it has one.
        evidence: Spans of video the text rests on.
        frames: Frames looked at to produce it.
        model_calls: Model calls made to produce it.
        error: True when the call failed in a way the model can react to (bad arguments,
            a model that refused).
        adjusted: What was changed to fit a bound, in words: arguments moved into the schema's
            bounds, frames spliced further (or fewer measured) to fit a model's image limit.
    """

    text: str
    confidence: float | None = None
    evidence: tuple[Evidence, ...] = ()
    frames: int = 0
    model_calls: int = 0
    error: bool = False
    adjusted: tuple[str, ...] = ()


@dataclass
class ToolContext:
    """What tools share and the schema never shows: library, videos in scope, models, options,
    and the run's meter and trace (``None`` outside a run)."""

    library: Library
    models: Models | None
    video_ids: list[str]
    budget: Meter | None = None
    trace: Trace | None = None
    options: ToolOptions = field(default_factory=ToolOptions)
    _durations: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def require_models(self, role: str, tool: str) -> Models:
        """The model hub, for a tool that calls the ``role`` model.

        Raises:
            ToolInputError: this context has no models.
        """
        if self.models is None:
            raise ToolInputError(f"{tool} needs models (the {role} role); this context has none")
        return self.models

    def duration(self, video_id: str) -> float:
        """The video's duration in seconds, read from the Library once."""
        if video_id not in self._durations:
            self._durations[video_id] = self.library.get_video(video_id).duration
        return self._durations[video_id]

    def span(self, video_id: str) -> tuple[float, float]:
        """The part of the video the run may see: its window (a question asked with
        ``--last``/``--since``/``--until``: the Library is then a
        :class:`~vidagent.library.window.WindowedLibrary`), else ``(0, duration)``."""
        window = self.library.window(video_id)
        return window if window is not None else (0.0, self.duration(video_id))

    def resolve_video(self, ref: str | None) -> str:
        """A video id in scope from an id, unique id prefix or file name; ``None`` means the only one.

        Raises:
            ToolInputError: ``ref`` is None and there is not exactly one video in scope.
            VideoNotFoundError: ``ref`` names no video in scope; the message lists them.
        """
        choices = ", ".join(self.video_ids) or "none"
        if ref is None:
            if len(self.video_ids) == 1:
                return self.video_ids[0]
            raise ToolInputError(f"several videos are in scope ({choices}); say which one")
        if ref in self.video_ids:
            return ref
        prefixed = [v for v in self.video_ids if v.startswith(ref)]
        if len(prefixed) == 1:
            return prefixed[0]
        try:
            found = self.library.resolve(ref)
        except VideoNotFoundError:
            found = None
        if found in self.video_ids and found is not None:
            return found
        raise VideoNotFoundError(f"no video {ref!r} in scope; choose one of: {choices}")

    def clamp(self, video_id: str, t: float) -> float:
        """``t`` moved into the video's :meth:`span` (``[0, duration]`` unless windowed)."""
        start, end = self.span(video_id)
        return min(max(t, start), end)

    def clamp_span(self, video_id: str, t0: float, t1: float) -> tuple[float, float]:
        """``(t0, t1)`` in order and clamped into the video's :meth:`span`."""
        lo, hi = sorted((t0, t1))
        return self.clamp(video_id, lo), self.clamp(video_id, hi)


def _to_seconds(value: Any) -> float:
    # bool is an int to Python, not a time to a model: let parse_time reject it as text.
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    seconds = float(value) if number else parse_time(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{value!r} is not a time; use seconds or HH:MM:SS")
    return seconds


Seconds = Annotated[
    float,
    BeforeValidator(_to_seconds),
    WithJsonSchema({"type": ["number", "string"], "description": "seconds or HH:MM:SS"}),
]
"""A time argument: a number of seconds or ``HH:MM:SS`` / ``MM:SS`` / ``SS.s`` text."""


# ---------------------------------------------------------------------------------------------
# Registration

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (everything before the first section) and the ``Args:`` entries."""
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
        elif section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            entry = _ARG.match(line.strip())
            indent = len(line) - len(line.lstrip())
            if entry and (current is None or indent <= arg_indent):
                current, arg_indent = entry.group(1).lstrip("*"), indent
                args[current] = entry.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), args


def _strip_titles(schema: Any) -> Any:
    """The schema without pydantic's generated ``title`` keys (property names stay)."""
    if isinstance(schema, list):
        return [_strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        elif key in ("default", "enum", "const", "examples"):
            out[key] = value
        else:
            out[key] = _strip_titles(value)
    return out


def _arguments_model(
    name: str, fn: Callable[..., Any], hints: dict[str, Any], docs: dict[str, str]
) -> type[pydantic.BaseModel]:
    """A pydantic model of the arguments after ``ctx``.

    Fields get internal names and the parameter name as alias, so parameters called ``json``
    or ``schema`` do not clash with BaseModel attributes.
    """
    params = list(inspect.signature(fn).parameters.values())[1:]
    fields: dict[str, Any] = {}
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: parameter {p.name!r} cannot be *args or **kwargs")
        if p.name not in hints:
            raise TypeError(f"tool {name!r}: parameter {p.name!r} needs a type annotation")
        if not docs.get(p.name):
            raise TypeError(
                f"tool {name!r}: parameter {p.name!r} needs a description under 'Args:'"
            )
        default = ... if p.default is p.empty else p.default
        fields[f"arg{i}"] = (
            hints[p.name],
            Field(default, alias=p.name, description=docs[p.name]),
        )
    stale = set(docs) - {p.name for p in params} - {next(iter(inspect.signature(fn).parameters))}
    if stale:
        raise TypeError(f"tool {name!r}: 'Args:' documents unknown parameters {sorted(stale)}")
    # validate_default: a default such as "00:00:10" for a Seconds argument goes through parsing.
    config = ConfigDict(extra="forbid", validate_default=True)
    model: type[pydantic.BaseModel] = pydantic.create_model(
        f"{name}_arguments", __config__=config, **fields
    )
    return model


def _describe(schema: dict[str, Any]) -> str:
    """A JSON schema as a short type, for error messages: ``[time, time] | null``."""
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_describe(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == ["number", "string"]:
        return "time"
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(_describe(s) for s in schema["prefixItems"]) + "]"
        return f"list[{_describe(schema.get('items', {}))}]"
    return "|".join(kind) if isinstance(kind, list) else str(kind)


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The bounds of a property, looking inside ``anyOf`` (an optional number)."""
    found: dict[str, Any] = {
        k: schema[k] for k in ("minimum", "maximum", "maxLength") if k in schema
    }
    for sub in schema.get("anyOf", []):
        found |= _bounds(sub)
    return found


def clamp_to_schema(
    args: dict[str, Any], schema: dict[str, Any]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``args`` with numbers moved into their ``minimum``/``maximum`` and strings cut to their
    ``maxLength``, and a line for each change (a model that asks for ``top_k = 2e15`` gets the
    schema's maximum and is told so, instead of an error it may repeat)."""
    out, notes = dict(args), []
    for name, sub in schema.get("properties", {}).items():
        value, bounds = out.get(name), _bounds(sub)
        if isinstance(value, bool) or not bounds:
            continue
        if isinstance(value, (int, float)) and math.isfinite(value):
            low, high = bounds.get("minimum", -math.inf), bounds.get("maximum", math.inf)
            moved = min(max(value, low), high)
            if moved != value:
                out[name] = int(moved) if isinstance(value, int) else float(moved)
                notes.append(f"{name} = {value:g} is out of range; {moved:g} was used")
        elif isinstance(value, str) and len(value) > bounds.get("maxLength", len(value)):
            out[name] = value[: bounds["maxLength"]]
            notes.append(f"{name} was cut to its {bounds['maxLength']} characters")
    return out, tuple(notes)


class Tool:
    """A registered tool: call it with a context and the model's raw arguments."""

    def __init__(self, fn: Callable[..., Observation], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not fn.__doc__ or not fn.__doc__.strip():
            raise TypeError(f"tool {self.name!r} needs a docstring")
        self.description, docs = _parse_docstring(fn.__doc__)
        if not self.description:
            raise TypeError(f"tool {self.name!r}: the docstring needs a summary before 'Args:'")
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except NameError as exc:
            raise TypeError(f"tool {self.name!r}: cannot resolve an annotation: {exc}") from None
        params = list(inspect.signature(fn).parameters)
        if not params or hints.get(params[0]) is not ToolContext:
            raise TypeError(f"tool {self.name!r}: the first parameter must be 'ctx: ToolContext'")
        if hints.get("return") is not Observation:
            raise TypeError(f"tool {self.name!r} must be annotated to return Observation")
        self._model = _arguments_model(self.name, fn, hints, docs)
        self.schema: dict[str, Any] = _strip_titles(self._model.model_json_schema())
        self._presented: ToolSpec | None = None
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def spec(self) -> ToolSpec:
        """What a model receives: name, description and the argument schema."""
        return self._presented or ToolSpec(self.name, self.description, self.schema)

    def presented_as(self, spec: ToolSpec) -> Tool:
        """This tool shown to models with another schema (a paper's verbatim one).

        Arguments are still validated against the function's own signature, so the shown schema
        may be looser (DVD's ``items: {}``) but must name only real arguments and require every
        argument the function requires.

        Raises:
            TypeError: the spec names another tool, an unknown argument, or leaves out a
                required one.
        """
        props = set(spec.parameters.get("properties", {}))
        own = set(self.schema.get("properties", {}))
        required = set(self.schema.get("required", []))
        if spec.name != self.name or props - own or required - props:
            raise TypeError(
                f"spec {spec.name!r} does not fit tool {self.name!r}: unknown "
                f"{sorted(props - own)}, missing {sorted(required - props)}"
            )
        shown = copy.copy(self)
        shown._presented = spec
        return shown

    def signature(self) -> str:
        """A one-line summary of the arguments: ``search(query: string, top_k: integer = 16)``."""
        required = set(self.schema.get("required", []))
        parts = []
        for arg, sub in self.schema.get("properties", {}).items():
            default = "" if arg in required else f" = {json.dumps(sub.get('default'))}"
            parts.append(f"{arg}: {_describe(sub)}{default}")
        return f"{self.name}({', '.join(parts)})"

    def __call__(
        self, ctx: ToolContext, raw: Mapping[str, Any] | str | None = None, /, **kwargs: Any
    ) -> Observation:
        """Validate ``raw`` (a mapping or the JSON text a model wrote) and run the tool."""
        args, problems = self._parse(raw, kwargs)
        if problems:
            return self._invalid(problems)
        args, adjusted = clamp_to_schema(args, self.schema)
        try:
            values = self._model.model_validate(args)
        except pydantic.ValidationError as exc:
            return self._invalid([_problem(e) for e in exc.errors()])
        arguments = {
            info.alias or key: getattr(values, key)
            for key, info in self._model.model_fields.items()
        }
        try:
            result = self.fn(ctx, **arguments)
        except FIXABLE_ERRORS as exc:
            return Observation(text=f"{self.name} failed: {exc}", error=True, adjusted=adjusted)
        except ProviderError as exc:
            text = f"{self.name} failed: the model it calls gave an error ({type(exc).__name__}: {exc})"
            return Observation(text=text, error=True, adjusted=adjusted)
        if not isinstance(result, Observation):
            raise TypeError(f"tool {self.name!r} returned {type(result).__name__}, not Observation")
        if adjusted:
            note = "\n".join(f"(note: {a})" for a in adjusted)
            result = dataclasses.replace(
                result, text=f"{note}\n{result.text}", adjusted=adjusted + result.adjusted
            )
        return result

    def _parse(
        self, raw: Mapping[str, Any] | str | None, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], list[str]]:
        if isinstance(raw, str):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError as exc:
                return {}, [f"the arguments are not valid JSON ({exc})"]
        if raw is not None and not isinstance(raw, Mapping):
            return {}, [f"the arguments must be a JSON object, not {type(raw).__name__}"]
        return {**(raw or {}), **kwargs}, []

    def _invalid(self, problems: list[str]) -> Observation:
        lines = "\n".join(f"- {p}" for p in problems)
        return Observation(
            text=f"Invalid arguments for {self.name}:\n{lines}\nExpected: {self.signature()}",
            error=True,
        )


def _problem(error: Any) -> str:
    """One readable line for one pydantic error."""
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
    if error["type"] == "missing":
        return f"'{where}' is required"
    if error["type"] == "extra_forbidden":
        return f"'{where}' is not an argument of this tool"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"'{where}': {message} (got {error['input']!r})"


@overload
def tool(fn: Callable[..., Observation], *, name: str | None = None) -> Tool: ...


@overload
def tool(
    fn: None = None, *, name: str | None = None
) -> Callable[[Callable[..., Observation]], Tool]: ...


def tool(
    fn: Callable[..., Observation] | None = None, *, name: str | None = None
) -> Tool | Callable[[Callable[..., Observation]], Tool]:
    """Register a function as a tool: ``@tool`` or ``@tool(name="...")``.

    Raises:
        TypeError: no docstring, a parameter without a type or an ``Args:`` entry, a first
            parameter that is not ``ctx: ToolContext``, or a return type other than Observation.
    """
    if fn is None:
        return lambda f: Tool(f, name=name)
    return Tool(fn, name=name)


class Toolbox:
    """The tools an agent may call, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, t: Tool) -> None:
        """Add a tool; two tools with one name is a programming error.

        Raises:
            ValueError: a tool of that name is already in the box.
        """
        if t.name in self._tools:
            raise ValueError(f"two tools are named {t.name!r}")
        self._tools[t.name] = t

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec() for t in self._tools.values()]

    def protocol(self) -> str:
        """The JSON-action instructions for models without native tool calling."""
        lines = ["You can call these functions:"]
        for s in self.specs():
            params = s.parameters.get("properties", {})
            required = set(s.parameters.get("required", []))
            args = ", ".join(f"{k}{'' if k in required else '?'}" for k in params)
            lines.append(f"- {s.name}({args}): {s.description.strip()}")
            for k, sub in params.items():
                lines.append(f"    {k}: {sub.get('description', '').strip()}")
        lines.append(
            "Reply with exactly one JSON object and nothing else, of the form "
            '{"thought": "<your reasoning>", "action": {"name": "<function name>", '
            '"arguments": {<the function\'s arguments>}}}'
        )
        return "\n".join(lines)

    def action_schema(self) -> dict[str, Any]:
        """The JSON schema of one action; llama.cpp compiles it to a grammar the reply follows.

        Arguments follow each tool's own schema (exact types and bounds: DVD's shown schema has
        ``items: {}``), restricted to the arguments shown to the model, every one required so
        that a grammar-bound model writes each once.
        """
        choices = [
            {
                "type": "object",
                "properties": {"name": {"const": name}, "arguments": _closed(self[name])},
                "required": ["name", "arguments"],
            }
            for name in self.names
        ]
        return {
            "type": "object",
            "properties": {
                "thought": {"type": "string", "maxLength": 800},
                "action": {"anyOf": choices} if len(choices) > 1 else choices[0],
            },
            "required": ["thought", "action"],
        }

    def call(
        self, ctx: ToolContext, name: str, args: Mapping[str, Any] | str | None = None
    ) -> Observation:
        """Run the named tool; an unknown name comes back as an error observation."""
        if name not in self._tools:
            return Observation(
                text=f"Unknown tool {name!r}; available tools: {', '.join(self._tools)}",
                error=True,
            )
        return self._tools[name](ctx, args)


def _closed(t: Tool) -> dict[str, Any]:
    shown = t.spec().parameters.get("properties", {})
    own = t.schema.get("properties", {})
    properties = {k: own[k] for k in shown if k in own}
    return {"type": "object", "properties": properties, "required": list(properties)}


@tool
def answer(ctx: ToolContext, answer: str) -> Observation:
    """Call this function after confirming the answer of the user's question, and finish the conversation.

    Args:
        answer: Answer to the user's question.
    """
    return Observation(text=answer)
