"""Looking at pixels: frame inspection (DVD's FrameInspect) and the helpers that pick, resize,
splice and label frames for a vision-language model.

Frames are decoded on demand from the source file at the resolution asked for (the Library's
thumbnails are for browsing). Every image sent to a model is preceded by its time as a text
label, ``t=HH:MM:SS`` with tenths where the time has them (DVD spec A.11 #9). When a model accepts fewer images than there are
frames, neighbouring frames are spliced side by side into one image, as DVD does to fit Azure's
50-image limit (the label then gives the first and last time).

``ctx.options`` keys read here: ``inspect_frames`` (default 50), ``inspect_fps`` (2),
``inspect_height`` (720), ``inspect_prompt`` (the user prompt template, default DVD Table 11).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

import numpy as np
from pydantic import Field

from vidagent.exceptions import ConfigError
from vidagent.models.base import ChatRequest, ImagePart, Message
from vidagent.prompts import load_prompt
from vidagent.timecode import clock
from vidagent.tools.base import Evidence, Observation, Seconds, ToolContext, tool

TimeRanges = Annotated[list[tuple[Seconds, Seconds]], Field(min_length=1)]


def short_side_size(width: int, height: int, short_side: int) -> int:
    """The longest-side size (for :func:`~vidagent.media.frames_at`) giving ``short_side``p."""
    return round(short_side * max(width, height) / max(1, min(width, height)))


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


def browse_times(duration: float, n: int) -> list[float]:
    """``n`` times at the midpoints of equal bins over the video (DVD spec A.6)."""
    return [(j + 0.5) * duration / n for j in range(n)]


def splice(frames: np.ndarray, per_image: int) -> list[np.ndarray]:
    """Groups of ``per_image`` frames, each joined side by side into one image.

    Args:
        frames: The frames.  # (N, H, W, 3) uint8
        per_image: Frames per composite (1: no splicing).

    Returns:
        The composites.  # each (H, W * k, 3) uint8, k <= per_image
    """
    return [
        np.concatenate(list(frames[i : i + per_image]), axis=1)
        for i in range(0, len(frames), per_image)
    ]


def _at(t: float) -> str:
    """``HH:MM:SS`` with tenths where the time has them: 2 fps frames sit on half seconds."""
    return clock(round(t, 1))


def labelled_images(
    frames: np.ndarray, times: Sequence[float], max_images: int
) -> tuple[str | ImagePart, ...]:
    """Message content: a ``t=`` label before each image, splicing to fit ``max_images``."""
    from vidagent.media import encode_jpeg

    per_image = max(1, math.ceil(len(frames) / max(1, max_images)))
    parts: list[str | ImagePart] = []
    for i, image in enumerate(splice(frames, per_image)):
        span = times[i * per_image : (i + 1) * per_image]
        label = f"t={_at(span[0])}" if len(span) == 1 else f"t={_at(span[0])}-{_at(span[-1])}"
        parts += [label, ImagePart(encode_jpeg(image, quality=85))]
    return tuple(parts)


def ask_vlm(
    ctx: ToolContext,
    video_id: str,
    times: Sequence[float],
    *,
    short_side: int,
    system: str,
    prompt: str,
    max_tokens: int = 512,
) -> str:
    """Decode frames of a video at ``times`` and ask the ``vlm`` role about them.

    Raises:
        ConfigError: no model hub in the context.
    """
    from vidagent.media import frames_at

    if ctx.models is None:
        raise ConfigError("this tool needs models (the vlm role)")
    record = ctx.library.get_video(video_id)
    size = short_side_size(record.width, record.height, short_side)
    frames = frames_at(record.source, list(times), size=size)  # (N, H, W, 3) uint8
    client = ctx.models.client("vlm")
    content = (*labelled_images(frames, times, client.capabilities.max_images or 50), prompt)
    request = ChatRequest(
        (Message("system", system), Message("user", content)),
        temperature=0.0,
        max_tokens=max_tokens,
    )
    return client.chat(request).text.strip()


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
    duration = ctx.duration(video_id)
    late = [min(pair) for pair in time_ranges_hhmmss if min(pair) > duration]
    if late:
        raise ValueError(
            f"time range starting {_at(late[0])} begins after the video ends ({_at(duration)})"
        )
    ranges = [ctx.clamp_span(video_id, t0, t1) for t0, t1 in time_ranges_hhmmss]
    opts = ctx.options
    times = inspect_times(ranges, opts.get("inspect_fps", 2.0), opts.get("inspect_frames", 50))
    template = opts.get("inspect_prompt") or load_prompt("dvd_frame_inspect").strip()
    reply = ask_vlm(
        ctx,
        video_id,
        times,
        short_side=opts.get("inspect_height", 720),
        system=load_prompt("dvd_frame_inspect_system").strip(),
        prompt=template.replace("[question]", question),
    )
    return Observation(
        text=reply or "Error: the model returned nothing.",
        evidence=tuple(Evidence(video_id, t0, t1) for t0, t1 in sorted(ranges)),
        frames=len(times),
        model_calls=1,
    )
