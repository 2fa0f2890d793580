"""AgentCVR's visual sub-agent's frames: which ones, how they are labelled, and decoding them.

As the released code samples them (spec/agentcvr.md §5.1): ``k`` frames of an interval of
length ``D`` starting at ``s`` sit at the bin centres ``s + D * (j + 0.5) / k``, become frame
indices ``floor(t * fps)`` clipped to the last frame, and repeats are dropped. A clip made of
several pieces of its source (a CrossVid clip with several ``[begin, end]`` spans) shares its
frames among the pieces in proportion to their length, by largest remainder; so does a call
whose targets ask for more frames than the visual model takes, in proportion to what each
target asked. Frames are sent with their long side at 360 px.

Drone-view inputs are folders of images: ``k`` images at ``linspace(start, end, k)`` (as the
code does), with the boxes of the question's objects drawn in green and labelled with the name
the question uses (``obj_1``), as CrossVid's ``frame_bbox.py`` scales them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vidagent.exceptions import MediaError, ToolInputError
from vidagent.models.base import ImagePart

LONG_SIDE = 360
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
#: ``{object name: {frame index: (x0, y0, x1, y1)}}`` in the source image's pixels
Boxes = Mapping[str, Mapping[int, tuple[float, float, float, float]]]


def bin_centres(start: float, end: float, k: int) -> list[float]:
    """``k`` times at the centres of equal bins of ``[start, end]``."""
    span = end - start
    return [start + span * (j + 0.5) / k for j in range(k)]


def frame_indices(times: Sequence[float], fps: float, total_frames: int) -> list[int]:
    """``floor(t * fps)`` of each time, clipped to ``[0, total_frames - 1]``, repeats dropped
    (first kept, order kept)."""
    last = max(0, total_frames - 1)
    out = (min(max(math.floor(t * fps + 1e-9), 0), last) for t in times)
    return list(dict.fromkeys(out))


def allocate(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` by largest remainder (ties: the earlier)."""
    mass = sum(max(0.0, w) for w in weights)
    if total <= 0 or mass <= 0:
        return [0] * len(weights)
    quotas = [total * max(0.0, w) / mass for w in weights]
    shares = [math.floor(q) for q in quotas]
    order = sorted(range(len(weights)), key=lambda i: (-(quotas[i] - shares[i]), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


@dataclass(frozen=True)
class Piece:
    """A span of the source ``[src_start, src_end)`` seen at clip time ``clip_start`` on."""

    src_start: float
    src_end: float
    clip_start: float

    @property
    def length(self) -> float:
        return self.src_end - self.src_start


def clip_pieces(
    spans: Sequence[tuple[float, float]], duration: float, start: float = 0.0
) -> list[Piece]:
    """The source spans of a clip laid end to end on the clip's own timeline (none: the whole
    source); each span clamped to the source, or to ``[start, duration]`` (a question's
    window)."""
    if not spans:
        return [Piece(start, duration, 0.0)]
    pieces, at = [], 0.0
    for s, e in spans:
        s, e = max(start, float(s)), min(float(e), duration)
        if e > s:
            pieces.append(Piece(s, e, at))
            at += e - s
    return pieces


def source_times(pieces: Sequence[Piece], start: float, end: float, k: int) -> list[float]:
    """Source times of ``k`` frames of clip interval ``[start, end]``: bin centres within each
    piece it overlaps, the ``k`` shared among pieces by overlap length."""
    overlaps = []
    for p in pieces:
        lo, hi = max(start, p.clip_start), min(end, p.clip_start + p.length)
        if hi > lo:
            overlaps.append((p, lo, hi))
    shares = allocate(k, [hi - lo for _, lo, hi in overlaps])
    times = []
    for (p, lo, hi), n in zip(overlaps, shares, strict=True):
        offset = p.src_start - p.clip_start
        times += [t + offset for t in bin_centres(lo, hi, n)]
    return times


def mapping_line(first: int, last: int, video: int, start: float, end: float) -> str:
    """The released code's mapping line for frames of a video file."""
    return f"Frames {first}-{last} are from Video {video} ({start:.1f}s to {end:.1f}s)"


def folder_mapping_line(video: int, start_f: int, end_f: int, k: int) -> str:
    """The released code's mapping line for a frame folder (source frame numbers)."""
    return f"Frames {start_f}-{end_f} from Video {video} (sampled {k} images)"


def video_images(
    path: str | Path, times: Sequence[float], *, long_side: int = LONG_SIDE
) -> list[ImagePart]:
    """Frames of a video file nearest ``times``, long side at most ``long_side``, as JPEGs."""
    from vidagent.models.vision import frame_images

    return frame_images(path, times, size=long_side)


def folder_files(folder: str | Path) -> list[Path]:
    """A frame folder's images in name order (what CrossVid indexes).

    Raises:
        MediaError: the folder is missing or holds no image (a data problem: a benchmark run
            records it on the question's row and goes on).
    """
    root = Path(folder)
    if not root.is_dir():
        raise MediaError(root, "frame folder not found")
    files = sorted(p for p in root.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise MediaError(root, "the frame folder holds no images")
    return files


def folder_indices(start: float, end: float, k: int, total: int) -> list[int]:
    """``linspace(start, end, k)`` as whole frame numbers inside the folder, repeats dropped."""
    last = max(0, total - 1)
    hi = min(float(end), float(last))
    lo = min(max(0.0, float(start)), hi)
    values = np.linspace(lo, hi, max(1, k)).astype(int)
    return list(dict.fromkeys(int(v) for v in values))


def folder_images(
    files: Sequence[Path], indices: Sequence[int], boxes: Boxes, *, long_side: int = LONG_SIDE
) -> list[ImagePart]:
    """The images at ``indices``, resized (long side ``long_side``, never up) with the boxes of
    each frame drawn in green and labelled.

    Raises:
        ToolInputError: an image cannot be read.
    """
    import cv2

    from vidagent.media import encode_jpeg

    out = []
    for index in indices:
        bgr = cv2.imread(str(files[index]))
        if bgr is None:
            raise ToolInputError(f"cannot read frame image {files[index].name}")
        h, w = bgr.shape[:2]
        scale = min(1.0, long_side / max(h, w))
        if scale < 1.0:
            bgr = cv2.resize(bgr, (int(w * scale), int(h * scale)), interpolation=cv2.INTER_AREA)
        for name, per_frame in boxes.items():
            box = per_frame.get(index)
            if box is None:
                continue
            x0, y0, x1, y1 = (int(v * scale) for v in box)
            cv2.rectangle(bgr, (x0, y0), (x1, y1), (0, 255, 0), 2)
            cv2.putText(
                bgr,
                name,
                (x0, max(10, y0 - 3)),
                cv2.FONT_HERSHEY_SIMPLEX,
                0.4,
                (0, 255, 0),
                1,
                cv2.LINE_AA,
            )
        rgb = np.ascontiguousarray(bgr[:, :, ::-1])  # (H, W, 3) uint8
        out.append(ImagePart(encode_jpeg(rgb, quality=85)))
    return out
