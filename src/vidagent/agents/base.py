"""The one agent loop every strategy builds on.

:class:`Agent` owns what strategies share: the message history, one model turn with tools
(:meth:`Agent.decide`: native tool calling where the model has it, else a JSON-action protocol
that llama.cpp enforces with a grammar compiled from the action's JSON schema, with up to
:data:`FORMAT_RETRIES` retries carrying a reminder), running a tool (:meth:`Agent.act`),
budgets (:class:`~vidagent.agents.budget.Meter`, checked before every step), the forced final
answer (:meth:`Agent.force_answer`), answer extraction and the trace. A strategy implements
:meth:`Agent.solve`; a ReAct strategy is a prompt, a toolbox and a call to :meth:`Agent.react`.

Evidence of an answer: the spans of the last observation before it that had any (at most
:data:`EVIDENCE_SPANS`, best first), which in a ReAct run is normally the frame inspection
that confirmed it or the best clips of the last search.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from vidagent.agents.answer import extract_choice, option_letter, question_with_options
from vidagent.agents.budget import Budget, BudgetExceeded, Meter
from vidagent.agents.trace import (
    AgentTurn,
    Answered,
    BudgetExhausted,
    FormatError,
    ModelCall,
    Observed,
    PhaseChanged,
    RunFinished,
    RunStarted,
    ToolCalled,
    Trace,
)
from vidagent.config import ROLES
from vidagent.exceptions import ConfigError
from vidagent.models.base import ChatRequest, ChatResponse, Message, ToolSpec
from vidagent.models.client import CallRecord, UsageLedger
from vidagent.tools.base import Evidence, Observation, Tool, Toolbox, ToolContext

if TYPE_CHECKING:
    from vidagent.library import Library
    from vidagent.models.client import Models

FORMAT_RETRIES = 3
EVIDENCE_SPANS = 5
ToolMode = Literal["auto", "native", "json"]


@dataclass(frozen=True)
class Question:
    """A question about one or more indexed videos; ``options`` make it multiple-choice."""

    text: str
    video_ids: tuple[str, ...]
    options: tuple[str, ...] = ()

    @property
    def prompt(self) -> str:
        """The question with its options as ``(A) …`` lines."""
        return question_with_options(self.text, self.options)


@dataclass(frozen=True)
class Answer:
    """What a run concluded.

    Attributes:
        text: the answer as the model gave it.
        choice: the chosen option's index for multiple choice, else ``None`` (also when the
            text names no option: then ``parsed`` is False).
        parsed: a multiple-choice answer named exactly one option, or an open answer is
            non-empty.
        forced: the model was asked for a final answer because steps or a budget ran out.
        reason: ``answered``, ``max_steps``, ``budget:<name>`` or ``format_errors``.
        confidence: the strategy's confidence, when it has one.
        evidence: video spans the answer rests on.
        trace: the run's events.
    """

    text: str
    choice: int | None = None
    parsed: bool = True
    forced: bool = False
    reason: str = "answered"
    confidence: float | None = None
    evidence: tuple[Evidence, ...] = ()
    trace: Trace | None = field(default=None, compare=False, repr=False)

    @property
    def letter(self) -> str | None:
        return option_letter(self.choice) if self.choice is not None else None


@dataclass(frozen=True)
class Action:
    """One tool call the model decided on; ``arguments`` is what it wrote (JSON text or object)."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True)
class Decision:
    """A model turn: its reasoning, the tool calls it made (none: it answered in text)."""

    thought: str
    actions: tuple[Action, ...]
    text: str


class FormatFailure(Exception):
    """The model gave no valid action after every format retry."""


class Agent:
    """Base of every strategy. Subclasses set ``name`` and ``max_steps`` and write :meth:`solve`.

    Args:
        library: the Library holding the videos.
        models: the model hub (roles ``llm``, ``vlm``, ``embed`` … as the strategy needs).
        budget: per-question limits (default :class:`Budget` with the strategy's step limit).
        tool_mode: ``auto`` uses native tool calling when the llm supports it, else JSON actions;
            ``native`` and ``json`` force one.
        max_tokens: output cap per reasoning turn (``None``: the model's own; JSON actions on
            local models default to 512 so a runaway thought cannot stall a CPU for minutes).
    """

    name: ClassVar[str] = ""
    max_steps: ClassVar[int] = 15
    #: Ingest stages the strategy reads; ``ask`` indexes only these.
    stages: ClassVar[tuple[str, ...]] = (
        "transcribe",
        "read_text",
        "detect",
        "caption",
        "embed",
        "summarize",
    )
    #: Sent (without tools) when a run must end without the model having answered.
    final_prompt: ClassVar[str] = "Answer the question now with the information you have."
    final_prompt_choice: ClassVar[str] = "Answer now with the option letter only."

    def __init__(
        self,
        library: Library,
        models: Models,
        *,
        budget: Budget | None = None,
        tool_mode: ToolMode = "auto",
        max_tokens: int | None = None,
    ) -> None:
        self.library = library
        self.models = models
        self.budget = (budget or Budget()).with_steps(self.max_steps)
        self.tool_mode = tool_mode
        self.max_tokens = max_tokens
        self.messages: list[Message] = []
        self._protocol = ""  # the JSON-action instructions, in JSON mode
        self.step = 0
        self._evidence: tuple[Evidence, ...] = ()

    # -- what strategies implement -------------------------------------------------------------

    def solve(self, question: Question) -> Answer:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Strategy settings recorded in the trace (ablations, thresholds)."""
        return {"tool_mode": self.tool_mode, "max_tokens": self.max_tokens}

    # -- the run ---------------------------------------------------------------------------------

    def run(self, question: Question, trace: Trace | None = None) -> Answer:
        """Answer ``question``; every event goes to ``trace`` (default: kept in memory)."""
        self.trace = trace if trace is not None else Trace()
        self.meter = Meter(self.budget)
        self.messages, self.step, self._evidence = [], 0, ()
        self._usage = [0, 0]  # input, output tokens of this run
        self.ctx = ToolContext(
            self.library, self.models, list(question.video_ids), budget=self.meter, trace=self.trace
        )
        try:
            answer = self._run(question)
        finally:
            self.trace.close()
        return dataclasses.replace(answer, trace=self.trace)

    def _run(self, question: Question) -> Answer:
        self.trace.emit(self._started(question))
        with UsageLedger.capture(self._on_call):
            try:
                answer = self.solve(question)
            except BudgetExceeded as e:
                self.emit(BudgetExhausted, budget=e.budget, used=e.used, limit=e.limit)
                answer = self.force_answer(question, f"budget:{e.budget}")
            except FormatFailure:
                answer = self.force_answer(question, "format_errors")
        self.emit(
            Answered,
            text=answer.text,
            choice=answer.choice,
            parsed=answer.parsed,
            forced=answer.forced,
            reason=answer.reason,
            confidence=answer.confidence,
            evidence=[[e.video_id, e.t0, e.t1] for e in answer.evidence],
        )
        m = self.meter
        self.emit(
            RunFinished,
            steps=m.steps,
            frames=m.frames,
            model_calls=m.model_calls,
            input_tokens=self._usage[0],
            output_tokens=self._usage[1],
            cost_usd=m.cost_usd,
            seconds=m.seconds,
        )
        return answer

    def _started(self, question: Question) -> RunStarted:
        from vidagent import __version__

        videos = []
        for vid in question.video_ids:
            record = self.library.get_video(vid)
            videos.append({"video_id": vid, "name": record.name, "duration": record.duration})
        return RunStarted(
            t=0.0,
            strategy=self.name,
            question=question.text,
            options=list(question.options),
            videos=videos,
            models={role: self._spec(role) for role in ROLES},
            budget=self.budget.to_dict(),
            settings=json.loads(json.dumps(self.describe())),  # as the JSONL line will hold it
            version=__version__,
            started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    def _spec(self, role: str) -> str:
        """The spec actually serving ``role`` for the roles agents call, else the configured one."""
        if role in ("llm", "vlm", "embed"):
            try:
                return self.models.client(role).spec
            except ConfigError:
                pass
        return self.models.settings.spec(role)

    def emit(self, kind: type[Any], **fields: Any) -> None:
        """Emit a trace event of ``kind`` stamped with the run's clock (and step, if it has one)."""
        if "step" in {f.name for f in dataclasses.fields(kind)}:
            fields.setdefault("step", self.step)
        self.trace.emit(kind(t=round(self.meter.seconds, 4), **fields))

    def phase(self, phase: str, **data: Any) -> None:
        """Record a strategy milestone (a plan, a confidence) in the trace."""
        self.emit(PhaseChanged, phase=phase, data=data)

    def _on_call(self, r: CallRecord) -> None:
        self.meter.model_calls += 1
        self.meter.tokens += r.input_tokens + r.output_tokens
        self.meter.cost_usd += r.cost_usd
        self._usage[0] += r.input_tokens
        self._usage[1] += r.output_tokens
        self.emit(
            ModelCall,
            role=r.role,
            spec=r.spec,
            operation=r.operation,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            cost_usd=r.cost_usd,
            latency_s=round(r.latency_s, 4),
            cached=r.cached,
            error=r.error,
        )

    # -- answers -----------------------------------------------------------------------------------

    def make_answer(
        self,
        text: str,
        question: Question,
        *,
        forced: bool = False,
        reason: str = "answered",
        confidence: float | None = None,
    ) -> Answer:
        """An :class:`Answer` from the model's text: the option extracted, never guessed."""
        text = text.strip()
        choice = extract_choice(text, question.options) if question.options else None
        parsed = choice is not None if question.options else bool(text)
        return Answer(
            text=text,
            choice=choice,
            parsed=parsed,
            forced=forced,
            reason=reason,
            confidence=confidence,
            evidence=self._evidence,
        )

    def force_answer(self, question: Question, reason: str) -> Answer:
        """One last call without tools asking for the answer (allowed past every budget)."""
        prompt = self.final_prompt_choice if question.options else self.final_prompt
        messages = [*self._request_messages(), Message("user", prompt)]
        client = self.models.client("llm")
        schema = None
        if self._mode() == "json":
            schema = {
                "type": "object",
                "properties": {"answer": {"type": "string", "maxLength": 400}},
                "required": ["answer"],
            }
        response = client.chat(
            ChatRequest(
                tuple(messages),
                response_schema=schema if client.capabilities.supports_json_schema else None,
                json_mode=schema is not None and not client.capabilities.supports_json_schema,
                max_tokens=self._turn_tokens(),
            )
        )
        text = response.text
        if schema is not None:
            try:
                text = str(json.loads(text).get("answer", text))
            except (json.JSONDecodeError, AttributeError):
                pass
        return self.make_answer(text, question, forced=True, reason=reason)

    # -- one model turn --------------------------------------------------------------------------

    def _mode(self) -> Literal["native", "json"]:
        if self.tool_mode != "auto":
            return self.tool_mode
        return "native" if self.models.client("llm").capabilities.supports_tools else "json"

    def _turn_tokens(self) -> int | None:
        if self.max_tokens is not None:
            return self.max_tokens
        local = self.models.client("llm").capabilities.local
        return 512 if local and self._mode() == "json" else None

    def _request_messages(self) -> list[Message]:
        """The history as sent: in JSON mode the system prompt also explains the protocol, and
        observations are elided, oldest first, where the model's context would overflow."""
        messages = list(self.messages)
        if self._mode() == "json" and self._protocol:
            head, *rest = messages
            if head.role == "system":
                messages = [Message("system", f"{head.text}\n\n{self._protocol}"), *rest]
            else:
                messages = [Message("system", self._protocol), *messages]
        context = self.models.client("llm").capabilities.context_tokens
        if context:
            messages = fit_context(messages, context - (self._turn_tokens() or 512))
        return messages

    def decide(self, toolbox: Toolbox) -> Decision:
        """One reasoning turn offering ``toolbox``; appends the model's turn to the history.

        Raises:
            BudgetExceeded: a budget is spent (checked before the call).
            FormatFailure: JSON-action mode got no valid action after every retry.
        """
        self.meter.check()
        if self._mode() == "native":
            decision = self._decide_native(toolbox.specs())
        else:
            decision = self._decide_json(toolbox)
        self.emit(
            AgentTurn,
            thought=decision.thought,
            tool_calls=[
                {"id": a.id, "name": a.name, "arguments": a.arguments} for a in decision.actions
            ],
            mode=self._mode(),
        )
        return decision

    def _decide_native(self, specs: Sequence[ToolSpec]) -> Decision:
        response = self.models.client("llm").chat(
            ChatRequest(
                tuple(self.messages),
                tools=tuple(specs),
                tool_choice="auto",
                max_tokens=self._turn_tokens(),
            )
        )
        self.messages.append(Message("assistant", response.text, tool_calls=response.tool_calls))
        actions = tuple(Action(c.id, c.name, c.arguments) for c in response.tool_calls)
        return Decision(response.text, actions, response.text)

    def _decide_json(self, toolbox: Toolbox) -> Decision:
        self._protocol = json_protocol(toolbox.specs())
        client = self.models.client("llm")
        schema = action_schema(toolbox)
        request_messages = self._request_messages()
        for attempt in range(FORMAT_RETRIES + 1):
            response: ChatResponse = client.chat(
                ChatRequest(
                    tuple(request_messages),
                    response_schema=schema if client.capabilities.supports_json_schema else None,
                    json_mode=not client.capabilities.supports_json_schema,
                    max_tokens=self._turn_tokens(),
                )
            )
            parsed = parse_action(response.text)
            if isinstance(parsed, Decision):
                # Failed attempts stay in the trace, not in the history the model sees next.
                self.messages.append(Message("assistant", response.text))
                return parsed
            self.emit(FormatError, attempt=attempt + 1, problem=parsed, reply=response.text)
            request_messages = [
                *request_messages,
                Message("assistant", response.text),
                Message("user", format_reminder(parsed)),
            ]
        raise FormatFailure(f"no valid action after {FORMAT_RETRIES} retries")

    # -- tools -----------------------------------------------------------------------------------

    def act(self, action: Action, toolbox: Toolbox) -> Observation:
        """Run one tool call, record it, and add its observation to the history."""
        arguments = action.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                pass  # the tool reports the bad JSON to the model
        self.emit(ToolCalled, call_id=action.id, tool=action.name, arguments=arguments)
        started = time.monotonic()
        obs = toolbox.call(self.ctx, action.name, arguments)
        self.meter.frames += obs.frames
        if obs.evidence and not obs.error:
            self._evidence = obs.evidence[:EVIDENCE_SPANS]
        self.emit(
            Observed,
            call_id=action.id,
            tool=action.name,
            text=obs.text,
            confidence=obs.confidence,
            evidence=[[e.video_id, e.t0, e.t1] for e in obs.evidence],
            frames=obs.frames,
            model_calls=obs.model_calls,
            error=obs.error,
            seconds=round(time.monotonic() - started, 4),
        )
        if self._mode() == "native":
            self.messages.append(
                Message("tool", obs.text, tool_call_id=action.id, name=action.name)
            )
        else:
            self.messages.append(Message("user", f"Observation from {action.name}:\n{obs.text}"))
        return obs

    def react(
        self,
        question: Question,
        toolbox: Toolbox,
        *,
        answer_tool: str = "answer",
        finish_prompt: str = "",
    ) -> Answer:
        """The ReAct loop: reason, call tools, observe, until the answer tool or the step limit.

        On the last step ``finish_prompt`` (if any) is added before the model's turn; when the
        limit passes without an answer, :meth:`force_answer` makes one more call without tools.
        Every tool call of one turn runs, in order, and counts towards that turn's step.
        """
        limit = self.budget.steps or self.max_steps
        for step in range(1, limit + 1):
            self.step = step
            if step == limit and finish_prompt:
                self.messages.append(Message("user", finish_prompt))
            decision = self.decide(toolbox)
            self.meter.steps = step
            if not decision.actions:
                return self.make_answer(decision.text, question)
            for action in decision.actions:
                obs = self.act(action, toolbox)
                # The answer tool echoes its argument; a bad call is an observation to fix.
                if action.name == answer_tool and not obs.error:
                    return self.make_answer(obs.text, question)
        return self.force_answer(question, "max_steps")


ELIDED = "[observation elided to fit the model's context window; call the tool again if needed]"


def _tokens(messages: Sequence[Message]) -> int:
    """A cautious token estimate: three characters per token (English runs about four)."""
    return sum(len(m.text) // 3 + 4 for m in messages)


def fit_context(messages: list[Message], limit: int) -> list[Message]:
    """``messages`` with the oldest observations replaced by a note until they fit ``limit``.

    The system prompt, the question and the latest message are never elided; a history that
    still does not fit goes as it is and the model's own error says so.
    """
    out = list(messages)
    for i, m in enumerate(out[:-1]):
        if _tokens(out) <= limit:
            break
        if i < 2 or ELIDED in m.text:
            continue
        if m.role == "tool":
            out[i] = dataclasses.replace(m, content=ELIDED)
        elif m.role == "user" and m.text.startswith("Observation from "):
            out[i] = dataclasses.replace(m, content=f"{m.text.split(chr(10), 1)[0]}\n{ELIDED}")
    return out


# ---------------------------------------------------------------------------------------------
# The JSON-action protocol (models without native tool calling)


def json_protocol(specs: Sequence[ToolSpec]) -> str:
    """The instructions appended to the system prompt in JSON-action mode."""
    lines = ["You can call these functions:"]
    for s in specs:
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


def action_schema(toolbox: Toolbox) -> dict[str, Any]:
    """The JSON schema of one action; llama.cpp compiles it to a grammar the reply must follow.

    Arguments follow each tool's own schema (exact types: DVD's shown schema has ``items: {}``),
    restricted to the arguments shown to the model, every one of them required so that a
    grammar-bound model writes each once.
    """
    choices = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": _closed(toolbox[name])},
            "required": ["name", "arguments"],
        }
        for name in toolbox.names
    ]
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": 800},
            "action": {"anyOf": choices} if len(choices) > 1 else choices[0],
        },
        "required": ["thought", "action"],
    }


def _closed(tool: Tool) -> dict[str, Any]:
    shown = tool.spec().parameters.get("properties", {})
    own = tool.schema.get("properties", {})
    properties = {k: own[k] for k in shown if k in own}
    return {"type": "object", "properties": properties, "required": list(properties)}


def parse_action(text: str) -> Decision | str:
    """A :class:`Decision` from a JSON-action reply, or the problem to remind the model of."""
    try:
        data = json.loads(_json_part(text))
    except json.JSONDecodeError as e:
        return f"the reply is not valid JSON ({e.msg} at character {e.pos})"
    if not isinstance(data, dict):
        return "the reply must be a JSON object"
    action = data.get("action")
    if not isinstance(action, dict) or not isinstance(action.get("name"), str):
        return 'the reply has no "action" object with a "name"'
    arguments = action.get("arguments", {})
    thought = data.get("thought", "")
    return Decision(
        thought if isinstance(thought, str) else json.dumps(thought),
        (Action(f"call_{uuid.uuid4().hex[:8]}", action["name"], arguments),),
        text,
    )


def _json_part(text: str) -> str:
    """The outermost ``{…}`` of a reply that wrapped its JSON in prose or a code fence."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def format_reminder(problem: str) -> str:
    return (
        f"Your last reply was not a valid action: {problem}. Reply again with exactly one JSON "
        'object: {"thought": "...", "action": {"name": "<function name>", "arguments": {...}}}'
    )
