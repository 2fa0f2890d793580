"""One question's run: its conversation, meter, trace and tool context.

An :class:`~vidagent.agents.base.Agent` is immutable configuration and may answer many
questions at once; everything that changes while one question is answered lives in a
:class:`Run`. The run owns what strategies share: step numbering with a budget check before
each step (:meth:`Run.steps`), event emission stamped with the run's clock, step and ids
(:meth:`Run.emit`), one model turn with tools (:meth:`Run.decide`: native tool calls, or JSON
actions with up to :data:`~vidagent.agents.actions.FORMAT_RETRIES` retries), running a tool
(:meth:`Run.act`), structured chat (:meth:`Run.chat`), the ReAct loop (:meth:`Run.react`) and
making answers (:meth:`Run.answer`). A strategy writes only its decisions.

Child runs (:meth:`Run.child`) are further conversations of the same question — a sub-agent, a
search branch — sharing the meter, trace and tool context, each with its own messages; their
events carry their own run id and the trace records the parent.

Failing the same way again: a tool call identical (same tool, same arguments) to one made
earlier in the run may not be run again; the model gets an observation saying so instead: that
it failed, and why, or that its result is above and unchanged (only repeats of failed calls,
unless the strategy's ``refuse_repeats`` is ``"all"``, as AVI's, or the llm is the embedded
smoke-test model, which loops on one call). When one call has failed, or been refused,
:data:`REPEAT_LIMIT` times, the last observation says so and the search ends with a forced
answer (:class:`~vidagent.agents.actions.RepeatedFailure`).

Evidence first (:meth:`Run.evidence_first`): where the strategy takes it and the
``evidence_first`` setting is on (``auto``: for the embedded smoke-test llm only), what the index
retrieves for the question and each option (:mod:`vidagent.agents.evidence`, the ``retrieval``
baseline's own search and scoring) is added to the conversation as one ``retrieval``
observation before the first step, and recorded as a tool call and its observation in the
trace. The strategy's prompts are unchanged; its spans are the answer's evidence until a later
observation has its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from vidagent.agents.actions import (
    FORMAT_RETRIES,
    Action,
    Decision,
    FormatFailure,
    RepeatedFailure,
    StepsSpent,
    format_reminder,
    parse_action,
)
from vidagent.agents.answer import extract_choice
from vidagent.agents.evidence import Finder, best, render_open, render_options, scope
from vidagent.agents.types import Answer
from vidagent.exceptions import LibraryError
from vidagent.models.base import ChatResponse, Message
from vidagent.models.repetition import FINISH_REASON
from vidagent.tools.base import Evidence, Observation, Toolbox, ToolContext
from vidagent.trace import AgentTurn, ChildStarted, FormatError, Observed, PhaseChanged, ToolCalled

#: Why a model stopped when its reply was cut off rather than finished: at the output token
#: limit, or by the repetition guard (:mod:`vidagent.models.repetition`).
CUT_OFF = frozenset({"length", FINISH_REASON})

if TYPE_CHECKING:
    from vidagent.agents.types import Question
    from vidagent.budget import Meter
    from vidagent.models.client import Client, Models
    from vidagent.tools.index import IndexView
    from vidagent.tools.options import ToolOptions
    from vidagent.trace import Event, Trace

#: The run whose model or tool call is in progress in this thread: the model calls it makes are
#: recorded under its id (a child run's calls under the child's).
ACTIVE: ContextVar[Run | None] = ContextVar("vidagent_active_run", default=None)

EVIDENCE_SPANS = 5
REPEAT_LIMIT = 3
REPEATED = (
    "This exact call has now failed {n} times with the same arguments; it will not work. "
    "The search ends here: answer with what you know."
)
REFUSED_FAILED = (
    "Error: this exact call already failed at step {step} and was not run again ({error}). "
    "Change the arguments or call another tool."
)
REFUSED_MADE = (
    "Error: this exact call was already made (step {step}); its result is above and unchanged. "
    "It was not run again: change the arguments or call another tool."
)
#: The reply to a native tool call that never ran (not from a paper).
NOT_RUN = "Not run: the search ended before this call (a budget was spent, or the run stopped)."


def answer_tool_calls(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with a reply to every native tool call that has none: a budget spent, or a
    stop, inside a step leaves its later calls (or the one under way) unanswered, and an
    OpenAI-compatible endpoint refuses such a history (400) for the forced answer after it."""
    out: list[Message] = []
    waiting: dict[str, str] = {}  # call id -> tool name

    def close() -> None:
        out.extend(Message("tool", NOT_RUN, tool_call_id=i, name=n) for i, n in waiting.items())
        waiting.clear()

    for m in messages:
        if m.role == "tool" and m.tool_call_id in waiting:
            del waiting[m.tool_call_id]
        else:
            close()
        out.append(m)
        if m.role == "assistant":
            waiting = {c.id: c.name for c in m.tool_calls}
    close()
    return out


@dataclass(frozen=True)
class RunPolicy:
    """How a strategy's runs go, computed once by the agent
    (:meth:`~vidagent.agents.base.Agent.policy`), so a run never asks the agent back.

    Attributes:
        name: the strategy's name (a run's name when it has none of its own).
        mode: ``native`` tool calls or ``json`` actions.
        turn_tokens: the output cap of a reasoning turn (None: the model's own).
        steps: the step limit (the budget's, else the strategy's ``max_steps``).
        refuse_repeats: identical calls refused: those that ``failed`` before, or ``all``.
        evidence_first: show the index's evidence before the first step.
        final_prompt: sent (without tools) when a run must end without an answer.
        final_prompt_choice: the same for a multiple-choice question.
    """

    name: str
    mode: Literal["native", "json"]
    turn_tokens: int | None
    steps: int
    refuse_repeats: Literal["failed", "all"] = "failed"
    evidence_first: bool = False
    final_prompt: str = "Answer the question now with the information you have."
    final_prompt_choice: str = "Answer now with the option letter only."


def call_key(name: str, arguments: Any) -> str:
    """What makes two tool calls identical: the tool and its (decoded) arguments."""
    if isinstance(arguments, str):  # the raw JSON a native tool call carries
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments)
    return f"{name}:{json.dumps(arguments, sort_keys=True, default=str)}"


class Run:
    """The state of one question (or of one child conversation of it).

    Attributes:
        policy: how the strategy's runs go.
        index: the index, read-only.
        models: the model hub.
        question: what is asked.
        messages: this conversation's history as the model sees it.
        step: the current step (shared numbering with the parent for a child run).
        evidence: the spans the latest successful observation rested on.
        ctx: the tool context (library, videos in scope, models, typed options, meter, trace).
    """

    def __init__(
        self,
        policy: RunPolicy,
        index: IndexView,
        models: Models,
        question: Question,
        trace: Trace,
        meter: Meter,
        *,
        tool_options: ToolOptions | None = None,
        parent: Run | None = None,
        name: str = "",
    ) -> None:
        self.policy, self.index, self.models = policy, index, models
        self.question, self.trace, self.meter = question, trace, meter
        self.id = uuid.uuid4().hex[:8]
        self.parent, self.name = parent, name or policy.name
        self.messages: list[Message] = []
        #: the toolbox whose protocol the last JSON-mode turn sent explained, and the system
        #: prompt the history held then (a strategy may change it: AVI's phases)
        self.protocol: tuple[Toolbox, str] | None = None
        self.step: int = parent.step if parent is not None else 0
        self.evidence: tuple[Evidence, ...] = ()
        self.ctx: ToolContext = (
            parent.ctx
            if parent is not None
            else index.context(question.video_ids, budget=meter, trace=trace, options=tool_options)
        )
        self.span = ""  # the tool call in progress: model calls made by the tool carry it
        self.state: Any = None  # the strategy's own per-question memory
        self._failures: Counter[str] = Counter()
        self._calls: dict[str, tuple[int, str | None]] = {}  # key: (step, its error or None)
        self._evidence_done = parent is not None  # a child conversation goes without
        #: At most this many steps in :meth:`steps` whatever the strategy asks (the critic's
        #: bounded second round), numbered on from ``step_base`` in the meter.
        self.step_limit: int | None = None
        self.step_base = 0

    # -- events ---------------------------------------------------------------------------------

    def emit(self, kind: type[Event], **fields: Any) -> None:
        """Emit a trace event of ``kind`` stamped with the run's clock, step and ids."""
        if "step" in {f.name for f in dataclasses.fields(kind)}:
            fields.setdefault("step", self.step)
        fields.setdefault("run", self.id)
        fields.setdefault("span", self.span)
        self.trace.emit(kind(t=round(self.meter.seconds, 4), **fields))

    def phase(self, phase: str, **data: Any) -> None:
        """Record a strategy milestone (a plan, a confidence, a phase) in the trace."""
        self.emit(PhaseChanged, phase=phase, data=data)

    def child(self, name: str, **data: Any) -> Run:
        """A new conversation under this run (a sub-agent, a search branch)."""
        run = Run(
            self.policy,
            self.index,
            self.models,
            self.question,
            self.trace,
            self.meter,
            parent=self,
            name=name,
        )
        self.emit(ChildStarted, child=run.id, parent=self.id, name=name, data=data)
        return run

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Make this run the one model calls in this thread are recorded under."""
        token = ACTIVE.set(self)
        try:
            yield
        finally:
            ACTIVE.reset(token)

    # -- steps ----------------------------------------------------------------------------------

    def steps(self, limit: int | None = None) -> Iterator[int]:
        """Step numbers ``1..limit`` (default: the budget's steps); every budget is checked
        before each step, so a spent budget raises :class:`~vidagent.budget.BudgetExceeded`
        there and the agent turns it into a forced answer."""
        last = limit if limit is not None else self.policy.steps
        if self.step_limit is not None:
            last = min(last, self.step_limit)
        for step in range(1, last + 1):
            self.meter.check()
            if step == 1:
                self.evidence_first()
            self.step = self.meter.steps = self.step_base + step
            yield step

    # -- the reasoning model ----------------------------------------------------------------------

    @property
    def llm(self) -> Client:
        return self.models.client("llm")

    def mode(self) -> Literal["native", "json"]:
        return self.policy.mode

    def chat(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        *,
        max_tokens: int | None = None,
        check: bool = True,
    ) -> str:
        """One reply of the reasoning model to ``messages``, following ``schema`` when given
        (structured output where the model has it, else JSON mode). Every budget is checked
        first unless ``check`` is False: a final answer, which may go past them, and which the
        time budget then does not cut while it runs (:meth:`Meter.past_budgets`).

        Raises:
            BudgetExceeded: a budget is spent.
            Stopped: the caller stopped the run (before the call, or while it ran).
        """
        return self.respond(messages, schema, max_tokens=max_tokens, check=check).text

    def respond(
        self,
        messages: list[Message],
        schema: dict[str, Any] | None = None,
        *,
        max_tokens: int | None = None,
        check: bool = True,
    ) -> ChatResponse:
        """:meth:`chat`'s whole response: its text and why the model stopped."""
        if check:
            self.meter.check()
        tokens = max_tokens if max_tokens is not None else self.policy.turn_tokens
        past = contextlib.nullcontext() if check else self.meter.past_budgets()
        with self.active(), past:
            return self.llm.structured(messages, schema, max_tokens=tokens)

    def request_messages(self, toolbox: Toolbox | None = None) -> list[Message]:
        """The history as sent: in JSON mode the system prompt also explains the protocol; in
        native mode every tool call has a reply (:func:`answer_tool_calls`)."""
        messages = list(self.messages)
        if self.mode() == "native":
            return answer_tool_calls(messages)
        if toolbox is None:
            return messages
        protocol = toolbox.protocol()
        if messages and messages[0].role == "system":
            return [Message("system", f"{messages[0].text}\n\n{protocol}"), *messages[1:]]
        return [Message("system", protocol), *messages]

    def final_messages(self, prompt: str) -> list[Message]:
        """The history and ``prompt``, for a last call without tools (a forced answer).

        A model whose reply the answer's schema binds (a local model's grammar) gets the last
        turn's system prompt as it was, the protocol included: a local model then evaluates only
        what followed its last turn rather than the whole history again (the embedded SmolLM2's
        forced answer after three DVD turns on a real clip: 1.5 s on one core, 15.2 s when its
        2,000 tokens were evaluated anew), and an endpoint's prompt cache keeps the prefix.
        Other models get the history without the protocol, whose form of reply the answer does
        not take.
        """
        keep = None
        if self.protocol is not None and self.llm.capabilities.supports_json_schema:
            toolbox, system = self.protocol
            keep = toolbox if system == self._system() else None
        return [*self.request_messages(keep), Message("user", prompt)]

    def _system(self) -> str:
        return self.messages[0].text if self.messages and self.messages[0].role == "system" else ""

    def decide(self, toolbox: Toolbox) -> Decision:
        """One reasoning turn offering ``toolbox``; appends the model's turn to the history.

        Raises:
            BudgetExceeded: a budget is spent (checked before the call).
            FormatFailure: JSON-action mode got no valid action after every retry.
        """
        self.meter.check()
        self.evidence_first()
        decision = (
            self._decide_native(toolbox) if self.mode() == "native" else self._decide_json(toolbox)
        )
        calls = [{"id": a.id, "name": a.name, "arguments": a.arguments} for a in decision.actions]
        self.emit(AgentTurn, thought=decision.thought, tool_calls=calls, mode=self.mode())
        return decision

    def _decide_native(self, toolbox: Toolbox) -> Decision:
        from vidagent.models.base import ChatRequest

        request = ChatRequest(
            tuple(self.request_messages()),
            tools=tuple(toolbox.specs()),
            tool_choice="auto",
            max_tokens=self.policy.turn_tokens,
        )
        with self.active():
            response = self.llm.chat(request)
        self.messages.append(Message("assistant", response.text, tool_calls=response.tool_calls))
        actions = tuple(Action(c.id, c.name, c.arguments) for c in response.tool_calls)
        return Decision(response.text, actions, response.text)

    def _decide_json(self, toolbox: Toolbox) -> Decision:
        """A JSON action, with up to :data:`FORMAT_RETRIES` retries. An invalid reply goes back
        to the model with what is wrong with it, except a reply cut off at the token limit
        (``finish_reason`` ``length`` or ``repetition``): sent back, it was continued or copied
        and cut again, every retry adding a cap's worth of tokens to the prompt (the embedded
        SmolLM2 on AVI's first turn: four replies cut at 512 tokens, the prompt growing from
        1,640 to 3,385). The retry after a cut asks for a short reply in its place."""
        schema, asked = toolbox.action_schema(), self.request_messages(toolbox)
        sent = asked
        for attempt in range(FORMAT_RETRIES + 1):
            response = self.respond(sent, schema)
            reply = response.text
            self.protocol = (toolbox, self._system())
            parsed = parse_action(reply)
            if isinstance(parsed, Decision):
                # Failed attempts stay in the trace, not in the history the model sees next.
                self.messages.append(Message("assistant", reply))
                return parsed
            if response.finish_reason in CUT_OFF:
                limit = self.policy.turn_tokens
                parsed = f"the reply was cut off at the {limit or 'output'}-token limit"
                sent = [*asked, Message("user", format_reminder(parsed, short=True))]
            else:
                reminder = Message("user", format_reminder(parsed))
                sent = [*sent, Message("assistant", reply), reminder]
            self.emit(FormatError, attempt=attempt + 1, problem=parsed, reply=reply)
        raise FormatFailure(f"no valid action after {FORMAT_RETRIES} retries")

    # -- tools ------------------------------------------------------------------------------------

    def act(self, action: Action, toolbox: Toolbox, *, remember: bool = True) -> Observation:
        """Run one tool call, record it, and add its observation to the history (unless
        ``remember`` is False: a strategy that keeps observations elsewhere, such as
        VideoAgent2's memory bank).

        Raises:
            RepeatedFailure: the same call failed :data:`REPEAT_LIMIT` times (after its
                observation was recorded and added to the history).
        """
        arguments = action.arguments
        if isinstance(arguments, str):
            with contextlib.suppress(json.JSONDecodeError):  # the tool reports bad JSON
                arguments = json.loads(arguments) if arguments.strip() else {}
        key = call_key(action.name, arguments)
        refused = self._refusal(key)
        if refused is not None:
            self.record(action, refused, remember=remember)
            return refused
        self.emit(ToolCalled, call_id=action.id, tool=action.name, arguments=arguments)
        started, self.span = time.monotonic(), action.id
        try:
            with self.active():
                obs = toolbox.call(self.ctx, action.name, arguments)
        finally:
            self.span = ""
        error = (obs.text.strip().splitlines() or ["an error"])[0][:200] if obs.error else None
        if key not in self._calls or error is not None:  # first made, or failed now
            self._calls[key] = (self.step, error)
        self.record(action, obs, time.monotonic() - started, remember=remember)
        return obs

    def _refusal(self, key: str) -> Observation | None:
        """The observation refusing an identical call that failed before (or, where the
        strategy refuses every repeat, was made before); None: run it."""
        if key not in self._calls:
            return None
        step, error = self._calls[key]
        if error is not None:
            return Observation(REFUSED_FAILED.format(step=step, error=error), error=True)
        if self.policy.refuse_repeats == "all":
            return Observation(REFUSED_MADE.format(step=step), error=True)
        return None

    def record(
        self, action: Action, obs: Observation, seconds: float = 0.0, *, remember: bool = True
    ) -> None:
        """Account for an observation, emit it and (``remember``) add it to the history.

        Raises:
            RepeatedFailure: the same call failed :data:`REPEAT_LIMIT` times (after its
                observation, which says so, was recorded).
        """
        repeated = self._count_failure(action.name, action.arguments, obs)
        if repeated:
            obs = dataclasses.replace(obs, text=f"{obs.text}\n{REPEATED.format(n=repeated)}")
        self.meter.frames += obs.frames
        if obs.evidence and not obs.error:  # a span the call named twice is evidence once
            self.evidence = tuple(dict.fromkeys(obs.evidence))[:EVIDENCE_SPANS]
        self.emit(
            Observed,
            call_id=action.id,
            tool=action.name,
            text=obs.text,
            confidence=obs.confidence,
            evidence=[e.to_list() for e in obs.evidence],
            frames=obs.frames,
            model_calls=obs.model_calls,
            error=obs.error,
            seconds=round(seconds, 4),
            adjusted=list(obs.adjusted),
        )
        if remember:
            if self.mode() == "native" and action.id in self._native_ids():
                message = Message("tool", obs.text, tool_call_id=action.id, name=action.name)
            else:
                message = Message("user", f"Observation from {action.name}:\n{obs.text}")
            self.messages.append(message)
        if repeated:
            raise RepeatedFailure(f"{action.name} failed {repeated} times with the same arguments")

    def _native_ids(self) -> set[str]:
        last = next((m for m in reversed(self.messages) if m.role == "assistant"), None)
        return {c.id for c in last.tool_calls} if last is not None else set()

    def _count_failure(self, name: str, arguments: Any, obs: Observation) -> int:
        """How often this exact call has failed, when that reaches the limit (else 0)."""
        if not obs.error:
            return 0
        key = call_key(name, arguments)
        self._failures[key] += 1
        return self._failures[key] if self._failures[key] >= REPEAT_LIMIT else 0

    # -- evidence first ---------------------------------------------------------------------------

    def evidence_first(self) -> None:
        """Add what the index retrieves for the question (and each option) to the conversation
        as one ``retrieval`` observation, once per question and before the first step, when the
        policy says so (:attr:`RunPolicy.evidence_first`). An index that
        cannot be searched (no clip vectors, another embedder) is a ``evidence_first`` phase
        saying why, and the run goes on without."""
        if self._evidence_done:
            return
        self._evidence_done = True
        if not self.policy.evidence_first:
            return
        q, finder = self.question, Finder(self.index)
        try:
            finder.check()
        except LibraryError as e:
            self.phase("evidence_first", shown=False, reason=str(e))
            return
        action = Action(
            "evidence_first", "retrieval", {"question": q.text, "options": list(q.options)}
        )
        self.emit(ToolCalled, call_id=action.id, tool=action.name, arguments=action.arguments)
        started, several = time.monotonic(), len(q.video_ids) > 1
        ids = scope(self.index, q)  # the one video the question names, if it names one
        with self.active():
            if q.options:
                scores = finder.videos(q.text, q.options, q.video_ids) or finder.options(
                    q.text, q.options, ids
                )
                text = render_options(q.options, scores, several)
                order = [*best(scores), *sorted(range(len(scores)), key=lambda i: -scores[i].score)]
                spans = dict.fromkeys(e for i in order for e in scores[i].spans)
                obs = Observation(text, evidence=tuple(spans))
            else:
                hits = finder.search(q.text, ids)
                spans = dict.fromkeys(Evidence(h.clip.video_id, h.clip.t0, h.clip.t1) for h in hits)
                obs = Observation(render_open(hits, several), evidence=tuple(spans))
        self.record(action, obs, time.monotonic() - started)

    def react(
        self, toolbox: Toolbox, *, answer_tool: str = "answer", finish_prompt: str = ""
    ) -> Answer:
        """The ReAct loop: reason, call tools, observe, until the answer tool or the step limit.

        On the last step ``finish_prompt`` (if any) is added before the model's turn; when the
        limit passes without an answer, :class:`~vidagent.agents.actions.StepsSpent` ends the
        search and the agent's forced answer makes one more call without tools. Every tool
        call of one turn runs, in order, and counts towards that turn's step.
        """
        limit = self.policy.steps
        for step in self.steps(limit):
            if step == limit and finish_prompt:
                self.messages.append(Message("user", finish_prompt))
            decision = self.decide(toolbox)
            if not decision.actions:
                return self.answer(decision.text)
            for action in decision.actions:
                obs = self.act(action, toolbox)
                # The answer tool echoes its argument; a bad call is an observation to fix.
                if action.name == answer_tool and not obs.error:
                    return self.answer(obs.text)
        raise StepsSpent(f"{limit} steps")

    # -- answers ----------------------------------------------------------------------------------

    def answer(
        self,
        text: str,
        *,
        forced: bool = False,
        reason: str = "answered",
        confidence: float | None = None,
        note: str = "",
    ) -> Answer:
        """An answer from the model's text: the option extracted, never guessed."""
        text, options = text.strip(), self.question.options
        choice = extract_choice(text, options) if options else None
        return Answer(
            text=text,
            choice=choice,
            parsed=choice is not None if options else bool(text),
            forced=forced,
            reason=reason,
            confidence=confidence,
            evidence=self.evidence,
            note=note,
        )
