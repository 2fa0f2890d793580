"""AVI's Retrieve tools (spec ``dvd-avi.md`` B.5.1): global, over text and the entity graph; no pixels.

- ``clip_retrieve_tool``: the top-k clips (k = 16, fixed by the paper, not shown to the model) by cosine
  between the query's embedding and each clip's embedded text, listed in time order as
  ``[start–end] (score 0.xx) caption``; hits that ``clip_merge`` would join follow as merged
  spans (B.11 #11: merging is applied inside clip_retrieve and also offered as a tool).
- ``clip_merge_tool``: joins adjacent or temporally close clips with coherent captions, so an
  event split across 5 s clips is one span again: consecutive clips merge when the gap between
  them is at most :data:`MERGE_GAP` seconds and their captions' cosine is at least
  :data:`MERGE_COSINE` (the paper leaves the rule unspecified; these are the spec's).
- ``global_explore_tool``: a query-focused pass over the whole timeline by the ``llm`` role:
  every caption in time order, a summary and ``[start-end]: reason`` highlights (B.11 #12; the
  prompt, ``avi_global_explore.txt``, is ours: the paper gives none). Captions beyond the
  model's declared context are explored in windows and the window results explored again
  (map-reduce). The result is a Library memo per video, query, model and prompt.
- ``graph_retrieve_tool``: entities, their time-stamped relations and super-nodes from the
  entity graph (:meth:`vidagent.library.graph.EntityGraph.retrieve`, B.3.2), with ``query_rel``
  from the ``embed`` role.

Every tool takes ``video`` when several videos are in scope; entities are per video.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from vidagent.exceptions import ToolInputError
from vidagent.geometry import unit_rows
from vidagent.library.schema import ClipHit, ClipRow
from vidagent.models.base import ChatRequest, Message
from vidagent.models.context import estimate_tokens
from vidagent.prompts import load_prompt
from vidagent.tools.base import Evidence, Observation, Seconds, ToolContext, tool
from vidagent.tools.index import search_text

TOP_K = 16  # clip_retrieve's k, fixed by the paper (not the model's to choose)
MERGE_GAP = 5.0  # seconds between clips that may still merge (one AVI clip)
MERGE_COSINE = 0.75  # caption similarity for a merge
MERGED_WORDS = 60  # words of a merged span's caption summary
EXPLORE_REPLY = 1024  # tokens a global_explore answer may take


def _where(ctx: ToolContext, video_id: str) -> str:
    return "" if len(ctx.video_ids) == 1 else f"{ctx.library.get_video(video_id).name} "


def _span(ctx: ToolContext, video_id: str, t0: float, t1: float) -> str:
    return f"[{_where(ctx, video_id)}{t0:.1f}s–{t1:.1f}s]"


def _videos(ctx: ToolContext, video: str | None) -> list[str]:
    return [ctx.resolve_video(video)] if video is not None else list(ctx.video_ids)


def merge_clips(
    clips: Sequence[ClipRow],
    vectors: np.ndarray,
    *,
    gap: float = MERGE_GAP,
    cosine: float = MERGE_COSINE,
) -> list[list[ClipRow]]:
    """Groups of ``clips`` (with their caption ``vectors``, (N, D)) to merge, in time order.

    Two clips of one video that follow each other in time merge when the second starts at most
    ``gap`` seconds after the first ends and their captions' cosine is at least ``cosine``.
    """
    order = sorted(range(len(clips)), key=lambda i: (clips[i].video_id, clips[i].t0))
    unit = unit_rows(vectors) if len(clips) else vectors
    groups: list[list[int]] = []
    for i in order:
        last = groups[-1][-1] if groups else None
        if (
            last is not None
            and clips[last].video_id == clips[i].video_id
            and clips[i].t0 - clips[last].t1 <= gap
            and float(unit[last] @ unit[i]) >= cosine
        ):
            groups[-1].append(i)
        else:
            groups.append([i])
    return [[clips[i] for i in g] for g in groups]


def _merged_caption(group: Sequence[ClipRow]) -> str:
    first = [c.caption.strip().split(". ")[0].rstrip(".") for c in group if c.caption.strip()]
    words = " / ".join(dict.fromkeys(first)).split()
    text = " ".join(words[:MERGED_WORDS]) + (" …" if len(words) > MERGED_WORDS else "")
    return text or "(no caption)"


def _merge_lines(ctx: ToolContext, clips: Sequence[ClipRow]) -> tuple[list[str], list[Evidence]]:
    """Merged spans of ``clips`` as lines, and their evidence (only groups of two or more)."""
    if len(clips) < 2:
        return [], []
    client = ctx.require_models("embed", "clip_merge_tool").client("embed")
    vectors = client.embed([c.caption or "(no caption)" for c in clips]).vectors  # (N, D)
    lines, evidence = [], []
    for group in merge_clips(clips, vectors):
        if len(group) < 2:
            continue
        vid, t0, t1 = group[0].video_id, group[0].t0, group[-1].t1
        lines.append(f"{_span(ctx, vid, t0, t1)} {len(group)} clips: {_merged_caption(group)}")
        evidence.append(Evidence(vid, t0, t1))
    return lines, evidence


@tool
def clip_retrieve_tool(
    ctx: ToolContext,
    query: str,
    video: str | None = None,
) -> Observation:
    """Retrieve the 16 video clips whose captions best match a text query, with similarity scores, in time order.

    Args:
        query: A textual description of the event or content to find.
        video: Search only this video (id or name); default every video in scope.
    """
    if not query.strip():
        raise ToolInputError("query is empty; describe what to find")
    client = ctx.require_models("embed", "clip_retrieve_tool").client("embed")
    hits = search_text(ctx.library, client, query, _videos(ctx, video), k=TOP_K)
    if not hits:
        return Observation(text="No clips found.")
    ordered = sorted(hits, key=lambda h: (h.clip.video_id, h.clip.t0))
    lines = [_hit_line(ctx, h) for h in ordered]
    merged, spans = _merge_lines(ctx, [h.clip for h in ordered])
    if merged:
        lines += ["Merged spans (adjacent clips with coherent captions):", *merged]
    best = sorted(hits, key=lambda h: -h.score)
    evidence = [Evidence(h.clip.video_id, h.clip.t0, h.clip.t1) for h in best]
    return Observation(text="\n".join(lines), evidence=tuple(spans + evidence))


def _hit_line(ctx: ToolContext, h: ClipHit) -> str:
    caption = h.clip.caption.strip() or "(no caption)"
    return f"{_span(ctx, h.clip.video_id, h.clip.t0, h.clip.t1)} (score {h.score:.2f}) {caption}"


@tool
def clip_merge_tool(
    ctx: ToolContext,
    time_ranges: Annotated[list[tuple[Seconds, Seconds]], Field(min_length=1)],
    video: str | None = None,
) -> Observation:
    """Merge adjacent or temporally close clips that share semantic coherence into longer spans, so that events split across clip boundaries are reassembled.

    Args:
        time_ranges: [start, end] pairs (seconds or HH:MM:SS) of the clips to merge, e.g. the spans clip_retrieve_tool returned.
        video: The video the clips belong to (id or name); needed when several are in scope.
    """
    video_id = ctx.resolve_video(video)
    ranges = [ctx.clamp_span(video_id, *sorted(pair)) for pair in time_ranges]
    clips = [
        c
        for c in ctx.library.clips(video_id)
        if any(c.t0 < t1 and t0 < c.t1 or c.t0 == t0 for t0, t1 in ranges)
    ]
    if not clips:
        return Observation(text="No clips in those time ranges.", error=True)
    client = ctx.require_models("embed", "clip_merge_tool").client("embed")
    vectors = client.embed([c.caption or "(no caption)" for c in clips]).vectors  # (N, D)
    lines, evidence = [], []
    for group in merge_clips(clips, vectors):
        t0, t1 = group[0].t0, group[-1].t1
        lines.append(
            f"{_span(ctx, video_id, t0, t1)} {len(group)} clip(s): {_merged_caption(group)}"
        )
        evidence.append(Evidence(video_id, t0, t1))
    return Observation(text="\n".join(lines), evidence=tuple(evidence))


@tool
def global_explore_tool(ctx: ToolContext, query: str, video: str | None = None) -> Observation:
    """Explore the whole timeline for a query: a comprehensive summary of the events and main subjects, and the segments that may be relevant.

    Args:
        query: The question or topic to explore the video for.
        video: Explore only this video (id or name); default every video in scope.
    """
    query = query.strip() or ctx.options.question
    sections, calls = [], 0
    for video_id in _videos(ctx, video):
        text, made = _explore(ctx, video_id, query)
        calls += made
        head = "" if len(ctx.video_ids) == 1 else f"Video {ctx.library.get_video(video_id).name}:\n"
        sections.append(head + text)
    evidence = tuple(Evidence(v, *ctx.span(v)) for v in _videos(ctx, video))
    return Observation(text="\n\n".join(sections), evidence=evidence, model_calls=calls)


def _caption_lines(clips: Sequence[ClipRow]) -> list[str]:
    return [f"[{c.t0:.1f}-{c.t1:.1f}] {c.caption.strip() or '(no caption)'}" for c in clips]


def _explore(ctx: ToolContext, video_id: str, query: str) -> tuple[str, int]:
    """The exploration of one video (memoised) and the model calls it took now."""
    client = ctx.require_models("llm", "global_explore_tool").client("llm")
    template = load_prompt("avi_global_explore").strip()
    lines = _caption_lines(ctx.library.clips(video_id))
    if not lines:
        raise ToolInputError("this video has no clips indexed yet")
    key_parts = [query, client.spec, template, *lines]
    key = "explore:" + hashlib.sha256("\x1f".join(key_parts).encode()).hexdigest()[:16]
    calls = 0

    def ask(captions: list[str]) -> str:
        nonlocal calls
        calls += 1
        prompt = template.replace("[query]", query).replace("[captions]", "\n".join(captions))
        request = ChatRequest((Message("user", prompt),), temperature=0.0, max_tokens=EXPLORE_REPLY)
        return client.chat(request).text.strip()

    def build() -> tuple[str, dict[str, Any]]:
        windows = _windows(lines, client.capabilities.context_tokens, template)
        if len(windows) == 1:
            return ask(windows[0]), {"query": query, "windows": 1}
        partial = [f"Part {k + 1}:\n{ask(w)}" for k, w in enumerate(windows)]
        return ask(partial), {"query": query, "windows": len(windows)}

    found, _ = ctx.library.memo(
        video_id, "browse", key, producer=client.spec, inputs_hash=key, build=build
    )
    return found.text or "Error: the model returned nothing.", calls


def _windows(lines: list[str], context: int | None, template: str) -> list[list[str]]:
    """``lines`` cut into windows that fit ``context`` tokens beside the prompt and twice the
    reply; a model that declares no context (a remote endpoint) takes every caption at once."""
    if context is None:
        return [lines]
    room = context - estimate_tokens([Message("user", template)]) - 2 * EXPLORE_REPLY
    room = max(room, 256)
    windows: list[list[str]] = [[]]
    used = 0
    for line in lines:
        cost = estimate_tokens([Message("user", line)])
        if windows[-1] and used + cost > room:
            windows.append([])
            used = 0
        windows[-1].append(line)
        used += cost
    return windows


@tool
def graph_retrieve_tool(ctx: ToolContext, query: str, video: str | None = None) -> Observation:
    """Retrieve entities (subjects), their relationships and the time intervals of their interactions from the video's entity graph; name two entities to get the paths between them.

    Args:
        query: The entities, relationship or event to look for, e.g. "the man in the red shirt and the woman with the dog".
        video: The video whose graph to search (id or name); needed when several are in scope.
    """
    if not query.strip():
        raise ToolInputError("query is empty; name the entities or relationship to look for")
    video_id = ctx.resolve_video(video)
    graph = ctx.library.entity_graph(video_id)
    if graph is None:
        raise ToolInputError(
            "this video has no entity graph (index it with the graph stage); use clip_retrieve_tool"
        )
    client = ctx.require_models("embed", "graph_retrieve_tool").client("embed")
    vector = client.embed([query]).vectors[0]  # (D,)
    found = graph.retrieve(query, vector)
    evidence = tuple(Evidence(video_id, t0, t1) for t0, t1 in found.spans)
    return Observation(text=found.text, evidence=evidence)


RETRIEVE_TOOLS = (clip_retrieve_tool, clip_merge_tool, global_explore_tool, graph_retrieve_tool)
