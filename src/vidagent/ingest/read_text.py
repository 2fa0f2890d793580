"""The read_text stage: text burned into the picture (titles, slides, signs, subtitles), per clip.

Frames are sampled at ``fps`` (default one every 2 s: titles and captions stay up longer than
that, and OCR is the dearest local stage), at most ``size`` pixels on the long side,
in one sequential decode over runs of pending clips
(:func:`~vidagent.ingest.sampling.sample_clips`), and read in batches.
The default size, 960, keeps small print legible: on a 1920x1080 frame, text 13 px high is read
exactly from a 960 px frame but with errors from a 640 px one.

OCR is the most expensive local stage, so a frame that has not changed since the last frame
actually read reuses that frame's lines. "Not changed" is judged on 64x36 grayscale thumbnails
(each cell the mean of a block of pixels, which averages sensor and compression noise away): the
frame is unchanged when no cell moved by more than :data:`UNCHANGED_MAX_DIFF` grey levels.
The *largest* cell change is the test, not the mean, because text is small. Measured on
generated 1 fps samples, thumbnails of frames decoded at 960 px::

    change between samples                       mean |diff|   max |diff|
    none (x264 still)                            0.00-0.02     0-3
    none, sensor noise sigma 4 on every frame    0.03-0.27     1-2
    one 20 px letter added on a 1280x720 slide   0.03          53
    small subtitle line replaced (1280x720)      0.15-0.19     40-51
    big title digit replaced (640x360)           0.77-1.05     165-181

A mean threshold cannot separate these (noise 0.27 > one letter 0.03); the maximum separates
them by a factor of 13, and 12 sits between with margin on both sides. The comparison is with
the last frame read, not the previous frame, so a slow fade or pan is read again once it adds
up to a visible change.

Before a changed frame is read, a text-presence gate (on by default, ``gate=False`` turns it
off) skips OCR where no text can be: text is strokes, so some 32x32 cell of the frame's Canny
edge map (thresholds 50/150, at the decoded size) is dense with edges. A frame whose densest
cell has at most :data:`GATE_MAX_EDGES` of its pixels on an edge is taken to hold no text and
gets no lines. Measured on 0.5 fps samples, densest-cell edge fraction::

    frames                                              densest cell
    generated 640x360, textured pan + disc, no text     0.00-0.061 (96 frames)
    generated, large title ("SCENE 5 TITLE")            0.155 and up
    real 480x352 animation, any line read               0.09 and up ("CC", a small logo)
    real 480x352 animation, nothing read                0.00-0.37 (7 of 49 below the gate)

The gate is calibrated on what PP-OCR reads, so it applies to the embedded ``rapidocr:`` models
only (:data:`GATED_OCR`); another OCR model (a VLM endpoint, a test's fake) sees every frame.
A single straight edge across a cell is 1/32 = 0.031 of it and two are 0.062, so the gate
passes anything busier than a border; OCR of a frame costs 0.15-0.4 s, the gate about 1 ms.

Per clip, ``ocr_text`` holds the distinct lines in first-seen order joined by newlines, compared
case- and whitespace-insensitively, and ``ocr_lines`` the same lines as JSON
``[{"text", "t0", "t1"}, ...]`` with the time of the first and the last sampled frame each was
read in (a frame found unchanged counts as showing the lines of the frame it reuses); both are
written in one commit with the fingerprint, so a crash leaves a clip with both or neither. With
one frame every ``1 / fps`` seconds, a line's true span starts up to one interval before ``t0``
and ends up to one after ``t1``.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, ClassVar

import cv2
import numpy as np

from vidagent.ingest.base import IngestContext, Stage, StageEstimate
from vidagent.ingest.sampling import sample_clips
from vidagent.library.schema import ClipRow, OcrLine
from vidagent.media import probe

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.media import VideoInfo
    from vidagent.models.base import TextLine
    from vidagent.models.client import Client

THUMB_SIZE = (64, 36)  # (w, h) of the change-detection thumbnails
#: Largest thumbnail-cell change, in grey levels, of a frame that counts as unchanged.
UNCHANGED_MAX_DIFF = 12
#: CPU seconds per *sampled* frame (:data:`~vidagent.ingest.base.MEASURED_ON`): 28 for the 601
#: frames of the 20-minute composed video, of which 182 were unchanged and 28 without text
#: edges (0.072 per frame read). Text on every frame (the narrated clip alone) costs about
#: twice as much, a still or dark video next to nothing.
CPU_PER_FRAME = {"rapidocr:pp-ocr": 0.05}
#: Edge fraction of the densest 32x32 cell at or under which a frame holds no text (see above).
GATE_MAX_EDGES = 0.07
_GATE_CELL = 32
#: Spec prefixes of the OCR models the gate was measured against.
GATED_OCR = ("rapidocr:",)
#: Clips held before a checkpoint when the gate leaves too few frames to fill an OCR batch.
_MAX_WAITING = 32
#: OCR reads started beyond the oldest one not yet stored: the OCR engines take the next
#: batch's frames while the last of a batch is still being read, and frames are gated and
#: clips stored meanwhile (read alone at the end of a 2-core ingest, OCR kept 1.2-1.6 of the 2
#: cores busy without it).
_READS_AHEAD = 1


#: A clip and the OCR slot of each of its sampled frames, with the frame's time.
_Slots = tuple[ClipRow, list[tuple[float, int]]]


def thumbnail(rgb: np.ndarray) -> np.ndarray:
    """The change-detection thumbnail of a frame.  # (H, W, 3) uint8 -> (36, 64) int16"""
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)  # (H, W) uint8
    return cv2.resize(gray, THUMB_SIZE, interpolation=cv2.INTER_AREA).astype(np.int16)


def unchanged(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two thumbnails show the same picture (see the module docstring)."""
    return int(np.abs(a - b).max()) <= UNCHANGED_MAX_DIFF


def text_likely(rgb: np.ndarray) -> bool:
    """Whether a frame may hold text: its densest edge cell passes the gate (module docstring)."""
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)  # (H, W) uint8
    edges = cv2.Canny(gray, 50, 150)  # (H, W) uint8, 0 or 255
    c = _GATE_CELL
    h, w = edges.shape[0] // c * c, edges.shape[1] // c * c
    if h == 0 or w == 0:
        return True  # smaller than one cell: let OCR decide
    cells = edges[:h, :w].reshape(h // c, c, w // c, c).mean(axis=(1, 3)) / 255.0  # (h/c, w/c)
    return float(cells.max()) > GATE_MAX_EDGES


def timed_lines(frames: Iterable[tuple[float, list[TextLine]]]) -> list[OcrLine]:
    """The distinct lines of frames ``(t, lines)`` in time order, first seen first (case and
    spacing do not count), each with the first and the last time it was read."""
    seen: dict[str, OcrLine] = {}
    for t, lines in frames:
        for line in lines:
            text = " ".join(line.text.split())
            key = text.casefold()
            if key in seen:
                seen[key] = seen[key]._replace(t1=t)
            elif text:
                seen[key] = OcrLine(text, t, t)
    return list(seen.values())


class _FrameReader:
    """Queues frames for OCR, handing an unchanged frame the slot of the last frame queued, and
    reads each queue in the background, up to :data:`_READS_AHEAD` reads beyond the oldest."""

    def __init__(
        self, client: Client, batch: int, readers: ThreadPoolExecutor, gate: bool = True
    ) -> None:
        self.client = client
        self.batch = batch
        self.readers = readers
        self.gate = gate
        self.lines: dict[int, list[TextLine]] = {}  # slot -> lines read
        self.queue: list[tuple[int, np.ndarray]] = []
        self.ref: tuple[int, np.ndarray] | None = None  # (slot, thumbnail) of the last one queued
        self.reads: deque[Future[list[tuple[int, list[TextLine]]]]] = deque()
        self.seen = 0
        self.read = 0
        self.gated = 0  # frames the text-presence gate kept from OCR

    def add(self, rgb: np.ndarray) -> int:
        """Queue a frame unless unchanged; returns the slot its lines will be in."""
        self.seen += 1
        thumb = thumbnail(rgb)
        if self.ref is not None and unchanged(self.ref[1], thumb):
            return self.ref[0]
        slot = self.read + self.gated
        if self.gate and not text_likely(rgb):
            self.gated += 1
            self.lines[slot] = []
        else:
            self.read += 1
            self.queue.append((slot, rgb))
        self.ref = (slot, thumb)
        return slot

    def read_queue(self) -> None:
        """Start reading the queued frames (one read, perhaps of none)."""
        queue, self.queue = self.queue, []
        self.reads.append(self.readers.submit(self._read, queue))

    def _read(self, queue: list[tuple[int, np.ndarray]]) -> list[tuple[int, list[TextLine]]]:
        out: list[tuple[int, list[TextLine]]] = []
        for i in range(0, len(queue), self.batch):
            part = queue[i : i + self.batch]
            out += zip(
                (slot for slot, _ in part),
                self.client.read_text([f for _, f in part]),
                strict=False,
            )
        return out

    def collect(self) -> None:
        """Wait for the oldest read; its lines are then in :attr:`lines`."""
        self.lines.update(self.reads.popleft().result())

    def forget(self, needed: Iterable[int]) -> None:
        """Drop the lines of every slot but ``needed`` and the reference one (later frames
        may reuse it)."""
        keep = {*needed, self.ref[0] if self.ref is not None else -1}
        self.lines = {k: v for k, v in self.lines.items() if k in keep}


class ReadText(Stage):
    """OCR of sampled frames into ``ocr_text`` and ``ocr_lines`` per clip.

    Args:
        fps: frames sampled per second.
        size: longest side of the frames read, in pixels (never upscaled).
        batch: frames per OCR call (at least the adapter's ``batch_size``).
        gate: skip OCR of frames the text-presence gate finds no text in (module docstring;
            ``rapidocr:`` models only).

    After :meth:`run`, ``frames_seen`` and ``frames_read`` count the sampled and the actually
    read frames, and ``note`` says so in words.
    """

    name: ClassVar[str] = "read_text"
    role: ClassVar[str | None] = "ocr"
    column: ClassVar[str | None] = "ocr_model"

    def __init__(
        self, fps: float = 0.5, size: int = 960, batch: int = 8, gate: bool = True
    ) -> None:
        self.fps = fps
        self.size = size
        self.batch = batch
        self.gate = gate
        self.frames_seen = 0
        self.frames_read = 0
        self.note = ""

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        fp = self.fingerprint(ctx.settings)
        client = ctx.models.client(str(self.role))
        gate = self.gate and client.spec.startswith(GATED_OCR)
        batch = max(self.batch, client.capabilities.batch_size)
        with ThreadPoolExecutor(_READS_AHEAD + 1, thread_name_prefix="read_text") as readers:
            reader = _FrameReader(client, batch, readers, gate)
            groups: deque[list[_Slots]] = deque()  # clips read in order
            waiting: list[_Slots] = []
            sampled = sample_clips(probe(ctx.path), clips, self.fps, self.size, ctx.frames)
            for clip, frames in sampled:
                waiting.append((clip, [(t, reader.add(rgb)) for t, rgb in frames]))
                if len(reader.queue) >= reader.batch or len(waiting) >= _MAX_WAITING:
                    reader.read_queue()
                    groups.append(waiting)
                    waiting = []
                    while len(reader.reads) > _READS_AHEAD:
                        self._finish(ctx, reader, groups, fp, bar)
            reader.read_queue()
            groups.append(waiting)
            while groups:
                self._finish(ctx, reader, groups, fp, bar)
        self.frames_seen, self.frames_read = reader.seen, reader.read
        skipped = reader.seen - reader.read - reader.gated
        self.note = (
            f"read {reader.read} of {reader.seen} frames ({skipped} unchanged, reused; "
            f"{reader.gated} without text edges, skipped)"
        )

    def _finish(
        self,
        ctx: IngestContext,
        reader: _FrameReader,
        groups: deque[list[_Slots]],
        fp: str,
        bar: tqdm,
    ) -> None:
        """Store the clips of the oldest read, once it is done."""
        reader.collect()
        for clip, slots in groups.popleft():
            lines = timed_lines((t, reader.lines[s]) for t, s in slots)
            timed = [{"text": x.text, "t0": round(x.t0, 3), "t1": round(x.t1, 3)} for x in lines]
            update = {
                "clip_index": clip.clip_index,
                "ocr_text": "\n".join(x.text for x in lines),
                "ocr_lines": json.dumps(timed, ensure_ascii=False),
                "ocr_model": fp,
            }
            self.finished(ctx, update, bar)
        reader.forget(s for group in groups for _, slots in group for _, s in slots)

    def frame_grid(self) -> tuple[float, int]:
        return self.fps, self.size

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        """Every sampled frame at the composed video's mix of read, unchanged and textless."""
        spec = settings.spec(str(self.role))
        frames = max(math.ceil(info.duration * self.fps - 1e-9), clips)
        est = StageEstimate(
            self.name, self.role, spec, calls=math.ceil(frames / self.batch), frames=frames
        )
        if spec in CPU_PER_FRAME:
            est.measured(1.0 + frames * CPU_PER_FRAME[spec])  # 1.0: two engines load
        else:
            est.notes.append(f"no measured speed for {spec}")
        return est
