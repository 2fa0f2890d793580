"""AgentCVR (Qiu et al., 2026): a text-only master reasoning across several videos, delegating
looking to a visual sub-agent and listening to an audio sub-agent (spec ``agentcvr.md``; paper
``agentcvr.txt``).

The master loop is :func:`vidagent.agents.cvr.protocol.run_master`, the same code the RL text
simulator runs; this strategy plugs in the real sub-agents (:mod:`vidagent.agents.cvr.env`) and
the run's ``llm`` (budgeted and traced). As published: the per-task master prompts verbatim
(Appendix H.3; our generic one for questions that are not CrossVid's), the JSON actions
``observe``/``get_caption``/``answer``, at most 128 frames per ``observe``, 3 format attempts per
turn, 20 turns, frames at bin centres with a 360-px long side, Whisper on the requested interval,
raw videos (no index), observations sent back whole (the released inference code cuts none; the
2,000-character cut is its RL simulator's: ``tool_response_chars``).

Decisions where the paper is silent (see also :mod:`~vidagent.agents.cvr.protocol`):

- The last turn is forced: its observation says to answer now and only ``answer`` is accepted;
  a spent budget ends the same way (one call past the budget, answer only).
- ``index`` (``off``, the paper's raw-video setting, also for benchmark runs): ``auto`` also reads
  what the Library already has — a ``transcribe`` stage's transcript answers ``get_caption``
  instead of on-demand Whisper with the paper's decoding, and the video's global summary joins
  the user turn, which the paper's master never sees — and ``on`` indexes transcripts and
  summaries first. The trace's ``cvr_videos`` phase records, per video, which it used.
- ``tool_response_chars`` (``None``: whole): cut each observation to that many characters in the
  middle, as the released RL simulator does (2,000); the paper has no cut, and a whole-video
  ``get_caption`` transcript would lose its middle. A long history is fitted to the master's
  context window by the client, as for every strategy.
- ``constrain_json`` (``auto``: local models that take a schema): the master's reply is held to
  a JSON object with ``action``/``thought``/``params``/``final_answer`` by the model's grammar
  (llama.cpp), so a small offline model's reply parses; remote models, and local ones without a
  grammar (a ``transformers:`` checkpoint, as trained), are prompt-driven as in the paper.
- ``task``: the CrossVid task whose prompt and answer format a plain ``ask`` uses (default the
  generic prompt); a CrossVid benchmark question brings its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from vidagent.agents.base import Agent, Answer, IndexPlan
from vidagent.agents.cvr.env import VideoEnvironment
from vidagent.agents.cvr.inputs import inputs_of, task_of
from vidagent.agents.cvr.parse import LETTERS, CvrFormatError
from vidagent.agents.cvr.protocol import (
    CVR_FORMAT_RETRIES,
    CVR_MAX_TURNS,
    OBSERVE_ONLY,
    TASKS,
    EpisodeTurn,
    answer_format,
    parse_master_action,
    reminder,
    run_master,
)
from vidagent.exceptions import ConfigError
from vidagent.models.base import Message
from vidagent.trace import AgentTurn, FormatError, Observed, ToolCalled

if TYPE_CHECKING:
    from vidagent.agents.run import Run

BUDGET_NOTE = (
    "\n[The budget is spent: this is your last turn. Reply now with the answer action: "
    '{"action": "answer", "thought": "...", "final_answer": ...}]'
)
INDEX_STAGES = ("transcribe", "caption", "embed", "summarize")
LAST_TURN = "this is your last turn"  # in the note of a forced turn (the protocol's and ours)


def action_schema(
    task: str | None, options: Sequence[str] | None, *, last_turn: bool
) -> dict[str, Any]:
    """The JSON a constrained master may write: a call of the task's tools with its ``params``,
    or an ``answer`` with a ``final_answer`` of the task's type (an option letter where there are
    options); on a forced turn only the answer."""
    fmt = answer_format(task, options)
    final: dict[str, Any] = {"type": "string"}
    if fmt == "letter" and options:
        final = {"type": "string", "enum": list(LETTERS[: len(options)])}
    elif fmt == "interval":
        final = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    tools = ["observe"] if task in OBSERVE_ONLY else ["observe", "get_caption"]
    answer = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["answer"]},
            "thought": {"type": "string"},
            "final_answer": final,
        },
        "required": ["action", "thought", "final_answer"],
    }
    if last_turn:
        return answer
    call = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": tools},
            "thought": {"type": "string"},
            "params": {"type": "object"},
        },
        "required": ["action", "thought", "params"],
    }
    return {"anyOf": [call, answer]}  # an answer always carries its final_answer


@dataclass(frozen=True)
class CVROptions:
    """Settings of the AgentCVR strategy (defaults follow the paper).

    Attributes:
        task: a CrossVid task code for a plain question's master prompt (``None``: generic).
        max_turns: master turns, the last one forced (20).
        index: ``off`` reads raw videos only (the paper); ``auto`` reads indexed transcripts
            (for ``get_caption``) and summaries (in the user turn) where the Library has them,
            ``on`` builds them first.
        tool_response_chars: cut each observation to this many characters in the middle, as the
            released RL simulator does (``None``: whole, as the paper and released inference).
        constrain_json: hold the master's reply to the action JSON by grammar: ``auto`` for
            models in this process that take a schema, ``on``, ``off``.
        long_side: frames' long side in pixels (360).
        visual_max_tokens: the visual agent's reply cap (``None``: the model's own).
    """

    task: str | None = None
    max_turns: int = CVR_MAX_TURNS
    index: Literal["auto", "on", "off"] = "off"
    constrain_json: Literal["auto", "on", "off"] = "auto"
    long_side: int = 360
    visual_max_tokens: int | None = None
    tool_response_chars: int | None = None

    def __post_init__(self) -> None:
        if self.task is not None and self.task.upper() not in TASKS:
            raise ConfigError(f"cvr option task: {self.task!r} is not one of {', '.join(TASKS)}")
        if self.max_turns < 1 or self.long_side < 16:
            raise ConfigError("cvr options max_turns must be at least 1 and long_side at least 16")
        if self.tool_response_chars is not None and self.tool_response_chars < 2:
            raise ConfigError(
                "cvr option tool_response_chars must be at least 2 (or null: whole observations)"
            )


class CVRAgent(Agent):
    """AgentCVR; its options are :class:`CVROptions`."""

    name = "cvr"
    max_steps = CVR_MAX_TURNS
    Options = CVROptions
    options: CVROptions
    stages = ()  # the paper reads raw videos

    def index_plan(self) -> IndexPlan:
        return IndexPlan(INDEX_STAGES if self.options.index == "on" else ())

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "constrained": self._constrained()}

    def _constrained(self) -> bool:
        mode = self.options.constrain_json
        if mode != "auto":
            return mode == "on"
        caps = self.models.client("llm").capabilities
        return caps.local and caps.supports_json_schema

    def _max_tokens(self) -> int | None:
        if self.max_tokens is not None:
            return self.max_tokens
        return 512 if self.models.client("llm").capabilities.local else None

    def _chat(self, run: Run, messages: list[dict[str, str]], *, check: bool = True) -> str:
        run.state["messages"] = messages
        sent = [Message(m["role"], m["content"]) for m in messages]  # type: ignore[arg-type]
        schema = None
        if self._constrained():
            last = LAST_TURN in messages[-1]["content"]
            options = list(run.question.options) or None
            schema = action_schema(run.state.get("task"), options, last_turn=last)
        return run.chat(sent, schema, max_tokens=self._max_tokens(), check=check)

    def solve(self, run: Run) -> Answer:
        question = run.question
        task = task_of(question) or (self.options.task.upper() if self.options.task else None)
        env = VideoEnvironment(
            run,
            inputs_of(question),
            use_index=self.options.index != "off",
            long_side=self.options.long_side,
            visual_max_tokens=self.options.visual_max_tokens,
        )
        if not env.videos:
            raise ConfigError("cvr needs at least one video")
        run.state = {"task": task, "env": env, "messages": []}
        run.phase("cvr_videos", task=task, videos=env.describe())
        turns = min(self.options.max_turns, self.budget.steps or self.options.max_turns)

        def on_action(turn: EpisodeTurn) -> None:
            run.step = run.meter.steps = turn.turn
            for n, (raw, problem) in enumerate(
                zip(turn.attempts, turn.errors, strict=False), start=1
            ):
                run.emit(FormatError, attempt=n, problem=problem, reply=raw)
            assert turn.action is not None
            call = {
                "id": f"{turn.action.kind}_{turn.turn}",
                "name": turn.action.kind,
                "arguments": turn.action.as_dict(),
            }
            run.emit(AgentTurn, thought=turn.action.thought, tool_calls=[call], mode="json")
            if turn.action.kind != "answer":
                run.emit(
                    ToolCalled, call_id=call["id"], tool=call["name"], arguments=call["arguments"]
                )

        def on_turn(turn: EpisodeTurn) -> None:
            if turn.action is None:
                run.step = run.meter.steps = turn.turn
                for n, (raw, problem) in enumerate(
                    zip(turn.attempts, turn.errors, strict=False), start=1
                ):
                    run.emit(FormatError, attempt=n, problem=problem, reply=raw)
                return
            if turn.action.kind == "answer":
                return
            if turn.action.kind == "observe" and env.last_evidence:
                run.evidence = env.last_evidence
            run.emit(
                Observed,
                call_id=f"{turn.action.kind}_{turn.turn}",
                tool=turn.action.kind,
                text=turn.observation if turn.observation is not None else turn.tool_error or "",
                confidence=None,
                evidence=[e.to_list() for e in env.last_evidence],
                frames=env.last_frames,
                model_calls=env.last_calls,
                error=turn.tool_error is not None,
                seconds=0.0,
                adjusted=[env.last_note] if env.last_note else [],
            )

        episode = run_master(
            lambda messages: self._chat(run, messages),
            env,
            query=question.text,
            options=list(question.options) or None,
            task=task,
            max_turns=turns,
            on_turn=on_turn,
            on_action=on_action,
            response_chars=self.options.tool_response_chars,
        )
        run.state["messages"] = episode.messages
        reasons = {
            "answered": "answered",
            "forced_answer": "max_steps",
            "format_failure": "format_errors",
            "no_answer": "max_steps",
        }
        note = (
            ""
            if episode.final_answer is not None
            else (
                "no valid action after 3 attempts"
                if episode.reason == "format_failure"
                else "no answer on the last turn"
            )
        )
        return self._answer(
            run,
            episode.final_answer,
            forced=episode.forced,
            reason=reasons[episode.reason],
            note=note,
        )

    def _answer(
        self, run: Run, final: str | None, *, forced: bool, reason: str, note: str = ""
    ) -> Answer:
        """An Answer from the normalised final answer: a letter task's choice is its index."""
        question = run.question
        fmt = answer_format(run.state.get("task"), question.options or None)
        text = final or ""
        choice = LETTERS.index(text) if fmt == "letter" and len(text) == 1 else None
        parsed = bool(text) and (choice is not None or fmt != "letter" or not question.options)
        return Answer(
            text=text,
            choice=choice,
            parsed=parsed,
            forced=forced,
            reason=reason,
            evidence=run.evidence,
            note=note,
        )

    def force_answer(self, run: Run, reason: str, note: str = "") -> Answer:
        """A spent budget (or a model error): one more master turn, past the budget, where only
        ``answer`` is accepted, on the conversation so far."""
        state = run.state if isinstance(run.state, dict) else {}
        env = state.get("env")
        messages = [dict(m) for m in state.get("messages", [])]
        if env is None or len(messages) < 2:
            return super().force_answer(run, reason, note)
        while messages and messages[-1]["role"] == "user" and len(messages) > 2:
            if not messages[-1]["content"].startswith("Please ensure"):
                break
            messages.pop()
        last = messages[-1]
        forced = BUDGET_NOTE
        if last["role"] == "user":
            messages[-1] = {"role": "user", "content": last["content"] + forced}
        else:
            messages.append({"role": "user", "content": forced.strip()})
        errors: list[str] = []
        for attempt in range(1, CVR_FORMAT_RETRIES + 1):
            # each retry says why the last reply was refused, as the master loop's do (the same
            # request again was answered from the response cache with the same reply)
            again = [{"role": "user", "content": reminder(errors[-1])}] if errors else []
            raw = self._chat(run, messages + again, check=False)
            try:
                action = parse_master_action(
                    raw,
                    task=state.get("task"),
                    videos=env.videos,
                    options=list(run.question.options) or None,
                )
            except CvrFormatError as e:
                errors.append(str(e))
            else:
                if action.kind == "answer":
                    return self._answer(
                        run, action.final_answer, forced=True, reason=reason, note=note
                    )
                errors.append("the turns are used up: reply with the answer action now")
            run.emit(FormatError, attempt=attempt, problem=errors[-1], reply=raw)
        return self._answer(
            run,
            None,
            forced=True,
            reason=reason,
            note=f"{note}; no answer on the forced turn"
            if note
            else "no answer on the forced turn",
        )
