"""The embed stage: one vector per clip, from its caption, speech and on-screen text.

Deep Video Discovery embeds the caption alone (``settings.embed_text = "caption"``); by default
vidagent also appends the clip's transcript and on-screen text (labelled,
``"caption+speech+text"``), because offline captions are perception reports and speech carries
most of what users search for. The vectors live in ``clip_vectors`` bound in the manifest to
the embed model's spec and dimension. Each vector stores a hash of the text it was made from:

- a clip whose text changed (new caption, new transcript) is re-embedded alone;
- a new embed model empties the table (never mixing two models' vectors) and re-embeds all.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ClassVar

from vidagent.ingest.base import IngestContext, Stage, StageEstimate, text_hash

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo

TABLE = "clip_vectors"


def clip_text(clip: ClipRow, embed_text: str = "caption+speech+text") -> str:
    """What is embedded for a clip under the ``embed_text`` setting."""
    parts = [clip.caption.strip()]
    if embed_text == "caption":
        return parts[0]
    if clip.transcript.strip():
        parts.append(f"Speech: {clip.transcript.strip()}")
    if clip.ocr_text.strip():
        parts.append("On-screen text: " + " | ".join(clip.ocr_text.split("\n")))
    return "\n".join(p for p in parts if p)


class Embed(Stage):
    name = "embed"
    role = "embed"
    batch: ClassVar[int] = 64

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        clips = ctx.library.clips(ctx.video.video_id)
        bound = ctx.library.manifest.embeddings.get(TABLE, {})
        if bound.get("spec") != self.fingerprint(ctx.settings):
            return clips
        stored = ctx.library.clip_vector_hashes(ctx.video.video_id)
        rule = ctx.settings.embed_text
        return [c for c in clips if stored.get(c.clip_index) != text_hash(clip_text(c, rule))]

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        client = ctx.models.client("embed")
        spec = self.fingerprint(ctx.settings)
        chunks = [clips[i : i + self.batch] for i in range(0, len(clips), self.batch)]
        texts = [[clip_text(c, ctx.settings.embed_text) for c in chunk] for chunk in chunks]
        # Remote endpoints take several batches at once (the client layer caps how many);
        # a local model is one slot anyway. Batches are stored in order as they complete.
        workers = (
            1
            if client.capabilities.local
            else ctx.models.limiter.limit_for(client.adapter.endpoint, False)
        )
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for chunk, batch, result in zip(
                chunks, texts, pool.map(client.embed, texts), strict=False
            ):
                vectors = result.vectors  # (B, D) float32
                # A new model empties the table on its first batch; pending() already returned
                # every clip in that case, so nothing is left without a vector.
                ctx.library.use_embedding(TABLE, spec, int(vectors.shape[1]))
                hashes = [text_hash(t) for t in batch]
                ctx.library.put_clip_vectors(
                    ctx.video.video_id, spec, chunk, vectors, hashes, replace=False
                )
                bar.update(len(chunk))

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        from vidagent.models.registry import provider_capabilities

        spec = settings.spec("embed")
        # a caption as the graph and summary stages count it: the describer's short report,
        # or a VLM's 250-token reply; then ~2.5 spoken words/s at ~1.3 tokens/word, and a line
        # of on-screen text
        caption = 100 if settings.spec("captioner").startswith("perception:") else 250
        extra = 0.0
        if settings.embed_text != "caption":
            extra = 10 + (settings.clip_seconds * 3.3 if info.has_audio else 0)
        est = StageEstimate(
            self.name,
            self.role,
            spec,
            calls=-(-clips // self.batch),
            input_tokens=int(clips * (caption + extra)),
            notes=[f"{caption} tokens per caption"],
        )
        if provider_capabilities(spec).local:
            return est.measured(wall=clips / 100)  # 2.3 s for 240 clips, commits included
        est.seconds = est.calls * 1.0  # an endpoint's second a call
        return est
