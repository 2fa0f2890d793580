"""Frames for a vision-language model: decoded at a size, labelled with their times, spliced
side by side when the model takes fewer images than there are frames.

Shared by the tools that look at pixels (:mod:`vidagent.tools.frames`) and the ingest builders
that caption spans (:mod:`vidagent.ingest.context`). Every image sent is preceded by its time as
a text label, ``t=HH:MM:SS`` with tenths where the time has them (DVD spec A.11 #9); spliced
images are labelled with their first and last time, as DVD does to fit Azure's 50-image limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vidagent.models.base import ChatRequest, ImagePart, Message
from vidagent.timecode import clock

if TYPE_CHECKING:
    from vidagent.models.client import Client


def short_side_size(width: int, height: int, short_side: int) -> int:
    """The longest-side size (for :func:`~vidagent.media.frames_at`) giving ``short_side``p."""
    return round(short_side * max(width, height) / max(1, min(width, height)))


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


def at_label(t: float) -> str:
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
        label = f"t={at_label(span[0])}" if len(span) == 1 else f"t={at_label(span[0])}-{at_label(span[-1])}"
        parts += [label, ImagePart(encode_jpeg(image, quality=85))]
    return tuple(parts)


def ask_about_frames(
    client: Client,
    source: str | Path,
    times: Sequence[float],
    *,
    width: int,
    height: int,
    short_side: int,
    system: str,
    prompt: str,
    max_tokens: int = 512,
) -> str:
    """Decode ``source`` at ``times`` (``short_side`` pixels) and ask ``client`` about them.

    Raises:
        ConfigError: the model takes no images.
    """
    from vidagent.media import frames_at

    client.require_images()
    size = short_side_size(width, height, short_side)
    frames = frames_at(source, list(times), size=size)  # (N, H, W, 3) uint8
    content = (*labelled_images(frames, times, client.capabilities.max_images or 50), prompt)
    request = ChatRequest(
        (Message("system", system), Message("user", content)), temperature=0.0,
        max_tokens=max_tokens,
    )  # fmt: skip
    return client.chat(request).text.strip()
