"""The detect stage: objects (people, faces with the default detector) in sampled frames.

Frames are sampled at ``fps`` (default one every 2 s: people rarely come and go faster, and it
halves the cost of 1 fps), at most ``size`` pixels on the long side (default 800), in one sequential decode over runs of pending clips
(:func:`~vidagent.ingest.sampling.sample_clips`), and passed to the detector in batches.

800 px is the working width of the default ``opencv:hog+haar`` detector, which downscales wider
frames itself; decoding smaller loses people. Measured on the first 30 s of OpenCV's
``vtest.avi`` (768x576 pedestrians), 2 CPU cores::

    frame size   s/frame hog+haar   s/frame hog   frames with a person   people per frame
    768x576      0.16               0.085         30/30                  3.1
    640x480      0.11               0.041         24/30                  1.4
    480x360      0.06               0.021         11/30                  0.4

A frame whose picture has not changed since the last frame passed to the detector (the
change test of :mod:`vidagent.ingest.read_text`: no cell of a 64x36 greyscale thumbnail moved by
more than 12 grey levels) is not detected again: it gets that frame's detections at its own
time. Nothing can have come or gone in a picture that did not change, so nothing found is lost;
on an hour of the real clips (still stretches, a held title, pedestrians, animation) 591 of
1,801 frames were such repeats.

Per clip, ``detections`` is a JSON list of ``{"t", "label", "box", "score"}``: ``t`` the sample
time in seconds, ``box`` ``[x0, y0, x1, y1]`` in pixels of the video's display size (mapped back
from the decoded size and clipped to the frame).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vidagent.ingest.base import IngestContext, Stage, StageEstimate
from vidagent.ingest.read_text import thumbnail, unchanged
from vidagent.ingest.sampling import ClipFrames, sample_clips
from vidagent.media import probe

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo
    from vidagent.models.base import Detection
    from vidagent.models.client import Client

#: CPU seconds per *sampled* 640x360 frame (:data:`~vidagent.ingest.base.MEASURED_ON`): 37 for
#: the 601 frames of the 20-minute composed video, 182 of them unchanged (0.088 per frame
#: detected: HOG 0.042, Haar 0.040); other sizes scale by pixel count.
CPU_PER_FRAME = {"opencv:hog+haar": 0.062, "opencv:hog": 0.032, "opencv:haar": 0.030}
_MEASURED_PIXELS = 640 * 360


class Detect(Stage):
    """Detections on sampled frames into ``detections`` per clip.

    Args:
        fps: frames sampled per second.
        size: longest side of the frames passed to the detector, in pixels (never upscaled).
        batch: frames per detector call (at least the adapter's ``batch_size``).

    After :meth:`run`, ``note`` counts the detections and frames, and the frames unchanged
    since the last one detected, which reuse its detections.
    """

    name: ClassVar[str] = "detect"
    role: ClassVar[str | None] = "detector"
    column: ClassVar[str | None] = "detect_model"

    def __init__(self, fps: float = 0.5, size: int = 800, batch: int = 8) -> None:
        self.fps = fps
        self.size = size
        self.batch = batch
        self.note = ""

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        fp = self.fingerprint(ctx.settings)
        client = ctx.models.client(str(self.role))
        batch = max(self.batch, client.capabilities.batch_size)
        self._frames = self._found = self._reused = 0
        self._ref: tuple[np.ndarray, list[Detection]] | None = None  # last detected: thumb, found
        waiting: list[tuple[ClipRow, ClipFrames]] = []
        for clip, frames in sample_clips(probe(ctx.path), clips, self.fps, self.size, ctx.frames):
            waiting.append((clip, frames))
            if sum(len(f) for _, f in waiting) >= batch:
                self._detect(ctx, client, batch, waiting, fp, bar)
                waiting = []
        self._detect(ctx, client, batch, waiting, fp, bar)
        self.note = (
            f"{self._found} detections in {self._frames} frames "
            f"({self._reused} unchanged, their detections reused)"
        )

    def _detect(
        self,
        ctx: IngestContext,
        client: Client,
        batch: int,
        waiting: list[tuple[ClipRow, ClipFrames]],
        fp: str,
        bar: tqdm,
    ) -> None:
        flat = [rgb for _, frames in waiting for _, rgb in frames]
        # Each frame's detections: a new one's place in `todo`, or a repeat's reference's.
        plan: list[int | list[Detection]] = []
        todo: list[np.ndarray] = []
        ref: tuple[np.ndarray, int | list[Detection]] | None = self._ref
        for rgb in flat:
            thumb = thumbnail(rgb)
            if ref is not None and unchanged(ref[0], thumb):
                plan.append(ref[1])
                self._reused += 1
                continue
            plan.append(len(todo))
            ref = (thumb, len(todo))
            todo.append(rgb)
        new: list[list[Detection]] = []
        for i in range(0, len(todo), batch):
            new += client.detect(todo[i : i + batch])
        found = [new[p] if isinstance(p, int) else p for p in plan]
        if ref is not None:
            self._ref = (ref[0], new[ref[1]] if isinstance(ref[1], int) else ref[1])
        width, height = ctx.video.width, ctx.video.height
        at = 0
        for clip, frames in waiting:
            records = []
            for (t, rgb), detections in zip(frames, found[at : at + len(frames)], strict=False):
                sx, sy = width / rgb.shape[1], height / rgb.shape[0]
                records += [_record(t, d, sx, sy, width, height) for d in detections]
            at += len(frames)
            records = [r for r in records if r is not None]
            self._frames, self._found = self._frames + len(frames), self._found + len(records)
            update = {
                "clip_index": clip.clip_index,
                "detections": json.dumps(records),
                "detect_model": fp,
            }
            self.finished(ctx, update, bar)

    def frame_grid(self) -> tuple[float, int]:
        return self.fps, self.size

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        spec = settings.spec(str(self.role))
        frames = max(math.ceil(info.duration * self.fps - 1e-9), clips)
        est = StageEstimate(
            self.name, self.role, spec, calls=math.ceil(frames / self.batch), frames=frames
        )
        if spec in CPU_PER_FRAME:
            scale = min(1.0, self.size / max(info.width, info.height, 1))
            pixels = info.width * info.height * scale * scale
            est.measured(frames * CPU_PER_FRAME[spec] * pixels / _MEASURED_PIXELS)
        else:
            est.notes.append(f"no measured speed for {spec}")
        return est


def _record(
    t: float, d: Detection, sx: float, sy: float, width: int, height: int
) -> dict[str, Any] | None:
    """One detection in display pixels, clipped to the frame; None when nothing is left."""
    x0, y0, x1, y1 = d.box
    box = [
        round(min(max(x0 * sx, 0.0), width), 1),
        round(min(max(y0 * sy, 0.0), height), 1),
        round(min(max(x1 * sx, 0.0), width), 1),
        round(min(max(y1 * sy, 0.0), height), 1),
    ]
    if box[2] <= box[0] or box[3] <= box[1]:
        return None
    return {"t": round(t, 3), "label": d.label, "box": box, "score": round(d.score, 3)}
