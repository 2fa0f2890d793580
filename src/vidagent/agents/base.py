"""The base every strategy builds on: immutable configuration, validated options, one run loop.

An :class:`Agent` holds what does not change between questions: the Library, the model hub,
the budget, the tool mode and the strategy's options (a frozen dataclass, :attr:`Agent.Options`,
validated the same way for every strategy: an unknown or ill-typed option is a one-line
:class:`~vidagent.exceptions.ConfigError` naming the allowed ones). One Agent may answer many
questions at once: each :meth:`Agent.run` makes a :class:`~vidagent.agents.run.Run` holding that
question's messages, meter, trace and tool context, and the strategy's :meth:`Agent.solve`
writes only its decisions on it.

:meth:`Agent.run` owns how a run ends. A spent budget, a model that never produced a valid
action, the same failing call repeated, or an error of the reasoning model that the client's
retries could not cure (a 400 such as a content filter, a context overflow) all end in a forced
answer (:meth:`Agent.force_answer`) with the reason recorded; if that last call fails too, the
answer is empty, unparsed and says why. No question ends in a traceback for a model's sake;
a bug in our code still propagates.

Runtime settings every strategy takes beside its own options (``--set`` on the CLI, a key of
``options``): ``evidence_first`` (``auto``/``on``/``off``, default the ``evidence_first``
setting) shows the strategies that take it (:attr:`Agent.takes_evidence`) what the index
retrieves for the question before their first step (:meth:`Run.evidence_first`).

Evidence of an answer: the spans of the last observation before it that had any (at most
:data:`~vidagent.agents.run.EVIDENCE_SPANS`, best first), which in a ReAct run is normally the
frame inspection that confirmed it or the best clips of the last search.

Citations: whatever the strategy, :meth:`Agent.run` checks the answer's evidence spans against
the index before recording it (:mod:`vidagent.agents.citations`: each span labelled with what
was checked, ``found``, ``partial``, ``not-found`` or ``unchecked``, with its quote at its own
time) and applies the ``abstain`` policy (``auto``/``never``/``always-report``: a runtime key of
``options``, else the ``abstain`` setting, default ``auto``). With ``critic``
(``auto``/``on``/``off``; ``auto``: on when a vision model is configured; ``on``: also with a
text model, which reads the quotes alone) a reader says of each cited moment whether it answers
the question and, on a disagreement, the strategy answers once more with the reader's note
(:mod:`vidagent.agents.critic`). The benchmark harness builds its agents ``published=True``:
abstention is recorded but never changes an answer, the critic is off and no frames are looked
at, so a paper's configuration gives the answers it gave before.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pydantic

from vidagent.agents.actions import (
    FormatFailure,
    RepeatedFailure,
    StepsSpent,
    final_answer_schema,
)
from vidagent.agents.answer import option_letter
from vidagent.agents.citations import verify
from vidagent.agents.critic import READER_ABSTAINS, review, second_round, with_reader
from vidagent.agents.looker import FrameLooker, vision_model
from vidagent.agents.run import ACTIVE, Run, RunPolicy
from vidagent.agents.types import (
    ABSTAIN_POLICIES,
    INSUFFICIENT,
    AbstainPolicy,
    Answer,
    IndexPlan,
    Question,
    Verification,
    answered,
)
from vidagent.budget import Budget, BudgetExceeded, Meter, Stopped
from vidagent.exceptions import ConfigError, EndpointUnreachable, LibraryError, ProviderError
from vidagent.models.client import CallRecord, UsageLedger
from vidagent.models.interrupt import checked_calls
from vidagent.roles import ROLES
from vidagent.tools.index import IndexView
from vidagent.tools.options import ToolOptions
from vidagent.trace import Answered, BudgetExhausted, ModelCall, RunFinished, RunStarted, Trace

if TYPE_CHECKING:
    from vidagent.models.client import Client, Models
    from vidagent.tools.index import Store

__all__ = ["Agent", "Answer", "IndexPlan", "NoOptions", "Question", "RunPolicy"]

ToolMode = Literal["auto", "native", "json"]
Switch = Literal["auto", "on", "off"]
EvidenceFirst = Switch
CriticMode = Switch


@dataclass(frozen=True)
class NoOptions:
    """A strategy without options of its own."""


def _switch(name: str, given: Any) -> Switch:
    """A runtime switch's value (``auto``, ``on``, ``off``, or a bool); ConfigError otherwise."""
    modes: dict[Any, Switch] = {
        "auto": "auto",
        "on": "on",
        "off": "off",
        True: "on",
        False: "off",
    }
    value = modes.get(given) if isinstance(given, (str, bool)) else None
    if value is None:
        raise ConfigError(f"{name}: choose auto, on or off (got {given!r})")
    return value


class Agent:
    """Base of every strategy. Subclasses set ``name``, ``max_steps``, ``stages`` and
    ``Options`` and write :meth:`solve`.

    Args:
        library: the Library holding the videos; kept as ``agent.library`` for callers, while
            the strategy reads it only through tools and ``agent.index``
            (:class:`~vidagent.tools.index.IndexView`).
        models: the model hub (roles ``llm``, ``vlm``, ``embed`` … as the strategy needs).
        budget: per-question limits (default :class:`Budget` with the strategy's step limit).
        tool_mode: ``auto`` uses native tool calling when the llm supports it, else JSON actions;
            ``native`` and ``json`` force one.
        max_tokens: output cap per reasoning turn (``None``: the model's own; JSON actions on
            local models default to 512 so a runaway thought cannot stall a CPU for minutes).
        options: the strategy's options, as its ``Options`` or a mapping of field names
            (beside them the runtime's keys ``evidence_first``, ``abstain`` and ``critic``).
        published: answer as a published configuration (the benchmark harness): abstention
            recorded but never applied, no critic, no frames looked at to verify citations.
        more: options as keyword arguments.

    Raises:
        ConfigError: an unknown or ill-typed option, or a bad tool mode.
    """

    name: ClassVar[str] = ""
    max_steps: ClassVar[int] = 15
    Options: ClassVar[type[Any]] = NoOptions
    #: Ingest stages the strategy reads; ``ask`` indexes only these.
    stages: ClassVar[tuple[str, ...]] = (
        "transcribe",
        "read_text",
        "detect",
        "caption",
        "embed",
        "summarize",
    )
    #: The model roles each step waits on; the benchmark runner caps its threads at what
    #: their endpoints take at once.
    calls: ClassVar[tuple[str, ...]] = ("llm", "tool_vlm")
    #: Sent (without tools) when a run must end without the model having answered.
    final_prompt: ClassVar[str] = "Answer the question now with the information you have."
    final_prompt_choice: ClassVar[str] = "Answer now with the option letter only."
    #: Whether evidence first fits the strategy's conversation (its first model turn reads
    #: ``run.messages``); see :meth:`Run.evidence_first`.
    takes_evidence: ClassVar[bool] = False
    #: Identical tool calls the runtime refuses to run again: those that ``"failed"`` before
    #: (default), or ``"all"`` made before. With the embedded smoke-test llm every repeat is
    #: refused (:meth:`repeats_refused`).
    refuse_repeats: ClassVar[Literal["failed", "all"]] = "failed"

    def __init__(
        self,
        library: Store,
        models: Models,
        *,
        budget: Budget | None = None,
        tool_mode: ToolMode = "auto",
        max_tokens: int | None = None,
        options: Any = None,
        published: bool = False,
        **more: Any,
    ) -> None:
        if more:  # options as keywords: DVDAgent(lib, models, tools=("clip_search",))
            if options is None or isinstance(options, Mapping):  # runtime keys stay for below
                options = {**(options or {}), **more}
            else:
                options = {**dataclasses.asdict(self.parse_options(options)), **more}
        options, self.evidence_first = self._evidence_setting(options)
        options, self.abstain, self.critic = self._answer_settings(options, published)
        self.published = published
        if tool_mode not in ("auto", "native", "json"):
            raise ConfigError(f"tool mode {tool_mode!r}: choose auto, native or json")
        self.library = library  # for callers; the strategy reads through self.index and tools
        self.index = IndexView(library, models)
        self.models = models
        self.options = self.parse_options(options)
        self.budget = self.step_budget(budget or Budget())
        self.tool_mode: ToolMode = tool_mode
        self.max_tokens = max_tokens

    def within(self, library: Store) -> Agent:
        """This agent reading ``library`` instead, its configuration shared: how a question
        limited to a time window (``--last``, ``--since``, ``--until``) runs, over a
        :class:`~vidagent.library.window.WindowedLibrary` that every tool and
        :attr:`index` read goes through."""
        scoped = copy.copy(self)
        scoped.library = library
        scoped.index = IndexView(library, self.models)
        return scoped

    @classmethod
    def parse_options(cls, given: Any) -> Any:
        """The strategy's options from an ``Options`` object or a mapping of field names.

        Raises:
            ConfigError: an unknown name (the message lists the allowed ones) or a value of the
                wrong type.
        """
        if isinstance(given, cls.Options):
            return given
        given = dict(given or {})
        allowed = [f.name for f in dataclasses.fields(cls.Options)]
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise ConfigError(
                f"{cls.name} has no option {', '.join(unknown)}; "
                f"its options: {', '.join(sorted(allowed)) or 'none'}"
            )
        try:
            options = pydantic.TypeAdapter(cls.Options).validate_python(given)
        except pydantic.ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            problem = str(first["msg"]).removeprefix("Value error, ")
            raise ConfigError(
                f"{cls.name} option {where}: {problem} (got {first.get('input')!r})"
            ) from None
        for field in dataclasses.fields(options):  # nan passes every comparison a check makes
            value = getattr(options, field.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{cls.name} option {field.name}: must be a finite number")
        return options

    @classmethod
    def _evidence_setting(cls, options: Any) -> tuple[Any, EvidenceFirst | None]:
        """``options`` without the runtime's ``evidence_first`` key, and its value (None: the
        ``evidence_first`` setting decides)."""
        if not isinstance(options, Mapping) or "evidence_first" not in options:
            return options, None
        options = dict(options)
        value = _switch("evidence_first", options.pop("evidence_first"))
        if value == "on" and not cls.takes_evidence:
            raise ConfigError(f"{cls.name} does not take evidence_first")
        return options, value

    @classmethod
    def _answer_settings(
        cls, options: Any, published: bool
    ) -> tuple[Any, AbstainPolicy | None, CriticMode]:
        """``options`` without the runtime's ``abstain`` and ``critic`` keys, and their values
        (``abstain`` None: the setting decides, :meth:`abstain_policy`; ``critic``: ``auto``,
        published ``off``). A key given as None was not chosen: a front end passes its
        option on as it came, and an ``auto`` it filled in had overridden the ``abstain``
        setting (the config file's, ``VIDAGENT_ABSTAIN``) and a published configuration's
        ``critic`` off."""
        abstain: AbstainPolicy | None = None  # the ``abstain`` setting decides
        critic: CriticMode = "off" if published else "auto"
        if not isinstance(options, Mapping) or not {"abstain", "critic"} & set(options):
            return options, abstain, critic
        options = dict(options)
        given = options.pop("abstain", None)
        if given is not None:
            if given not in ABSTAIN_POLICIES:
                raise ConfigError(f"abstain: choose auto, never or always-report (got {given!r})")
            abstain = given
        if (chosen := options.pop("critic", None)) is not None:
            critic = _switch("critic", chosen)
        return options, abstain, critic

    def abstain_policy(self) -> AbstainPolicy:
        """The ``abstain`` option, else the ``abstain`` setting; a published configuration
        turns ``auto`` into ``always-report`` (recorded, never applied)."""
        if self.abstain is not None:
            return self.abstain
        setting: AbstainPolicy = self.models.settings.abstain
        return "always-report" if self.published and setting == "auto" else setting

    def looks(self) -> bool:
        """Whether the cited frames are looked at to check citations (and by the critic unless
        ``critic`` is ``off``): never for a published configuration; with ``critic=on``
        whenever ``tool_vlm`` takes images and is not the perception describer (which answers
        no question: it measures); with ``auto`` when a vision model is configured
        (:func:`vision_model`: not the perception describer, and not a test's scripted
        model)."""
        if self.published or self.critic == "off":
            return False
        try:
            client = self.models.client("tool_vlm")
        except ConfigError:  # a hub without a vision role (a test's, a text-only setup)
            return False
        if self.critic == "on":
            return client.capabilities.supports_images and not client.capabilities.describer
        return vision_model(client)

    def reader(self) -> Client | None:
        """The critic's model, which reads the cited moments (:mod:`vidagent.agents.critic`):
        the vision model where the frames are looked at (:meth:`looks`); with ``critic=on``
        and no vision model, the ``llm``, which reads the quotes alone; else None."""
        if self.looks():
            return self.models.client("tool_vlm")
        if self.critic == "on" and not self.published:
            return self.models.client("llm")
        return None

    def weak_llm(self) -> bool:
        """Whether the ``llm`` is a weak reasoner (its capabilities say so: the embedded
        SmolLM2-135M)."""
        try:
            return self.models.client("llm").capabilities.weak_reasoner
        except ConfigError:  # a hub without an llm (a test's)
            return False

    def evidence_first_on(self) -> bool:
        """Whether runs see the index's evidence before their first step: the strategy takes it
        and ``evidence_first`` (the option, else the setting) is ``on``, or ``auto`` with a
        weak reasoner."""
        if not self.takes_evidence:
            return False
        mode = self.evidence_first or self.models.settings.evidence_first
        return mode == "on" or (mode == "auto" and self.weak_llm())

    def repeats_refused(self) -> Literal["failed", "all"]:
        """Which identical calls a run refuses: the strategy's ``refuse_repeats``, or ``"all"``
        with a weak reasoner, which loops on one successful call (SmolLM2 made the same
        clip_search four times in a row on the demo clip) and can only get its result again."""
        return "all" if self.weak_llm() else self.refuse_repeats

    def policy(self) -> RunPolicy:
        """How this agent's runs go, computed once per question (:class:`RunPolicy`)."""
        return RunPolicy(
            name=self.name,
            mode=self.mode(),
            turn_tokens=self.turn_tokens(),
            steps=self.budget.steps or self.max_steps,
            refuse_repeats=self.repeats_refused(),
            evidence_first=self.evidence_first_on(),
            final_prompt=self.final_prompt,
            final_prompt_choice=self.final_prompt_choice,
        )

    def step_budget(self, budget: Budget) -> Budget:
        """The budget with the strategy's step limit where none was given."""
        return budget.with_steps(self.max_steps)

    # -- what strategies implement -------------------------------------------------------------

    def solve(self, run: Run) -> Answer:
        raise NotImplementedError

    def tool_options(self, question: Question) -> ToolOptions:
        """What the strategy tells its tools for this question."""
        return ToolOptions(question=question.prompt)

    def index_plan(self) -> IndexPlan:
        """The stages and index settings this strategy reads (default: ``stages`` as the
        settings say)."""
        return IndexPlan(self.stages)

    def context_request(self) -> dict[str, Any] | None:
        """What the application layer must build per video before a question, beyond the
        strategy's stages: keyword arguments of
        :func:`vidagent.ingest.context.build_segment_context`, or None (the default)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Strategy settings recorded in the trace (options, ablations, thresholds)."""
        runtime = {"evidence_first": self.evidence_first_on()} if self.takes_evidence else {}
        return {
            "tool_mode": self.tool_mode,
            "max_tokens": self.max_tokens,
            **runtime,
            **dataclasses.asdict(self.options),
        }

    def force_answer(self, run: Run, reason: str, note: str = "") -> Answer:
        """One last call without tools asking for the answer (allowed past every budget)."""
        prompt = self.final_prompt_choice if run.question.options else self.final_prompt
        messages = run.final_messages(prompt)
        schema = self.final_schema(run)
        text = run.chat(messages, schema, check=False)
        if schema is not None:
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                text = str(json.loads(text).get("answer", text))
        return run.answer(text, forced=True, reason=reason, note=note)

    def final_schema(self, run: Run) -> dict[str, Any] | None:
        """The forced answer's reply in JSON mode (None otherwise): for a multiple-choice
        question the grammar allows exactly what the prompt asks for, one option's letter."""
        if self.mode() != "json":
            return None
        schema = final_answer_schema()
        if run.question.options and run.question.task == "answer":
            letters = [option_letter(i) for i in range(len(run.question.options))]
            schema["properties"]["answer"] = {"type": "string", "enum": letters}
        return schema

    # -- model settings --------------------------------------------------------------------------

    def mode(self) -> Literal["native", "json"]:
        if self.tool_mode != "auto":
            return self.tool_mode
        return "native" if self.models.client("llm").capabilities.supports_tools else "json"

    def turn_tokens(self) -> int | None:
        if self.max_tokens is not None:
            return self.max_tokens
        local = self.models.client("llm").capabilities.local
        return 512 if local and self.mode() == "json" else None

    # -- the run ---------------------------------------------------------------------------------

    def run(
        self,
        question: Question,
        trace: Trace | None = None,
        *,
        should_stop: Callable[[], bool] | None = None,
        prepare: Callable[[], None] | None = None,
    ) -> Answer:
        """Answer ``question``; every event goes to ``trace`` (default: kept in memory).

        ``should_stop`` is asked before every step and model call, and by a model call under way
        between the units of work it can stop between (:mod:`vidagent.models.interrupt`); once
        it says True the run ends there with the answer it has (reason ``stopped``, no further
        model call), still checked and recorded. ``prepare`` builds what the strategy reads
        besides the index (VideoAgent2's general context) before the first step, inside the
        run: its model calls are in the trace and the totals, and its time and tokens count
        against the budget (a provider's failure there ends the run as one in a step does).
        """
        trace = trace if trace is not None else Trace()
        meter = Meter(self.budget, should_stop)
        run = Run(
            self.policy(),
            self.index,
            self.models,
            question,
            trace,
            meter,
            tool_options=self.tool_options(question),
        )
        usage = [0, 0]
        unpriced: list[str] = []

        def on_call(r: CallRecord) -> None:
            if not r.priced and r.spec not in unpriced:
                unpriced.append(r.spec)
            run.meter.model_calls += 1
            run.meter.tokens += r.input_tokens + r.output_tokens
            run.meter.cost_usd += r.cost_usd
            usage[0], usage[1] = usage[0] + r.input_tokens, usage[1] + r.output_tokens
            (ACTIVE.get() or run).emit(
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
                fitted=r.fitted,
                priced=r.priced,
            )

        try:
            run.emit(RunStarted, **self._started(question))
            with UsageLedger.capture(on_call), checked_calls(meter.interrupt):
                answer = self._checked(run, self._solve(run, prepare))
                reader = self.reader() if answer.reason != "stopped" else None
                if reader is not None:
                    answer = self._reviewed(run, answer, reader)
            run.emit(Answered, **answered(answer))
            m = run.meter
            run.emit(
                RunFinished,
                steps=m.steps,
                frames=m.frames,
                model_calls=m.model_calls,
                input_tokens=usage[0],
                output_tokens=usage[1],
                cost_usd=m.cost_usd,
                seconds=round(m.seconds, 3),  # to the millisecond, as a trace reads it
                unpriced=unpriced,
            )
        finally:
            trace.close()
        return dataclasses.replace(answer, trace=trace)

    def _solve(self, run: Run, prepare: Callable[[], None] | None = None) -> Answer:
        """The strategy's answer, or a forced one when the search cannot go on."""
        try:
            if prepare is not None:
                prepare()
            return self.solve(run)
        except Stopped as e:
            return run.answer("", forced=True, reason="stopped", note=str(e))
        except StepsSpent:
            return self._forced(run, "max_steps")
        except BudgetExceeded as e:
            run.emit(BudgetExhausted, budget=e.budget, used=e.used, limit=e.limit)
            return self._forced(run, f"budget:{e.budget}")
        except FormatFailure as e:
            return self._forced(run, "format_errors", str(e))
        except RepeatedFailure as e:
            return self._forced(run, "repeated_failures", str(e))
        except ProviderError as e:
            note = f"{type(e).__name__}: {e}"
            llm = self.models.client("llm").adapter.endpoint
            if isinstance(e, EndpointUnreachable) and e.endpoint == llm:
                # the final answer would be asked of the endpoint just found unreachable
                unasked = "no final answer asked of an endpoint that cannot be reached"
                failed = run.answer(
                    "", forced=True, reason="model_error", note=f"{note}; {unasked}"
                )
                return dataclasses.replace(failed, unanswered=True)
            return self._forced(run, "model_error", note)

    def _looker(self, run: Run, client: Client) -> FrameLooker:
        return FrameLooker(client, self.index, run.meter, self.budget.frames)

    def _checked(self, run: Run, answer: Answer) -> Answer:
        """The answer with its citations checked and the abstain policy applied (a free-form
        answer withheld under ``auto`` when nothing it claims is found where it cites)."""
        policy = self.abstain_policy()
        looks = self.looks() and answer.reason != "stopped"
        looker = self._looker(run, self.models.client("tool_vlm")) if looks else None
        try:
            with run.active():
                checked = verify(
                    run.question,
                    answer,
                    index=self.index,
                    embed=self.models.client("embed"),
                    looker=looker,
                    policy=policy,
                )
        except (LibraryError, ProviderError) as e:  # an index that cannot be searched
            checked = Verification(policy=policy, note=f"citations not checked: {e}")
        return self._verified(run, answer, checked)

    @staticmethod
    def _verified(run: Run, answer: Answer, checked: Verification) -> Answer:
        """``answer`` with ``checked`` set, its text withheld where ``checked`` abstains under
        ``auto`` and the answer is free-form (a letter or a grounding answer's interval is
        kept, marked)."""
        if checked.abstained and checked.policy == "auto" and run.question.free and answer.text:
            checked = dataclasses.replace(checked, withheld=answer.text)
            answer = dataclasses.replace(answer, text=INSUFFICIENT)
        return dataclasses.replace(answer, verification=checked)

    def _reviewed(self, run: Run, answer: Answer, reader: Client) -> Answer:
        """The reader's review of ``answer`` (its verdict on each cited moment set on the
        citations) and, on a disagreement, the strategy's answer of one more bounded round,
        checked like the first and read again: where the reader disagrees with that one too,
        it abstains, unless the reader cannot see and a claim is about what is seen
        (:mod:`vidagent.agents.critic`)."""
        answer = self._read_by(run, answer, reader)
        said = answer.review
        assert said is not None
        if said.verdict != "disagree":
            return answer
        again = self._checked(run, self._solve(second_round(run, answer, said.note)))
        if again.reason != "stopped":
            again = self._read_by(run, again, reader)
        last = again.review.verdict if again.review is not None else ""
        checked = again.verification
        assert checked is not None
        # a reader that cannot see has not checked a claim about what is seen: unverified stays
        seen = reader.capabilities.supports_images or not checked.unverified
        if last == "disagree" and checked.policy != "never" and not checked.abstained and seen:
            unread = dataclasses.replace(checked, abstained=True, reason=READER_ABSTAINS)
            again = self._verified(run, again, unread)
        revised = dataclasses.replace(said, revised=True, first_answer=answer.text, second=last)
        return dataclasses.replace(again, review=revised)

    def _read_by(self, run: Run, answer: Answer, reader: Client) -> Answer:
        """``answer`` with the reader's review and its verdict on each cited moment."""
        with run.active():
            said = review(run.question, answer, self._looker(run, reader))
        assert answer.verification is not None
        return dataclasses.replace(
            answer, verification=with_reader(answer.verification, said), review=said
        )

    def _forced(self, run: Run, reason: str, note: str = "") -> Answer:
        stop = run.meter.should_stop
        if stop is not None and stop():  # asked to stop while the last step ran: no final call
            return run.answer("", forced=True, reason="stopped", note="stopped by the caller")
        try:
            return self.force_answer(run, reason, note)
        except Stopped as e:  # the caller stopped the run while the call ran
            return run.answer("", forced=True, reason="stopped", note=str(e))
        except ProviderError as e:
            failed = f"the final answer call failed too ({type(e).__name__}: {e})"
            answer = run.answer(
                "", forced=True, reason=reason, note=f"{note}; {failed}" if note else failed
            )
            return dataclasses.replace(answer, unanswered=True)

    def _started(self, question: Question) -> dict[str, Any]:
        from vidagent._version import __version__

        videos = []
        for vid in question.video_ids:
            record = self.index.video(vid)
            video = {"video_id": vid, "name": record.name, "duration": record.duration}
            if getattr(record, "recorded_at", ""):  # its times also read as wall-clock times
                video["recorded_at"] = record.recorded_at
            window = self.index.window(vid)
            if window is not None:  # the run saw only this part (its duration: the window's end)
                video["window"] = [round(window[0], 3), round(window[1], 3)]
            videos.append(video)
        return {
            "strategy": self.name,
            "question": question.text,
            "options": list(question.options),
            "videos": videos,
            "models": {role: self.models.serving(role) for role in ROLES},
            "calls": list(self.calls),
            "index": self.index_plan().describe(self.models.settings),
            "budget": self.budget.to_dict(),
            "settings": json.loads(json.dumps(self.describe(), default=str)),
            "version": __version__,
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
