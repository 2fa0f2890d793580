"""AgentCVR's master loop, independent of where observations come from (spec/agentcvr.md §2, §4).

The master is text only: a system prompt (one per CrossVid task, verbatim from the paper's
Appendix H.3, or our generic one), a JSON user turn with the question, each video's index and
length and the options, then one JSON action per turn: ``observe``, ``get_caption`` or
``answer``. :func:`run_master` runs that loop against a :class:`CvrEnvironment`: the real visual
and audio sub-agents (:mod:`vidagent.agents.cvr.agent`) or a text simulator for RL training; both see
exactly the same messages, so a policy trained on the simulator runs unchanged on videos.

Decisions where the paper and its code are silent (spec §9):

- Observations go back as a ``user`` message ``[TOOL OBS] {"call_id", "tool_name", "result"}``
  (errors: ``"error"`` instead of ``"result"``), the code's fallback for servers without a ``tool``
  role; a ``tool`` message without a preceding native tool call is refused by OpenAI-compatible
  servers, and the master here speaks plain-text JSON. The result text goes back whole: the paper
  publishes no cut and the released inference code (``agent_system/agent_executor.py``) sends
  every observation whole; a long history is fitted to the model's context by the client
  (:mod:`vidagent.models.context`). The released *RL simulator* (verl's agent loop, configured by
  ``crossvid_qwen3_grpo.yaml``: ``max_tool_response_length: 2000``,
  ``tool_response_truncate_side: "middle"``) cuts each tool response to its first and last 1,000
  characters around ``...(truncated)...``; ``run_master(response_chars=2000)`` does the same, and
  training rollouts in the text simulator ask for it by default (``simulator.response_chars``).
- A reply that is not one valid action is retried up to :data:`CVR_FORMAT_RETRIES` times in all;
  a retry appends the published reminder and a line saying what was wrong (a deterministic model
  given the same messages would say the same thing again). Neither the rejected reply nor the
  reminder stays in the history. Three failures end the episode without an answer.
- From turn :data:`CVR_TOLERANCE_TURNS` on, each observation carries a note with the turn count;
  the last turn (``max_turns``) is forced: its observation says to answer now, and only an
  ``answer`` action is accepted then. So an episode has at most ``max_turns`` master turns.
- ``<think>...</think>`` is stripped from a reply before it is stored.
- Frame-folder (drone-view) videos have no duration: their ``start_time``/``end_time`` (or
  ``start_frame``/``end_frame``, as the released code asks) are frame numbers, and the user turn
  shows ``total_frames`` instead of ``duration_seconds``, as the released code does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from vidagent.agents.cvr.parse import (
    LETTERS,
    AnswerFormat,
    CvrFormatError,
    extract_json,
    normalise_answer,
    number_param,
    strip_think,
)
from vidagent.exceptions import MediaError, ToolInputError, UserError
from vidagent.prompts import load_prompt

CVR_MAX_TURNS = 20
CVR_TOLERANCE_TURNS = 10
CVR_FORMAT_RETRIES = 3
CVR_MAX_FRAMES = 128
#: The released RL simulator's cut of a tool response (verl ``max_tool_response_length``, middle);
#: not in the paper, and not in the released inference code, so real observations are whole.
TOOL_RESPONSE_CHARS = 2000
DEFAULT_FRAMES = 32  # a target without num_frames (the released code; 16 for frame folders)
DEFAULT_FOLDER_FRAMES = 16

TASKS = ("BU", "NC", "CC", "PEA", "PI", "FSA", "PSS", "MSR", "MOC", "CCQA")
# The tasks whose prompts say observe is "the only visual tool": silent or frame-folder videos.
OBSERVE_ONLY = frozenset({"BU", "PEA", "MSR", "MOC"})
ANSWER_FORMATS: dict[str, AnswerFormat] = {"BU": "letters", "PSS": "order", "FSA": "interval"}
ANSWER_FORMATS["CCQA"] = "text"

# The released executor's reminder on a retried turn (spec §6.4.5).
FORMAT_REMINDER = "Please ensure your reply is valid JSON and output only one JSON object per turn."
OBS_PREFIX = "[TOOL OBS] "
TOOL_NAMES = {"observe": "active_perception", "get_caption": "get_caption"}
TRUNCATION_MARK = "...(truncated)..."  # verl's middle-truncation marker
ActionKind = Literal["observe", "get_caption", "answer"]


@dataclass(frozen=True)
class CvrVideo:
    """What the master may know about one video.

    Attributes:
        index: 1-based, as the prompts number the videos.
        duration_seconds: the clip's length; ``None`` for a frame folder.
        total_frames: a frame folder's number of images (``None`` for a video file).
        has_audio: whether the video has a sound track (shown to the master only when ``False``).
        summary: the index's summary of the video, shown when the strategy is asked to.
    """

    index: int
    duration_seconds: float | None = None
    total_frames: int | None = None
    has_audio: bool = True
    summary: str | None = None

    @property
    def frames_based(self) -> bool:
        return self.duration_seconds is None and self.total_frames is not None

    @property
    def extent(self) -> float | None:
        """The end of the video in the master's unit: seconds, or frames for a folder."""
        if self.frames_based:
            return float(self.total_frames or 0)
        return self.duration_seconds


@dataclass(frozen=True)
class ObserveTarget:
    """One interval of one video to look at: seconds (frame numbers for frame folders)."""

    video_index: int
    start: float
    end: float
    num_frames: int


class CvrEnvironment(Protocol):
    """Where observations come from: the real sub-agents, or the RL text simulator."""

    videos: Sequence[CvrVideo]

    def observe(self, targets: Sequence[ObserveTarget], focus_prompt: str) -> str: ...

    def get_caption(self, video_index: int, start: float | None, end: float | None) -> str: ...


class CvrToolError(Exception):
    """An environment could not serve a valid action; goes back to the master as an error."""


@dataclass
class CvrAction:
    """One parsed master action; ``final_answer`` is normalised to the task's format."""

    kind: ActionKind
    thought: str = ""
    targets: tuple[ObserveTarget, ...] = ()
    focus_prompt: str = ""
    video_index: int | None = None
    start: float | None = None
    end: float | None = None
    final_answer: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The action as plain data (for traces and logs)."""
        out: dict[str, Any] = {"action": self.kind}
        if self.kind == "observe":
            out["observation_targets"] = [
                {
                    "video_index": t.video_index,
                    "start": t.start,
                    "end": t.end,
                    "num_frames": t.num_frames,
                }
                for t in self.targets
            ]
            out["focus_prompt"] = self.focus_prompt
        elif self.kind == "get_caption":
            out.update(video_index=self.video_index, start=self.start, end=self.end)
        else:
            out["final_answer"] = self.final_answer
        return out


@dataclass
class EpisodeTurn:
    """One master turn: every attempt's raw reply, the action taken and what came back.

    Attributes:
        turn: 1-based.
        raw: the accepted reply as the model wrote it (the last attempt's when none was accepted).
        attempts: every raw reply of this turn, the rejected ones first.
        errors: the one-line reason each rejected attempt was refused.
        action: the accepted action, or ``None`` when all attempts failed.
        observation: the environment's full text (``None`` for answers and failed turns).
        message: the observation message as the master saw it (cut when the run asked for
            ``response_chars``, with any note).
        tool_error: the environment's error, when the action could not be served.
        forced: whether this was the last turn, where only an answer is accepted.
    """

    turn: int
    raw: str = ""
    attempts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    action: CvrAction | None = None
    observation: str | None = None
    message: str | None = None
    tool_error: str | None = None
    forced: bool = False


@dataclass
class Episode:
    """A whole master run.

    Attributes:
        messages: exactly what the master saw and said, in order (role/content).
        turns: one record per master turn.
        final_answer: the normalised answer, or ``None``.
        forced: whether the answer (or its absence) came from the forced last turn.
        reason: ``answered``, ``forced_answer``, ``format_failure`` or ``no_answer``.
    """

    messages: list[dict[str, str]]
    turns: list[EpisodeTurn] = field(default_factory=list)
    final_answer: str | None = None
    forced: bool = False
    reason: str = ""


# -- prompts and the first user turn ----------------------------------------------------------


def master_prompt(task: str | None) -> str:
    """The master's system prompt for a CrossVid task (verbatim), or the generic one for ``None``.

    Raises:
        UserError: ``task`` is not a CrossVid task code.
    """
    if task is None:
        return load_prompt("cvr_master_generic")
    code = task.upper()
    if code not in TASKS:
        raise UserError(
            f"AgentCVR has no master prompt for task {task!r}; tasks: {', '.join(TASKS)}"
        )
    return load_prompt(f"cvr_master_{code.lower()}")


def answer_format(task: str | None, options: Sequence[str] | None) -> AnswerFormat:
    """How the final answer must be written for ``task`` (generic: a letter when there are options)."""
    if task is not None and task.upper() in ANSWER_FORMATS:
        return ANSWER_FORMATS[task.upper()]
    if task is not None or options:
        return "letter"
    return "text"


def labelled_options(options: Sequence[str]) -> list[str]:
    """Options as ``"A. ..."`` (kept as they are when already labelled so)."""
    out = []
    for i, text in enumerate(options):
        letter = LETTERS[i]
        body = str(text).strip()
        out.append(body if re.match(rf"^\(?{letter}[.):]\s", body) else f"{letter}. {body}")
    return out


def user_message(query: str, videos: Sequence[CvrVideo], options: Sequence[str] | None) -> str:
    """The first user turn, the released code's JSON: query, videos, possible_answers."""
    shown = []
    for v in videos:
        entry: dict[str, Any] = {"video_index": v.index}
        if v.frames_based:
            entry["total_frames"] = v.total_frames
        else:
            entry["duration_seconds"] = (
                round(v.duration_seconds, 2) if v.duration_seconds is not None else None
            )
        if not v.has_audio:
            entry["has_audio"] = False
        if v.summary:
            entry["summary"] = v.summary
        shown.append(entry)
    payload: dict[str, Any] = {"query": query, "videos": shown}
    if options:
        payload["possible_answers"] = labelled_options(options)
    return json.dumps(payload, ensure_ascii=False)


# -- parsing -----------------------------------------------------------------------------------


def _index(value: Any, videos: Sequence[CvrVideo]) -> int:
    number = number_param(value, "video_index")
    if number != int(number) or not 1 <= int(number) <= len(videos):
        raise CvrFormatError(
            f"video_index {value!r} is out of range: videos are 1 to {len(videos)}"
        )
    return int(number)


def _interval(
    params: dict[str, Any], video: CvrVideo, *, required: bool
) -> tuple[float | None, float | None]:
    """``start_time``/``end_time`` (frame folders: also ``start_frame``/``end_frame``), checked;
    an end past the video is clamped to it."""
    raw_start = params.get("start_time", params.get("start_frame"))
    raw_end = params.get("end_time", params.get("end_frame"))
    if raw_start is None and raw_end is None and not required:
        return None, None
    extent = video.extent
    start = 0.0 if raw_start is None else number_param(raw_start, "start_time")
    end = extent if raw_end is None else number_param(raw_end, "end_time")
    if end is None:
        raise CvrFormatError(f"end_time is needed: the length of Video {video.index} is unknown")
    if start < 0:
        raise CvrFormatError(f"start_time {start:g} is negative")
    if extent is not None and end > extent:
        end = extent
    if start >= end:
        unit = "frames" if video.frames_based else "s"
        raise CvrFormatError(
            f"start_time {start:g} must be before end_time {end:g} "
            f"(Video {video.index} is {extent:g} {unit} long)"
            if extent is not None
            else f"start_time {start:g} must be before end_time {end:g}"
        )
    return start, end


def _targets(params: dict[str, Any], videos: Sequence[CvrVideo]) -> tuple[ObserveTarget, ...]:
    raw = params.get("observation_targets")
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise CvrFormatError("observe needs params.observation_targets, a non-empty list")
    targets = []
    for item in raw:
        if not isinstance(item, dict):
            raise CvrFormatError("each observation target must be an object with video_index")
        if "video_index" not in item:
            raise CvrFormatError("an observation target lacks video_index")
        index = _index(item["video_index"], videos)
        video = videos[index - 1]
        start, end = _interval(item, video, required=True)
        default = DEFAULT_FOLDER_FRAMES if video.frames_based else DEFAULT_FRAMES
        count = number_param(item.get("num_frames", default), "num_frames")
        if count != int(count) or count < 1:
            raise CvrFormatError(f"num_frames must be a positive whole number, not {count:g}")
        assert start is not None and end is not None  # required=True
        targets.append(ObserveTarget(index, start, end, int(count)))
    total = sum(t.num_frames for t in targets)
    if total > CVR_MAX_FRAMES:
        raise CvrFormatError(
            f"num_frames sum to {total}; a single observe may ask for at most {CVR_MAX_FRAMES}"
        )
    return tuple(targets)


def parse_master_action(
    text: str,
    *,
    task: str | None,
    videos: Sequence[CvrVideo],
    options: Sequence[str] | None = None,
) -> CvrAction:
    """The action in one master reply, checked against the task and the videos.

    Raises:
        CvrFormatError: not JSON, an unknown action, missing or mistyped parameters, a video index
            out of range, ``start >= end``, more than 128 frames, or an answer not in the task's
            format.
    """
    doc = extract_json(text)
    kind = doc.get("action")
    thought = doc.get("thought", "")
    thought = thought if isinstance(thought, str) else json.dumps(thought, ensure_ascii=False)
    params = doc.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise CvrFormatError("params must be a JSON object")
    code = task.upper() if task else None
    if kind == "observe":
        focus = params.get("focus_prompt", "")
        if not isinstance(focus, str):
            raise CvrFormatError("focus_prompt must be a string")
        return CvrAction("observe", thought, _targets(params, videos), focus_prompt=focus.strip())
    if kind == "get_caption":
        if code in OBSERVE_ONLY:
            raise CvrFormatError("get_caption is not a tool of this task; observe is the only one")
        if "video_index" not in params:
            raise CvrFormatError("get_caption needs params.video_index")
        index = _index(params["video_index"], videos)
        start, end = _interval(params, videos[index - 1], required=False)
        return CvrAction("get_caption", thought, video_index=index, start=start, end=end)
    if kind == "answer":
        raw = doc["final_answer"] if "final_answer" in doc else params.get("final_answer")
        final = normalise_answer(raw, answer_format(code, options), videos=videos, options=options)
        return CvrAction("answer", thought, final_answer=final)
    if kind is None:
        raise CvrFormatError('the JSON object has no "action" key')
    raise CvrFormatError(f"unknown action {kind!r}; use observe, get_caption or answer")


# -- the loop ----------------------------------------------------------------------------------


def truncate_middle(text: str, limit: int = TOOL_RESPONSE_CHARS) -> str:
    """``text`` longer than ``limit`` characters cut as verl's agent loop cuts a tool response on
    its ``middle`` side: the first and the last ``limit // 2`` characters around
    :data:`TRUNCATION_MARK` (so the result is the mark's length over ``limit``)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + TRUNCATION_MARK + text[len(text) - half :]


def observation_message(
    kind: str,
    turn: int,
    *,
    result: str | None,
    error: str | None,
    response_chars: int | None = None,
) -> str:
    """The master-facing observation: ``[TOOL OBS] `` and the published JSON wrapper; the result
    whole, or cut in the middle to ``response_chars`` as the released RL simulator cuts it."""
    body: dict[str, Any] = {"call_id": f"{kind}_{turn}", "tool_name": TOOL_NAMES.get(kind, kind)}
    if error is not None:
        body["error"] = error
    else:
        text = result or ""
        body["result"] = text if response_chars is None else truncate_middle(text, response_chars)
    return OBS_PREFIX + json.dumps(body, ensure_ascii=False)


def turn_note(next_turn: int, max_turns: int) -> str:
    """The note appended for the coming turn: the count from the tolerance zone on, and the
    order to answer on the last turn ("" before the tolerance zone)."""
    if next_turn >= max_turns:
        return (
            f"\n[Turn {next_turn} of {max_turns}: this is your last turn. Reply now with the "
            'answer action: {"action": "answer", "thought": "...", "final_answer": ...}]'
        )
    if next_turn > CVR_TOLERANCE_TURNS:
        return f"\n[Turn {next_turn} of {max_turns}: answer as soon as the evidence suffices.]"
    return ""


def reminder(reason: str) -> str:
    """The user turn that asks again after a rejected reply, saying why."""
    return f"{FORMAT_REMINDER}\n(Your last reply was rejected: {reason})"


def _attempt_turn(
    chat: Callable[[list[dict[str, str]]], str],
    messages: list[dict[str, str]],
    record: EpisodeTurn,
    parse: Callable[[str], CvrAction],
) -> CvrAction | None:
    for _ in range(CVR_FORMAT_RETRIES):
        extra = [{"role": "user", "content": reminder(record.errors[-1])}] if record.errors else []
        raw = chat(messages + extra)
        record.attempts.append(raw)
        record.raw = raw
        try:
            action = parse(raw)
        except CvrFormatError as e:
            record.errors.append(str(e))
            continue
        if record.forced and action.kind != "answer":
            record.errors.append("the turns are used up: reply with the answer action now")
            continue
        return action
    return None


def _serve(env: CvrEnvironment, action: CvrAction) -> str:
    if action.kind == "observe":
        return env.observe(action.targets, action.focus_prompt)
    assert action.video_index is not None
    return env.get_caption(action.video_index, action.start, action.end)


def run_master(
    chat: Callable[[list[dict[str, str]]], str],
    env: CvrEnvironment,
    *,
    query: str,
    options: Sequence[str] | None,
    task: str | None,
    max_turns: int = CVR_MAX_TURNS,
    on_turn: Callable[[EpisodeTurn], None] | None = None,
    on_action: Callable[[EpisodeTurn], None] | None = None,
    response_chars: int | None = None,
) -> Episode:
    """Run the master until it answers, fails the format three times, or uses up ``max_turns``.

    ``response_chars`` cuts each observation's result to that many characters in the middle, as
    the released RL simulator does (:data:`TOOL_RESPONSE_CHARS`); ``None`` (real videos, as the
    paper and the released inference code) sends it whole.

    ``chat(messages)`` is the master model; exceptions it raises (budget, provider) propagate.
    ``on_action`` sees each turn once its action is accepted and before the environment serves
    it; ``on_turn`` sees it when it is over (with its observation).
    An environment's :class:`CvrToolError`, :class:`ToolInputError` or :class:`MediaError` goes
    back to the master as the observation's ``error``.
    """
    if max_turns < 1:
        raise UserError(f"max_turns must be at least 1, not {max_turns}")
    if response_chars is not None and response_chars < 2:
        raise UserError(f"response_chars must be at least 2 (or None: whole), not {response_chars}")
    videos = list(env.videos)
    first = user_message(query, videos, options) + turn_note(1, max_turns)
    messages = [
        {"role": "system", "content": master_prompt(task)},
        {"role": "user", "content": first},
    ]
    episode = Episode(messages=messages)

    def parse(raw: str) -> CvrAction:
        return parse_master_action(raw, task=task, videos=videos, options=options)

    for turn in range(1, max_turns + 1):
        record = EpisodeTurn(turn=turn, forced=turn == max_turns)
        episode.turns.append(record)
        action = _attempt_turn(chat, messages, record, parse)
        record.action = action
        if action is None:
            episode.forced = record.forced
            episode.reason = "no_answer" if record.forced else "format_failure"
            _notify(on_turn, record)
            return episode
        messages.append({"role": "assistant", "content": strip_think(record.raw)})
        _notify(on_action, record)
        if action.kind == "answer":
            episode.final_answer = action.final_answer
            episode.forced = record.forced
            episode.reason = "forced_answer" if record.forced else "answered"
            _notify(on_turn, record)
            return episode
        try:
            record.observation = _serve(env, action)
        except (CvrToolError, ToolInputError, MediaError) as e:
            record.tool_error = str(e) or type(e).__name__
        record.message = observation_message(
            action.kind,
            turn,
            result=record.observation,
            error=record.tool_error,
            response_chars=response_chars,
        ) + turn_note(turn + 1, max_turns)
        messages.append({"role": "user", "content": record.message})
        _notify(on_turn, record)
    raise AssertionError("unreachable: the last turn is forced")  # pragma: no cover


def _notify(on_turn: Callable[[EpisodeTurn], None] | None, record: EpisodeTurn) -> None:
    if on_turn is not None:
        on_turn(record)
