"""Looking at pixels: frame inspection (DVD's FrameInspect) and the times it picks.

Frames are decoded on demand from the source file at the resolution asked for (the Library's
thumbnails are for browsing), labelled and spliced for the model by
:mod:`vidagent.models.vision`. Settings: :class:`~vidagent.tools.options.FrameOptions`
(``ctx.options.frames``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from vidagent.exceptions import ToolInputError
from vidagent.models.vision import ask_about_frames, at_label
from vidagent.prompts import load_prompt
from vidagent.tools.base import Evidence, Observation, Seconds, ToolContext, tool

TimeRanges = Annotated[list[tuple[Seconds, Seconds]], Field(min_length=1)]


def inspect_times(
    ranges: Sequence[tuple[float, float]], fps: float = 2.0, limit: int = 50
) -> list[float]:
    """Frame times to look at in ``ranges``: every frame at ``fps``, or ``limit`` spread evenly.

    As DVD's released code does: the ranges are laid end to end on one timeline of length T;
    when they hold more than ``limit`` frames, offsets ``m * T / limit`` are mapped back into
    their range and snapped to the ``fps`` grid; duplicates are dropped.
    """
    spans = sorted((t0, t1) for t0, t1 in ranges if t1 >= t0)
    every = sorted(
        {
            round(k / fps, 3)
            for t0, t1 in spans
            for k in range(math.ceil(t0 * fps), math.floor(t1 * fps) + 1)
        }
    )
    if len(every) <= limit:
        return every or [spans[0][0]] if spans else []
    total = sum(t1 - t0 for t0, t1 in spans)
    times = set()
    for m in range(limit):
        offset = m * total / limit
        for t0, t1 in spans:
            if offset <= t1 - t0:
                times.add(round(round((t0 + offset) * fps) / fps, 3))
                break
            offset -= t1 - t0
    return sorted(times)


def browse_times(duration: float, n: int, start: float = 0.0) -> list[float]:
    """``n`` times at the midpoints of equal bins over the video (DVD spec A.6), or over
    ``[start, duration]`` (a question's window)."""
    return [start + (j + 0.5) * (duration - start) / n for j in range(n)]


def ask_vlm(
    ctx: ToolContext,
    video_id: str,
    times: Sequence[float],
    *,
    short_side: int,
    system: str,
    prompt: str,
    max_tokens: int = 512,
    splice: int = 1,
) -> tuple[str, str]:
    """Decode frames of a video at ``times`` and ask the ``tool_vlm`` role about them; the reply and
    a note when the frames could not be sent as asked (:func:`~vidagent.models.vision.layout`).

    Raises:
        ToolInputError: no model hub in the context.
        ConfigError: the vlm takes no images.
    """
    record = ctx.library.get_video(video_id)
    client = ctx.require_models("tool_vlm", "this tool").client("tool_vlm")
    # Every frame a tool looks at passes here: clamped, none lies outside a question's window.
    return ask_about_frames(
        client,
        record.source,
        [ctx.clamp(video_id, t) for t in times],
        width=record.width,
        height=record.height,
        short_side=short_side,
        system=system,
        prompt=prompt,
        max_tokens=max_tokens,
        splice=splice,
    )


@tool
def frame_inspect(
    ctx: ToolContext,
    question: str,
    time_ranges_hhmmss: TimeRanges,
    video: str | None = None,
) -> Observation:
    """Crop the video frames based on the time ranges and ask the model a detailed question about the cropped video clips.

    Args:
        question: The specific detailed question to ask about the video content during the
            specified time ranges. No need to add time ranges in the question.
        time_ranges_hhmmss: A list of [start, end] pairs, each time in HH:MM:SS or seconds. At
            most 50 frames are looked at, spread evenly when the ranges hold more.
        video: The video to look at (its id or name); needed when several are in scope.
    """
    video_id = ctx.resolve_video(video)
    start, duration = ctx.span(video_id)
    late = [min(pair) for pair in time_ranges_hhmmss if min(pair) > duration]
    if late:
        raise ToolInputError(
            f"time range starting {at_label(late[0])} begins after the video ends ({at_label(duration)})"
        )
    early = [max(pair) for pair in time_ranges_hhmmss if max(pair) < start]
    if early:
        raise ToolInputError(
            f"time range ending {at_label(early[0])} ends before the part of the video this "
            f"question is about begins ({at_label(start)})"
        )
    ranges = [ctx.clamp_span(video_id, t0, t1) for t0, t1 in time_ranges_hhmmss]
    opts = ctx.options.frames
    times = inspect_times(ranges, opts.inspect_fps, opts.inspect_frames)
    template = opts.inspect_prompt or load_prompt("dvd_frame_inspect").strip()
    reply, note = ask_vlm(
        ctx,
        video_id,
        times,
        short_side=opts.inspect_height,
        system=load_prompt("dvd_frame_inspect_system").strip(),
        prompt=template.replace("[question]", question),
    )
    return Observation(
        text=reply or "Error: the model returned nothing.",
        evidence=tuple(Evidence(video_id, t0, t1) for t0, t1 in sorted(ranges)),
        frames=len(times),
        model_calls=1,
        adjusted=(note,) if note else (),
    )
