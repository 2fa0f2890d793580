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
- :class:`SearchRound`: one round of a tree search (EEA): nodes, frames, scores, the choice;
- :class:`BudgetExhausted`: which budget ran out, before a forced answer;
- :class:`Answered` and :class:`RunFinished`: the answer and the run's totals.

Runs form a tree. Every event carries ``run``, the id of the run that emitted it, and ``span``,
the tool call it happened inside (a model call made by a tool carries that call's id). A
strategy with several conversations or sub-agents (a tree search's branches, a master agent's
visual sub-agent) opens child runs: :class:`ChildStarted` names the child's id, its parent and
its purpose, and the child's events carry the child's id. A trace is drawn as a tree by
grouping events on ``run`` and linking each child to its parent. Rendering is the front ends'
business (:mod:`vidagent.cli.render`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

from vidagent.exceptions import UserError


@dataclass(frozen=True)
class Event:
    """Base of every trace event; ``t`` is seconds since the run started."""

    kind: ClassVar[str] = ""
    t: float
    run: str = field(default="", kw_only=True)  # id of the run that emitted it
    span: str = field(default="", kw_only=True)  # the tool call it happened inside, if any

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
    index: dict[str, Any] = field(default_factory=dict)  # stages and index settings asked for
    version: str = ""
    started_at: str = ""
    # the roles each step waits on (Agent.calls; traces written before it: an agent's)
    calls: list[str] = field(default_factory=lambda: ["llm", "tool_vlm"])


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
    fitted: str = ""  # what was elided or cut to fit the model's context window
    priced: bool = True  # False: no price is known for the model (cost_usd 0 means unknown)


@dataclass(frozen=True)
class ChildStarted(Event):
    """A child run (a sub-agent, a conversation, a search branch) began under ``parent``."""

    kind: ClassVar[str] = "child_started"
    child: str
    parent: str
    name: str
    data: dict[str, Any] = field(default_factory=dict)


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
    adjusted: list[str] = field(default_factory=list)  # arguments clamped to the tool's bounds


@dataclass(frozen=True)
class SearchRound(Event):
    """One round of a tree search over video segments (EEA): the node expanded, the frames
    sampled, the children scored, every candidate's fused score, the queries and anchors after
    the round, the memory, and the policy's choice. A front end draws the tree from these:
    ``expanded`` and each child carry their ``id`` and ``parent``."""

    kind: ClassVar[str] = "search_round"
    step: int
    round: int
    expanded: list[dict[str, Any]]  # the nodes split this round (several: a forest's roots)
    frames: list[list[Any]]  # [video_id, t] sampled this round
    anchor_frames: list[list[Any]]  # those of them that were semantic anchors
    children: list[dict[str, Any]]  # {"id", "video_id", "span", "parent", "r", "u", "h", ...}
    entropy: float  # H over every candidate
    candidates: list[dict[str, Any]]  # every leaf after the round, with r, u and h
    new_queries: list[str]
    queries: list[str]
    anchors: list[dict[str, Any]]
    memory: list[list[Any]]  # [video_id, t, score]
    choice: dict[str, Any] = field(default_factory=dict)  # {"segment": id} or {"answer": text}
    retrieval: dict[str, Any] = field(default_factory=dict)  # retriever, queries searched, clips


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


#: The answer schema an :class:`Answered` event is written in. 2: citations labelled with
#: :data:`CITATION_LABELS` (what was checked) and, where a reader ran, its verdict; 1 (traces
#: written before): ``supported``, ``weak`` or ``unsupported`` (a score over words and an
#: embedder's cosine, demoted by fitted rules), read back as they were written.
ANSWER_SCHEMA = 2
#: What a citation's label states, each a statement a person can confirm by playing the span
#: (docs/strategies/index.md, "Checked citations"):
#: ``found``: every key word of the claim is said or shown here (the quote, at its own time);
#: ``partial``: some of them are; ``not-found``: none of what the index holds here matches;
#: ``unchecked``: the claim is about what is seen and no vision model is configured, so it
#: cannot be checked here.
CITATION_LABELS = ("found", "partial", "not-found", "unchecked")
#: A reader's verdict on a cited moment (only where a reader ran: the critic).
READER_VERDICTS = ("answers", "does-not-answer")


#: The most seconds a time in a trace may hold: about 115 days.
MAX_SECONDS = 1e7


def _seconds(value: Any) -> bool:
    """Whether ``value`` is a time of a video a trace may hold: a finite number of seconds
    within :data:`MAX_SECONDS` either way (a span outside the video is told where it is used)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) <= MAX_SECONDS
    )


@dataclass(frozen=True)
class Citation:
    """One cited span of an answer, checked for one of its claims.

    Attributes:
        video_id: the video.
        t0, t1: where the quote is (its words' own times, the frames its line was read in, a
            detection's frames); the cited span itself when nothing was found.
        cited: the span as the strategy cited it, ``[t0, t1]``.
        label: what was checked (:data:`CITATION_LABELS`; schema 1: its old labels).
        support: the share of the claim's key words said or shown here, in ``[0, 1]``.
        source: where the quote is: ``speech``, ``on-screen text``, ``caption``, ``detection``,
            ``graph``, ``vision``; ``""`` when nothing was found.
        text: the quote (the matched words, the line, the caption sentence, the vision
            model's reply).
        claim: the index of the claim it is checked for.
        matched: the words of the cited piece that hold the claim's key words (as written
            there; a key word matches by its stem, :mod:`vidagent.agents.citations.claims`).
        reader: the reader's verdict on whether this moment answers the question
            (:data:`READER_VERDICTS`), ``""`` where no reader ran.
        notes: facts a named rule recorded about the moment (``other-option-here: …``).
        speaker: who says the quote, for speech: ``S1 (Dr Lee)``, ``S1``; ``""`` where the
            transcript is not labelled or the quote is not speech (:meth:`to_json` leaves it
            out then; a trace written before it reads back with ``""``).
    """

    video_id: str
    t0: float
    t1: float
    cited: list[float]
    label: str
    support: float
    source: str = ""
    text: str = ""
    claim: int = 0
    matched: list[str] = field(default_factory=list)
    reader: str = ""
    notes: list[str] = field(default_factory=list)
    speaker: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Citation:
        """A citation read back from a trace.

        Raises:
            ValueError: its times are not seconds of a video (text, nan, 1e300: a damaged
                trace, which every reader would otherwise trip over in its own way).
        """
        known = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in data.items() if k in known}
        cited = kept.get("cited", [])
        times = {"t0": kept.get("t0"), "t1": kept.get("t1")}
        if isinstance(cited, list):
            times |= {f"cited[{k}]": v for k, v in enumerate(cited)}
        for name, value in times.items():
            if not _seconds(value):
                raise ValueError(f"a citation's {name} ({value!r}) is not seconds of a video")
        return cls(**kept)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if not self.speaker:
            del out["speaker"]
        return out


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
    note: str = ""  # why a forced answer was forced, in words (a model error's message)
    #: Its citations checked (:mod:`vidagent.agents.citations`); dicts read from a file become
    #: :class:`Citation` s.
    citations: list[Citation] = field(default_factory=list)
    #: The claims they are checked for: {"text", "citations", "support", "status"}.
    claims: list[dict[str, Any]] = field(default_factory=list)
    support: float | None = None
    abstained: bool = False
    abstain_policy: str = ""
    abstain_reason: str = ""
    withheld: str = ""  # a free-form answer's text replaced by "insufficient evidence"
    verify_note: str = ""  # what the check could not do, and why
    critic: dict[str, Any] = field(default_factory=dict)  # the reviewer's verdict, when on
    #: The claims that could not be checked here (a visual claim with no vision model): the
    #: answer stands, unverified, and is never withheld for them.
    unverified: bool = False
    schema: int = 1  # :data:`ANSWER_SCHEMA`; traces written before it have none, so 1

    def __post_init__(self) -> None:
        typed = [c if isinstance(c, Citation) else Citation.from_dict(c) for c in self.citations]
        object.__setattr__(self, "citations", typed)


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
    #: Specs called without a known price: ``cost_usd`` leaves them out ("no price", not $0).
    unpriced: list[str] = field(default_factory=list)


EVENTS: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        ModelCall,
        ChildStarted,
        AgentTurn,
        FormatError,
        ToolCalled,
        Observed,
        PhaseChanged,
        SearchRound,
        BudgetExhausted,
        Answered,
        RunFinished,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    """The event a JSON line holds.

    Raises:
        TypeError: ``data`` is not a JSON object.
        ValueError: an unknown kind, or fields that do not fit it.
    """
    if not isinstance(data, dict):
        raise TypeError(f"a JSON {type(data).__name__}, not an event object")
    fields = dict(data)
    cls = EVENTS.get(str(fields.pop("kind", "")))
    if cls is None:
        raise ValueError(f"unknown trace event kind {data.get('kind')!r}")
    try:
        return cls(**fields)
    except TypeError as e:  # in the event's own terms, not Python's call signature
        known = {f.name: f for f in dataclasses.fields(cls)}
        needed = [
            n
            for n, f in known.items()
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        missing = [n for n in needed if n not in fields]
        unknown = sorted(set(fields) - set(known))
        said = [f"{k} {', '.join(v)}" for k, v in (("lacks", missing), ("has no", unknown)) if v]
        raise ValueError(f"bad {cls.kind} event: {'; '.join(said) or e}") from None


def check_target(path: Path) -> None:
    """Refuse to write a trace over a file that is not one: a trace named again is replaced,
    anything else (the video asked about, say: ``--trace talk.mp4``) is kept.

    Raises:
        UserError: ``path`` holds something that is not a trace.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with path.open("rb") as f:
            kind = json.loads(f.readline(1 << 16)).get("kind")
    except (ValueError, AttributeError, OSError):
        kind = None
    if not isinstance(kind, str):
        raise UserError(
            f"{path} exists and is not a trace; name another file (a trace is replaced, "
            "anything else kept)"
        )


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
        #: A trace read back whose last line was cut off as it was written (:meth:`load`).
        self.cut = False
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
        """A trace read back from its JSONL file. A last line that is not a whole event and
        has no newline was cut off as it was written (the process died): the events before it
        are read and :attr:`cut` is set.

        Raises:
            UserError: the file is missing or a line is not a trace event (the message says which).
        """
        path = Path(path)
        if not path.is_file():
            raise UserError(f"{path}: no such trace file")
        trace = cls()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{path}: not a vidagent trace event file (not text)") from None
        lines = text.splitlines()
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                trace.events.append(event_from_dict(json.loads(line)))
            except (ValueError, TypeError, AttributeError) as e:
                if n == len(lines) and not text.endswith("\n") and trace.events:
                    trace.cut = True
                    break
                raise UserError(f"{path}:{n}: not a vidagent trace event ({e})") from None
        if not trace.events:
            raise UserError(f"{path}: the trace is empty")
        return trace
