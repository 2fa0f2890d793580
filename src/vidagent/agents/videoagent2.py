"""VideoAgent2 (Zhi et al.): an uncertainty-aware plan-adjust chain of thought over a memory bank
(spec ``videoagent2-eea.md`` part A; paper ``videoagent2.txt``).

Algorithm 1: (1) ``B_1 = {C, S}``, captions of consecutive n-second segments (n = 4) of frames
at fps_d = 1 and the LLM's summary of them (prompt_Summary); (2) prompt_Answer gives ``A_t`` and
``cf_t`` in one call, and ``cf_t >= cf_thr`` (5) stops; (3) prompt_CreatePlan at t = 1,
prompt_AdjustPlan after, each naming exactly one tool with its frame range and parameters; (4)
the tool runs and its return is appended to the bank with its confidence (Merge, A.11 #5:
``{'step', 'call', 'return', 'confidence'}``). At most T = 5 assessments and T - 1 tool calls: at
t = T the answer is returned without a plan (A.11 #1; Sec. 4.4 "the maximum number of tool calls
is equal to T-1"). :attr:`Answer.confidence` is that answer's ``cf`` on the paper's 0-5 scale
(0: "not enough information", else "scaled from 1-5"), not the 0-1 of tool confidences.
The memory bank, the reply parsers and the reply schemas live in :mod:`.videoagent2_memory`.

The five tools are the perception tools: Image Caption → ``caption_frames``, Object Detection →
``detect_objects``, the two zoom tools → ``zoom_in`` (task caption / detect), Object Tracking →
``track_object``. Frame ids are indices at fps_d (seconds at 1 fps); a ``bbox`` whose values are
all at most 1 is fractions of the frame (what the tools return), else pixels of the frame.

Protocols: where the llm calls tools natively (GPT-4o), the prompts go verbatim and replies are
parsed as spec A.7.6 says; in JSON-action mode (``tool_mode``, or an llm without native calls
such as the embedded SmolLM2) a line naming the fields is added and ``response_schema``
constrains the reply.

Decisions where the paper is silent (spec A.11 numbers):

- General context: the index's clip captions and global summary when the video was indexed
  with ``clip_seconds == n`` and ``sample_fps == fps_d`` (``stages["structure"]["sampling"]``;
  its VLM captions see 2 fps, denser than the fps_d chosen "to ensure computational
  efficiency"). Otherwise it is built: segments cut as the index cuts clips (a tail under n/5
  joins the one before), each captioned by the ``vlm`` role from its fps_d frames with
  ``videoagent2_segment_caption.txt`` (not from the paper: LaViLa takes no prompt) or by the
  perception describer from the index rows inside it, then summarised as the summarize stage
  does (#6, #13); it is cached as ``Summary(kind="videoagent2:<n>s@<fps>fps")``. Like
  indexing, building does not count frames against the question's budget (tokens it does).
- Conversation (#4): one chat per question; ``B_t`` holds ``B_{t-1}``, so the banks of earlier
  answer turns are replaced by a note.
- Unparsable replies: no answer is ``cf = 0``; a multiple-choice answer naming no option is no
  answer; a plan with no valid call gives an error record of confidence 0 that counts as the
  step's tool call (#14).
- No answer at t = T, or a budget spent (#2): one more call, the bank plus "You must choose the
  single most likely option.".
- A small context window (SmolLM2's 8k): captions are cut to fewer words until the bank takes
  at most 40% of it, tool returns to 1200 characters.
- One video per question: the prompts cannot name another.

Table 4's ablations, each its own switch (the paper stacks them): ``tool_confidence=False``
strips confidences from tool returns ("disabling tools from generating confidence scores");
``adjust_plan=False`` asks once for every action and runs them ("develops an information
retrieval plan and executes it without any modifications"); ``chain_of_thought=False`` drops
"Please think step by step." and the plan ("directly calls tools and generates answers without
the CoT process"), making ``adjust_plan`` moot; ``tools=False`` answers from ``B_1`` alone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from vidagent.agents.answer import extract_choice
from vidagent.agents.base import Action, Agent, Answer, Question
from vidagent.agents.budget import Budget
from vidagent.agents.trace import FormatError, Observed, ToolCalled
from vidagent.agents.videoagent2_memory import (
    PAPER_TOOLS,
    TOOL_KEYS,
    MemoryBank,
    ToolRecord,
    answer_schema,
    as_number,
    json_object,
    parse_assessment,
    parse_box,
    parse_frame_range,
    parse_plan,
    plan_schema,
    tool_key,
)
from vidagent.exceptions import ConfigError
from vidagent.ingest.base import text_hash
from vidagent.ingest.summarize import GLOBAL, Line, Summarize, caption_lines
from vidagent.library.schema import ClipRow, Summary
from vidagent.media import uniform_clips
from vidagent.models.base import ChatRequest, Message
from vidagent.prompts import load_prompt, prompt_hash
from vidagent.tools.base import Observation, Toolbox
from vidagent.tools.perception import PERCEPTION_TOOLS

if TYPE_CHECKING:
    from vidagent.library import Library, VideoRecord
    from vidagent.models.client import Models

CONTEXT_KIND = "videoagent2:"  # Summary kind prefix of a general context built here
SMALL_CONTEXT = 16384  # tokens; below this the bank is fitted (SmolLM2: 8192)
RETURN_CHARS = 1200
SEGMENT_SIDE = 360  # short side of segment frames sent to a VLM (LaViLa sees 224 px)
ELIDED_BANK = "(the memory bank at this point; the latest one follows below)"

# Not from the paper: ablation endings, the forced answer (A.11 #2), JSON field notes.
THINK = "Please think step by step. "
PLAN_TAIL = "Please think step by step and first make"
FIRST_ACTION = "Then please\noutput  the first action"
_FORMAT = "in the following JSON format: {’Action’: ’tool call command’}."
DIRECT_ACTION = f"Please output the action directly {_FORMAT}"
DIRECT_NEXT = (
    f"Your answer is not confident enough. Please output the next action directly {_FORMAT}"
)
ALL_ACTIONS = "Then please\noutput every action of the plan, in order, each"
FINAL_CHOICE = "You must choose the single most likely option."
FINAL_OPEN = "You must give your best answer."
JSON_ANSWER = (
    'Reply with a JSON object: {thought}"answer" is {what}, or "none" if you do not have '
    'enough information; "confidence" is 0 then, else your confidence score from 1 to 5.'
)
JSON_PLAN = "Reply with a JSON object: {plan}{action} to call a tool."


@dataclass(frozen=True)
class VideoAgent2Options:
    """Settings of the VideoAgent2 strategy; defaults follow the paper.

    Attributes:
        confidence_threshold: cf_thr: stop when the answer's confidence (0-5) reaches it.
        max_assessments: T; None takes the step budget (default 5). Sets the step budget.
        fps: fps_d, frames per second of the general context and of frame ids.
        segment_seconds: n, seconds per captioned segment.
        context: ``auto`` reuses the index when it was cut into n-second clips at fps_d and
            builds the context otherwise; ``index`` always reuses it; ``build`` always builds.
        cache_context: store a built context in the Library and reuse it.
        tool_confidence: ablation (1) when False: tool returns lose their confidences.
        adjust_plan: ablation (2) when False: one plan of every action, run unchanged.
        chain_of_thought: ablation (3) when False: no step-by-step reasoning and no plan.
        tools: ablation (4) when False: answer from the general context alone.
        caption_words: cut captions in the bank to this many words; None fits small contexts.
        tool_options: ``ctx.options`` for the perception tools (``detect_alpha`` …).
    """

    confidence_threshold: float = 5.0
    max_assessments: int | None = None
    fps: float = 1.0
    segment_seconds: float = 4.0
    context: Literal["auto", "index", "build"] = "auto"
    cache_context: bool = True
    tool_confidence: bool = True
    adjust_plan: bool = True
    chain_of_thought: bool = True
    tools: bool = True
    caption_words: int | None = None
    tool_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checks = {
            "confidence_threshold must be in [0, 5]": 0 <= self.confidence_threshold <= 5,
            "max_assessments must be at least 1": (self.max_assessments or 1) >= 1,
            "fps and segment_seconds must be positive": min(self.fps, self.segment_seconds) > 0,
            "context must be auto, index or build": self.context in ("auto", "index", "build"),
        }
        for problem, ok in checks.items():
            if not ok:
                raise ConfigError(f"videoagent2: {problem} (set it with --set key=value)")


# ---------------------------------------------------------------------------------------------
# The agent


class VideoAgent2Agent(Agent):
    """VideoAgent2. Extra keyword arguments are :class:`VideoAgent2Options` fields."""

    name = "videoagent2"
    max_steps = 5  # T
    stages = ("transcribe", "read_text", "detect", "caption", "summarize")  # no retrieval

    bank: MemoryBank
    _chat: list[Message]  # the question's one conversation
    _banks: dict[int, str]  # chat index of an answer turn -> that turn with its bank elided
    _queue: list[dict[str, Any]]  # the unadjusted plan's remaining actions

    def __init__(self, library: Library, models: Models, **kwargs: Any) -> None:
        fields = set(VideoAgent2Options.__dataclass_fields__)
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in fields}
        unknown = set(kwargs) - {"budget", "tool_mode", "max_tokens"}
        if unknown:
            raise ConfigError(
                f"videoagent2 has no option {', '.join(sorted(unknown))}; "
                f"its options: {', '.join(sorted(fields))}"
            )
        self.options = VideoAgent2Options(**options)
        if self.options.max_assessments is not None:
            budget = kwargs.get("budget") or Budget()
            kwargs["budget"] = dataclasses.replace(budget, steps=self.options.max_assessments)
        super().__init__(library, models, **kwargs)
        self.toolbox = Toolbox(PERCEPTION_TOOLS)

    def describe(self) -> dict[str, Any]:
        protocol = "json" if self._mode() == "json" else "text"
        return {**super().describe(), **asdict(self.options), "protocol": protocol}

    # -- the loop (Algorithm 1) -------------------------------------------------------------------

    def solve(self, question: Question) -> Answer:
        self.bank, self._chat, self._banks, self._queue = MemoryBank([], ""), [], {}, []
        self._json = self._mode() == "json"
        if len(question.video_ids) != 1:
            raise ConfigError("videoagent2 answers about one video at a time; ask about each")
        self.ctx.options.update(self.options.tool_options, question=question.prompt)
        self.bank = self.general_context(question.video_ids[0])
        last = (self.budget.steps or self.max_steps) if self.options.tools else 1
        reason = "max_steps"
        for t in range(1, last + 1):
            self.step = t
            self.meter.check()
            answer, confidence = self.assess(question)
            self.meter.steps = t
            if answer is not None and confidence >= self.options.confidence_threshold:
                return self.make_answer(answer, question, confidence=confidence)
            if t == last:
                break
            self.meter.check()
            command = self.plan(t)
            if command is None:  # an unadjusted plan ran out of actions
                reason = "plan_done"
                break
            self.meter.check()
            self.retrieve(t, command)
        if answer is None:
            return self.force_answer(question, reason)
        return self.make_answer(answer, question, reason=reason, confidence=confidence)

    # -- phase 1 ----------------------------------------------------------------------------------

    def general_context(self, video_id: str) -> MemoryBank:
        """B_1 = {C, S}: the index's when it fits the settings, else built (module docstring)."""
        record = self.library.get_video(video_id)
        o = self.options
        sampling = record.stages.get("structure", {}).get("sampling", {})
        wanted = {"clip_seconds": o.segment_seconds, "sample_fps": o.fps}
        fits = all(_same(sampling.get(k), v) for k, v in wanted.items())
        lines = []
        if o.context == "index" or (o.context == "auto" and fits):
            lines = caption_lines(self.library.clips(video_id))
        if lines:
            source, stored = "index", self.library.summary(video_id, GLOBAL)
            fresh = stored is not None and stored.inputs_hash == text_hash(*map(str, lines))
            summary = stored.text if fresh and stored is not None else self._summarize(lines)
        else:
            lines, summary, source = self._build_context(record)
        self.phase("context", source=source, segments=len(lines), summary=summary)
        return MemoryBank(lines, summary)

    def _summarize(self, lines: list[Line]) -> str:
        """S = F_llm(C, prompt_Summary), chunked for small models as the summarize stage does."""
        self.meter.check()
        return Summarize().summarize_lines(self.models.client("llm"), lines)[0]

    def _build_context(self, record: VideoRecord) -> tuple[list[Line], str, str]:
        """C and S built here (or read from the Library's cache), and which it was."""
        o, vid = self.options, record.video_id
        kind = f"{CONTEXT_KIND}{o.segment_seconds:g}s@{o.fps:g}fps"
        prompts = ("videoagent2_summary", "videoagent2_segment_caption")
        specs = [self.models.client(r).spec for r in ("vlm", "llm")]
        fingerprint = "|".join([*specs, *map(prompt_hash, prompts)])
        inputs = text_hash(json.dumps(record.stages, sort_keys=True))
        cached = self.library.summary(vid, kind) if o.cache_context else None
        if cached is not None and (cached.model, cached.inputs_hash) == (fingerprint, inputs):
            segments = json.loads(cached.data)["segments"]
            return [Line(*s) for s in segments], cached.text, "cache"
        spans = uniform_clips(record.duration, o.segment_seconds)
        lines = [Line(s.t0, s.t1, self._caption_segment(record, s.t0, s.t1)) for s in spans]
        summary = self._summarize(lines)
        if o.cache_context:
            data = json.dumps(
                {"segments": [[x.t0, x.t1, x.text] for x in lines]}, ensure_ascii=False
            )
            self.library.put_summary(Summary(vid, kind, summary, data, fingerprint, inputs))
        return lines, summary, "built"

    def _caption_segment(self, record: VideoRecord, t0: float, t1: float) -> str:
        """One segment's caption from its frames at fps_d (the paper's F_vc)."""
        from vidagent.tools.frames import ask_vlm

        count = max(1, math.ceil((t1 - t0) * self.options.fps - 1e-6))
        times = [round(t0 + k / self.options.fps, 3) for k in range(count)]
        client = self.models.client("vlm")
        if client.adapter.provider == "perception":
            return self._describe_segment(record, t0, t1, times)
        if not client.capabilities.supports_images:
            raise ConfigError(
                f"the vlm role {client.spec} takes no images; set vlm to a vision model "
                "(openai:<model>) or to perception:describer"
            )
        system = load_prompt("videoagent2_segment_caption").strip()
        clip = f"The clip spans {str(Line(t0, t1, '')).partition(': ')[0]}."
        text = ask_vlm(self.ctx, record.video_id, times, short_side=SEGMENT_SIDE, system=system,
                       prompt=clip, max_tokens=120)  # fmt: skip
        return " ".join(text.split())

    def _describe_segment(
        self, record: VideoRecord, t0: float, t1: float, times: list[float]
    ) -> str:
        """The perception describer's caption of a segment, from the index rows inside it."""
        from vidagent.ingest.describe import decode_jpeg, describe_clip, detections_in

        vid, clips = record.video_id, self.library.clips(record.video_id, t0, t1)
        found = [d for c in clips for d in json.loads(c.detections or "[]") if t0 <= d["t"] < t1]
        # On-screen text is stored per clip without times: the overlapping clips' lines.
        ocr = dict.fromkeys(x.strip() for c in clips for x in c.ocr_text.splitlines() if x.strip())
        speech = " ".join(s.text.strip() for s in self.library.transcript(vid, t0, t1))
        first = clips[0] if clips else ClipRow(vid, 0, t0, t1)
        row = dataclasses.replace(
            first, t0=t0, t1=t1, detections=json.dumps(found), ocr_text="\n".join(ocr),
            transcript=speech,
        )  # fmt: skip
        thumbs = [f for f in self.library.frames(vid, t0, t1) if f.t < t1]
        picked = {min(thumbs, key=lambda f: abs(f.t - t)).t for t in times} if thumbs else set()
        frames = [(f.t, decode_jpeg(f.jpeg)) for f in thumbs if f.t in picked]
        cuts = [s.t0 for s in self.library.shots(vid)[1:]]
        return describe_clip(row, frames, cuts, detections_in(row, record.width, record.height))

    # -- phase 2 ----------------------------------------------------------------------------------

    def _fit(self) -> tuple[int | None, int]:
        """Caption words and tool-return characters that keep the bank within a small context."""
        context = self.models.client("llm").capabilities.context_tokens
        words = self.options.caption_words
        if not context or context >= SMALL_CONTEXT:
            return words, 0
        room = int(context * 0.4 * 3)  # characters; base.fit_context counts three per token
        cuts = (words,) if words is not None else (None, 120, 80, 50, 30, 20, 12)
        fitting = (c for c in cuts if len(self.bank.render(words=c)) <= room)
        return next(fitting, cuts[-1]), RETURN_CHARS

    def answer_prompt(self, question: Question, bank: str | None = None) -> str:
        """prompt_Answer with ``{B}`` the current bank (or ``bank``) and ``{Q}`` the question with
        its options; the JSON protocol adds a line naming the fields."""
        if bank is None:
            words, chars = self._fit()
            confidences = self.options.tool_confidence
            bank = self.bank.render(confidences=confidences, words=words, chars=chars)
        text = load_prompt("videoagent2_answer").strip()
        if not self.options.chain_of_thought:
            text = _without(text, THINK, "")
        text = text.replace("{Q}", question.prompt).replace("{B}", f"\n{bank}\n")
        if self._json:
            cot = self.options.chain_of_thought
            thought = '"thought" is your reasoning, step by step; ' if cot else ""
            what = "the option letter" if question.options else "your answer"
            text += "\n\n" + JSON_ANSWER.format(thought=thought, what=what)
        return text

    def assess(self, question: Question) -> tuple[str | None, float]:
        """Phase 2: ``A_t`` and ``cf_t`` in one call."""
        prompt, elided = self.answer_prompt(question), self.answer_prompt(question, ELIDED_BANK)
        reply = self._ask(prompt, self._answer_schema(question, final=False), elided)
        answer, confidence = parse_assessment(reply)
        if answer is not None and question.options:
            answer = answer if extract_choice(answer, question.options) is not None else None
        self.phase("assess", answer=answer, confidence=confidence)
        return answer, confidence

    def _answer_schema(self, question: Question, *, final: bool) -> dict[str, Any] | None:
        if not self._json:
            return None
        local = self.models.client("llm").capabilities.local
        cot = self.options.chain_of_thought
        return answer_schema(len(question.options), cot=cot, final=final, local=local)

    def _ask(self, prompt: str, schema: dict[str, Any] | None, elided: str | None = None) -> str:
        """One llm turn in the chat. An answer turn (``elided``: itself without its bank) makes
        the banks of the answer turns before it redundant: they are sent elided."""
        if elided is not None:
            self._banks[len(self._chat)] = elided
        self._chat.append(Message("user", prompt))
        latest = max(self._banks, default=-1)
        sent = [
            Message(m.role, self._banks[i]) if i in self._banks and i < latest else m
            for i, m in enumerate(self._chat)
        ]
        client = self.models.client("llm")
        schema_ok = client.capabilities.supports_json_schema
        response = client.chat(
            ChatRequest(
                tuple(sent),
                response_schema=schema if schema_ok else None,
                json_mode=schema is not None and not schema_ok,
                max_tokens=self._turn_tokens(),
            )
        )
        self._chat.append(Message("assistant", response.text))
        return response.text

    def force_answer(self, question: Question, reason: str) -> Answer:
        """A.11 #2: the bank once more, with "You must choose the single most likely option."."""
        must = FINAL_CHOICE if question.options else FINAL_OPEN
        prompt = f"{self.answer_prompt(question)}\n\n{must}"
        elided = f"{self.answer_prompt(question, ELIDED_BANK)}\n\n{must}"
        reply = self._ask(prompt, self._answer_schema(question, final=True), elided)
        data = json_object(reply)
        if data is not None and str(data.get("answer") or "").strip():
            text, confidence = str(data["answer"]).strip(), as_number(data.get("confidence"))
        else:
            answer, confidence = parse_assessment(reply)
            text = answer if answer is not None else reply
        return self.make_answer(text, question, forced=True, reason=reason, confidence=confidence)

    # -- phase 3 ----------------------------------------------------------------------------------

    def plan_prompt(self, t: int) -> str | None:
        """prompt_CreatePlan at t = 1, else prompt_AdjustPlan; ablations change the endings.
        None when the unadjusted plan is only run (no call)."""
        o = self.options
        if t > 1:
            if not o.chain_of_thought:
                return DIRECT_NEXT
            return load_prompt("videoagent2_adjust_plan").strip() if o.adjust_plan else None
        text = load_prompt("videoagent2_create_plan").strip()
        if not o.chain_of_thought:
            return text[: text.index(PLAN_TAIL)] + DIRECT_ACTION
        if not o.adjust_plan:
            return _without(text, FIRST_ACTION, ALL_ACTIONS)
        return text

    def plan(self, t: int) -> dict[str, Any] | None:
        """Phase 3: the step's tool call command (an empty dict when the reply had none)."""
        prompt = self.plan_prompt(t)
        if prompt is None:
            command = self._queue.pop(0) if self._queue else None
            if command is not None:
                self.phase("plan", action=command, plan="(the plan of t = 1, unchanged)")
            return command
        cot = self.options.chain_of_thought
        # Unadjusted, the plan's every action is asked for at once: T - 1 at most are run.
        unadjusted = t == 1 and cot and not self.options.adjust_plan
        every = max(1, (self.budget.steps or self.max_steps) - 1) if unadjusted else 0
        schema = None
        if self._json:
            frames = math.floor(self.ctx.duration(self.ctx.video_ids[0]) * self.options.fps)
            local = self.models.client("llm").capabilities.local
            schema = plan_schema(cot=cot, actions=every, last_frame=frames, local=local)
            plan = '"plan" is your plan, step by step; ' if cot else ""
            action = '"Actions" are the commands, in order' if every else '"Action" is the command'
            prompt += "\n\n" + JSON_PLAN.format(plan=plan, action=action)
        reply = self._ask(prompt, schema)
        text, commands = parse_plan(reply)
        commands = commands[:every] if every else commands[-1:]  # A.7.6: the last Action block
        self._queue = commands[1:]
        if not commands:
            problem = "no tool call command in the reply"
            self.emit(FormatError, attempt=1, problem=problem, reply=reply)
        self.phase("plan", action=commands[0] if commands else None, plan=text, adjusted=t > 1)
        return commands[0] if commands else {}

    # -- phase 4 ----------------------------------------------------------------------------------

    def retrieve(self, t: int, command: dict[str, Any]) -> Observation:
        """Phase 4: run the command's tool and merge its return into the bank."""
        mapped = self.to_action(command)
        if isinstance(mapped, Action):
            obs = self.act(mapped, self.toolbox)
        else:
            obs = Observation(f"Invalid tool call: {mapped}", confidence=0.0, error=True)
            call_id = f"call_{uuid.uuid4().hex[:8]}"
            name = str(command.get("tool_name", "?"))
            self.emit(ToolCalled, call_id=call_id, tool=name, arguments=command)
            self.emit(Observed, call_id=call_id, tool=name, text=obs.text, confidence=0.0,
                      evidence=[], frames=0, model_calls=0, error=True, seconds=0.0)  # fmt: skip
        self.bank.returns.append(ToolRecord(t, command, obs.text, obs.confidence, obs.error))
        return obs

    def to_action(self, command: dict[str, Any]) -> Action | str:
        """Our tool call for a paper tool call command, or what is wrong with it."""
        raw = str(command.get("tool_name") or command.get("tool") or "")
        paper = TOOL_KEYS.get(tool_key(raw))
        if paper is None:
            return f"unknown tool {raw!r}; the tools are: {', '.join(PAPER_TOOLS)}"
        tool, task = PAPER_TOOLS[paper]
        span = parse_frame_range(command.get("frame_range"))
        if span is None:
            return "frame_range must be a frame id or 'start frame-end frame'"
        start, end = (round(f / self.options.fps, 3) for f in span)
        args: dict[str, Any] = {"start" if tool == "caption_frames" else "time": start}
        if tool == "zoom_in":
            record = self.library.get_video(self.ctx.video_ids[0])
            box = parse_box(command.get("bbox"), record.width, record.height)
            if isinstance(box, str):
                return box
            args |= {"box": list(box), "task": task}
        elif tool == "track_object":
            args = {
                "object_name": str(command.get("object_name") or ""),
                "start": start,
                "end": end,
            }
        elif end != start:
            args["end"] = end
        return Action(f"call_{uuid.uuid4().hex[:8]}", tool, args)


def _same(value: Any, want: float) -> bool:
    return isinstance(value, (int, float)) and abs(float(value) - want) < 1e-6


def _without(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced; a prompt file that lost ``old`` is our bug."""
    if old not in text:
        raise RuntimeError(f"prompt text {old!r} not found: the prompt file changed")
    return text.replace(old, new, 1)
