"""CrossVid questions as AgentCVR's master sees them (``vidagent bench run crossvid -s cvr``).

The runner asks a benchmark module's ``strategy_question`` first; for ``cvr`` it returns a
:class:`~vidagent.agents.cvr.inputs.CvrQuestion` with the task and each master-facing video:
clips of a file (``begin``/``end``, PI's beginning and ending, each PSS segment; the master's
times run from 0 in each clip), or a drone view's frame folder with the question's objects boxed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vidagent.bench.base import BenchmarkDataError, Sample

Box = tuple[float, float, float, float]

# AgentCVR's own query texts for the tasks whose files hold none (its run scripts, spec §1.3).
CVR_QUERIES = {
    "PI": "Given the Beginning and Ending clips of a movie scene, infer what most likely happened "
    "in the middle.",
    "PSS": "Review these video clips. They are shuffled segments from a single cooking video. "
    "Please determine their correct chronological order.",
}


def strategy_question(sample: Sample, strategy: str, ensure: Callable[[Path], str]) -> Any:
    """The question as ``strategy`` takes it, or ``None`` for the runner's usual one.

    For ``cvr`` (AgentCVR): a :class:`~vidagent.agents.cvr.inputs.CvrQuestion` naming the task
    (its master prompt and answer format) and each master-facing video: a clip of a video file
    (``begin``/``end``, PI's beginning and ending, each PSS segment; times then run from 0 in
    the clip) or a drone view's frame folder with the question's objects boxed as ``obj_k``.
    ``ensure`` gives a file's Library id.

    Raises:
        BenchmarkDataError: a drone-view question's box file is missing or unreadable.
    """
    if strategy != "cvr":
        return None
    from vidagent.agents.cvr.inputs import CvrInput, CvrQuestion

    task = sample.categories[0]
    query = CVR_QUERIES.get(task, sample.question) if task in ("PI", "PSS") else sample.question
    if task in ("MSR", "MOC"):
        boxes, note = _uav_boxes(sample)
        inputs = tuple(
            CvrInput(folder=str(p), boxes=b, label=p.name)
            for p, b in zip(sample.videos, boxes, strict=True)
        )
        query += note
    else:
        ids = [ensure(p) for p in sample.videos]
        spans = _clip_spans(task, sample, len(ids))
        if task in ("PI", "PSS"):
            ids = ids * len(spans)
        inputs = tuple(
            CvrInput(video_id=i, spans=s, label=p.name)
            for i, s, p in zip(ids, spans, [*sample.videos] * len(ids), strict=False)
        )
    if task == "FSA":
        begin, end = sample.extras["ref_segment"]
        query += f"\nReference Segment (Video 1): [{begin}, {end}]s"
    video_ids = tuple(dict.fromkeys(i.video_id for i in inputs if i.video_id is not None))
    return CvrQuestion(query, video_ids, tuple(sample.options), cvr_task=task, inputs=inputs)


def _clip_spans(task: str, sample: Sample, n: int) -> list[tuple[tuple[float, float], ...]]:
    """Each master-facing video's source spans (``()``: the whole file)."""
    x = sample.extras
    if task == "PI":
        return [_spans(x.get("beginning")), _spans(x.get("ending"))]
    if task == "PSS":
        segments = x.get("segments") or {}
        return [_spans(segments[k]) for k in sorted(segments, key=lambda k: int(k))]
    begins, ends = x.get("begin"), x.get("end")
    if isinstance(begins, list) and isinstance(ends, list) and len(begins) == len(ends) == n:
        return [
            ((float(b), float(e)),) if b is not None and e is not None else ()
            for b, e in zip(begins, ends, strict=True)
        ]
    return [()] * n


def _spans(value: Any) -> tuple[tuple[float, float], ...]:
    """``[[s, e], ...]`` or ``[s, e]`` as spans."""
    if not value:
        return ()
    if all(isinstance(v, (int, float)) for v in value):
        value = [value]
    return tuple((float(s), float(e)) for s, e in value)


def _uav_boxes(sample: Sample) -> tuple[list[dict[str, dict[int, Box]]], str]:
    """Per view, ``{obj_k: {frame index: box}}`` of the question's ``{A3}``-style objects (view
    letter, then the 1-based place in the row's ``objects``), from CrossVid's
    ``uav/bbox/<view>/<vid>.json``; and a line telling the master where each object is boxed."""
    x = sample.extras
    tags: dict[str, str] = x.get("tags") or {}
    objects = x.get("objects") or []
    boxes: list[dict[str, dict[int, Box]]] = [{}, {}]
    where = []
    for tag, name in tags.items():
        if len(tag) < 2 or tag[0] not in "AB" or not tag[1:].isdigit():
            continue
        view, place = "AB".index(tag[0]), int(tag[1:]) - 1
        if not 0 <= place < len(objects):
            raise BenchmarkDataError(f"CrossVid {sample.id}: {{{tag}}} names no object of the row")
        entity = _uav_entity(Path(x["bbox_files"][view]), objects[place].get("id"), sample.id)
        per_frame = {
            int(k): (float(b["xtl"]), float(b["ytl"]), float(b["xbr"]), float(b["ybr"]))
            for k, b in entity.items()
            if b is not None
        }
        boxes[view][name] = per_frame
        seen = min(per_frame) if per_frame else None
        where.append(
            f"{name} is boxed and labelled in green in Video {view + 1}'s frames"
            + (f" (first at frame {seen})" if seen is not None else "")
        )
    return boxes, ("\nObjects: " + "; ".join(where) + ".") if where else ""


def _uav_entity(path: Path, object_id: Any, sample_id: str) -> dict[str, Any]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, json.JSONDecodeError) as e:
        raise BenchmarkDataError(f"CrossVid {sample_id}: cannot read boxes {path} ({e})") from None
    for row in rows:
        if row.get("id") == object_id:
            return row.get("bbox") or {}
    raise BenchmarkDataError(f"CrossVid {sample_id}: object {object_id} not in {path}")
