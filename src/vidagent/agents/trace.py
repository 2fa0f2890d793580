"""Traces: every agent run as a stream of typed events, written as JSONL as it happens.

Each event is a frozen dataclass with a ``kind``; :func:`event_from_dict` rebuilds it from its
JSON line, so a trace round-trips without loss and replays offline (``vidagent replay``) through
the same :func:`render` the live display uses. Events, in the order a run emits them:

- :class:`RunStarted`: strategy, question, options, videos, model specs, budget, settings;
- :class:`ModelCall`: one call by any role (the agent's own and those inside tools), with
  tokens, latency and cost;
- :class:`AgentTurn`: what the reasoning model said at a step: thought and tool calls;
- :class:`FormatError`: a reply that was not a valid action, and the reminder sent back;
- :class:`ToolCalled` then :class:`Observed`: a tool call and what it returned;
- :class:`PhaseChanged`: a strategy's own milestones (a plan, a confidence, a phase);
- :class:`BudgetExhausted`: which budget ran out, before a forced answer;
- :class:`Answered` and :class:`RunFinished`: the answer and the run's totals.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

from vidagent.exceptions import UserError
from vidagent.timecode import clock


@dataclass(frozen=True)
class Event:
    """Base of every trace event; ``t`` is seconds since the run started."""

    kind: ClassVar[str] = ""
    t: float

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    strategy: str
    question: str
    options: list[str]
    videos: list[dict[str, Any]]  # {"video_id", "name", "duration"}
    models: dict[str, str]  # role -> spec
    budget: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)  # strategy options, ablations
    version: str = ""
    started_at: str = ""


@dataclass(frozen=True)
class ModelCall(Event):
    kind: ClassVar[str] = "model_call"
    role: str
    spec: str
    operation: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    cached: bool = False
    error: str | None = None


@dataclass(frozen=True)
class AgentTurn(Event):
    kind: ClassVar[str] = "agent_turn"
    step: int
    thought: str
    tool_calls: list[dict[str, Any]]  # {"id", "name", "arguments"}
    mode: str  # "native" | "json"


@dataclass(frozen=True)
class FormatError(Event):
    kind: ClassVar[str] = "format_error"
    step: int
    attempt: int
    problem: str
    reply: str


@dataclass(frozen=True)
class ToolCalled(Event):
    kind: ClassVar[str] = "tool_called"
    step: int
    call_id: str
    tool: str
    arguments: Any


@dataclass(frozen=True)
class Observed(Event):
    kind: ClassVar[str] = "observed"
    step: int
    call_id: str
    tool: str
    text: str
    confidence: float | None
    evidence: list[list[Any]]  # [video_id, t0, t1]
    frames: int
    model_calls: int
    error: bool
    seconds: float


@dataclass(frozen=True)
class PhaseChanged(Event):
    kind: ClassVar[str] = "phase"
    step: int
    phase: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BudgetExhausted(Event):
    kind: ClassVar[str] = "budget_exhausted"
    step: int
    budget: str
    used: float
    limit: float


@dataclass(frozen=True)
class Answered(Event):
    kind: ClassVar[str] = "answer"
    text: str
    choice: int | None
    parsed: bool
    forced: bool
    reason: str
    confidence: float | None
    evidence: list[list[Any]]


@dataclass(frozen=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    steps: int
    frames: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    seconds: float


EVENTS: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted, ModelCall, AgentTurn, FormatError, ToolCalled, Observed, PhaseChanged,
        BudgetExhausted, Answered, RunFinished,
    )
}  # fmt: skip


def event_from_dict(data: dict[str, Any]) -> Event:
    """The event a JSON line holds.

    Raises:
        ValueError: an unknown kind or fields that do not fit it.
    """
    fields = dict(data)
    cls = EVENTS.get(str(fields.pop("kind", "")))
    if cls is None:
        raise ValueError(f"unknown trace event kind {data.get('kind')!r}")
    try:
        return cls(**fields)
    except TypeError as e:
        raise ValueError(f"bad {cls.kind} event: {e}") from None


class Trace:
    """The events of one run, kept in memory and appended to a JSONL file as they happen.

    Args:
        path: where to write (created with its folder); ``None`` keeps the trace in memory.
        listeners: called with every event as it is emitted (the live display).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        listeners: Iterable[Callable[[Event], None]] = (),
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.events: list[Event] = []
        self.listeners = list(listeners)
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")

    def emit(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
            if self._file is not None:
                self._file.write(json.dumps(event.to_dict(), ensure_ascii=False) + "\n")
                self._file.flush()
        for listener in self.listeners:
            listener(event)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __iter__(self) -> Iterator[Event]:
        return iter(list(self.events))

    def of(self, kind: type[Event]) -> list[Any]:
        """The events of one type, in order."""
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def answer(self) -> Answered | None:
        found = self.of(Answered)
        return found[-1] if found else None

    @property
    def totals(self) -> RunFinished | None:
        found = self.of(RunFinished)
        return found[-1] if found else None

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """A trace read back from its JSONL file.

        Raises:
            UserError: the file is missing or a line is not a trace event (the message says which).
        """
        path = Path(path)
        if not path.is_file():
            raise UserError(f"{path}: no such trace file")
        trace = cls()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise UserError(f"{path}: not a vidagent trace event file (not text)") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                trace.events.append(event_from_dict(json.loads(line)))
            except (ValueError, AttributeError) as e:
                raise UserError(f"{path}:{n}: not a vidagent trace event ({e})") from None
        if not trace.events:
            raise UserError(f"{path}: the trace is empty")
        return trace


# ---------------------------------------------------------------------------------------------
# Rendering (live and replay share it)


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _spans(evidence: list[list[Any]], names: dict[str, str]) -> str:
    parts = []
    for video_id, t0, t1 in evidence:
        where = names.get(video_id, video_id[:12])
        parts.append(f"{where} {clock(round(t0, 1))}–{clock(round(t1, 1))}")
    return "; ".join(parts)


class Renderer:
    """Turns events into the lines a person reads; keeps the video names seen at the start.

    Args:
        width: observations and thoughts are cut to this many characters (0: never cut).
        calls: also show every model call (tokens, latency, cost).
    """

    def __init__(self, width: int = 160, calls: bool = False) -> None:
        self.width = width
        self.calls = calls
        self.names: dict[str, str] = {}
        self.options: list[str] = []

    def _cut(self, text: str) -> str:
        return _short(text, self.width) if self.width else text

    def __call__(self, e: Event) -> str | None:
        if isinstance(e, RunStarted):
            self.names = {v["video_id"]: v.get("name", v["video_id"]) for v in e.videos}
            self.options = list(e.options)
            videos = ", ".join(self.names.values())
            head = f"[{e.strategy}] {e.question}"
            opts = "".join(f"\n  ({chr(65 + i)}) {o}" for i, o in enumerate(e.options))
            return f"{head}{opts}\n  videos: {videos}; llm {e.models.get('llm', '?')}"
        if isinstance(e, AgentTurn):
            thought = f"\nstep {e.step} · thought: {self._cut(e.thought)}" if e.thought else ""
            return thought.lstrip("\n") or None
        if isinstance(e, ToolCalled):
            args = json.dumps(e.arguments, ensure_ascii=False)
            return f"step {e.step} → {e.tool} {self._cut(args)}"
        if isinstance(e, Observed):
            mark = "✗" if e.error else "←"
            extra = f" [confidence {e.confidence:.2f}]" if e.confidence is not None else ""
            frames = f" [{e.frames} frames]" if e.frames else ""
            return f"step {e.step} {mark} {self._cut(e.text)}{extra}{frames}"
        if isinstance(e, FormatError):
            return f"step {e.step} ✗ not a valid action (try {e.attempt}): {self._cut(e.problem)}"
        if isinstance(e, PhaseChanged):
            data = json.dumps(e.data, ensure_ascii=False) if e.data else ""
            return f"step {e.step} · {e.phase} {self._cut(data)}".rstrip()
        if isinstance(e, BudgetExhausted):
            return f"budget '{e.budget}' exhausted ({e.used:g} of {e.limit:g}): forcing an answer"
        if isinstance(e, ModelCall):
            if not self.calls:
                return None
            cost = f" ${e.cost_usd:.4f}" if e.cost_usd else ""
            return (
                f"  model {e.role} {e.spec}: {e.input_tokens}+{e.output_tokens} tokens "
                f"{e.latency_s:.2f}s{cost}{' (cached)' if e.cached else ''}"
            )
        if isinstance(e, Answered):
            return render_answer(e, self.names, self.options)
        if isinstance(e, RunFinished):
            cost = f", ${e.cost_usd:.4f}" if e.cost_usd else ""
            return (
                f"{e.steps} steps, {e.frames} frames, {e.model_calls} model calls, "
                f"{e.input_tokens}+{e.output_tokens} tokens{cost}, {e.seconds:.1f} s"
            )
        return None


def render_answer(
    e: Answered, names: dict[str, str] | None = None, options: list[str] | None = None
) -> str:
    """The answer block: text with its option, how it ended, evidence spans."""
    text = e.text.strip()
    if e.choice is not None:
        letter = chr(65 + e.choice)
        option = options[e.choice] if options and e.choice < len(options) else ""
        if re.fullmatch(rf"\(?{letter}\)?\.?", text):
            text = f"({letter}) {option}".rstrip()
        elif not re.match(rf"^(?:\({letter}\)|{letter}(?:$|[.):]))", text):
            text = f"({letter}) {text}"
    lines = [f"answer: {text}"]
    if not e.parsed:
        lines.append("  (no option could be read from this answer: recorded as unparsable)")
    if e.forced:
        lines.append(f"  (forced final answer: {e.reason})")
    if e.confidence is not None:
        lines.append(f"  confidence: {e.confidence:g}")
    if e.evidence:
        lines.append(f"  evidence: {_spans(e.evidence, names or {})}")
    return "\n".join(lines)


def render(events: Iterable[Event], width: int = 160, calls: bool = False) -> Iterator[str]:
    """The lines of a whole trace, as the live display printed them."""
    renderer = Renderer(width, calls)
    for e in events:
        line = renderer(e)
        if line is not None:
            yield line
