"""AVI's Perceive tools (spec ``dvd-avi.md`` B.5.2): local, on raw frames.

Frames are decoded from the source at 2 fps inside the given time ranges (the paper samples at
2 fps) and spread evenly past each tool's cap (B.11 #23): 32 for ``object_detect_tool`` and
``text_extract_tool``, 64 for ``frame_analysis_tool`` (the paper's ``max_frames``), and 240 for
``boundary_detect_tool``, which first scans a longer range coarsely and then refines around
the peak at 2 fps (:func:`vidagent.tools.boundary.frame_times`).

- ``object_detect_tool``: open-vocabulary detection with the configured detector (the
  ``detector`` role, e.g. ``transformers:<Grounding DINO dir>``; or boxes from the tool VLM
  with ``object_detector="vlm"``; people and faces only offline, which the observation says);
  non-maximum suppression at IoU 0.5 (the paper's ``iou_threshold``) per frame and label;
  boxes below ``ctx.options.perception.detect_threshold`` dropped (AVI sets 0.35, Grounding
  DINO's box threshold). Per-frame lines and,
  since counting questions need it, the maximum and median count of each label across frames.
- ``text_extract_tool``: the ``ocr`` role on every frame, lines of confidence ≥ 0.5, a string
  seen on consecutive frames listed once with its first time.
- ``boundary_detect_tool``: the frame–text similarity curve of an ``image_embed`` model (the
  paper's CLIP; its citation is SigLIP 2), smoothed over 3 frames, thresholded at
  ``min + 0.6·(max − min)``, and the run above it around the peak (B.5.2). Without an
  ``image_embed`` model the curve is each clip's caption similarity to the event (the
  ``embed`` role): a coarse, clip-resolution fallback the observation labels as such.
- ``frame_analysis_tool``: free-form questions to the ``tool_vlm`` over at most 64 frames of a
  list of ranges, each frame labelled with its time; the last resort.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Annotated

import numpy as np
from pydantic import Field

from vidagent.exceptions import ToolInputError
from vidagent.geometry import box_iou
from vidagent.models.base import Detection
from vidagent.tools.base import Evidence, Observation, Seconds, ToolContext, tool
from vidagent.tools.boundary import boundary_from_curve, caption_curve, image_curve, locate
from vidagent.tools.detectors import backends, detector_report, resolve_target, to_fraction
from vidagent.tools.frames import ask_vlm, inspect_times
from vidagent.tools.tracking import Cost, Region, VideoView, open_video

TimeRanges = Annotated[list[tuple[Seconds, Seconds]], Field(min_length=1)]

FPS = 2.0  # AVI samples raw frames at 2 fps
PERCEIVE_FRAMES = 32  # object_detect and text_extract (B.11 #23)
ANALYSIS_FRAMES = 64  # frame_analysis's max_frames (the paper)
BOUNDARY_FRAMES = 240  # boundary_detect: two minutes at 2 fps
NMS_IOU = 0.5  # object_detect's iou_threshold (the paper)
OCR_CONFIDENCE = 0.5
DETECT_SIDE = 1280  # 720p frames: long side
ANALYSIS_HEIGHT = 720
ANALYSIS_PROMPT = "Answer the question based on the frames: {question}"


def _ranges(
    ctx: ToolContext, v: VideoView, ranges: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The ranges in order and clamped to the video; none inside it is the model's to fix."""
    start, end = ctx.span(v.video_id)
    kept = [
        ctx.clamp_span(v.video_id, *sorted(r)) for r in ranges if min(r) <= end and max(r) >= start
    ]
    if not kept:
        raise ToolInputError(
            f"every time range lies outside the video{v.name} ({start:g} to {end:.1f} s)"
        )
    return kept


def _evidence(v: VideoView, ranges: Sequence[tuple[float, float]]) -> tuple[Evidence, ...]:
    return tuple(Evidence(v.video_id, t0, t1) for t0, t1 in ranges)


def nms(detections: Sequence[Detection], threshold: float = NMS_IOU) -> list[Detection]:
    """Greedy non-maximum suppression per label: the most confident box of each overlapping
    group (IoU above ``threshold``) is kept."""
    kept: list[Detection] = []
    for d in sorted(detections, key=lambda d: -d.score):
        if all(k.label != d.label or box_iou(k.box, d.box) <= threshold for k in kept):
            kept.append(d)
    return kept


@tool
def object_detect_tool(
    ctx: ToolContext,
    time_ranges: TimeRanges,
    objects: Annotated[list[str], Field(min_length=1)],
    video: str | None = None,
) -> Observation:
    """Open-set object detection on the video frames of the given time ranges: boxes, labels and confidences per frame, and counts per label.

    Args:
        time_ranges: [start, end] pairs (seconds or HH:MM:SS) to look at.
        objects: Text descriptions of the objects to detect, e.g. ["performer in white skirt", "cat"].
        video: The video to look at (id or name); needed when several are in scope.
    """
    v = open_video(ctx, video)
    ranges = _ranges(ctx, v, time_ranges)
    detector, _ = backends(ctx)
    targets = sorted({resolve_target(o, detector) for o in objects})
    times = inspect_times(ranges, FPS, PERCEIVE_FRAMES)
    cost = Cost()
    frames = Region().frames(v, times, DETECT_SIDE, cost)  # (N, H, W, 3) uint8
    h, w = frames.shape[1:3]
    found = detector.detect(list(frames), targets)
    threshold = ctx.options.perception.detect_threshold  # AVI: 0.35, Grounding DINO's box threshold
    calls, notes = detector_report(detector)
    rows = [
        (
            f"Detections of {', '.join(targets)} in {len(times)} frame(s){v.name} "
            f"(detector {detector.name}, NMS IoU {NMS_IOU}):"
        )
    ]
    rows += [f"Note: {n}." for n in notes]
    counts: dict[str, list[int]] = defaultdict(list)
    scores: list[float] = []
    for t, dets in zip(times, found, strict=False):
        kept = nms([d for d in dets if d.score >= threshold])
        per = Counter(d.label for d in kept)
        for label in targets:
            counts[label].append(per.get(label, 0))
        for d in kept:
            box = to_fraction(d.box, w, h)
            rows.append(
                f"t={t:.1f}s: {d.label} (p={d.score:.2f}) ["
                + ", ".join(f"{x:.3f}" for x in box)
                + "]"
            )
            scores.append(d.score)
    if not scores:
        rows.append("Nothing found above the detection threshold.")
    rows.append(
        "Counts per frame: "
        + "; ".join(
            f"{label}: max {max(c)}, median {statistics.median(c):g}"
            for label, c in sorted(counts.items())
        )
    )
    rows.append("Boxes are fractions of the frame [x0, y0, x1, y1].")
    confidence = float(np.mean(scores)) if scores else 0.0
    return Observation(
        "\n".join(rows), confidence, _evidence(v, ranges), cost.frames, cost.calls + calls
    )


@tool
def text_extract_tool(
    ctx: ToolContext, time_ranges: TimeRanges, video: str | None = None
) -> Observation:
    """Text recognition (OCR) on the video frames of the given time ranges.

    Args:
        time_ranges: [start, end] pairs (seconds or HH:MM:SS) to read.
        video: The video to read (id or name); needed when several are in scope.
    """
    v = open_video(ctx, video)
    ranges = _ranges(ctx, v, time_ranges)
    client = ctx.require_models("ocr", "text_extract_tool").client("ocr")
    times = inspect_times(ranges, FPS, PERCEIVE_FRAMES)
    cost = Cost()
    frames = Region().frames(v, times, DETECT_SIDE, cost)  # (N, H, W, 3) uint8
    read = client.read_text(list(frames))
    rows, before = [], set[str]()
    for t, lines in zip(times, read, strict=False):
        now = {
            ln.text.strip(): ln.score
            for ln in lines
            if ln.score >= OCR_CONFIDENCE and ln.text.strip()
        }
        rows += [
            f't={t:.1f}s: "{text}" ({score:.2f})'
            for text, score in now.items()
            if text not in before
        ]
        before = set(now)
    head = f"Text read in {len(times)} frame(s){v.name} (confidence ≥ {OCR_CONFIDENCE}; repeats on consecutive frames listed once):"
    text = "\n".join([head, *rows]) if rows else f"{head}\nNo text found."
    return Observation(text, None, _evidence(v, ranges), cost.frames, cost.calls + len(times) and 1)


@tool
def boundary_detect_tool(
    ctx: ToolContext,
    time_ranges: TimeRanges,
    event: str,
    video: str | None = None,
) -> Observation:
    """Detect the start and end of an event inside the given time ranges from frame-level image-text similarity.

    Args:
        time_ranges: [start, end] pairs (seconds or HH:MM:SS) to search; the event is located in the span they cover.
        event: A short description of the event, e.g. "person opens the fridge".
        video: The video to look at (id or name); needed when several are in scope.
    """
    if not event.strip():
        raise ToolInputError("event is empty; describe the event to locate")
    v = open_video(ctx, video)
    ranges = _ranges(ctx, v, time_ranges)
    t0, t1 = min(r[0] for r in ranges), max(r[1] for r in ranges)
    models = ctx.require_models("image_embed", "boundary_detect_tool")
    record = ctx.library.get_video(v.video_id)
    spec = models.settings.spec("image_embed")
    if not spec.startswith("none:"):

        def score(times: list[float]) -> np.ndarray:
            return image_curve(models, record.source, record.width, record.height, times, event)

        b, frames = locate(score, t0, t1, fps=FPS, cap=BOUNDARY_FRAMES)
        how = f"frame-text similarity of {frames} frames, {spec}"
    else:
        times, sims = caption_curve(ctx.library, models, v.video_id, t0, t1, event)
        if not times:
            return Observation(f"No clips between {t0:.1f}s and {t1:.1f}s{v.name}.", error=True)
        b, frames = boundary_from_curve(times, sims, window=1), 0
        how = (
            "coarse: caption similarity per clip (no image_embed model is configured; "
            "set one, e.g. clip:<dir>, for frame-level boundaries)"
        )
    text = (
        f"Event boundary{v.name}: [{b.t_start:.1f}s, {b.t_end:.1f}s] "
        f"(peak at {b.peak_t:.1f}s, score {b.peak_score:.3f}, threshold {b.threshold:.3f}; {how})"
    )
    return Observation(text, None, (Evidence(v.video_id, b.t_start, b.t_end),), frames, 1)


@tool
def frame_analysis_tool(
    ctx: ToolContext,
    time_ranges: TimeRanges,
    question: str,
    video: str | None = None,
) -> Observation:
    """Ask a vision-language model a specific question about the frames of a list of time ranges (at most 64 frames; expensive, a last resort).

    Args:
        time_ranges: A list of [start, end] pairs (seconds or HH:MM:SS): every promising segment.
        question: The specific question to answer from the frames.
        video: The video to look at (id or name); needed when several are in scope.
    """
    v = open_video(ctx, video)
    ranges = _ranges(ctx, v, time_ranges)
    times = inspect_times(ranges, FPS, ANALYSIS_FRAMES)
    reply, note = ask_vlm(
        ctx,
        v.video_id,
        times,
        short_side=ANALYSIS_HEIGHT,
        system="You are a helpful assistant to answer questions.",
        prompt=ANALYSIS_PROMPT.format(question=question),
    )
    return Observation(
        reply or "Error: the model returned nothing.",
        None,
        _evidence(v, ranges),
        len(times),
        1,
        adjusted=(note,) if note else (),
    )


PERCEIVE_TOOLS = (object_detect_tool, boundary_detect_tool, text_extract_tool, frame_analysis_tool)
