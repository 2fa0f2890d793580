"""The summarize stage: a global summary of the clip captions, and the final subject registry.

**Which summary** (the ``summary`` setting): ``model`` is the VideoAgent2 summary below;
``extractive`` is the digest of :mod:`vidagent.ingest.digest` (indexed sentences chosen by the
``embed`` role, no llm call); ``auto`` (the default) is the digest when the ``llm`` is the
embedded smoke-test model (a weak reasoner, as its capabilities say), which repeats itself and
echoes the prompt, and the model's summary otherwise. The artefact's ``data["method"]`` says
which it is, and the fingerprints differ, so switching redoes it.

**Global summary** (VideoAgent2 Phase 1, ``S = F_llm(C, prompt_Summary)``). ``C`` is one line per
captioned clip, ``"{start}s-{end}s: {caption}"`` (spec A.11 #8; times as integers when whole,
else with one decimal; each caption's whitespace collapsed so a clip stays on one line; clips
whose caption is blank, e.g. content-filtered, are left out). ``{C}`` is filled by plain
replacement with the lines between newlines, the ``llm`` answers at temperature 0, and the full
response is stored as the artefact ``("summary", "global")`` (A.11 #6;
:meth:`~vidagent.library.Library.global_summary` reads it). The prompt stays verbatim for every
video, "4-second clips" included (A.11 #13).

**Limits of the model.** The paper summarises all captions in one call to GPT-4, and so does
this stage when the model declares no context window (``capabilities.context_tokens``: remote
endpoints, unless the spec names ``context_tokens``) and its output is capped only by the
endpoint (or the spec's ``max_output_tokens``). A model in this process (SmolLM2's 8k window)
caps its reply at 512 tokens, a guard against a runaway on a CPU. When ``C`` exceeds what the
window leaves after the prompt and twice the reply cap (:func:`fitting_budget`; tokens estimated
at three characters, as the client fits requests), consecutive lines are summarised in chunks
within that budget (at least two lines each, so every level shrinks), each with the same
prompt; the chunk summaries become lines ``"{start}s-{end}s: {summary}"`` over their chunk's
span and are summarised the same way, level by level, until they fit one call. An endpoint
that refuses the request as too long (``ContextOverflowError``) gets the same hierarchy with
the budget halved until it fits. The chunk summaries are kept in the summary's ``data``.

A reply cut by its cap (``finish_reason == "length"``) is asked once more with twice the cap;
cut again, or cut by the endpoint's own limit, it is kept, counted in ``data["cut"]`` and in the
stage's note, so a truncated summary is never passed off as whole.

The summary is redone only when its fingerprint (llm spec + prompt hash) or the captions change:
``inputs_hash`` hashes the caption lines it was made from. The digest's fingerprint is
``extractive|{embed spec}|{embed_text}|{DIGEST_VERSION}``; its ``inputs_hash`` covers the clips'
captions, the perception describer's facts, transcripts and on-screen text and the transcript
segments.

**Subject registry.** The caption stage leaves the registry ``S_N`` as the ``"registry"`` artefact.
This stage adds each subject's ``temporal_spans`` (A.11 #2): the clips whose ``subjects`` name
it, consecutive ones merged with a gap tolerance of one clip, as ``[start_s, end_s]``. An id that
clips name but the registry lacks gets an ``unknown`` entry. The ``producer`` and ``inputs_hash`` of
the caption stage's checkpoint are kept, since no model is involved and the caption stage
resumes from them. The optional "actions" LLM pass of A.11 #2 is not run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from vidagent.exceptions import ContextOverflowError
from vidagent.ingest.base import IngestContext, Stage, StageEstimate, text_hash
from vidagent.ingest.digest import digest
from vidagent.library.schema import GLOBAL_SUMMARY, Artifact
from vidagent.library.views import Line, caption_lines
from vidagent.models.base import ChatRequest, Message
from vidagent.models.context import CHARS_PER_TOKEN
from vidagent.prompts import load_prompt
from vidagent.timecode import hhmmss

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo
    from vidagent.models.client import Client


#: Tokens of C per call below which a model's refusal is not worked around by halving.
MIN_BUDGET = 256
#: The output cap of a local model's summary reply (a runaway guard on a CPU); it is asked once
#: more with twice this when the cap cuts it, so fitting budgets leave room for that.
LOCAL_REPLY = 512
#: The context the estimate assumes of a local model (the llama.cpp default ``n_ctx``).
LOCAL_CONTEXT = 8192
#: Bumped when the digest's rules change, so stored digests are redone (digest2: shot sentences
#: from the describer's stored facts, every sentence of another caption).
DIGEST_VERSION = "digest2"


def summary_method(settings: Settings) -> Literal["extractive", "model"]:
    """What the ``summary`` setting asks of this llm: ``auto`` is the extractive digest for
    a weak reasoner (the embedded smoke-test llm's capabilities say so), the model's summary for
    any other."""
    if settings.summary == "auto":
        from vidagent.models.registry import declared_capabilities

        weak = declared_capabilities(settings.spec("llm"), "llm").weak_reasoner
        return "extractive" if weak else "model"
    return settings.summary


def reply_cap(client: Client) -> int | None:
    """The summary's output cap: :data:`LOCAL_REPLY` for a model in this process, else none
    (the endpoint's own limit, or the spec's ``max_output_tokens``)."""
    return LOCAL_REPLY if client.capabilities.local else None


def fitting_budget(client: Client) -> int | None:
    """Tokens of C per call that fit the model's declared context with the prompt and twice the
    reply cap; None (all in one call, as the paper) where the context is not declared."""
    context = client.capabilities.context_tokens
    if not context:
        return None
    return _fit(context, 2 * (reply_cap(client) or LOCAL_REPLY))


def _fit(context: int, reply: int) -> int:
    prompt = len(load_prompt("videoagent2_summary")) // CHARS_PER_TOKEN + 16
    return max(MIN_BUDGET, context - prompt - reply)


def summary_prompt(lines: list[Line]) -> str:
    """prompt_Summary with ``{C}`` filled by the lines, one per line."""
    return load_prompt("videoagent2_summary").replace(
        "{C}", "\n" + "\n".join(map(str, lines)) + "\n"
    )


def temporal_spans(indices: list[int], clips: dict[int, ClipRow]) -> list[list[float]]:
    """Spans of the clips ``indices``, neighbours at most one clip apart merged."""
    spans: list[list[int]] = []
    for i in sorted(set(indices)):
        if spans and i - spans[-1][1] <= 2:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return [[clips[a].t0, clips[b].t1] for a, b in spans]


def derive_registry(entries: dict[str, Any], clips: list[ClipRow]) -> dict[str, Any]:
    """The registry with ``temporal_spans`` from the clips' subjects (idempotent)."""
    by_index = {c.clip_index: c for c in clips}
    seen: dict[str, list[int]] = {}
    for c in clips:
        ids = json.loads(c.subjects or "[]")
        if isinstance(ids, dict):  # AVI's per-clip registry: local ids, not the video's
            continue
        for sid in ids:
            seen.setdefault(sid, []).append(c.clip_index)
    out: dict[str, Any] = {}
    for sid, entry in entries.items():
        out[sid] = {k: v for k, v in entry.items() if k != "temporal_spans"}
    for sid, where in seen.items():
        if sid not in out:
            first = by_index[where[0]]
            out[sid] = {
                "name": "unknown",
                "appearance": [],
                "identity": [],
                "first_seen": hhmmss(first.t0),
                "first_clip": first.clip_index,
            }
    for sid, entry in out.items():
        entry["temporal_spans"] = temporal_spans(seen.get(sid, []), by_index)
    return out


class Summarize(Stage):
    """Global summary and subject registry of a video; see the module docstring."""

    name = "summarize"
    role = "llm"
    prompts = ("videoagent2_summary",)
    #: tokens of C per call; None: what the model's context leaves (:func:`fitting_budget`)
    token_budget: ClassVar[int | None] = None
    output_tokens: ClassVar[int] = 500  # expected per call, for the estimate

    def __init__(self) -> None:
        self.note = ""
        self.calls = 0  # llm calls of the last run
        self.cut = 0  # replies of the last run the output limit cut

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        """Every clip when the summary or the registry is stale, else none."""
        clips = ctx.library.clips(ctx.video.video_id)
        fresh = self._global_fresh(ctx, clips) and self._registry(ctx, clips)[1]
        return [] if fresh else clips

    def fingerprint(self, settings: Settings) -> str:
        if summary_method(settings) == "extractive":
            return f"extractive|{settings.spec('embed')}|{settings.embed_text}|{DIGEST_VERSION}"
        return super().fingerprint(settings)

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        vid = ctx.video.video_id
        clips = ctx.library.clips(vid)
        ctx.library.memo(
            vid,
            "summary",
            GLOBAL_SUMMARY,
            producer=self.fingerprint(ctx.settings),
            inputs_hash=self._inputs_hash(ctx, clips),
            build=lambda: self._build(ctx, clips),
        )
        registry, fresh = self._registry(ctx, clips)
        if not fresh:
            stored = ctx.library.artifact(vid, "registry")
            ctx.library.put_artifact(
                Artifact(
                    vid,
                    "registry",
                    data=registry,
                    producer=stored.producer if stored else "",
                    inputs_hash=stored.inputs_hash if stored else "",
                )
            )
        bar.update(len(clips))

    def _build(self, ctx: IngestContext, clips: list[ClipRow]) -> tuple[str, dict[str, Any]]:
        if summary_method(ctx.settings) == "extractive":
            segments = ctx.library.transcript(ctx.video.video_id)
            rule, spec = ctx.settings.embed_text, ctx.settings.spec("embed")
            text, data = digest(
                ctx.models.client("embed"),
                clips,
                segments,
                ctx.video.duration,
                embed_text=rule,
                known=ctx.library.clip_vectors_by_text(ctx.video.video_id, spec),
            )
            chosen, pool = len(data["sentences"]), data["candidates"]
            self.note = f"extractive digest: {chosen} of {pool} indexed sentences"
            return text, data
        text, data = self.summarize_lines(ctx.models.client(self.role), caption_lines(clips))
        return text, {"method": "model", **data}

    def _inputs_hash(self, ctx: IngestContext, clips: list[ClipRow]) -> str:
        if summary_method(ctx.settings) == "model":
            return text_hash(*map(str, caption_lines(clips)))
        segments = ctx.library.transcript(ctx.video.video_id)
        return text_hash(
            *(f"{c.t0}|{c.t1}|{c.caption}|{c.facts}|{c.transcript}|{c.ocr_text}" for c in clips),
            *(f"{s.t0}|{s.t1}|{s.text}" for s in segments),
        )

    def _global_fresh(self, ctx: IngestContext, clips: list[ClipRow]) -> bool:
        stored = ctx.library.artifact(ctx.video.video_id, "summary", GLOBAL_SUMMARY)
        return (
            stored is not None
            and stored.producer == self.fingerprint(ctx.settings)
            and stored.inputs_hash == self._inputs_hash(ctx, clips)
        )

    def _registry(self, ctx: IngestContext, clips: list[ClipRow]) -> tuple[dict[str, Any], bool]:
        """The derived registry, and whether the stored one already equals it."""
        stored = ctx.library.artifact(ctx.video.video_id, "registry")
        current = stored.data if stored else {}
        derived = derive_registry(current, clips)
        return derived, (current == derived) if stored else not derived

    def summarize_lines(self, client: Client, lines: list[Line]) -> tuple[str, dict[str, Any]]:
        """The final summary text, and the chunk summaries of each level below it (``levels``)
        with the number of replies the output limit cut (``cut``).

        Raises:
            ContextOverflowError: the model refuses even chunks of two lines.
        """
        if not lines:
            self.note = "no captions to summarise"
            return "", {"levels": [], "cut": 0}
        budget = self.token_budget or fitting_budget(client)
        while True:
            try:
                return self._levels(client, lines, budget)
            except ContextOverflowError:
                # The window is smaller than we knew (an endpoint that does not say): halve.
                tried = budget or self._tokens(lines)
                if tried <= MIN_BUDGET:
                    raise
                budget = max(MIN_BUDGET, tried // 2)

    def _levels(
        self, client: Client, lines: list[Line], budget: int | None
    ) -> tuple[str, dict[str, Any]]:
        levels: list[list[dict[str, Any]]] = []
        self.calls, self.cut = 0, 0
        while budget is not None and len(lines) > 1 and self._tokens(lines) > budget:
            summaries = [  # a lone trailing line moves up a level as it is
                Line(
                    chunk[0].t0,
                    chunk[-1].t1,
                    self._ask(client, chunk) if chunk[1:] else chunk[0].text,
                )
                for chunk in self._chunks(lines, budget)
            ]
            levels.append([{"t0": s.t0, "t1": s.t1, "text": s.text} for s in summaries])
            lines = summaries
        text = self._ask(client, lines)
        notes = (
            [f"hierarchical: {self.calls} llm calls over {len(levels) + 1} levels"]
            if levels
            else []
        )
        notes += [f"{self.cut} repl(ies) cut by the output limit"] if self.cut else []
        self.note = "; ".join(notes)
        return text, {"levels": levels, "cut": self.cut}

    def _ask(self, client: Client, lines: list[Line]) -> str:
        """One prompt_Summary call; a reply the output cap cut is asked once more with twice
        the cap (the budget leaves room for it), then kept as it is and counted."""
        cap = reply_cap(client)
        for attempt in (cap, 2 * cap if cap else None):
            request = ChatRequest(
                messages=(Message("user", summary_prompt(lines)),),
                temperature=0.0,
                max_tokens=attempt,
            )
            self.calls += 1
            reply = client.chat(request)
            if reply.finish_reason != "length":
                return reply.text
            if attempt is None:
                break  # the model's own limit: asking again would cut it the same way
        self.cut += 1
        return reply.text

    def _tokens(self, lines: list[Line]) -> int:
        return sum(len(str(line)) + 1 for line in lines) // CHARS_PER_TOKEN

    def _chunks(self, lines: list[Line], budget: int) -> list[list[Line]]:
        """Consecutive lines within the budget, at least two per chunk (so levels shrink)."""
        chunks: list[list[Line]] = [[]]
        for line in lines:
            chunk = chunks[-1]
            if len(chunk) >= 2 and self._tokens([*chunk, line]) > budget:
                chunks.append([line])
            else:
                chunk.append(line)
        return chunks

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        if summary_method(settings) == "extractive":
            return StageEstimate(
                self.name,
                "embed",
                settings.spec("embed"),
                calls=1,
                input_tokens=clips * 150,
                notes=["extractive digest of the index: no llm call"],
            ).measured(wall=clips / 200)  # 1.1 s for 240 clips (MEASURED_ON)
        spec = settings.spec(self.role)
        per_caption = 100 if settings.spec("captioner").startswith("perception:") else 250
        captions = clips * per_caption
        prompt = len(load_prompt("videoagent2_summary")) // 4
        local = not spec.startswith("openai:")
        budget = self.token_budget or (_fit(LOCAL_CONTEXT, 2 * LOCAL_REPLY) if local else None)
        chunks = 0 if budget is None or captions <= budget else -(-captions // budget)
        calls = 1 + chunks
        input_tokens = captions + calls * prompt + chunks * self.output_tokens
        output_tokens = calls * self.output_tokens
        return StageEstimate(
            self.name,
            self.role,
            spec,
            calls=calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            seconds=(input_tokens / 300 + output_tokens / 20) if local else calls * 15.0,
            notes=[f"{per_caption} tokens per caption"]
            + ([f"chunks of {budget} tokens"] if budget else ["one call (context not declared)"]),
        )
