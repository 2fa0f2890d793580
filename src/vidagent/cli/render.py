"""Rendering trace events as the lines a person reads: the live display of ``ask`` and
``replay`` share it. A front end's concern, so it lives with the CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from vidagent.budget import spent
from vidagent.timecode import clock, wall_clock
from vidagent.trace import (
    AgentTurn,
    Answered,
    BudgetExhausted,
    ChildStarted,
    Event,
    FormatError,
    ModelCall,
    Observed,
    PhaseChanged,
    RunFinished,
    RunStarted,
    SearchRound,
    ToolCalled,
)


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _spans(evidence: list[list[Any]], names: dict[str, str]) -> str:
    parts = []
    for video_id, t0, t1 in evidence:
        where = names.get(video_id, video_id[:12])
        instant = round(t0, 1) == round(t1, 1)  # a frame (EEA's memory), not a span
        span = clock(round(t0, 1)) if instant else f"{clock(round(t0, 1))}–{clock(round(t1, 1))}"
        parts.append(f"{where} {span}")
    return "; ".join(parts)


def _windows(videos: list[dict[str, Any]]) -> str:
    """``\n  window: NAME 00:10:00–00:20:00 (2026-…Z to 2026-…Z)`` for each video a run saw only
    part of (``--last``, ``--since``, ``--until``), wall-clock times where its start is known."""
    lines = []
    for v in videos:
        if not v.get("window"):
            continue
        t0, t1 = v["window"]
        walls = [wall_clock(v.get("recorded_at") or "", t) for t in (t0, t1)]
        wall = f" ({walls[0]} to {walls[1]})" if all(walls) else ""
        lines.append(
            f"\n  window: {_spans([[v['video_id'], t0, t1]], {v['video_id']: v.get('name', v['video_id'][:12])})}{wall}"
        )
    return "".join(lines)


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
        self.recorded: dict[str, str] = {}  # video id -> when its recording started
        self.options: list[str] = []

    def _cut(self, text: str) -> str:
        return shorten(text, self.width) if self.width else text

    def __call__(self, e: Event) -> str | None:
        if isinstance(e, RunStarted):
            self.names = {v["video_id"]: v.get("name", v["video_id"]) for v in e.videos}
            self.recorded = {v["video_id"]: v.get("recorded_at") or "" for v in e.videos}
            self.options = list(e.options)
            videos = ", ".join(self.names.values())
            head = f"[{e.strategy}] {e.question}"
            opts = "".join(f"\n  ({chr(65 + i)}) {o}" for i, o in enumerate(e.options))
            note = f"\n  note: {e.index['note']}" if e.index.get("note") else ""
            window = _windows(e.videos)
            # a strategy that calls no llm (the retrieval baseline): naming one would say it did
            llm = f"llm {e.models.get('llm', '?')}" if "llm" in e.calls else "no llm"
            return f"{head}{opts}\n  videos: {videos}; {llm}{window}{note}"
        if isinstance(e, ChildStarted):
            data = json.dumps(e.data, ensure_ascii=False) if e.data else ""
            return f"⤷ {e.name} [{e.child}] {self._cut(data)}".rstrip()
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
        if isinstance(e, SearchRound):
            return self._round(e)
        if isinstance(e, PhaseChanged):
            if e.phase == "retrieval" and "spans" in e.data:
                return self._option(e)
            data = json.dumps(e.data, ensure_ascii=False) if e.data else ""
            return f"step {e.step} · {e.phase} {self._cut(data)}".rstrip()
        if isinstance(e, BudgetExhausted):
            used = spent(e.budget, e.used)
            return f"budget '{e.budget}' exhausted ({used} of {e.limit:g}): forcing an answer"
        if isinstance(e, ModelCall):
            if not self.calls:
                return None
            cost = f" ${e.cost_usd:.4f}" if e.cost_usd else "" if e.priced else " no price"
            return (
                f"  model {e.role} {e.spec}: {e.input_tokens}+{e.output_tokens} tokens "
                f"{e.latency_s:.2f}s{cost}{' (cached)' if e.cached else ''}"
                + (f" ({e.error})" if e.error else "")
            )
        if isinstance(e, Answered):
            return render_answer(e, self.names, self.options, self.recorded)
        if isinstance(e, RunFinished):
            cost = f", ${e.cost_usd:.4f}" if e.cost_usd else ""
            if e.unpriced:  # a sum that leaves calls out is not the cost: say which
                cost = f"{cost or ', $0'} + no price for {', '.join(e.unpriced)}"
            return (
                f"{e.steps} step{'s' * (e.steps != 1)}, {e.frames} frames, "
                f"{e.model_calls} model calls, "
                f"{e.input_tokens}+{e.output_tokens} tokens{cost}, {e.seconds:.1f} s"
            )
        return None

    def _where(self, video_id: str, span: list[Any]) -> str:
        name = f"{self.names.get(video_id, video_id[:12])} " if len(self.names) > 1 else ""
        return f"{name}{clock(span[0])}–{clock(span[1])}"

    def _option(self, e: PhaseChanged) -> str:
        """The retrieval baseline's score of an option (or of the best clip of an open or
        grounding question): its terms, the words found, where, what it answered."""
        d = e.data
        found = f": {', '.join(d['matches'])}" if d.get("matches") else ""
        scored = "dense" in d  # an option's two terms
        terms = f" (dense {d['dense']:.3f}, lexical {d['lexical']:.2f}{found})" if scored else ""
        where = _spans(d["spans"], self.names) or "no clip"
        answer = f" → {d['answer']}" if d.get("answer") else ""
        label = d.get("option", "best clip")
        return self._cut(
            f"step {e.step} · retrieval {label} · score {d.get('score', 0):.3f}{terms} · "
            f"{where}{answer}"
        )

    def _round(self, e: SearchRound) -> str:
        """A tree-search round: what was split where, each child's scores, and the choice."""
        split = ", ".join(f"#{n['id']} {self._where(n['video_id'], n['span'])}" for n in e.expanded)
        seen = ", ".join(f"{t}s" for _, t in e.frames) or "none"
        anchored = f" ({len(e.anchor_frames)} anchors)" if e.anchor_frames else ""
        lines = [f"round {e.round} · split {split} at {seen}{anchored}"]
        for c in e.children:
            why = f" · {self._cut(c['explanation'])}" if c.get("explanation") else ""
            lines.append(
                f"  #{c['id']} {self._where(c['video_id'], c['span'])}  r {c['r']:g}  "
                f"u {c['u']:.2f}  h {c['h']:.3f}{why}"
            )
        queries = f" · new queries: {'; '.join(e.new_queries)}" if e.new_queries else ""
        lines.append(
            f"  H {e.entropy:.2f} · {len(e.candidates)} candidates · {len(e.anchors)} anchors · "
            f"memory {len(e.memory)} frames{queries}"
        )
        choice = e.choice
        if "segment" in choice:
            moved = f" (asked #{choice['redirected_from']})" if "redirected_from" in choice else ""
            lines.append(f"  → explore #{choice['segment']}{moved}")
        elif "answer" in choice:
            lines.append(f"  → answer: {self._cut(str(choice['answer']))}")
        return "\n".join(lines)


def render_answer(
    e: Answered,
    names: dict[str, str] | None = None,
    options: list[str] | None = None,
    recorded: dict[str, str] | None = None,
) -> str:
    """The answer block: text with its option, how it ended, evidence spans; citations of a
    video whose recording start is in ``recorded`` also read as wall-clock times."""
    text = e.text.strip()
    if e.choice is not None:
        letter = chr(65 + e.choice)
        option = options[e.choice] if options and e.choice < len(options) else ""
        if re.fullmatch(rf"\(?{letter}\)?\.?", text):
            text = f"({letter}) {option}".rstrip()
        elif not re.match(rf"^(?:\({letter}\)|{letter}(?:$|[.):]))", text):
            text = f"({letter}) {text}"
    lines = [f"answer: {text or '(none)'}"]
    if not e.parsed:
        what = "no option could be read from this answer" if options else "no answer was given"
        lines.append(f"  ({what}: recorded as unparsable)")
    if e.forced:
        note = f"; {e.note}" if e.note else ""
        lines.append(f"  (forced final answer: {e.reason}{note})")
    if e.confidence is not None:
        lines.append(f"  confidence: {e.confidence:g}")
    if e.unverified:
        lines.append("  unverified: a claim about what is seen, with no vision model to check it")
    if e.abstained:
        withheld = f' (withheld: "{shorten(e.withheld, 80)}")' if e.withheld else ""
        lines.append(f"  abstained ({e.abstain_policy}): {e.abstain_reason}{withheld}")
    if e.evidence:
        lines.append(f"  evidence: {_spans(e.evidence, names or {})}")
    lines += _citations(e, names or {}, recorded or {})
    lines += _review(e.critic)
    return "\n".join(lines)


#: The reader's verdict on the whole answer (:class:`~vidagent.agents.types.Review`), as said.
_VERDICTS = {"agree": "agrees", "disagree": "disagrees", "none": "gave no verdict"}


def _review(critic: dict[str, Any]) -> list[str]:
    """The reader's verdict (the critic's, where one ran) and, where it disagreed, the second
    round's: shown beside the citations' own ``[reader: …]`` verdicts."""
    if not critic:
        return []
    verdict = str(critic.get("verdict") or "none")
    note = f": {shorten(str(critic['note']), 100)}" if critic.get("note") else ""
    lines = [f"  reader: {_VERDICTS.get(verdict, verdict)}{note}"]
    if critic.get("revised"):
        second = critic.get("second_verdict") or "not read"
        second = _VERDICTS.get(second, second)
        first = shorten(str(critic.get("first_answer", "")), 60)
        lines.append(
            f'    (answered again in place of "{first}"; the reader on this answer: {second})'
        )
    return lines


def _citations(e: Answered, names: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """Each citation with its label, tightened time, source and supporting text; grouped by
    claim when the answer makes several."""
    if not e.citations:
        return []
    several = len(e.claims) > 1
    lines = ["  citations:"]
    for k, claim in enumerate(e.claims if several else [{}]):
        if several:
            lines.append(f'    claim {k + 1}: "{shorten(str(claim.get("text", "")), 100)}"')
            if not any(c.claim == k for c in e.citations):  # nothing was checked for it
                lines.append(f"      {'not cited':<11} no moment is cited for this claim")
        for c in e.citations:
            if several and c.claim != k:
                continue
            where = _spans([[c.video_id, c.t0, c.t1]], names)
            if wall := wall_clock(recorded.get(c.video_id, ""), c.t0):
                where += f" ({wall})"
            who = f" ({c.speaker})" if c.speaker else ""
            found = f' {c.source}{who}: "{shorten(c.text, 80)}"' if c.source else ""
            indent = "      " if several else "    "
            read = f" [reader: {c.reader}]" if c.reader else ""
            notes = "".join(f" ({n})" for n in c.notes)
            lines.append(f"{indent}{c.label:<11} {where}{found}{read}{notes}")
    if e.verify_note:
        lines.append(f"    ({e.verify_note})")
    return lines


def render(events: Iterable[Event], width: int = 160, calls: bool = False) -> Iterator[str]:
    """The lines of a whole trace, as the live display printed them."""
    renderer = Renderer(width, calls)
    for e in events:
        line = renderer(e)
        if line is not None:
            yield line
