"""The graph stage: AVI's entity-centric temporal knowledge graph of a video (spec B.2 steps 6-10).

The ``llm`` role reads the video's clip captions in time order with the Fig. 8 prompt
(``prompts/avi_graph.txt``, verbatim, as the system message); the user message is one line per
captioned clip, ``[{t0}s–{t1}s] {caption}``. Captions name DVD's registry ids (``Subject_3``),
which the prompt asks the model to keep as ``subject_id``.

**Windows** (B.11 #2). An hour is 720 captions, more than most models' context. When the model
declares its window (``capabilities.context_tokens``: models in this process, or a spec's
``context_tokens``), consecutive captions fill what it leaves after the prompt and the reply cap
(tokens estimated at three characters, as the client fits requests); otherwise windows are 60
captions. Consecutive windows share a tenth of their captions (6 of 60) so an interaction across
a boundary is seen whole once; :func:`~vidagent.library.graph_extract.merge_extractions` joins
the windows' subjects and drops the duplicated interactions.

**Replies.** The request asks for the reply's JSON schema where the model supports structured
output, else JSON mode (:meth:`~vidagent.models.client.Client.structured`). A reply that holds no
Fig. 8 object is asked again once, with the bad reply and a reminder appended (a new request,
so a cached bad reply is not simply returned again); a second bad reply leaves that window
empty and says so in the stage's note. A model that refuses a window as too long gets it in two
halves.

**Batch** (``settings.batch``, off by default). With a model that has a batch API (OpenAI's),
the windows go in one batch at half the price (:meth:`~vidagent.models.client.Client.chat_batch`),
its state stored in the Library as the ``"batch"`` artefact keyed ``graph``, so a rerun polls
the batch it submitted. A reply that is not the JSON is asked again at once, and a window the
batch failed is sent alone, as without it; the note counts the batched windows and names
what was not batched and why.

**Graph.** Nodes, edges, super-nodes and importance are built by
:class:`~vidagent.library.graph.EntityGraph`; the ``embed`` role embeds ``"name; attributes"`` of
each person (the clustering similarity of Eq. 10) and every node's name (Eq. 13's
``query_rel``). The graph replaces the video's previous one in the ``entities`` and ``relations``
tables (:meth:`~vidagent.library.Library.put_entity_graph`).

**Idempotent, whole-video** (like ``summarize``): the fingerprint is llm spec + prompt hash +
embed spec, ``inputs_hash`` hashes the caption lines; with both unchanged the stage does
nothing, and any change rebuilds the whole graph.

**When it runs.** It is optional: it runs when named (``vidagent index --stages graph``), when a
strategy's index plan lists it (AVI's does), and by default only when the ``llm`` role is
neither the embedded smoke-test SmolLM2, which cannot follow Fig. 8, nor a scripted ``fake:``
model (:func:`~vidagent.ingest.pipeline.default_stages`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vidagent.exceptions import ContextOverflowError
from vidagent.ingest.base import IngestContext, Stage, StageEstimate, batch_job, text_hash
from vidagent.library.graph import EntityGraph, secs
from vidagent.library.graph_extract import Extraction, merge_extractions, parse_extraction
from vidagent.models.base import ChatResponse, Message
from vidagent.models.context import CHARS_PER_TOKEN
from vidagent.prompts import load_prompt

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo
    from vidagent.models.client import Client

#: A batch's stored state and how to store it anew (:func:`~vidagent.ingest.base.batch_job`).
BatchJob = tuple[dict[str, Any] | None, Callable[[dict[str, Any]], None]]

PROMPT = "avi_graph"
WINDOW = 60  # captions per window when the model declares no context (B.11 #2)
OVERLAP_SHARE = 10  # consecutive windows share 1/10 of their captions (6 of 60)
LOCAL_REPLY = 2048  # reply cap of a model in this process (a runaway guard on a CPU)
RETRY_NOTE = (
    "Your reply was not the JSON object the instructions ask for. Reply again with only that "
    "JSON object, with the keys video_analysis and interactions."
)

_SPAN = {"type": "array", "items": {"type": ["string", "number"]}}
#: Fig. 8's output as a JSON schema, for models with structured output.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "video_analysis": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subject_id": {"type": ["string", "null"]},
                    "subject_name": {"type": "string"},
                    "appearance_timeline": {"type": "array", "items": _SPAN},
                    "attributes": {"type": "array", "items": {"type": "string"}},
                    "actions_events": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"action": {"type": "string"}, "timestamp": _SPAN},
                            "required": ["action", "timestamp"],
                        },
                    },
                },
                "required": [
                    "subject_id",
                    "subject_name",
                    "appearance_timeline",
                    "attributes",
                    "actions_events",
                ],
            },
        },
        "interactions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subjects_involved": {"type": "array", "items": {"type": "string"}},
                    "interaction_description": {"type": "string"},
                    "timestamp": _SPAN,
                },
                "required": ["subjects_involved", "interaction_description", "timestamp"],
            },
        },
    },
    "required": ["video_analysis", "interactions"],
}


@dataclass(frozen=True)
class CaptionLine:
    t0: float
    t1: float
    text: str

    def __str__(self) -> str:
        return f"[{secs(self.t0)}–{secs(self.t1)}] {' '.join(self.text.split())}"


def caption_lines(clips: list[ClipRow]) -> list[CaptionLine]:
    """The captioned clips in time order (a blank caption says nothing: left out)."""
    return [CaptionLine(c.t0, c.t1, c.caption) for c in clips if c.caption.strip()]


def reply_cap(client: Client) -> int | None:
    return LOCAL_REPLY if client.capabilities.local else None


def caption_budget(client: Client) -> int | None:
    """Tokens of captions per call the model's declared window leaves; None: not declared."""
    context = client.capabilities.context_tokens
    if not context:
        return None
    prompt = len(load_prompt(PROMPT)) // CHARS_PER_TOKEN + 16
    return max(256, context - prompt - (reply_cap(client) or LOCAL_REPLY))


def windows(lines: list[CaptionLine], budget: int | None) -> list[list[CaptionLine]]:
    """Consecutive windows of lines (module docstring): of at most ``budget`` tokens (at least
    two lines each), or of :data:`WINDOW` lines; each shares a tenth of the previous one's."""
    out: list[list[CaptionLine]] = []
    start = 0
    while start < len(lines):
        end, tokens = start, 0
        while end < len(lines):
            cost = (len(str(lines[end])) + 1) // CHARS_PER_TOKEN + 1
            full = tokens + cost > budget if budget is not None else end - start >= WINDOW
            if full and end - start >= 2:
                break
            tokens += cost
            end += 1
        out.append(lines[start:end])
        if end >= len(lines):
            break
        start = max(start + 1, end - (end - start) // OVERLAP_SHARE)
    return out


class Graph(Stage):
    """AVI's entity graph of a video; see the module docstring."""

    name = "graph"
    role = "llm"
    prompts = (PROMPT,)
    #: tokens of captions per call; None: what the model's declared window leaves
    token_budget: ClassVar[int | None] = None
    output_tokens: ClassVar[int] = 1500  # expected per window, for the estimate

    def __init__(self) -> None:
        self.note = ""
        self.calls = 0  # llm calls of the last run
        self.windows = 0  # windows of the last run
        self.failed: list[str] = []  # windows left empty, as "t0-t1"
        self.batched = 0  # windows answered through the batch API
        self.unbatched: list[str] = []  # why batch was not used, where it was asked for

    def fingerprint(self, settings: Settings) -> str:
        return f"{super().fingerprint(settings)}|embed={settings.spec('embed')}"

    def inputs_hash(self, clips: list[ClipRow]) -> str:
        return text_hash(str(len(clips)), *map(str, caption_lines(clips)))

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        """Every clip when the stored graph is missing or stale, else none."""
        clips = ctx.library.clips(ctx.video.video_id)
        stored = ctx.library.artifact(ctx.video.video_id, "graph")
        fresh = (
            stored is not None
            and stored.producer == self.fingerprint(ctx.settings)
            and stored.inputs_hash == self.inputs_hash(clips)
        )
        return [] if fresh else clips

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        vid = ctx.video.video_id
        clips = ctx.library.clips(vid)
        graph = self.build(ctx, clips)
        ctx.library.put_entity_graph(
            vid, graph, self.fingerprint(ctx.settings), self.inputs_hash(clips)
        )
        bar.update(len(clips))

    def build(self, ctx: IngestContext, clips: list[ClipRow]) -> EntityGraph:
        """Extract, merge, cluster, embed and score the graph of ``clips``."""
        self.calls, self.windows, self.failed = 0, 0, []
        self.batched, self.unbatched = 0, []
        lines = caption_lines(clips)
        spans = [(c.clip_index, c.t0, c.t1) for c in clips]
        client = ctx.models.client(self.role)
        batch = batch_job(ctx, self.name) if ctx.settings.batch else None
        if batch is not None and not client.capabilities.supports_batch:
            self.unbatched.append(f"{client.spec} has no batch API: windows sent one by one")
            batch = None
        extraction = self.extract(client, lines, batch) if lines else Extraction()
        graph = EntityGraph.build(ctx.video.video_id, extraction, spans)
        self._embed(ctx, graph)
        graph.score()
        notes = [] if lines else ["no captions: run the caption stage first"]
        if self.failed:
            notes.append(
                f"{len(self.failed)} of {self.windows} windows unreadable, left empty "
                f"({', '.join(self.failed)})"
            )
        if self.batched:
            notes.append(f"{self.batched} windows through the Batch API at half price")
        notes += self.unbatched
        graph.notes = notes + graph.notes
        people = sum(n.kind == "human" for n in graph.nodes.values())
        summary = (
            f"{people} people, {len(graph.edges)} edges, {len(graph.super_nodes())} super-nodes "
            f"from {self.windows} windows"
        )
        self.note = "; ".join([summary, *notes])
        return graph

    def extract(
        self, client: Client, lines: list[CaptionLine], batch: BatchJob | None = None
    ) -> Extraction:
        """Every window's extraction, merged; through the model's batch API with ``batch``
        (its stored state and how to store it)."""
        budget = self.token_budget or caption_budget(client)
        chunks = windows(lines, budget)
        if batch is None:
            return merge_extractions([self._window(client, w) for w in chunks])
        return merge_extractions(self._batched(client, chunks, batch))

    def _batched(
        self, client: Client, chunks: list[list[CaptionLine]], batch: BatchJob
    ) -> list[Extraction]:
        """The windows' extractions from one batch; a reply that is not the JSON is asked
        again at once, and a window the batch failed goes one by one, both as without it."""
        system = Message("system", load_prompt(PROMPT))
        requests = {
            f"window-{i}": client.structured_request(
                [system, Message("user", "\n".join(map(str, w)))], SCHEMA, reply_cap(client)
            )
            for i, w in enumerate(chunks)
        }
        answers = client.chat_batch(requests, *batch)
        parts: list[Extraction] = []
        for i, w in enumerate(chunks):
            answer = answers[f"window-{i}"]
            if not isinstance(answer, ChatResponse):
                self.unbatched.append(f"window {i + 1} failed in the batch ({answer}): sent alone")
                parts.append(self._window(client, w))
                continue
            self.batched += 1
            self.windows += 1
            self.calls += 1
            found = parse_extraction(answer.text)
            if found is None:
                retry = [*requests[f"window-{i}"].messages, Message("assistant", answer.text)]
                self.calls += 1
                again = [*retry, Message("user", RETRY_NOTE)]
                reply = client.structured(again, SCHEMA, max_tokens=reply_cap(client))
                found = parse_extraction(reply.text)
            if found is None:
                self.failed.append(f"{secs(w[0].t0)}-{secs(w[-1].t1)}")
            parts.append(found or Extraction())
        return parts

    def _window(self, client: Client, lines: list[CaptionLine]) -> Extraction:
        self.windows += 1
        user = Message("user", "\n".join(map(str, lines)))
        messages = [Message("system", load_prompt(PROMPT)), user]
        try:
            for attempt in range(2):
                self.calls += 1
                reply = client.structured(messages, SCHEMA, max_tokens=reply_cap(client))
                found = parse_extraction(reply.text)
                if found is not None:
                    return found
                if attempt == 0:
                    messages += [Message("assistant", reply.text), Message("user", RETRY_NOTE)]
        except ContextOverflowError:
            if len(lines) < 4:
                raise
            self.windows -= 1
            half = len(lines) // 2
            return merge_extractions(
                [self._window(client, lines[:half]), self._window(client, lines[half:])]
            )
        self.failed.append(f"{secs(lines[0].t0)}-{secs(lines[-1].t1)}")
        return Extraction()

    def _embed(self, ctx: IngestContext, graph: EntityGraph) -> None:
        """Cluster people into super-nodes, then embed every node's name."""
        if not graph.nodes:
            return
        client = ctx.models.client("embed")
        humans = [n for n in graph.nodes.values() if n.kind == "human"]
        texts = [f"{n.name}; {', '.join(n.attributes)}" for n in humans]
        vectors = client.embed(texts).vectors if texts else np.zeros((0, 0), np.float32)
        graph.add_super_nodes({n.node_id: v for n, v in zip(humans, vectors, strict=False)})
        nodes = list(graph.nodes.values())
        names = client.embed([n.name for n in nodes]).vectors  # (N, D) float32
        for n, v in zip(nodes, names, strict=False):
            n.name_vector = v

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        from vidagent.models.registry import provider_capabilities

        spec = settings.spec(self.role)
        per_caption = 100 if settings.spec("captioner").startswith("perception:") else 250
        local = not spec.startswith("openai:")
        batch = settings.batch and provider_capabilities(spec).supports_batch
        step = WINDOW - WINDOW // OVERLAP_SHARE
        calls = max(1, -(-(clips - WINDOW // OVERLAP_SHARE) // step)) if clips else 0
        prompt = len(load_prompt(PROMPT)) // CHARS_PER_TOKEN
        input_tokens = clips * per_caption * WINDOW // step + calls * prompt
        output_tokens = calls * self.output_tokens
        return StageEstimate(
            self.name,
            self.role,
            spec,
            calls=calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            seconds=(input_tokens / 300 + output_tokens / 20) if local else calls * 30.0,
            notes=[
                f"windows of {WINDOW} captions, {WINDOW // OVERLAP_SHARE} shared",
                f"{per_caption} tokens per caption",
                *(["Batch API: half the price, answers within 24 h"] if batch else []),
            ],
            batch=batch,
        )
