"""Indexing a live stream window by window, into one video that grows.

Each window (:class:`vidagent.media.live.Window`, a few seconds of the stream in its own file)
runs through the ordinary pipeline (:func:`~vidagent.ingest.pipeline.index_path`, every stage
and its overlap) into a *scratch* Library, a folder of its own that holds one window at a time.
:func:`graft` then copies what it made into the stream's video in the real Library, its times
moved by the window's start and its clip, shot and segment numbers after the stream's: clips
with every stage's output and fingerprint, thumbnails, shots, transcript segments (with their
word times), clip vectors and frame vectors. The times a caption states are the stream's
already: the caption stage is told the window's start (``clock_offset``). So a window costs what its own length costs,
however long the stream has run, and the stages need no notion of a stream.

What a window cannot know of the windows before it: the speakers stage numbers voices within a
window (``S1`` of one window need not be ``S1`` of the next), and a clip's subjects are a
window's own. The summary and the subject registry are the stream's: the summarize stage (and
``graph`` where it runs) reads the stream's rows in the real Library, on a schedule
(:data:`SCHEDULED`).

A window is grafted rows first and the stream's record last (its duration and the windows it
counts); a window cut short by a crash is dropped (:meth:`~vidagent.library.Library.drop_span`)
before it is grafted again, so no clip is stored twice.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.ingest.pipeline import IndexResult, index_path
from vidagent.library.schema import ClipRow, FrameRow, ShotRow, TranscriptSegment

if TYPE_CHECKING:
    from pathlib import Path

    from vidagent.config import Settings
    from vidagent.library import Library
    from vidagent.models.client import Models

#: Stages that read the whole stream, run on a schedule over the real Library, not per window.
SCHEDULED: frozenset[str] = frozenset({"summarize", "graph"})


@dataclass(frozen=True)
class Grafted:
    """What one window added to the stream: its clips, as stored (stream times)."""

    clips: list[ClipRow]
    result: IndexResult


def index_window(
    path: Path,
    *,
    scratch: Library,
    library: Library,
    video_id: str,
    offset: float,
    settings: Settings,
    models: Models,
    stages: Sequence[str],
) -> Grafted:
    """Index the window file ``path`` in ``scratch`` and graft it into ``video_id`` of
    ``library`` at ``offset`` stream seconds (module docstring).

    Raises:
        MediaError: the window's file cannot be read.
    """
    per_window = [s for s in stages if s not in SCHEDULED]
    result = index_path(
        path,
        library=scratch,
        settings=settings,
        models=models,
        stages=per_window,
        options={"caption": {"clock_offset": offset}},  # its captions state stream times
    )
    if result.error is not None:
        raise result.error
    assert result.video is not None
    try:
        clips = graft(scratch, result.video.video_id, library, video_id, offset)
    finally:
        scratch.remove_video(result.video.video_id)
    return Grafted(clips, result)


def graft(
    scratch: Library, window_id: str, library: Library, video_id: str, offset: float
) -> list[ClipRow]:
    """Copy the video ``window_id`` of ``scratch`` into ``video_id`` of ``library``, its
    times plus ``offset`` and its numbers after the video's own; returns its clips as stored."""
    have = library.clips(video_id)
    first = (max(c.clip_index for c in have) + 1) if have else 0
    segments = library.transcript(video_id)
    seg0 = (max(s.segment_index for s in segments) + 1) if segments else 0
    shots = library.shots(video_id)
    shot0 = (max(s.shot_index for s in shots) + 1) if shots else 0
    clips = [_clip(c, video_id, first + c.clip_index, offset) for c in scratch.clips(window_id)]
    library.add_rows(
        video_id,
        clips=clips,
        frames=[
            FrameRow(video_id, round(f.t + offset, 3), f.width, f.height, f.jpeg)
            for f in scratch.frames(window_id)
        ],
        shots=[
            ShotRow(video_id, shot0 + s.shot_index, s.t0 + offset, s.t1 + offset)
            for s in scratch.shots(window_id)
        ],
        transcript=[
            _segment(s, video_id, seg0 + s.segment_index, offset)
            for s in scratch.transcript(window_id)
        ],
    )
    _graft_vectors(scratch, window_id, library, video_id, clips, offset)
    return clips


def _graft_vectors(
    scratch: Library,
    window_id: str,
    library: Library,
    video_id: str,
    clips: list[ClipRow],
    offset: float,
) -> None:
    bound = scratch.manifest.embeddings.get("clip_vectors")
    hashes = scratch.clip_vector_hashes(window_id)
    if bound and hashes:
        spec = str(bound["spec"])
        by_text = scratch.clip_vectors_by_text(window_id, spec)
        own = library.manifest.embeddings.get("clip_vectors")
        if own is None or own["spec"] != spec or own["dim"] != bound["dim"]:
            library.use_embedding("clip_vectors", spec, int(bound["dim"]))
        first = clips[0].clip_index if clips else 0
        kept = [c for c in clips if hashes.get(c.clip_index - first) in by_text]
        if kept:
            keys = [hashes[c.clip_index - first] for c in kept]
            vectors = [by_text[k] for k in keys]
            library.put_clip_vectors(video_id, spec, kept, np.stack(vectors), keys, replace=False)
    frame_spec = scratch.frame_vector_spec()
    times, images = scratch.frame_vectors(window_id)  # (N,), (N, D)
    if frame_spec and len(times):
        if library.frame_vector_spec() != frame_spec:
            library.use_embedding("frame_vectors", frame_spec, int(images.shape[1]))
        library.put_frame_vectors(video_id, frame_spec, times + offset, images, replace=False)


def _clip(c: ClipRow, video_id: str, index: int, offset: float) -> ClipRow:
    lines = [
        {**d, "t0": float(d["t0"]) + offset, "t1": float(d["t1"]) + offset}
        for d in _json(c.ocr_lines, [])
    ]
    seen = [
        {**d, "t": float(d["t"]) + offset} if isinstance(d, dict) and "t" in d else d
        for d in _json(c.detections, [])
    ]
    facts = _json(c.facts, {})
    if isinstance(facts, dict) and facts.get("cuts"):
        facts["cuts"] = [float(t) + offset for t in facts["cuts"]]
    return dataclasses.replace(
        c,
        video_id=video_id,
        clip_index=index,
        t0=c.t0 + offset,
        t1=c.t1 + offset,
        ocr_lines=json.dumps(lines) if lines or c.ocr_lines != "[]" else c.ocr_lines,
        detections=json.dumps(seen) if seen else c.detections,
        facts=json.dumps(facts) if facts else c.facts,
    )


def _segment(s: TranscriptSegment, video_id: str, index: int, offset: float) -> TranscriptSegment:
    words = [[float(w[0]) + offset, float(w[1]) + offset, *w[2:]] for w in _json(s.words, [])]
    return dataclasses.replace(
        s,
        video_id=video_id,
        segment_index=index,
        t0=s.t0 + offset,
        t1=s.t1 + offset,
        words=json.dumps(words),
    )


def _json(text: str, empty: Any) -> Any:
    try:
        return json.loads(text or "null") or empty
    except json.JSONDecodeError:
        return empty
