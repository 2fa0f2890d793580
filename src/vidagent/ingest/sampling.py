"""Frames of many clips in few decodes, for the stages that look at pixels (OCR, detection)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from vidagent.media import Size, frames_at, iter_sampled_frames

if TYPE_CHECKING:
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo

#: Pending clips at most this far apart are decoded in one pass rather than reached by a seek:
#: decoding a gap with non-reference frames skipped costs less than a seek and its GOP.
MERGE_GAP_SECONDS = 30.0
_EPS = 1e-6

ClipFrames = list[tuple[float, np.ndarray]]  # (t, (H, W, 3) uint8 RGB) in time order


def sample_clips(
    info: VideoInfo, clips: Sequence[ClipRow], fps: float, size: Size
) -> Iterator[tuple[ClipRow, ClipFrames]]:
    """Yield each clip, in time order, with its frames on a grid of ``fps`` from its run's start.

    Clips are grouped into runs whose gaps are under :data:`MERGE_GAP_SECONDS` (or two keyframe
    intervals), and each run is decoded in one sequential pass; frames in the gaps are dropped.
    A clip too short to hold a grid point gets the frame at its middle.

    Args:
        info: the probed video.
        clips: the clips wanted, in any order.
        fps: samples per second.
        size: frame size (see :data:`~vidagent.media.Size`).
    """
    ordered = sorted(clips, key=lambda c: c.t0)
    gap = max(MERGE_GAP_SECONDS, 2.0 * info.keyframe_interval)
    runs: list[list[ClipRow]] = []
    for clip in ordered:
        if runs and clip.t0 - runs[-1][-1].t1 <= gap:
            runs[-1].append(clip)
        else:
            runs.append([clip])
    for run in runs:
        yield from _sample_run(info, run, fps, size)


def _sample_run(
    info: VideoInfo, run: list[ClipRow], fps: float, size: Size
) -> Iterator[tuple[ClipRow, ClipFrames]]:
    k = 0  # the clip of the run being filled
    got: ClipFrames = []
    for t, rgb in iter_sampled_frames(info, fps, size, start=run[0].t0, end=run[-1].t1):
        while k < len(run) and t >= run[k].t1 - _EPS:
            yield run[k], got or _middle(info, run[k], size)
            k, got = k + 1, []
        if k < len(run) and t >= run[k].t0 - _EPS:
            got.append((t, rgb))
    for clip in run[k:]:
        yield clip, got or _middle(info, clip, size)
        got = []


def _middle(info: VideoInfo, clip: ClipRow, size: Size) -> ClipFrames:
    t = (clip.t0 + clip.t1) / 2
    return [(t, frames_at(info, [t], size=size)[0])]
