"""Searching the index: DVD's GlobalBrowse and ClipSearch, over one or several videos.

``clip_search`` ranks clips by cosine similarity between the query's embedding and each clip's
embedded text (see :mod:`vidagent.ingest.embed`) and lists the top k in time order with their
scores (DVD spec A.11 #14); no language model is called. ``global_browse`` returns the subject
registry built at ingest and an event-centric summary of frames sampled uniformly over the whole
video, written by the ``tool_vlm`` role for the query (DVD Table 12). That summary is cached in the
Library per video, query, model and sampling, so asking again costs nothing.

Settings: :class:`~vidagent.tools.options.RetrievalOptions` (``ctx.options.retrieval``); the
question (``ctx.options.question``) stands in for an empty browse query. The browse summary is
a Library memo (``Artifact`` kind ``browse``), written through the Library's locked write path,
so concurrent questions may browse the same video safely.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from pydantic import Field

from vidagent.exceptions import ToolInputError
from vidagent.library.schema import ClipHit
from vidagent.library.views import registry_view
from vidagent.prompts import load_prompt
from vidagent.timecode import clock
from vidagent.tools.base import Evidence, Observation, Seconds, ToolContext, tool
from vidagent.tools.frames import ask_vlm, browse_times
from vidagent.tools.index import search_text


def clip_text(hit: ClipHit, words: int | None = None, speech_and_text: bool = True) -> str:
    """A clip's caption (with its speech and on-screen text), cut to ``words`` words.

    The perception describer's caption states the clip's speech and its readable on-screen
    lines itself (:mod:`vidagent.ingest.describe`; the lines it leaves out are misreadings), so
    they are not appended to it a second time (with the repeat, the embedded SmolLM2's turn
    after a 36-clip search of the narrated clip was 7,104 prompt tokens; without it 6,494)."""
    clip = hit.clip
    text = clip.caption.strip()
    speech_and_text = speech_and_text and clip.describer_facts() is None
    if speech_and_text and clip.transcript.strip():
        text += f' Speech: "{clip.transcript.strip()}"'
    if speech_and_text and clip.ocr_text.strip():
        text += f' On-screen text: "{clip.ocr_text.strip()}"'
    cut = text.split()
    if words is not None and len(cut) > words:
        text = " ".join(cut[:words]) + " …"
    return text or "(no caption)"


def _span(ctx: ToolContext, video_id: str, t0: float, t1: float) -> str:
    where = "" if len(ctx.video_ids) == 1 else f"{ctx.library.get_video(video_id).name} "
    return f"[{where}{clock(round(t0, 1))}, {clock(round(t1, 1))}]"


@tool
def clip_search(
    ctx: ToolContext,
    event_description: str,
    top_k: Annotated[int, Field(ge=1, le=200)] = 16,
    video: str | None = None,
    time_range: tuple[Seconds, Seconds] | None = None,
) -> Observation:
    """Searches for events in a video clip database based on a given event description and retrieves the top-k most relevant video clip captions.

    Args:
        event_description: A textual description of the event to search for.
        top_k: The maximum number of top results to retrieve.
        video: Search only this video (id or name); default every video in scope.
        time_range: Search only clips overlapping [start, end].
    """
    if not event_description.strip():
        raise ToolInputError("event_description is empty; describe the event to search for")
    client = ctx.require_models("embed", "clip_search").client("embed")
    videos = [ctx.resolve_video(video)] if video is not None else list(ctx.video_ids)
    t_from, t_to = sorted(time_range) if time_range is not None else (None, None)
    hits = search_text(
        ctx.library, client, event_description, videos, k=top_k, t_from=t_from, t_to=t_to
    )
    if not hits:
        return Observation(text="Searched Video Clip Scripts :\nNo clips found.")
    opts = ctx.options.retrieval
    lines = [
        f"{_span(ctx, h.clip.video_id, h.clip.t0, h.clip.t1)} ({h.score:.2f}) "
        + clip_text(h, opts.caption_words, opts.speech_and_text)
        for h in sorted(hits, key=lambda h: (h.clip.video_id, h.clip.t0))
    ]
    return Observation(
        text="Searched Video Clip Scripts :\n" + "\n".join(lines),
        evidence=tuple(Evidence(h.clip.video_id, h.clip.t0, h.clip.t1) for h in hits),  # best first
    )


@tool
def global_browse(ctx: ToolContext, query: str, video: str | None = None) -> Observation:
    """Obtain a subject registry and relevant information about the query from the whole video.

    Args:
        query: A textual description of the question to search for.
        video: Browse only this video (id or name); default every video in scope.
    """
    query = query.strip() or ctx.options.question
    videos = [ctx.resolve_video(video)] if video is not None else list(ctx.video_ids)
    sections, frames, calls, notes = [], 0, 0, list[str]()
    for video_id in videos:
        stored = ctx.library.artifact(video_id, "registry")
        registry = registry_view(stored.data) if stored is not None else "{}"
        events, looked, note = _event_summary(ctx, video_id, query)
        notes += [note] if note else []
        frames, calls = frames + looked, calls + (1 if looked else 0)
        head = "" if len(videos) == 1 else f"Video {ctx.library.get_video(video_id).name}:\n"
        sections.append(f"{head}Subjects Information :\n{registry}\nEvent Information :\n{events}")
    return Observation(
        text="\n\n".join(sections),
        evidence=tuple(Evidence(v, *ctx.span(v)) for v in videos),
        frames=frames,
        model_calls=calls,
        adjusted=tuple(notes),
    )


def _event_summary(ctx: ToolContext, video_id: str, query: str) -> tuple[str, int, str]:
    """The query's event summary, the frames looked at for it (0 when it was memoised), and
    how they were sent when not as asked."""
    client = ctx.require_models("tool_vlm", "global_browse").client("tool_vlm")
    opts = ctx.options.retrieval
    n, height = opts.browse_frames, opts.browse_height
    template = opts.browse_prompt or load_prompt("dvd_global_browse").strip()
    key_parts = [query, client.spec, template, str(n), str(height), str(opts.browse_splice)]
    key = hashlib.sha256("\x1f".join(key_parts).encode()).hexdigest()[:16]
    start, end = ctx.span(video_id)
    times = browse_times(end, n, start)

    def build() -> tuple[str, dict[str, Any]]:
        text, note = ask_vlm(
            ctx,
            video_id,
            times,
            short_side=height,
            system=load_prompt("dvd_frame_inspect_system").strip(),
            prompt=template.replace("[question]", query),
            splice=opts.browse_splice,
        )
        return text, {"query": query, "frames": n, "height": height, "layout": note}

    found, built = ctx.library.memo(
        video_id, "browse", key, producer=client.spec, inputs_hash=key, build=build
    )
    return found.text, len(times) if built else 0, str(found.data.get("layout", ""))
