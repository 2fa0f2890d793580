"""VideoAgent2's general context ``B_1 = {C, S}``, built on demand and kept in the Library.

``C`` is a caption per consecutive n-second segment of frames at fps_d, ``S`` the llm's summary
of them (prompt_Summary). When the video was indexed with ``clip_seconds == n`` and
``sample_fps == fps_d`` (``stages["structure"]["sampling"]``) the index's clip captions are ``C``
(their VLM captions see 2 fps, denser than the fps_d chosen "to ensure computational
efficiency"); otherwise the segments are cut as the index cuts clips (a tail under n/5 joins
the one before) and each is captioned by the ``captioner`` role from its fps_d frames with
``videoagent2_segment_caption.txt`` (not from the paper: LaViLa takes no prompt), or by the
perception describer from the index rows inside it. ``S`` is summarised as the summarize stage
does, hierarchically when ``C`` exceeds the model's context.

It is an ingest builder, not agent code: the application layer runs it before the question
(like indexing, its model calls are the index's cost, not the question's) and the strategy
reads the result as the artefact ``("context", context_key(n, fps))``. The write is a Library
memo (:meth:`~vidagent.library.Library.memo`), keyed by the models, prompts and inputs that made
it, so it is built once and concurrent questions share it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any, Literal

from vidagent.ingest.base import text_hash
from vidagent.ingest.describe import decode_jpeg, describe_clip, detections_in
from vidagent.ingest.summarize import Summarize
from vidagent.library.schema import Artifact, ClipRow
from vidagent.library.views import Line, caption_lines, context_key, reuses_index
from vidagent.media import uniform_clips
from vidagent.models.vision import ask_about_frames
from vidagent.prompts import load_prompt, prompt_hash

if TYPE_CHECKING:
    from vidagent.library import Library, VideoRecord
    from vidagent.models.client import Models

SEGMENT_SIDE = 360  # short side of segment frames sent to a VLM (LaViLa sees 224 px)
ContextMode = Literal["auto", "index", "build"]


def build_segment_context(
    library: Library,
    models: Models,
    video_id: str,
    *,
    segment_seconds: float = 4.0,
    fps: float = 1.0,
    mode: ContextMode = "auto",
    cache: bool = True,
) -> Artifact:
    """The general context of a video as an artefact, built or reused (module docstring).

    Args:
        mode: ``auto`` reuses the index when it was cut into n-second clips at fps_d and builds
            otherwise; ``index`` always reuses it (when it has captions); ``build`` always builds.
        cache: reuse a stored context; False builds it again (and stores the new one).
    """
    record = library.get_video(video_id)
    sampling = record.stages.get("structure", {}).get("sampling", {})
    reuse = reuses_index(
        mode, sampling.get("clip_seconds"), sampling.get("sample_fps"), segment_seconds, fps
    )
    lines = caption_lines(library.clips(video_id)) if reuse else []
    llm = models.client("llm")
    summary_fp = "|".join([llm.spec, prompt_hash("videoagent2_summary")])
    key = context_key(segment_seconds, fps)
    if not cache:
        library.delete_artifacts(video_id, "context", [key])
    if lines:
        inputs = text_hash("index", *map(str, lines))

        def from_index() -> tuple[str, dict[str, Any]]:
            stored = library.artifact(video_id, "summary", "global")
            fresh = stored is not None and stored.inputs_hash == text_hash(*map(str, lines))
            if fresh and stored is not None:
                return stored.text, _payload(lines, "index", stored.data.get("cut", 0))
            return _summarize(models, lines, "index")

        return library.memo(
            video_id, "context", key, producer=summary_fp, inputs_hash=inputs, build=from_index
        )[0]
    vlm = models.client("captioner")
    producer = "|".join([summary_fp, vlm.spec, prompt_hash("videoagent2_segment_caption")])
    # what made the index, not when: a stage's "at" changes when it runs again with the same
    # model, which would build B_1 again for every question
    made = {
        name: {k: v for k, v in info.items() if k != "at"} for name, info in record.stages.items()
    }
    inputs = text_hash("built", json.dumps(made, sort_keys=True))

    def build() -> tuple[str, dict[str, Any]]:
        spans = uniform_clips(record.duration, segment_seconds)
        built = [
            Line(s.t0, s.t1, _caption(library, models, record, s.t0, s.t1, fps)) for s in spans
        ]
        return _summarize(models, built, "built")

    return library.memo(
        video_id, "context", key, producer=producer, inputs_hash=inputs, build=build
    )[0]


def _payload(lines: list[Line], source: str, cut: int) -> dict[str, Any]:
    """The stored segments, where they came from, and how many summary replies were cut."""
    return {"segments": [[x.t0, x.t1, x.text] for x in lines], "source": source, "cut": cut}


def _summarize(models: Models, lines: list[Line], source: str) -> tuple[str, dict[str, Any]]:
    """S = F_llm(C, prompt_Summary) within the model's limits, as the summarize stage does."""
    text, data = Summarize().summarize_lines(models.client("llm"), lines)
    return text, _payload(lines, source, int(data["cut"]))


def _caption(
    library: Library, models: Models, record: VideoRecord, t0: float, t1: float, fps: float
) -> str:
    """One segment's caption from its frames at fps_d (the paper's F_vc)."""
    count = max(1, math.ceil((t1 - t0) * fps - 1e-6))
    times = [round(t0 + k / fps, 3) for k in range(count)]
    client = models.client("captioner")
    if client.capabilities.describer:
        return _describe(library, record, t0, t1, times)
    clip = f"The clip spans {str(Line(t0, t1, '')).partition(': ')[0]}."
    text, _ = ask_about_frames(
        client,
        record.source,
        times,
        width=record.width,
        height=record.height,
        short_side=SEGMENT_SIDE,
        system=load_prompt("videoagent2_segment_caption").strip(),
        prompt=clip,
        max_tokens=120,
    )
    return " ".join(text.split())


def _describe(
    library: Library, record: VideoRecord, t0: float, t1: float, times: list[float]
) -> str:
    """The perception describer's caption of a segment, from the index rows inside it."""
    vid, clips = record.video_id, library.clips(record.video_id, t0, t1)
    found = [d for c in clips for d in json.loads(c.detections or "[]") if t0 <= d["t"] < t1]
    # On-screen text is stored per clip without times: the overlapping clips' lines.
    ocr = dict.fromkeys(x.strip() for c in clips for x in c.ocr_text.splitlines() if x.strip())
    speech = " ".join(s.text.strip() for s in library.transcript(vid, t0, t1))
    first = clips[0] if clips else ClipRow(vid, 0, t0, t1)
    row = dataclasses.replace(
        first,
        t0=t0,
        t1=t1,
        detections=json.dumps(found),
        ocr_text="\n".join(ocr),
        transcript=speech,
    )
    thumbs = [f for f in library.frames(vid, t0, t1) if f.t < t1]
    picked = {min(thumbs, key=lambda f: abs(f.t - t)).t for t in times} if thumbs else set()
    frames = [(f.t, decode_jpeg(f.jpeg)) for f in thumbs if f.t in picked]
    cuts = [s.t0 for s in library.shots(vid)[1:]]
    return describe_clip(row, frames, cuts, detections_in(row, record.width, record.height))
