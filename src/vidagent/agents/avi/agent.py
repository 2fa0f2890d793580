"""Agentic Video Intelligence (AVI): Retrieve → Perceive → Review over a multi-granular index
with an entity-centric temporal graph (spec ``dvd-avi.md`` part B; paper ``avi.txt``).

As published:

- **Phases** (Eqs. 5–8): the retrieve phase offers only ``clip_retrieve_tool``,
  ``global_explore_tool`` and ``graph_retrieve_tool`` (plus ``clip_merge_tool``, B.11 #11), the
  perceive phase only ``object_detect_tool``, ``boundary_detect_tool``, ``text_extract_tool``
  and ``frame_analysis_tool``, the review phase no tool at all: the model writes the answer
  after ``**Answer:**`` or ``[STAGE_SWITCH: perceive]``. A phase ends when the model writes
  ``[STAGE_SWITCH: <next>]`` or answers without a tool call; a switch written beside a tool
  call runs the tool first (B.11 #16); ``**Answer:**`` in the perceive phase moves to review,
  which confirms it (#17).
- **Prompts** verbatim as package data: the system prompt (Fig. 5) is rebuilt at every phase
  change from the core protocol (Fig. 9), the phase's instruction (Figs. 10–12), the Fig. 6
  description of each of the phase's tools and the video's length; the conversation carries
  over. ``clip_merge_tool`` has no Fig. 6 line; its line is ours.
- **One tool call per iteration**: further calls of the same turn are answered "Skipped"; a
  tool of another phase gets an error observation. A call identical to an earlier one is not
  run again (the runtime's guard, :attr:`refuse_repeats` ``"all"``): the model is told so, and
  the third such repeat ends the search with a forced answer (``repeated_failures``), so a model
  that loops cannot spend the iterations on nothing.
- **At most 10 iterations** (tool executions; the budget's ``steps``) and a hard cap of 25 model
  turns (B.11 #15), then the forced answer: "Iteration limit reached. …" without tools.
- **Answers** are read after ``**Answer:**`` (B.6.4): an option letter, or ``[s, e]`` in
  grounding mode (:attr:`~vidagent.agents.base.Question.task` ``"ground"``), whose interval is
  the answer's evidence.

Decisions where the paper is silent:

- The first user message is the question with its ``(A) …`` option lines and "Answer with the
  option letter." (B.11 #24); in grounding mode it asks for the event's start and end in the
  review phase's own format (``**Answer:**[1.5s,12.5s]``).
- Models without native tool calls (JSON actions, the offline default) cannot "answer without a
  tool call": they get a ``stage_switch`` action in the retrieve and perceive phases and
  ``answer``/``stage_switch`` in review; the prompts are unchanged.
- Several videos: every tool takes ``video``, the video lengths are listed in the system
  prompt, and each video has its own entity graph (cross-video identity is not claimed).
- Index: AVI's own captions (Fig. 7, clips captioned independently: ``captions="avi"``) or
  DVD's progressive registry captions (``"registry"``, the default, B.11 #1 option A: the graph
  prompt expects subject ids that only a registry gives); transcripts are not read (the paper
  has no ASR) unless ``transcripts`` is set. The trace's ``run_started.index`` records which.
- Ablations of Table 3: ``phases=False`` (every tool at once, free-form), ``review=False``
  (perceive's switch ends in the answer) and ``graph=False`` (no graph stage or tool). The
  embedded smoke-test llm (SmolLM2-135M) gets no graph either: extracting one took it over ten
  minutes of CPU for a 16-clip video, and its replies are not a graph worth searching.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidagent.agents.actions import Action, Decision
from vidagent.agents.base import Agent, Answer, IndexPlan, Question
from vidagent.exceptions import ConfigError
from vidagent.models.base import Message, ToolSpec
from vidagent.prompts import load_prompt
from vidagent.tools.avi.perceive import PERCEIVE_TOOLS
from vidagent.tools.avi.retrieve import RETRIEVE_TOOLS
from vidagent.tools.base import Evidence, Observation, Tool, Toolbox, ToolContext, answer, tool
from vidagent.tools.options import PerceptionOptions, ToolOptions
from vidagent.trace import AgentTurn

if TYPE_CHECKING:
    from vidagent.agents.run import Run

Phase = Literal["retrieve", "perceive", "review", "free"]
SWITCH = re.compile(r"\[STAGE_SWITCH:\s*(retrieve|perceive|review)\s*\]", re.IGNORECASE)
ANSWER = re.compile(r"\*\*Answer:\*\*\s*(.+)", re.DOTALL)
#: ``[1.5s,12.5s]`` as the paper writes it; brackets and units optional (a forced answer)
INTERVAL = re.compile(r"\[?\s*(\d+(?:\.\d+)?)\s*s?\s*[,\-–]\s*(\d+(?:\.\d+)?)\s*s?\s*\]?")
STAGE_NAMES = {"retrieve": "RETRIEVE", "perceive": "PERCEIVE", "review": "REVIEW", "free": "FREE"}
INSTRUCTIONS = {"retrieve": "avi_retrieve", "perceive": "avi_perceive", "review": "avi_review"}
MERGE_LINE = (
    "• To merge adjacent or temporally close clips into one span (an event split across clips), "
    "use ‘clip_merge_tool‘ with their time ranges."
)  # not in Fig. 6: the paper does not list clip_merge among the prompt's tools
SKIPPED = "Skipped: protocol allows exactly ONE tool call per iteration."
FORCED = (
    "Iteration limit reached. Based on all evidence so far, give your best final answer now, "
    "starting with `**Answer:**`."
)
CHOICE_LINE = "Answer with the option letter."
FREE_NUDGE = "Call one tool, or give the final answer starting with **Answer:**."
GROUND_PROMPT = (
    'Localize this event in the video: "{event}". Give its start and end time in seconds as '
    "the final answer, e.g. **Answer:**[1.5s,12.5s]."
)


@dataclass(frozen=True)
class AVIOptions:
    """Settings of the AVI strategy (defaults follow the paper).

    Attributes:
        max_llm_calls: hard cap on model turns (B.11 #15); the iteration limit (tool
            executions, 10) is the budget's ``steps``.
        phases: False is Table 3's "w/o three-phase structure": every tool in one free stage.
        review: False is "w/o review": the perceive phase's switch ends in the answer.
        graph: False is "w/o entity graph": no graph stage, no graph_retrieve_tool.
        clip_merge: offer clip_merge_tool in the retrieve phase (it also runs inside
            clip_retrieve_tool).
        captions: ``"registry"`` (DVD's progressive captions with subject ids) or ``"avi"``
            (Fig. 7, clips captioned independently).
        transcripts: captions also see each clip's speech (the paper has no ASR).
        enforce_targeted_perception: refuse frame_analysis_tool until object_detect,
            boundary_detect or text_extract has run (B.11 #18; the paper only asks in the prompt).
    """

    max_llm_calls: int = 25
    phases: bool = True
    review: bool = True
    graph: bool = True
    clip_merge: bool = True
    captions: Literal["registry", "avi"] = "registry"
    transcripts: bool = False
    enforce_targeted_perception: bool = False

    def __post_init__(self) -> None:
        if self.max_llm_calls < 1:
            raise ConfigError("avi option max_llm_calls must be at least 1")


@tool
def stage_switch(ctx: ToolContext, stage: Literal["retrieve", "perceive", "review"]) -> Observation:
    """Switch to another stage: the JSON-action form of writing [STAGE_SWITCH: <stage>].

    Args:
        stage: The stage to switch to.
    """
    return Observation(text=f"[STAGE_SWITCH: {stage}]")


class AVIAgent(Agent):
    """Agentic Video Intelligence; its options are :class:`AVIOptions`."""

    name = "avi"
    max_steps = 10
    takes_evidence = True
    refuse_repeats = "all"  # a repeat is never run again, whatever it returned
    Options = AVIOptions
    options: AVIOptions
    stages = ("caption", "embed", "graph")

    # -- configuration ----------------------------------------------------------------------------

    def index_plan(self) -> IndexPlan:
        o = self.options
        stages = ("transcribe",) * o.transcripts + ("caption", "embed") + ("graph",) * self._graph()
        settings = {"caption_transcripts": o.transcripts, "embed_text": "caption"}
        if o.captions == "avi":
            settings["caption_style"] = "avi"
        return IndexPlan(stages, settings)

    def tool_options(self, question: Question) -> ToolOptions:
        # Grounding DINO's box threshold; NMS at the paper's IoU 0.5 is the tool's own.
        return ToolOptions(
            question=question.prompt, perception=PerceptionOptions(detect_threshold=0.35)
        )

    def _graph(self) -> bool:
        """Whether the entity graph is built and searched: not when ablated, and not with the
        embedded smoke-test llm, which would spend many minutes of CPU per video extracting a
        graph too poor to search."""
        return self.options.graph and not self.weak_llm()

    def phase_tools(self, phase: Phase) -> tuple[Tool, ...]:
        """The tools a phase offers (Eq. 8), as the options leave them."""
        retrieve = tuple(
            t
            for t in RETRIEVE_TOOLS
            if (self._graph() or t.name != "graph_retrieve_tool")
            and (self.options.clip_merge or t.name != "clip_merge_tool")
        )
        return {
            "retrieve": retrieve,
            "perceive": PERCEIVE_TOOLS,
            "review": (),
            "free": retrieve + PERCEIVE_TOOLS,
        }[phase]

    def toolbox(self, phase: Phase, several: bool = False) -> Toolbox:
        """What the model may call in ``phase``; JSON actions add the stage switch (and the answer
        in review), which native tool callers write as text. With one video in scope the tools
        are shown without their ``video`` argument."""
        box = Toolbox(t if several else _without_video(t) for t in self.phase_tools(phase))
        if self.mode() == "json":
            if phase in ("review", "free"):
                box.add(answer)
            if phase != "free":
                box.add(stage_switch)
        return box

    # -- prompts ----------------------------------------------------------------------------------

    def system_prompt(self, phase: Phase, question: Question) -> str:
        """Fig. 5 filled for ``phase``: Fig. 9, the phase's instruction, its tools' Fig. 6 lines."""
        described = tool_descriptions()
        lines = [described.get(t.name, MERGE_LINE) for t in self.phase_tools(phase)]
        instruction = load_prompt(INSTRUCTIONS.get(phase, "avi_review")).strip()
        lengths = [self.index.video(v) for v in question.video_ids]
        length = (
            f"{lengths[0].duration:.1f}"
            if len(lengths) == 1
            else ", ".join(f"{v.duration:.1f} ({v.name}, id {v.video_id[:12]})" for v in lengths)
        )
        return (
            load_prompt("avi_system")
            .strip()
            .replace("<current_stage >", STAGE_NAMES[phase])
            .replace("<core_protocol >", load_prompt("avi_core_protocol").strip())
            .replace("<stage_instruction >", instruction)
            .replace("<tool_descriptions >", "\n".join(lines))
            .replace("<video_length >", length)
        )

    def user_prompt(self, question: Question) -> str:
        if question.task == "ground":
            return GROUND_PROMPT.format(event=question.text.strip())
        text = question.prompt
        return f"{text}\n{CHOICE_LINE}" if question.options else text

    # -- the loop ---------------------------------------------------------------------------------

    def solve(self, run: Run) -> Answer:
        question = run.question
        phase: Phase = "retrieve" if self.options.phases else "free"
        run.messages = [
            Message("system", self.system_prompt(phase, question)),
            Message("user", self.user_prompt(question)),
        ]
        run.phase(phase)
        several = len(question.video_ids) > 1
        limit = self.budget.steps or self.max_steps
        executed = turns = 0
        targeted = False
        while executed < limit and turns < self.options.max_llm_calls:
            run.meter.check()
            turns += 1
            run.step = turns
            if phase == "review":
                text, said = self._review_turn(run)
                final = _answer_in(text, said)
                if final is not None:
                    return self._answer(run, final)
                phase = self._enter(run, "perceive", "review found the evidence insufficient")
                continue
            toolbox = self.toolbox(phase, several)
            decision = run.decide(toolbox)
            switch, said, calls = self._read(decision)
            if calls:
                targeted = self._execute(run, phase, toolbox, decision, calls[0], targeted)
                executed += 1
                run.meter.steps = executed
            final = _answer_in(decision.text, said)
            if phase == "free":
                if final is not None and (said is not None or not calls):
                    return self._answer(run, final)
                if not calls:
                    run.messages.append(Message("user", FREE_NUDGE))
                continue
            if final is not None:
                switch = "review"  # B.11 #17: review confirms an answer written while perceiving
            if switch or not calls:
                following = self._next(run, phase, switch)
                if following == "answer":
                    return self._final(run, "answered")
                phase = following
        return self._final(run, "max_steps")

    def _read(self, decision: Decision) -> tuple[str | None, str | None, list[Action]]:
        """The switch the turn asked for, an answer it gave (JSON ``answer``), its tool calls."""
        switch, said, calls = None, None, []
        for action in decision.actions:
            if action.name == "stage_switch":
                args = action.arguments if isinstance(action.arguments, dict) else {}
                switch = str(args.get("stage", "")).lower() or None
            elif action.name == "answer":
                args = action.arguments if isinstance(action.arguments, dict) else {}
                said = str(args.get("answer", ""))
            else:
                calls.append(action)
        found = SWITCH.search(decision.text) or SWITCH.search(decision.thought)
        return switch or (found.group(1).lower() if found else None), said, calls

    def _execute(
        self,
        run: Run,
        phase: Phase,
        toolbox: Toolbox,
        decision: Decision,
        call: Action,
        targeted: bool,
    ) -> bool:
        """Run the turn's first call (the protocol allows one); whether a targeted perception
        tool has run by now."""
        if call.name not in toolbox or call.name in ("answer", "stage_switch"):
            obs = Observation(
                f"Error: tool {call.name} not available in {phase} stage.", error=True
            )
            run.record(call, obs)
        elif (
            call.name == "frame_analysis_tool"
            and self.options.enforce_targeted_perception
            and not targeted
        ):
            obs = Observation(
                "Error: call object_detect_tool, boundary_detect_tool or text_extract_tool first; "
                "frame_analysis_tool is the last resort.",
                error=True,
            )
            run.record(call, obs)
        else:
            # A repeat of an earlier call is refused by the runtime (refuse_repeats = "all").
            run.act(call, toolbox)
            targeted = targeted or call.name in (
                "object_detect_tool",
                "boundary_detect_tool",
                "text_extract_tool",
            )
        native = self.mode() == "native"
        for extra in decision.actions[1:] if native else ():
            if extra.name not in ("answer", "stage_switch"):
                run.record(extra, Observation(SKIPPED))
        return targeted

    def _next(self, run: Run, phase: Phase, switch: str | None) -> Phase | Literal["answer"]:
        if phase == "retrieve":
            return self._enter(run, "perceive", "retrieve goal met")
        if not self.options.review:
            return "answer"
        if switch == "retrieve":
            return self._enter(run, "retrieve", "the model asked to retrieve again")
        return self._enter(run, "review", "perceive goal met")

    def _enter(self, run: Run, phase: Phase, why: str) -> Phase:
        run.messages[0] = Message("system", self.system_prompt(phase, run.question))
        run.phase(phase, reason=why)
        return phase

    def _review_turn(self, run: Run) -> tuple[str, str | None]:
        """The review phase's turn: plain text natively (no tools), ``answer``/``stage_switch``
        as JSON actions; returns the text and the JSON answer, if one was given."""
        if self.mode() == "json":
            decision = run.decide(self.toolbox("review"))
            _, said, _ = self._read(decision)
            return decision.text, said
        text = run.chat(run.messages, max_tokens=self.turn_tokens())
        run.messages.append(Message("assistant", text))
        run.emit(AgentTurn, thought=text, tool_calls=[], mode=self.mode())
        return text, None

    # -- answers ----------------------------------------------------------------------------------

    def _answer(
        self, run: Run, said: str, *, forced: bool = False, reason: str = "answered"
    ) -> Answer:
        said = said.strip()
        if run.question.task == "ground":
            found = INTERVAL.search(said)
            if found:  # read in order and clamped to the video, whose span is the evidence
                video = run.question.video_ids[0]
                t0, t1 = sorted((float(found.group(1)), float(found.group(2))))
                t0, t1 = run.ctx.clamp_span(video, t0, t1)
                run.evidence = (Evidence(video, t0, t1),)
                said = f"[{t0:g}, {t1:g}]"
        return run.answer(said, forced=forced, reason=reason)

    def _final(self, run: Run, reason: str) -> Answer:
        """One call without tools for the answer: the iteration limit's forced answer, or (no
        review phase) the answer after perception."""
        prompt = (
            FORCED
            if reason != "answered"
            else "Give your final answer now, starting with `**Answer:**`."
        )
        messages = run.final_messages(prompt)
        # a multiple-choice question's letter, as every strategy's forced answer (a free
        # string let SmolLM2 write "The answer is: The answer is: …" and no letter)
        schema = self.final_schema(run)
        text = run.chat(messages, schema, check=False)
        if schema is not None:
            text = _json_answer(text)
        found = ANSWER.search(text)
        return self._answer(
            run, found.group(1) if found else text, forced=reason != "answered", reason=reason
        )

    def force_answer(self, run: Run, reason: str, note: str = "") -> Answer:
        answered = self._final(run, reason)
        return dataclasses.replace(answered, note=note) if note else answered


def _without_video(t: Tool) -> Tool:
    spec = t.spec()
    params = copy.deepcopy(spec.parameters)
    if "video" not in params.get("properties", {}):
        return t
    del params["properties"]["video"]
    return t.presented_as(ToolSpec(spec.name, spec.description, params))


def _answer_in(text: str, said: str | None) -> str | None:
    """The answer a turn gave: a JSON ``answer`` action's, else what follows ``**Answer:**``."""
    if said is not None:
        return said
    found = ANSWER.search(text)
    return found.group(1) if found else None


def _json_answer(text: str) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text
    return str(data.get("answer", text)) if isinstance(data, dict) else text


_FIG6 = re.compile(r"^’(\w+)’: ’(.*)’,?$")


def tool_descriptions() -> dict[str, str]:
    """Fig. 6: each tool's line of the system prompt, by tool name."""
    found = (_FIG6.match(line.strip()) for line in load_prompt("avi_tools").splitlines())
    return {m.group(1): m.group(2) for m in found if m}
