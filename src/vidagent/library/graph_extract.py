"""Reading AVI's entity-graph extractor replies (Fig. 8) and merging them across windows.

The extractor (the ``llm`` role with ``prompts/avi_graph.txt``) answers a JSON object with
``video_analysis`` (human subjects: ``subject_id``, ``subject_name``, ``appearance_timeline``,
``attributes``, ``actions_events``) and ``interactions`` (``subjects_involved``,
``interaction_description``, ``timestamp``). Models wrap it in code fences, add prose after it,
and write times as ``"00:01:05"``, ``"1:05"``, ``"65.5s"`` or numbers; :func:`parse_extraction`
accepts all of these (spec B.11 #10) and turns every time into float seconds.

A long video is extracted in windows of captions (B.11 #2); :func:`merge_extractions` joins the
windows' replies: a subject is the same across windows when its ``subject_id`` is (else when its
normalised name is), its timelines are concatenated, sorted and overlapping intervals merged,
and an interaction seen in two overlapping windows (same participants, overlapping times) is
kept once; within one window's reply every listed interaction is kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_SECONDS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:s|sec|secs|seconds)?\s*$", re.IGNORECASE)
_CLOCK = re.compile(r"^\s*(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d+)?))?\s*$")

Span = tuple[float, float]


@dataclass
class Action:
    """One of a subject's individual actions and when it happened (``None``: no time given)."""

    action: str
    span: Span | None = None


@dataclass
class Subject:
    """A human subject of the extractor's ``video_analysis``."""

    subject_id: str | None
    name: str
    timeline: list[Span] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)


@dataclass
class Interaction:
    """An interaction between subjects, as the extractor listed them (first: the actor)."""

    participants: list[str]
    description: str
    span: Span | None = None


@dataclass
class Extraction:
    """What one or more extractor replies found."""

    subjects: list[Subject] = field(default_factory=list)
    interactions: list[Interaction] = field(default_factory=list)


def parse_seconds(value: Any) -> float | None:
    """Seconds from a number, ``"12.5"``, ``"12.5s"``, ``"MM:SS"`` or ``"HH:MM:SS(.s)"``.

    Returns None for anything else (``"unknown"``, ``None``, a negative number).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value >= 0 else None
    if not isinstance(value, str):
        return None
    if m := _SECONDS.match(value):
        return float(m.group(1))
    if m := _CLOCK.match(value):
        a, b, c = m.groups()
        if c is None:  # MM:SS
            return int(a) * 60 + float(b)
        return int(a) * 3600 + int(b) * 60 + float(c)
    return None


def parse_span(value: Any) -> Span | None:
    """``[start, end]`` (or one time, an instant) as float seconds, ordered; None if unusable."""
    if isinstance(value, dict):
        value = [
            value.get("start", value.get("start_time")),
            value.get("end", value.get("end_time")),
        ]
    if not isinstance(value, (list, tuple)):
        t = parse_seconds(value)
        return (t, t) if t is not None else None
    times = [t for t in map(parse_seconds, value[:2]) if t is not None]
    if not times:
        return None
    a, b = times[0], times[-1]
    return (min(a, b), max(a, b))


def merge_spans(spans: list[Span]) -> list[Span]:
    """Sorted spans with overlapping or touching ones joined."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def json_object(text: str) -> Any:
    """The first JSON object in ``text`` (inside a code fence when there is one), or None."""
    fenced = _FENCE.search(text)
    bodies = [fenced.group(1), text] if fenced else [text]
    decoder = json.JSONDecoder()
    for body in bodies:
        for m in list(re.finditer(r"[{\[]", body))[:50]:
            try:
                obj = decoder.raw_decode(body[m.start() :])[0]
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) or (
                isinstance(obj, list) and obj and isinstance(obj[0], dict)
            ):
                return obj
    return None


def _strings(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    items = value if isinstance(value, list) else [value]
    return [str(v).strip() for v in items if str(v).strip()]


def _subject(entry: dict[str, Any]) -> Subject | None:
    sid = entry.get("subject_id")
    sid = str(sid).strip() if sid not in (None, "", "null", "None") else None
    name = str(entry.get("subject_name") or entry.get("name") or sid or "").strip()
    if not name:
        return None
    raw_timeline = entry.get("appearance_timeline") or []
    if (
        isinstance(raw_timeline, list)
        and raw_timeline
        and not isinstance(raw_timeline[0], (list, tuple, dict))
    ):
        raw_timeline = [raw_timeline]  # one [start, end] pair written flat
    timeline = [
        s for s in map(parse_span, raw_timeline if isinstance(raw_timeline, list) else []) if s
    ]
    actions = []
    for a in entry.get("actions_events") or []:
        if isinstance(a, dict) and str(a.get("action") or "").strip():
            actions.append(Action(str(a["action"]).strip(), parse_span(a.get("timestamp"))))
        elif isinstance(a, str) and a.strip():
            actions.append(Action(a.strip()))
    return Subject(sid, name, merge_spans(timeline), _strings(entry.get("attributes")), actions)


def _interaction(entry: dict[str, Any]) -> Interaction | None:
    who = _strings(entry.get("subjects_involved"))
    text = str(entry.get("interaction_description") or entry.get("description") or "").strip()
    if not who or not text:
        return None
    return Interaction(list(dict.fromkeys(who)), text, parse_span(entry.get("timestamp")))


def parse_extraction(text: str) -> Extraction | None:
    """The subjects and interactions of a Fig. 8 reply; None when it holds no such object.

    Entries without a name (subjects) or without participants or a description
    (interactions) are dropped; times that do not parse leave a span out, not the entry.
    """
    obj = json_object(text)
    if isinstance(obj, list):  # a bare video_analysis list
        obj = {"video_analysis": obj}
    if not isinstance(obj, dict) or not ({"video_analysis", "interactions"} & obj.keys()):
        return None
    analysis, interactions = obj.get("video_analysis") or [], obj.get("interactions") or []
    if not isinstance(analysis, list) or not isinstance(interactions, list):
        return None
    subjects = [s for s in (_subject(e) for e in analysis if isinstance(e, dict)) if s]
    found = [i for i in (_interaction(e) for e in interactions if isinstance(e, dict)) if i]
    return Extraction(subjects, found)


def normalise_name(name: str) -> str:
    """A name as merging compares it: lower-cased, punctuation and extra spaces gone."""
    return " ".join(re.sub(r"[^\w\s]", " ", name.lower()).split())


def _overlap(a: Span | None, b: Span | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return max(a[0], b[0]) <= min(a[1], b[1])


def _add_unique(into: list[str], more: list[str]) -> None:
    seen = {s.lower() for s in into}
    for s in more:
        if s.lower() not in seen:
            into.append(s)
            seen.add(s.lower())


def merge_extractions(parts: list[Extraction]) -> Extraction:
    """One extraction from several windows' (see the module docstring); order is first seen."""
    merged: list[Subject] = []
    by_id: dict[str, Subject] = {}
    by_name: dict[str, Subject] = {}
    for part in parts:
        for s in part.subjects:
            key = normalise_name(s.name)
            into = (by_id.get(s.subject_id) if s.subject_id else None) or by_name.get(key)
            if into is not None and s.subject_id and into.subject_id not in (None, s.subject_id):
                into = None  # same name, two different ids: two people
            if into is None:
                into = Subject(s.subject_id, s.name)
                merged.append(into)
            if into.subject_id is None and s.subject_id:
                into.subject_id = s.subject_id
            into.timeline = merge_spans(into.timeline + s.timeline)
            _add_unique(into.attributes, s.attributes)
            known = {(a.action.lower(), a.span) for a in into.actions}
            into.actions += [a for a in s.actions if (a.action.lower(), a.span) not in known]
            if into.subject_id:
                by_id[into.subject_id] = into
            by_name.setdefault(key, into)
    for s in merged:
        s.actions.sort(key=lambda a: a.span or (float("inf"), float("inf")))
    interactions: list[Interaction] = []
    origin: list[int] = []  # the window each kept interaction came from
    for k, part in enumerate(parts):
        for i in part.interactions:
            # Only another window's copy is a duplicate: one reply's list is of distinct
            # interactions, even between the same people at overlapping times.
            twin = next(
                (
                    j
                    for j, o in zip(interactions, origin, strict=False)
                    if o != k
                    and set(j.participants) == set(i.participants)
                    and _overlap(j.span, i.span)
                ),
                None,
            )
            if twin is None:
                interactions.append(Interaction(list(i.participants), i.description, i.span))
                origin.append(k)
            elif twin.span is not None and i.span is not None:
                twin.span = (min(twin.span[0], i.span[0]), max(twin.span[1], i.span[1]))
    interactions.sort(key=lambda i: i.span or (float("inf"), float("inf")))
    return Extraction(merged, interactions)
