"""The embed_frames stage: one image-text vector per stored thumbnail, for retrieval by text.

It embeds the Library's thumbnails (``sample_fps`` frames a second, at most ``thumb_size``
pixels, decoded from their JPEGs: the video is not decoded again) with the ``image_embed``
model, in batches, into the ``frame_vectors`` table, bound in the manifest to that model's
spec and dimension like ``clip_vectors`` is to the ``embed`` model's. A text embedded by the
same model then ranks frames by cosine (EEA's "VideoCLIP-style" retriever).

It is optional: not among the stages a plain ``vidagent index`` runs (:data:`~vidagent.ingest
.pipeline.STAGES`); a strategy that reads frame vectors names it in its index plan, and
``vidagent index --stages embed_frames --image-embed clip:DIR`` runs it by hand. Without an
``image_embed`` model (``none:``, the offline default, since no CLIP weights ship offline) it has
nothing to do and its note says so.

Like the other stages it is resumable and idempotent:

- a batch's vectors are written as soon as they are made, so a rerun after a crash embeds only
  the thumbnails still without one;
- nothing is pending when every thumbnail's time has a vector of the current model;
- a new ``image_embed`` model empties the table (never mixing two models' vectors) and every
  video indexed through the stage again is re-embedded;
- new thumbnails (other sampling settings) drop the video's vectors
  (:meth:`~vidagent.library.Library.put_frames`), so they are re-embedded too.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from vidagent.ingest.base import IngestContext, Stage, StageEstimate
from vidagent.ingest.describe import decode_jpeg

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow, FrameRow
    from vidagent.media import VideoInfo

TABLE = "frame_vectors"
#: Seconds per 320x180 thumbnail of CLIP ViT-B/32 (224 px input) on 2 CPU cores, batches of 64,
#: timed with random weights of its shapes (the compute is the same); larger models take longer.
SECONDS_PER_FRAME = 0.05
DISABLED = "image_embed is none: no frames embedded (set image_embed to clip:<dir>)"


class EmbedFrames(Stage):
    """Thumbnails into ``frame_vectors`` with the ``image_embed`` model.

    Args:
        batch: thumbnails per ``embed_images`` call, and per checkpoint.

    Pending clips are those holding a thumbnail without a vector of the current model (the
    unit the pipeline counts); after :meth:`run`, ``note`` counts the frames embedded.
    """

    name: ClassVar[str] = "embed_frames"
    role: ClassVar[str | None] = "image_embed"

    def __init__(self, batch: int = 32) -> None:
        self.batch = batch
        self.note = ""

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        self.note = ""
        if _disabled(ctx.settings):
            self.note = DISABLED
            return []
        clips = ctx.library.clips(ctx.video.video_id)
        owed = set(_clip_of([f.t for f in self._todo(ctx)[0]], clips))
        return [c for c in clips if c.clip_index in owed]

    def _todo(self, ctx: IngestContext) -> tuple[list[FrameRow], bool]:
        """The thumbnails without a vector of the current model, and whether the video's
        stored vectors are to be replaced (some are at times no thumbnail has)."""
        frames = ctx.library.frames(ctx.video.video_id)
        if ctx.library.frame_vector_spec() != ctx.models.client("image_embed").spec:
            return frames, True
        times, _ = ctx.library.frame_vectors(ctx.video.video_id)
        stored = {round(float(t), 3) for t in times}
        if stored - {round(f.t, 3) for f in frames}:
            return frames, True
        return [f for f in frames if round(f.t, 3) not in stored], False

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        client = ctx.models.client("image_embed")
        every = ctx.library.clips(ctx.video.video_id)
        wanted = {c.clip_index for c in clips}
        todo, replace = self._todo(ctx)
        owners = _clip_of([f.t for f in todo], every)
        frames = [f for f, k in zip(todo, owners, strict=False) if k in wanted]
        replace = replace and set(owners) <= wanted  # never drop vectors of clips not asked for
        last = {k: i for i, k in enumerate(k for k in owners if k in wanted)}  # clip -> its last
        for i in range(0, len(frames), self.batch):
            chunk = frames[i : i + self.batch]
            vectors = client.embed_images([decode_jpeg(f.jpeg) for f in chunk])  # (B, D) float32
            # A new model empties the table on its first batch; _todo() then gave every frame.
            ctx.library.use_embedding(TABLE, client.spec, int(vectors.shape[1]))
            times = [f.t for f in chunk]
            ctx.library.put_frame_vectors(
                ctx.video.video_id, client.spec, times, vectors, replace=replace and i == 0
            )
            bar.update(sum(1 for k in last.values() if i <= k < i + len(chunk)))
        self.note = f"{len(frames)} frames embedded"

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        spec = settings.spec("image_embed")
        if _disabled(settings):
            return StageEstimate(self.name, self.role, spec, notes=[DISABLED])
        frames = max(1, math.ceil(info.duration * settings.sample_fps - 1e-9))
        est = StageEstimate(
            self.name, self.role, spec, calls=math.ceil(frames / self.batch), frames=frames
        )
        if spec.startswith("clip:"):
            est.seconds = frames * SECONDS_PER_FRAME
            est.notes.append("time as CLIP ViT-B/32 on 2 CPU cores; larger models take longer")
        else:
            est.notes.append(f"no measured speed for {spec}")
        return est


def _disabled(settings: Settings) -> bool:
    from vidagent.models.registry import parse_spec

    return parse_spec(settings.spec("image_embed")).disabled


def _clip_of(times: list[float], clips: list[ClipRow]) -> list[int]:
    """The index of the clip holding each time, ``clips`` in time order (the first clip holds
    times before it, the last its end and beyond; no clips, no owners)."""
    if not clips:
        return []
    starts = np.array([c.t0 for c in clips])  # (C,)
    at = np.searchsorted(starts, np.asarray(times, np.float64) + 1e-6, side="right") - 1  # (F,)
    return [clips[k].clip_index for k in np.clip(at, 0, len(clips) - 1).tolist()]
