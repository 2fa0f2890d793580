"""Deep Video Discovery (Zhang et al.): a ReAct agent over global_browse, clip_search and
frame_inspect (spec ``dvd-avi.md`` part A; paper ``dvd.txt``).

Faithful to the paper: Table 10's prompts as the system and user messages, Tables 13–14's
function schemas verbatim (without the runtime-injected ``database``), Tables 11–12 inside the
tools, at most N = 15 steps with "Please call the `answer` function to finish the task." added
on the last one and, failing that, one more call without tools (the paper's Fig. 8 shows a 16th
step). clip_search keeps k = 16 by default and the model may change it.

Decisions where the paper is silent (spec A.11):

- ``CLIP_SEARCH_WITH_TIME_PLACEHOLDER`` (#10): a hint to inspect frames directly when the
  question names a time (``\\d{1,2}:\\d{2}``), else nothing. ``[question]`` is the question
  with its options as ``(A) …`` lines; the last line ("Answer with the option's letter …") is
  dropped for open questions (#19).
- Several videos: the tools gain a ``video`` argument and the user prompt lists the videos
  (name, id, duration); one video keeps the paper's schemas exactly.
- ``prefill_global_browse`` (#12, off): run global_browse once and add it to the first message.
- ``clip_search_time_range`` (#13, off): show clip_search's optional ``time_range``.
- ``normalize_tool_names`` (#23, off): write ``clip_search``/``frame_inspect`` in the prompt
  where Table 10 says 'ClipSearch'/'FrameInspect'.
- ``tools`` (Table 5 ablations): which of the three search tools the agent gets.
- The forced answer: past the step limit (after the finish prompt), a spent budget, the same
  failing call three times or a model error, one more call without tools asks for the answer.
- Evidence first (the runtime's, :meth:`~vidagent.agents.run.Run.evidence_first`; on by
  default for the embedded smoke-test llm only): the index's evidence for the question and each
  option is an observation after the user prompt, before step 1.
- Local models (small context): clip texts are cut to 120 words in search results (#22).
- ``index``: the index the agent asks for. The paper's 74.2 on LVBench captions clips without
  transcripts and embeds and shows the caption alone (``"paper"``); its 76.0 fills the caption
  prompt's ``[TRANSCRIPTS]`` (``"paper+transcripts"``; transcripts come from faster-whisper,
  not WhisperX, and clips stay uniform: #4's transcript-guided cuts are not built). The
  default ``"rich"`` also reads on-screen text and detections, embeds each caption with its
  speech and on-screen text, and shows them in search results. The trace's ``started`` event
  records the stages and index settings in force (``index``). A video given by name keeps
  the index it has; a file is brought to the plan (a changed setting re-captions or
  re-embeds the clips it changes).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidagent.agents.actions import Action
from vidagent.agents.base import Agent, Answer, IndexPlan, Question
from vidagent.exceptions import ConfigError
from vidagent.models.base import Message, ToolSpec
from vidagent.prompts import load_json, load_prompt
from vidagent.timecode import hms
from vidagent.tools.base import Toolbox, answer
from vidagent.tools.frames import frame_inspect
from vidagent.tools.options import FrameOptions, RetrievalOptions, ToolOptions
from vidagent.tools.retrieval import clip_search, global_browse

if TYPE_CHECKING:
    from vidagent.agents.run import Run

SEARCH_TOOLS = ("global_browse", "clip_search", "frame_inspect")
FINISH_PROMPT = "Please call the `answer` function to finish the task."
TIME_HINT = (
    "If the question mentions a specific time, use 'FrameInspect' directly around that time."
)
ANSWER_LINE = (
    "Answer with the option's letter from the given choices directly and only give the best option."
)
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b")


@dataclass(frozen=True)
class DVDOptions:
    """Settings of the DVD strategy (defaults follow the paper)."""

    tools: tuple[str, ...] = SEARCH_TOOLS
    prefill_global_browse: bool = False
    clip_search_time_range: bool = False
    normalize_tool_names: bool = False
    browse_frames: int = 250
    browse_height: int = 360
    browse_splice: int = 5  # frames to an image: 250 frames are the paper's 50 images
    inspect_frames: int = 50
    inspect_height: int = 720
    caption_words: int | None = None  # None: 120 for local llms, else all
    #: "rich" (default): captions see transcripts, clips are searched and shown with their
    #: speech and on-screen text. "paper": as published for the 74.2 on LVBench, captions
    #: alone, built without transcripts, embedded and shown alone. "paper+transcripts": the
    #: 76.0 setting, transcripts in the caption prompt, captions embedded and shown alone.
    index: Literal["rich", "paper", "paper+transcripts"] = "rich"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.tools) - set(SEARCH_TOOLS))
        if unknown:
            raise ConfigError(f"dvd option tools: unknown {unknown}; choose from {SEARCH_TOOLS}")
        sizes = (
            self.browse_frames,
            self.browse_height,
            self.browse_splice,
            self.inspect_frames,
            self.inspect_height,
        )
        if min(sizes) < 1:
            raise ConfigError("dvd options browse_* and inspect_* must be at least 1")


class DVDAgent(Agent):
    """Deep Video Discovery; its options are :class:`DVDOptions`."""

    name = "dvd"
    max_steps = 15
    takes_evidence = True
    Options = DVDOptions
    options: DVDOptions
    stages = ("transcribe", "read_text", "detect", "caption", "embed")  # no global summary

    def index_plan(self) -> IndexPlan:
        if self.options.index == "rich":
            return IndexPlan(self.stages)
        transcripts = self.options.index == "paper+transcripts"
        stages = ("transcribe", "caption", "embed") if transcripts else ("caption", "embed")
        return IndexPlan(stages, {"caption_transcripts": transcripts, "embed_text": "caption"})

    def tool_options(self, question: Question) -> ToolOptions:
        o = self.options
        return ToolOptions(
            question=question.prompt,
            retrieval=RetrievalOptions(
                caption_words=self._caption_words(),
                browse_frames=o.browse_frames,
                browse_height=o.browse_height,
                browse_splice=o.browse_splice,
                speech_and_text=o.index == "rich",
            ),
            frames=FrameOptions(inspect_frames=o.inspect_frames, inspect_height=o.inspect_height),
        )

    def solve(self, run: Run) -> Answer:
        question = run.question
        toolbox = self.toolbox(several=len(question.video_ids) > 1)
        user = self.user_prompt(question)
        if self.options.prefill_global_browse and "global_browse" in toolbox:
            browsed = run.act(
                Action("prefill", "global_browse", {"query": question.prompt}), toolbox
            )
            user += f"\n\n{browsed.text}"
        run.messages = [
            Message("system", load_prompt("dvd_agent_system").strip()),
            Message("user", user),
        ]
        return run.react(toolbox, finish_prompt=FINISH_PROMPT)

    def _caption_words(self) -> int | None:
        if self.options.caption_words is not None:
            return self.options.caption_words
        return 120 if self.models.client("llm").capabilities.local else None

    def toolbox(self, several: bool) -> Toolbox:
        """The paper's tools with their verbatim schemas, minus ablated ones."""
        schemas = {s["function"]["name"]: s["function"] for s in load_json("dvd_tools")}
        tools = {t.name: t for t in (global_browse, clip_search, frame_inspect, answer)}
        box = Toolbox()
        for name in (*[t for t in SEARCH_TOOLS if t in self.options.tools], "answer"):
            params = copy.deepcopy(schemas[name]["parameters"])
            params["properties"].pop("database", None)
            params["required"] = [r for r in params["required"] if r != "database"]
            own = tools[name].schema["properties"]
            if several and "video" in own:
                params["properties"]["video"] = own["video"]
            if name == "clip_search" and self.options.clip_search_time_range:
                params["properties"]["time_range"] = own["time_range"]
            spec = ToolSpec(name, schemas[name]["description"], params)
            box.add(tools[name].presented_as(spec))
        return box

    def user_prompt(self, question: Question) -> str:
        """Table 10's user prompt with its placeholders filled (see the module docstring)."""
        text = load_prompt("dvd_agent").strip()
        hint = TIME_HINT if _TIME.search(question.prompt) else ""
        text = text.replace("CLIP_SEARCH_WITH_TIME_PLACEHOLDER", hint)
        text = text.replace("[question]", question.prompt)
        if not question.options:
            text = text.replace(f"\n\n{ANSWER_LINE}", "")
        if self.options.normalize_tool_names:
            text = text.replace("'ClipSearch'", "'clip_search'").replace(
                "'FrameInspect'", "'frame_inspect'"
            )
        if len(question.video_ids) > 1:
            lines = [
                f"- {v.name} (id {v.video_id[:12]}, {hms(v.duration)})"
                for v in (self.index.video(i) for i in question.video_ids)
            ]
            text += "\n\nThe question is about these videos:\n" + "\n".join(lines)
        return text
