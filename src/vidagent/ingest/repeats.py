"""Whether a clip's picture repeats the previous clip's (the ``caption_skip_repeats`` setting).

A slide, a static camera on an empty room, a paused screen: the clip after looks exactly like
the clip before, and a vision model asked again bills ten more frames to say the same. The
caption stage asks :class:`Repeats` before each call; where the picture repeats, it reuses the
previous clip's caption instead (:mod:`vidagent.ingest.caption`).

The test reads the Library's own thumbnails (``sample_fps``, 1 a second by default; nothing is
decoded from the video): each is shrunk to :data:`SIDE` x :data:`SIDE` greyscale (each pixel
the mean of a 1/32 by 1/32 patch, which averages compression noise away), and a clip repeats the
one before when every thumbnail of both lies within ``difference`` of the previous clip's last
one: no pixel differs by more, on a 0-1 scale. The largest pixel, not the mean, so that a line
of text appearing on a slide (a few patches, a fifth of the scale or more) is a change, where the
mean over the frame moves by 0.02. Both clips, not only the new one: a clip that moved and then
settled was captioned for its motion, which the still clip after it does not have. A clip
without thumbnails (shorter than a sampling step) never repeats.

Measured on a generated minute (``make_video`` with two still shots and two captions): a still
clip after a still clip differs by 0.004, and every other pair by 0.29 or more (a caption
appearing: 0.48; a panning texture: 0.29-0.68), so the setting's suggested 0.05 sits far from
both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vidagent.library import ClipRow, Library

SIDE = 32  # pixels of the greyscale square compared: position and layout, not JPEG noise


def grey(jpeg: bytes) -> np.ndarray:
    """A JPEG as a :data:`SIDE` x :data:`SIDE` greyscale array in [0, 1]."""
    import cv2

    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)  # (H, W) uint8
    if image is None:
        raise ValueError("a stored thumbnail is not a readable JPEG")
    small = cv2.resize(image, (SIDE, SIDE), interpolation=cv2.INTER_AREA)  # (32, 32) uint8
    return np.asarray(small, np.float32) / 255.0


class Repeats:
    """Compares clips of one video by their stored thumbnails (module docstring).

    Args:
        library: where the thumbnails are.
        video_id: the video.
        difference: the largest difference of any pixel (0-1) that still counts as the same
            picture.
    """

    def __init__(self, library: Library, video_id: str, difference: float) -> None:
        self.library = library
        self.video_id = video_id
        self.difference = difference
        self._thumbs: dict[int, list[np.ndarray]] = {}

    def thumbs(self, clip: ClipRow) -> list[np.ndarray]:
        """The clip's thumbnails, shrunk; the two clips' read last are kept."""
        found = self._thumbs.get(clip.clip_index)
        if found is None:
            rows = self.library.frames(self.video_id, clip.t0, clip.t1)
            found = self._thumbs[clip.clip_index] = [grey(f.jpeg) for f in rows if f.t < clip.t1]
            while len(self._thumbs) > 2:  # the two last read: clips come in order
                del self._thumbs[next(iter(self._thumbs))]
        return found

    def change(self, previous: ClipRow, clip: ClipRow) -> float | None:
        """The largest difference of any thumbnail of the two clips from ``previous``'s last
        one; None when either clip has none."""
        before, now = self.thumbs(previous), self.thumbs(clip)
        if not before or not now:
            return None
        ref = before[-1]
        return max(float(np.abs(t - ref).max()) for t in before + now)

    def repeats(self, previous: ClipRow, clip: ClipRow) -> bool:
        """Whether ``clip``'s picture repeats ``previous``'s."""
        change = self.change(previous, clip)
        return change is not None and change <= self.difference
