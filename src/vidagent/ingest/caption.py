"""The caption stage: one caption per clip and the progressive subject registry (DVD, Table 9).

Clips are captioned in temporal order, each seeing the subjects met so far:
``(S_i, c_i) = VLM(f_i, S_{i-1})``, ``S_0 = {}``, ``S_i = S_{i-1} ∪ new_i``. The adapter filling
the ``captioner`` role (the ``vlm`` unless set) decides how.

**A vision-language model** (``openai:<model>``, any adapter with ``supports_images``) gets
Table 9 verbatim, one request per clip: the system prompt; frames at 2 fps decoded from the
source at 720p (longest side 1280 px, never upscaled), each after a label ``t=HH:MM:SS`` (plus
``.5`` on half seconds; A.11 #9), at most ``capabilities.max_images`` (uniformly subsampled; 0 is
no cap); ``[TRANSCRIPTS]`` = the clip's transcript or ``No transcript.`` (the released code's
fallback; always, when ``settings.caption_transcripts`` is off: DVD's main setting, which has no
transcripts; the fingerprint then ends ``|no-transcripts``); ``[SUBJECTS]`` = ``S_{i-1}`` as compact JSON of the prompt's four fields;
``CLIP_START_TIME``/``CLIP_END_TIME`` = ``"HH:MM:SS"`` (truncated) as JSON strings, so the
template stays valid JSON (the released code leaves them bare); ``BENCHMARK_CUSTOM_PLACEHOLDER``
= ``benchmark_hint``, empty by default (A.11 #11); temperature 0, JSON mode. Placeholders are
filled in one pass, so a transcript is never searched for placeholders.

Answers are parsed leniently (code fences, trailing text, bare ``HH:MM:SS`` values). An
unparsable one is asked again up to ``format_retries`` times as a follow-up turn quoting it (an
identical request would only hit the response cache), then stored raw as the caption with no
subjects, and ``note`` says so. Proposed ids become runtime ids ``subject_<n>`` (A.11 #3) and
``subjects_present`` follows; an id that is neither known nor new is dropped, and a new subject
is present in the clip that introduced it. A rejected request
(:class:`~vidagent.exceptions.RequestRejectedError`, e.g. a content filter) or a filtered answer
leaves the caption blank, as in the paper. So that a misconfiguration cannot blank a whole
video, HTTP 401/403/404 are raised at once, and rejections before the run's first success are
held back and raised once ``probation`` of them are in a row.

**The perception describer** (``perception:describer``, the offline default; any adapter whose
capabilities say ``describer``) is not a VLM, and no model is called: the caption is a factual paragraph, opened by
:data:`~vidagent.models.perception.LABEL`, of what earlier stages stored in the clip's row
(``detections`` with position and size, ``ocr_text``, the transcript), what the stored 1 fps
thumbnails measure (dominant colours, brightness, motion) and the shot cuts inside the clip.
Subjects are detected people (and faces outside any person box), re-identified across clips by
a hue x saturation histogram of the box on the nearest thumbnail: an intersection of at least
``reid_threshold`` with a known subject's is a match, else a new ``subject_<n>`` is registered
with the region's dominant colours as appearance.

Beside each describer caption the stage stores what it measured as the row's ``facts``
(:class:`~vidagent.library.schema.DescriberFacts`: counts, lines and speech quoted, colours,
brightness, motion, cuts and the sentences reporting them), in the same commit, so readers take
the facts from there rather than parse the caption; a VLM's caption (and a blank one) stores
``"{}"``, so a switch between the two never leaves stale facts beside a caption. A describer's
caption without facts (one written before schema version 3) is pending.

**Checkpoints and resume.** Through the registry, a clip's caption depends on every clip before
it, so the pending clips are the first clip whose fingerprint differs *and all after it*. The
registry is stored as the ``"registry"`` artefact, ``inputs_hash`` = the last clip it covers,
*before* the clip rows it covers (VLM clips one by one: a call is never worth repeating). A
rerun continues from the first pending clip with that registry; one that does not end right
before it (a crash between the two writes) is rebuilt from the subjects introduced earlier
(each entry keeps ``first_clip``) and the ids finished clips name (``unknown`` placeholders if
their entry is lost).

**AVI's captions** (``settings.caption_style = "avi"``; the default ``"registry"`` is all of the
above) follow the AVI paper instead: Fig. 7 verbatim, one request per clip with no history,
transcript or system prompt, the clip's seconds as its times; the frames as above (2 fps, 720p,
``max_images``), labelled in seconds (:mod:`vidagent.ingest.caption_avi`). The reply's
``clip_description`` is the caption and its ``subject_registry`` the clip's own, stored in the
clip row's ``subjects`` as a JSON *object* of local ids (where the registry style stores a list
of global ids); nothing is merged into the ``"registry"`` artefact, which this style never
writes. With no chain, any clip whose fingerprint differs is pending and a rerun redoes exactly
those. Parsing, format retries and rejected requests work as for the registry style. The
fingerprint is the captioner's spec, Fig. 7's hash and ``|avi`` (no transcript or hint part:
the prompt has no slot for them), so switching styles re-captions every clip. The perception
describer is not a VLM: it has no prompt to change, so under ``"avi"`` it writes the same
captions and registry as above, and only the fingerprint (``|avi``) differs.

**Repeated pictures** (``settings.caption_skip_repeats``, off by default: the papers caption
every clip). On a VLM, a clip whose stored thumbnails repeat the previous clip's picture
(:mod:`vidagent.ingest.repeats`) is not sent: it takes that clip's caption and subjects, and its
``caption_model`` is the fingerprint plus ``|reused=<n>``, ``n`` the clip whose call wrote the
caption (a run of still clips all name the first). No model call, so the registry is unchanged.
Such a clip counts as done only while the setting is on: turned off, it is pending again (under
the registry style, with every clip after it). The stage's note says how many were reused. The
describer calls no model and ignores the setting.

**Batch** (``settings.batch``, off by default). AVI's captions stand alone, so with a model that
has a batch API they go through it at half the price, :data:`BATCH_CLIPS` clips a batch grouped
by clip index (the ``"batch"`` artefact keyed ``caption-<group>`` holds its state, so a rerun
polls the same batches); an unparsable answer gets its format retries and a rejected one is
blank, as without batch. A clip whose picture repeats is left out of the batch and takes the
caption of the clip before once that is known. DVD's registry captions are a chain, each call
needing the registry the clip before left, so they are never batched: the note says so.

Not implemented: A.11 #1's ``parallel_merge`` (the chain is sequential, as in the paper) and
A.11 #4's transcript-guided segmentation (clips are the structure stage's uniform clips).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from bisect import bisect_left
from collections.abc import Callable
from itertools import pairwise
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from vidagent.exceptions import RequestRejectedError
from vidagent.ingest.base import IngestContext, Stage, StageEstimate, batch_job, text_hash
from vidagent.ingest.caption_avi import PROMPT as AVI_PROMPT
from vidagent.ingest.caption_avi import as_list, avi_request, parse_avi_caption
from vidagent.ingest.describe import (
    decode_jpeg,
    describe,
    detections_in,
    next_subject_id,
    reidentify,
)
from vidagent.library.schema import Artifact
from vidagent.library.views import REGISTRY_FIELDS, registry_view
from vidagent.models.base import ChatRequest, ChatResponse, ImagePart, Message
from vidagent.prompts import load_prompt, prompt_hash
from vidagent.timecode import clock, hhmmss

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow, Library
    from vidagent.media import VideoInfo
    from vidagent.models.client import Client

log = logging.getLogger(__name__)
P = TypeVar("P")

NO_TRANSCRIPT = "No transcript."
FIX_JSON = (
    "Your reply was not valid JSON in the requested output format. Reply with only the JSON object."
)
# What the stage keeps per subject: the prompt's fields, the clip that introduced the subject
# (to rebuild the registry on resume) and, on the describer path, its colour signature.
KEPT_FIELDS = (*REGISTRY_FIELDS, "first_clip", "signature")
#: What follows the fingerprint in ``caption_model`` of a clip whose caption was reused from an
#: earlier clip with the same picture, then that clip's index (``caption_skip_repeats``).
REUSED = "|reused="
_CONFIG_STATUSES = frozenset({401, 403, 404})  # a key, permission or model problem, not content
#: AVI captions submitted together under ``settings.batch``, grouped by clip index so a rerun
#: finds the same batches; the client cuts a group into batches under OpenAI's 200 MB a file
#: (100 clips of ten 720p frames are about 150-250 MB in base64). It bounds the frames held.
BATCH_CLIPS = 100
#: Clips whose thumbnails the describer path reads in one Library query (one a clip cost 5 ms each).
_CLIPS_PER_QUERY = 64
_PLACEHOLDERS = re.compile(
    r"BENCHMARK_CUSTOM_PLACEHOLDER|\[TRANSCRIPTS\]|\[SUBJECTS\]|CLIP_START_TIME|CLIP_END_TIME"
)
_BARE_TIME = re.compile(r"(:\s*)(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)(?=\s*[,}\]\n])")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
#: mean absolute change between consecutive same-shot thumbnails (0-1) -> words


class _Filtered(Exception):
    """The provider's content filter cut the answer (finish_reason ``content_filter``)."""


# ---------------------------------------------------------------------------------------------
# Answer helpers


def parse_caption(text: str) -> tuple[str, list[str], dict[str, Any]] | None:
    """``(captions, subjects_present, new_subject_registry)`` from a Table 9 answer, or None."""
    obj = _json_object(text)
    if not isinstance(obj, dict):
        return None
    desc = obj.get("clip_description")
    present: Any = []
    if isinstance(desc, dict):
        captions, present = desc.get("captions"), desc.get("subjects_present") or []
    else:
        captions = desc  # the released code's variant: a plain narration string
    if isinstance(captions, list):
        captions = " ".join(str(c) for c in captions)
    if not isinstance(captions, str):
        return None
    ids = (
        [str(p) for p in present if isinstance(p, (str, int))] if isinstance(present, list) else []
    )
    new = obj.get("new_subject_registry")
    if isinstance(new, list):  # some models list the entries instead of keying them by id
        new = {
            str(e.get("subject_id", f"new_{i}")): e
            for i, e in enumerate(new)
            if isinstance(e, dict)
        }
    return captions.strip(), ids, new if isinstance(new, dict) else {}


def parse_avi(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(caption, local subject_registry)`` from a Fig. 7 answer (AVI), or None."""
    return parse_avi_caption(_json_object(text))


def _json_object(text: str) -> Any:
    """The first JSON object in ``text``, inside a code fence if there is one."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    for start in [m.start() for m in re.finditer(r"\{", body)][:20]:
        for candidate in (body[start:], _BARE_TIME.sub(r'\1"\2"', body[start:])):
            try:
                obj = json.JSONDecoder().raw_decode(candidate)[0]
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def _subject(entry: Any, clip: ClipRow) -> dict[str, Any]:
    entry = entry if isinstance(entry, dict) else {"appearance": entry}
    return {
        "name": str(entry.get("name") or "unknown"),
        "appearance": as_list(entry.get("appearance")),
        "identity": as_list(entry.get("identity")),
        "first_seen": str(entry.get("first_seen") or hhmmss(clip.t0)),
        "first_clip": clip.clip_index,
    }


# ---------------------------------------------------------------------------------------------
# The stage


class Caption(Stage):
    """Captions clips in order with a progressive subject registry; see the module docstring.

    Args:
        benchmark_hint: fills ``BENCHMARK_CUSTOM_PLACEHOLDER`` (e.g. EgoSchema's camera-wearer
            note); part of the fingerprint when set.
    """

    name = "caption"
    role = "captioner"
    column = "caption_model"
    prompts = ("dvd_caption_system", "dvd_caption")
    fps: ClassVar[float] = 2.0  # frames per second sent to the VLM (paper)
    frame_size: ClassVar[int] = 1280  # longest side: 720p for 16:9 video (paper)
    jpeg_quality: ClassVar[int] = 90
    format_retries: ClassVar[int] = 2
    probation: ClassVar[int] = 3
    reid_threshold: ClassVar[float] = 0.6
    output_tokens: ClassVar[int] = 250

    def __init__(self, benchmark_hint: str = "", clock_offset: float = 0.0) -> None:
        self.benchmark_hint = benchmark_hint
        #: seconds added to every time a caption states or a prompt shows: a live stream's
        #: window (:mod:`vidagent.ingest.live`) is indexed alone, its times its own, and its
        #: captions speak in the stream's times
        self.clock_offset = clock_offset
        self.note = ""

    def fingerprint(self, settings: Settings) -> str:
        if settings.caption_style == "avi":
            return f"{settings.spec(self.role)}|{prompt_hash(AVI_PROMPT)}|avi"
        base = super().fingerprint(settings)
        if not settings.caption_transcripts:
            base += "|no-transcripts"
        return f"{base}|hint={text_hash(self.benchmark_hint)[:8]}" if self.benchmark_hint else base

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        clips = ctx.library.clips(ctx.video.video_id)
        done = self._done(ctx.settings)
        if self._independent(ctx.settings):
            return [c for c in clips if not done(c)]  # no registry chain: each clip alone
        first = next((k for k, c in enumerate(clips) if not done(c)), len(clips))
        return clips[first:]

    def _done(self, settings: Settings) -> Callable[[ClipRow], bool]:
        """Whether a clip is captioned as ``settings`` would caption it: its ``caption_model``
        is the marker (:meth:`_marker`) and, for the describer, its facts are stored beside the
        caption (a describer's caption from before schema version 3 has none: it is written
        again, which calls no model and gives the same caption)."""
        from vidagent.models.registry import provider_capabilities

        if not provider_capabilities(settings.spec(self.role)).describer:
            fp = self.fingerprint(settings)
            # a caption reused for a repeated picture counts as done only while reuse is on
            reused = fp + REUSED if settings.caption_skip_repeats else None
            return lambda clip: (
                clip.caption_model == fp
                or (reused is not None and clip.caption_model.startswith(reused))
            )
        mark = self._marker(settings)
        return lambda clip: clip.caption_model == mark(clip) and clip.facts not in ("", "{}")

    def _marker(self, settings: Settings) -> Callable[[ClipRow], str]:
        """What a clip's ``caption_model`` holds once captioned under ``settings``: the
        fingerprint, and for the describer the perception stages it read (:func:`facts_read`;
        the transcript only where captions see it)."""
        from vidagent.models.registry import provider_capabilities

        fp = self.fingerprint(settings)
        if not provider_capabilities(settings.spec(self.role)).describer:
            return lambda clip: fp
        transcripts = settings.caption_transcripts
        return lambda clip: fp + facts_read(clip, transcripts)

    def _independent(self, settings: Settings) -> bool:
        """AVI's captions on a VLM: every clip captioned on its own (the describer chains)."""
        from vidagent.models.registry import provider_capabilities

        spec = settings.spec(self.role)
        return settings.caption_style == "avi" and not provider_capabilities(spec).describer

    def start(self) -> None:
        super().start()
        self._registry: dict[str, Any] | None = None
        self._held: list[dict[str, Any]] = []
        self._succeeded = False
        self._counts = {"blank": 0, "unparsed": 0, "reused": 0, "batched": 0, "unbatched": 0}

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        if not clips:
            return
        client = ctx.models.client(self.role)
        self._setup_repeats(ctx)
        if not ctx.settings.caption_transcripts:  # as DVD without its auxiliary transcripts
            clips = [dataclasses.replace(c, transcript="", transcript_model="") for c in clips]
        if client.capabilities.describer:
            self._registry = self._load_registry(ctx, clips[0].clip_index)
            self._run_describer(ctx, clips, bar)
        elif ctx.settings.caption_style == "avi":
            client.require_images()
            self._run_avi(ctx, client, clips, bar)
        else:
            client.require_images()
            self._registry = self._load_registry(ctx, clips[0].clip_index)
            self._run_vlm(ctx, client, clips, bar)
        self._buffer.extend(self._held)  # rejected clips of a run that never succeeded
        self._held = []
        self.flush(ctx)
        blank, raw = self._counts["blank"], self._counts["unparsed"]
        notes = [f"{blank} clip(s) left blank (request rejected)"] if blank else []
        notes += [f"{raw} clip(s) stored as raw text (unparsable JSON)"] if raw else []
        if self._counts["batched"]:
            notes.append(
                f"{self._counts['batched']} clip(s) captioned through the Batch API at half price"
            )
        if self._counts["unbatched"]:
            notes.append(f"batch: {client.spec} has no batch API; clips sent one by one")
        vlm = not client.capabilities.describer
        if ctx.settings.batch and vlm and ctx.settings.caption_style == "registry":
            notes.append(
                "batch: not for DVD's registry captions (each call needs the registry the "
                "clip before left); sent one by one"
            )
        if self._counts["reused"]:
            notes.append(
                f"{self._counts['reused']} clip(s) reused the caption of the clip before "
                "(the picture repeats; caption_skip_repeats)"
            )
        self.note = "; ".join(notes)

    def flush(self, ctx: IngestContext) -> None:
        """Write the registry covering the buffered clips, then the clips themselves."""
        if self._buffer and self._registry is not None:
            last = max(int(u["clip_index"]) for u in self._buffer)
            ctx.library.put_artifact(
                Artifact(
                    ctx.video.video_id,
                    "registry",
                    data=self._registry,
                    producer=self.fingerprint(ctx.settings),
                    inputs_hash=str(last),
                )
            )
        super().flush(ctx)

    def _load_registry(self, ctx: IngestContext, first: int) -> dict[str, Any]:
        """``S_{first-1}``: the stored checkpoint, or a rebuild when it does not fit."""
        if first == 0:
            return {}
        fp = self.fingerprint(ctx.settings)
        stored = ctx.library.artifact(ctx.video.video_id, "registry")
        data = stored.data if stored else {}
        entries = {
            sid: {k: e[k] for k in KEPT_FIELDS if k in e}
            for sid, e in data.items()
            if isinstance(e, dict)
        }
        if stored and stored.producer == fp and stored.inputs_hash == str(first - 1):
            return entries
        log.info("caption: rebuilding the subject registry before clip %d", first)
        kept = {sid: e for sid, e in entries.items() if int(e.get("first_clip", first)) < first}
        done = self._done(ctx.settings)
        for clip in ctx.library.clips(ctx.video.video_id):
            if clip.clip_index < first and done(clip):
                for sid in json.loads(clip.subjects or "[]"):
                    kept.setdefault(sid, _subject({}, clip))
        return kept

    # -- the VLM path -------------------------------------------------------------------------

    def _run_vlm(self, ctx: IngestContext, client: Client, clips: list[ClipRow], bar: tqdm) -> None:
        from vidagent.media import probe

        info = probe(ctx.path)
        fp = self.fingerprint(ctx.settings)
        for clip in clips:
            if self._reused(ctx, clip, fp, bar):
                continue
            request = self.request(info, clip, self._registry or {}, client.capabilities.max_images)
            try:
                parsed, raw = self._ask(client, request, parse_caption)
            except (RequestRejectedError, _Filtered) as e:
                self._rejected(ctx, clip, e, fp, bar)
                continue
            self._succeeded = True
            if parsed is None:
                log.warning("caption: clip %d answer is not JSON; storing it raw", clip.clip_index)
                self._counts["unparsed"] += 1
                caption, present = raw.strip(), list[str]()
            else:
                caption, present = parsed[0], self._register(clip, parsed[1], parsed[2])
            self._buffer.extend(self._held)
            self._held = []
            update = {"clip_index": clip.clip_index, "caption": caption, "facts": "{}"}
            update |= {"subjects": json.dumps(present), "caption_model": fp}
            self._captioned(update)
            self.finished(ctx, update, bar, now=True)

    def _run_avi(self, ctx: IngestContext, client: Client, clips: list[ClipRow], bar: tqdm) -> None:
        """AVI's captions: each clip on its own, so a clip is checkpointed as soon as it is done
        (with ``settings.batch``, a group of clips as its batch is answered)."""
        from vidagent.media import probe

        info = probe(ctx.path)
        fp = self.fingerprint(ctx.settings)
        if ctx.settings.batch and client.capabilities.supports_batch:
            self._run_avi_batch(ctx, client, clips, bar, info)
            return
        if ctx.settings.batch:
            self._counts["unbatched"] = len(clips)
        for clip in clips:
            if self._reused(ctx, clip, fp, bar):
                continue
            self._avi_clip(ctx, client, clip, self._avi_request(info, client, clip), bar)

    def _avi_request(self, info: VideoInfo, client: Client, clip: ClipRow) -> ChatRequest:
        times = self.frame_times(clip, client.capabilities.max_images)
        return avi_request(info, clip, times, size=self.frame_size, quality=self.jpeg_quality)

    def _avi_clip(
        self,
        ctx: IngestContext,
        client: Client,
        clip: ClipRow,
        request: ChatRequest,
        bar: tqdm,
        first: ChatResponse | Exception | None = None,
    ) -> None:
        """Caption one clip from its Fig. 7 request (``first``: the answer a batch gave it)."""
        fp = self.fingerprint(ctx.settings)
        try:
            if isinstance(first, Exception):
                raise first
            parsed, raw = self._ask(client, request, parse_avi, first)
        except (RequestRejectedError, _Filtered) as e:
            self._rejected(ctx, clip, e, fp, bar, empty="{}")
            return
        self._succeeded = True
        if parsed is None:
            log.warning("caption: clip %d answer is not JSON; storing it raw", clip.clip_index)
            self._counts["unparsed"] += 1
            parsed = (raw.strip(), {})
        self._buffer.extend(self._held)
        self._held = []
        update = {"clip_index": clip.clip_index, "caption": parsed[0], "caption_model": fp}
        update |= {"subjects": json.dumps(parsed[1]), "facts": "{}"}
        self._captioned(update)
        self.finished(ctx, update, bar, now=first is None)

    def _run_avi_batch(
        self, ctx: IngestContext, client: Client, clips: list[ClipRow], bar: tqdm, info: VideoInfo
    ) -> None:
        """AVI's captions through the batch API, :data:`BATCH_CLIPS` clips a batch (the group
        by clip index, so a rerun finds the same group and polls its batch). A clip whose
        picture repeats the one before is not sent; it takes that clip's caption once known,
        and is asked alone if that caption is blank."""
        from itertools import groupby

        fp = self.fingerprint(ctx.settings)
        for number, members in groupby(clips, key=lambda c: c.clip_index // BATCH_CLIPS):
            group = list(members)
            requests = {
                f"clip-{clip.clip_index}": self._avi_request(info, client, clip)
                for clip in group
                if not self._same_picture(clip)
            }
            answers = client.chat_batch(requests, *batch_job(ctx, f"caption-{number}"))
            for clip in group:
                key = f"clip-{clip.clip_index}"
                if key not in requests and self._reused(ctx, clip, fp, bar):
                    continue
                request = requests.get(key) or self._avi_request(info, client, clip)
                self._counts["batched"] += key in answers
                self._avi_clip(ctx, client, clip, request, bar, answers.get(key))
            self.flush(ctx)

    # -- repeated pictures (caption_skip_repeats) -----------------------------------------------

    def _setup_repeats(self, ctx: IngestContext) -> None:
        """The clips as stored (to find each pending clip's predecessor) and the comparer, when
        ``caption_skip_repeats`` is on."""
        from vidagent.ingest.repeats import Repeats

        self._repeats: Repeats | None = None
        self._rows: dict[int, ClipRow] = {}
        if ctx.settings.caption_skip_repeats:
            vid = ctx.video.video_id
            self._repeats = Repeats(ctx.library, vid, ctx.settings.caption_skip_repeats)
            self._rows = {c.clip_index: c for c in ctx.library.clips(vid)}

    def _captioned(self, update: dict[str, Any]) -> None:
        """Remember a clip's new caption, which the clip after it may reuse."""
        row = self._rows.get(int(update["clip_index"]))
        if row is not None:
            fields = {k: v for k, v in update.items() if k != "clip_index"}
            self._rows[row.clip_index] = dataclasses.replace(row, **fields)

    def _same_picture(self, clip: ClipRow) -> bool:
        """Whether ``clip``'s picture repeats the clip before's (whatever its caption)."""
        before = self._rows.get(clip.clip_index - 1)
        return (
            self._repeats is not None and before is not None and self._repeats.repeats(before, clip)
        )

    def _reused(self, ctx: IngestContext, clip: ClipRow, fp: str, bar: tqdm) -> bool:
        """Store the previous clip's caption for ``clip`` when its picture repeats that clip's
        (:mod:`vidagent.ingest.repeats`), marked with where it came from; False: call the model."""
        before = self._rows.get(clip.clip_index - 1)
        if self._repeats is None or before is None or not before.caption.strip():
            return False
        model = before.caption_model
        if model != fp and not model.startswith(fp + REUSED):
            return False  # not captioned under these settings (blank, or another model's)
        if not self._repeats.repeats(before, clip):
            return False
        source = model.partition(REUSED)[2] or str(before.clip_index)
        update = {"clip_index": clip.clip_index, "caption": before.caption, "facts": "{}"}
        update |= {"subjects": before.subjects, "caption_model": f"{fp}{REUSED}{source}"}
        self._counts["reused"] += 1
        self._captioned(update)
        self.finished(ctx, update, bar)
        return True

    def request(
        self, info: VideoInfo, clip: ClipRow, registry: dict[str, Any], max_images: int
    ) -> ChatRequest:
        """The Table 9 request for one clip: system prompt, filled user prompt, labelled frames."""
        from vidagent.media import encode_jpeg, frames_at

        times = self.frame_times(clip, max_images)
        frames = frames_at(info, times, size=self.frame_size)  # (N, H, W, 3) uint8
        parts: list[str | ImagePart] = [self.user_prompt(clip, registry)]
        for t, rgb in zip(times, frames, strict=False):
            shown = clock(t + self.clock_offset)
            parts += [f"t={shown}", ImagePart(encode_jpeg(rgb, self.jpeg_quality))]
        system = Message("system", load_prompt("dvd_caption_system"))
        return ChatRequest(
            messages=(system, Message("user", tuple(parts))), json_mode=True, temperature=0.0
        )

    def user_prompt(self, clip: ClipRow, registry: dict[str, Any]) -> str:
        values = {
            "BENCHMARK_CUSTOM_PLACEHOLDER": self.benchmark_hint,
            "[TRANSCRIPTS]": clip.transcript.strip() or NO_TRANSCRIPT,
            "[SUBJECTS]": registry_view(registry),
            "CLIP_START_TIME": json.dumps(hhmmss(clip.t0 + self.clock_offset)),
            "CLIP_END_TIME": json.dumps(hhmmss(clip.t1 + self.clock_offset)),
        }
        return _PLACEHOLDERS.sub(lambda m: values[m.group(0)], load_prompt("dvd_caption"))

    def frame_times(self, clip: ClipRow, max_images: int) -> list[float]:
        """Times at ``fps`` from the clip start, uniformly subsampled to ``max_images``."""
        n = max(1, math.ceil((clip.t1 - clip.t0) * self.fps - 1e-6))
        times = [round(clip.t0 + k / self.fps, 3) for k in range(n)]
        if 0 < max_images < n:
            times = [times[int(i)] for i in np.linspace(0, n - 1, max_images).round()]
        return times

    def _ask(
        self,
        client: Client,
        request: ChatRequest,
        parse: Callable[[str], P | None],
        first: ChatResponse | None = None,
    ) -> tuple[P | None, str]:
        """The parsed answer (or None) and the last raw text, with format retries; ``first``
        is the first answer where it came already (from a batch)."""
        messages, raw = request.messages, ""
        for attempt in range(1 + self.format_retries):
            if attempt == 0 and first is not None:
                response = first
            else:
                response = client.chat(dataclasses.replace(request, messages=messages))
            if response.finish_reason == "content_filter":
                raise _Filtered(response.text)
            raw = response.text
            parsed = parse(raw)
            if parsed is not None:
                return parsed, raw
            messages = (*messages, Message("assistant", raw), Message("user", FIX_JSON))
        return None, raw

    def _rejected(
        self,
        ctx: IngestContext,
        clip: ClipRow,
        error: Exception,
        fp: str,
        bar: tqdm,
        empty: str = "[]",
    ) -> None:
        status = getattr(error, "status", None)
        if status in _CONFIG_STATUSES:
            raise error
        log.warning("caption: clip %d rejected by the provider (%s)", clip.clip_index, error)
        self._counts["blank"] += 1
        update = {"clip_index": clip.clip_index, "caption": "", "subjects": empty}
        update |= {"caption_model": fp, "facts": "{}"}
        self._captioned(update)
        if self._succeeded:
            self.finished(ctx, update, bar, now=True)
            return
        self._held.append(update)
        bar.update(1)
        if len(self._held) >= self.probation:
            raise RequestRejectedError(
                f"the first {len(self._held)} clips were all rejected, which is not a content "
                f"filter; check the vlm model and endpoint (last error: {error})",
                status=status,
            ) from error

    def _register(self, clip: ClipRow, present: list[str], new: dict[str, Any]) -> list[str]:
        """Add the clip's new subjects under runtime ids; the ids present, renumbered."""
        registry = self._registry if self._registry is not None else {}
        known = set(registry)
        renamed: dict[str, str] = {}
        for proposed, entry in new.items():
            sid = next_subject_id(registry)
            registry[sid] = _subject(entry, clip)
            renamed[str(proposed)] = sid
        ids: list[str] = []
        for x in present:
            sid = renamed.get(x, x if x in known else "")
            if sid and sid not in ids:
                ids.append(sid)
        ids += [sid for sid in renamed.values() if sid not in ids]
        self._registry = registry
        return ids

    # -- the perception describer path ----------------------------------------------------------
    # A describer's caption states what the perception stages had found when it was written
    # ("People were not checked." before detection ran): its fingerprint names the stages it
    # read (facts_read), so a stage run later makes the caption pending again.

    def _run_describer(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        mark = self._marker(ctx.settings)
        video = ctx.video
        cuts = [s.t0 for s in ctx.library.shots(video.video_id)[1:]]
        registry = self._registry if self._registry is not None else {}
        frames, times = [], []
        for n, clip in enumerate(clips):
            if n % _CLIPS_PER_QUERY == 0:  # the thumbnails of the next clips, in time order
                group = clips[n : n + _CLIPS_PER_QUERY]
                t0, t1 = min(c.t0 for c in group), max(c.t1 for c in group)
                frames = ctx.library.frames(video.video_id, t0, t1)
                times = [f.t for f in frames]
            first, end = bisect_left(times, clip.t0), bisect_left(times, clip.t1)
            thumbs = [(f.t, decode_jpeg(f.jpeg)) for f in frames[first:end]]
            seen = detections_in(clip, video.width, video.height)
            present = reidentify(registry, clip, seen, thumbs, self.reid_threshold)
            caption, facts = describe(clip, thumbs, cuts, seen, offset=self.clock_offset)
            update = {"clip_index": clip.clip_index, "caption": caption, "facts": facts.to_json()}
            update |= {"subjects": json.dumps(present), "caption_model": mark(clip)}
            self._registry = registry
            self.finished(ctx, update, bar)

    # -- estimate -------------------------------------------------------------------------------

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        from vidagent.models.registry import provider_capabilities

        spec = settings.spec(self.role)
        if provider_capabilities(spec).describer:
            return StageEstimate(
                self.name,
                self.role,
                spec,
                frames=math.ceil(info.duration * settings.sample_fps),
                notes=["perception describer: no model calls; facts from stored rows"],
            ).measured(wall=clips * 0.003)  # 0.7 s for 240 clips (MEASURED_ON)
        per_clip = math.ceil(settings.clip_seconds * self.fps)
        frames = math.ceil(info.duration * self.fps)  # the last clip may be shorter
        avi = settings.caption_style == "avi"
        texts = (AVI_PROMPT,) if avi else ("dvd_caption", "dvd_caption_system")
        prompt = sum(len(load_prompt(t)) for t in texts) // 4
        # ~2.5 spoken words/s at ~1.3 tokens/word; the registry grows, ~200 tokens on average
        speech = settings.clip_seconds * 3.3 if info.has_audio else 4
        history = 0 if avi else 200 + speech  # Fig. 7 has neither a registry nor a transcript
        image, detail = self.image_tokens(info, spec)
        per_call = prompt + history + per_clip * (image + 8)
        notes = [
            f"{image} tokens per frame ({detail})",
            "calls are independent (AVI, Fig. 7)"
            if avi
            else "calls run one after another: each needs the previous clip's registry",
        ]
        batch = settings.batch and avi and provider_capabilities(spec).supports_batch
        if batch:
            notes.append("Batch API: half the price, answers within 24 h")
        elif settings.batch:
            notes.append("not batched: " + ("no batch API" if avi else "the registry is a chain"))
        if settings.caption_skip_repeats:
            notes.append(
                "every clip counted: clips whose picture repeats reuse a caption "
                "(caption_skip_repeats), but a dry run decodes nothing to know which (it "
                "counts them from the thumbnails of a video indexed before); the run's note "
                "says how many"
            )
        return StageEstimate(
            self.name,
            self.role,
            spec,
            calls=clips,
            frames=frames,
            input_tokens=int(clips * per_call - (clips * per_clip - frames) * (image + 8)),
            output_tokens=clips * self.output_tokens,
            seconds=clips * 6.0,
            notes=notes,
            batch=batch,
        )

    def refine(
        self, estimate: StageEstimate, library: Library, video_id: str, settings: Settings
    ) -> StageEstimate:
        """With ``caption_skip_repeats`` on and the video's thumbnails stored under the same
        clips, the clips whose picture repeats the clip before (as the run will find them)
        are counted off: no call, no frames, no tokens."""
        from vidagent.ingest.repeats import Repeats

        clips = library.clips(video_id)
        if not settings.caption_skip_repeats or not estimate.calls or len(clips) != estimate.calls:
            return estimate
        repeats = Repeats(library, video_id, settings.caption_skip_repeats)
        n = sum(repeats.repeats(a, b) for a, b in pairwise(clips))
        notes = [x for x in estimate.notes if "caption_skip_repeats" not in x]
        notes.append(
            f"{n} of {len(clips)} clips repeat the previous clip's picture in the stored "
            "thumbnails (caption_skip_repeats): not counted"
        )
        kept = (len(clips) - n) / len(clips)
        return dataclasses.replace(
            estimate,
            calls=len(clips) - n,
            frames=round(estimate.frames * kept),
            input_tokens=round(estimate.input_tokens * kept),
            output_tokens=round(estimate.output_tokens * kept),
            seconds=estimate.seconds * kept,
            notes=notes,
        )

    def image_tokens(self, info: VideoInfo, spec: str) -> tuple[int, str]:
        """Tokens one frame of ``info`` sent at :attr:`frame_size` costs under ``spec``'s
        ``detail`` option (OpenAI's rule, :func:`vidagent.models.openai.image_tokens`), and
        how it was counted, for the estimate's notes."""
        from vidagent.models.openai import image_tokens
        from vidagent.specs import parse_spec

        scale = min(1.0, self.frame_size / max(info.width, info.height, 1))
        w, h = round(info.width * scale), round(info.height * scale)
        detail = parse_spec(spec).options.get("detail")
        how = "low detail" if detail == "low" else f"{w}x{h} at OpenAI's high detail"
        return image_tokens(w, h, detail), how


#: The perception stages whose rows a describer's caption states, by their clips column.
FACT_STAGES = (
    ("transcribe", "transcript_model"),
    ("read_text", "ocr_model"),
    ("detect", "detect_model"),
)


def facts_read(clip: ClipRow, transcripts: bool = True) -> str:
    """The fingerprint suffix naming the perception stages that had filled ``clip`` (the
    describer's captions state their facts, or that they were not checked); the transcript's
    only when ``transcripts`` (captions that see it)."""
    read = [
        stage
        for stage, column in FACT_STAGES
        if getattr(clip, column) and (transcripts or stage != "transcribe")
    ]
    return "|facts=" + "+".join(read)
