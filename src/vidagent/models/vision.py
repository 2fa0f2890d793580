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
from dataclasses import dataclass
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
    frames: np.ndarray, times: Sequence[float], per_image: int = 1
) -> tuple[str | ImagePart, ...]:
    """Message content: a ``t=`` label before each image of ``per_image`` spliced frames."""
    from vidagent.media import encode_jpeg

    parts: list[str | ImagePart] = []
    for i, image in enumerate(splice(frames, per_image)):
        span = times[i * per_image : (i + 1) * per_image]
        label = (
            f"t={at_label(span[0])}"
            if len(span) == 1
            else f"t={at_label(span[0])}-{at_label(span[-1])}"
        )
        parts += [label, ImagePart(encode_jpeg(image, quality=85))]
    return tuple(parts)


def frame_images(source: str | Path, times: Sequence[float], *, size: int) -> list[ImagePart]:
    """The frames of ``source`` nearest ``times``, at most ``size`` pixels on their long side,
    each as a JPEG image part (for a strategy that labels and sends frames itself)."""
    from vidagent.media import encode_jpeg, frames_at

    frames = frames_at(source, list(times), size=size)  # (N, H, W, 3) uint8
    return [ImagePart(encode_jpeg(rgb, quality=85)) for rgb in frames]


@dataclass(frozen=True)
class Layout:
    """How frames go to a model: which times, how many to an image, and why, if not as asked."""

    times: list[float]
    per_image: int
    note: str = ""


def layout(
    times: Sequence[float], max_images: int, *, splice: int = 1, describer: bool = False
) -> Layout:
    """The frames to send and their splicing: ``splice`` to an image (DVD's global browse: 5),
    more only when the model's image limit forces it. A describer measures each frame on its
    own, so it is never sent spliced frames: past its limit it gets that many, spread evenly."""
    times, limit = list(times), max(1, max_images)
    if describer:
        if len(times) <= limit:
            return Layout(times, 1)
        kept = [times[round(i * (len(times) - 1) / max(1, limit - 1))] for i in range(limit)]
        return Layout(kept, 1, f"the perception describer measured {limit} of {len(times)} frames")
    per = max(1, splice, math.ceil(len(times) / limit))
    note = ""
    if per > max(1, splice):
        note = (
            f"{len(times)} frames were spliced {per} to an image to fit the model's limit of "
            f"{limit} images"
        )
    return Layout(times, per, note)


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
    splice: int = 1,
) -> tuple[str, str]:
    """Decode ``source`` at ``times`` (``short_side`` pixels) and ask ``client`` about them.

    Returns:
        The reply, and a note when the frames could not be sent as asked (spliced further to
        fit the model's image limit, or fewer measured by the describer); "" otherwise.

    Raises:
        ConfigError: the model takes no images.
    """
    from vidagent.media import frames_at

    client.require_images()
    caps = client.capabilities
    plan = layout(times, caps.max_images or 50, splice=splice, describer=caps.describer)
    size = short_side_size(width, height, short_side)
    frames = frames_at(source, plan.times, size=size)  # (N, H, W, 3) uint8
    content = (*labelled_images(frames, plan.times, plan.per_image), prompt)
    request = ChatRequest(
        (Message("system", system), Message("user", content)),
        temperature=0.0,
        max_tokens=max_tokens,
    )
    return client.chat(request).text.strip(), plan.note
