"""The global summary with the embedded smoke-test llm: an extractive digest of the index.

The llm spec names the embedded SmolLM2 (so ``is_smoke_test_llm`` holds), but the hub is given
explicit adapters: no GGUF is loaded, and the llm raises if the digest ever calls it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tqdm import tqdm

from vidagent.config import is_smoke_test_llm, load_settings
from vidagent.ingest.base import IngestContext
from vidagent.ingest.digest import HEADER, REDUNDANT, budget, select
from vidagent.ingest.embed import Embed, clip_text
from vidagent.ingest.structure import index_structure
from vidagent.ingest.summarize import Summarize
from vidagent.library import Library
from vidagent.library.schema import TranscriptSegment
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import LABEL
from vidagent.prompts import load_prompt

SMOKE = "llamacpp:smollm2-135m"
STOP_WORDS = frozenset(
    re.findall(
        r"\w+",
        "a an the of and or in on to for by is are be it its this that them they their with as at "
        "from into each all who what which while when please note",
    )
)
#: The speech of the small clip's three shots; one sentence is said twice (a repetition a
#: digest must not copy), and the index never mentions clips, captions or a camera wearer.
SEGMENTS = [
    (0.0, 2.5, "Welcome to the open house at the harbour museum."),
    (2.5, 5.0, "The old lighthouse lamp was restored last spring."),
    (5.0, 7.5, "Volunteers repaired the lens by hand. The lamp turns again tonight."),
    (7.5, 10.0, "The old lighthouse lamp was restored last spring."),
    (10.0, 12.0, "Tickets are free for children under twelve!"),
]
OCR = ["HARBOUR MUSEUM\nOPEN HOUSE", "HARBOUR MUSEUM\nLIGHTHOUSE LAMP", "TICKETS FREE"]
PICTURES = [
    "1 person in view at 0:01 (subject_1 at left, medium).",
    "No people detected.",
    "2 people in view at 0:10 (subject_1 at centre, large; subject_2 at right, small).",
]


def _refuse(request: ChatRequest) -> str:
    raise AssertionError("the extractive digest called the llm")


def make_ctx(
    library: Library, video: Path, chat: FakeAdapter | None = None, **settings: Any
) -> IngestContext:
    config = load_settings({"cache": "off", "llm": SMOKE, **settings})
    report = index_structure(library, video, config)
    adapters = {
        "llm": chat or FakeAdapter.function(_refuse),
        "embed": FakeAdapter("hash", {"dim": "64"}),
    }
    return IngestContext(
        library, Models.from_adapters(adapters, config), config, report.video, video
    )


def indexed(ctx: IngestContext) -> None:
    """Speech, on-screen text and describer-style captions written into the small clip's index."""
    vid = ctx.video.video_id
    clips = ctx.library.clips(vid)
    segments = [
        TranscriptSegment(vid, i, t0, t1, f" {text}", model="fake")
        for i, (t0, t1, text) in enumerate(SEGMENTS)
    ]
    ctx.library.put_transcript(vid, segments)
    updates = []
    for c in clips:
        speech = " ".join(s.text for s in segments if c.t0 <= s.t0 < c.t1).strip()
        ocr = OCR[c.clip_index]
        screen = " | ".join(f'"{x}"' for x in ocr.splitlines())
        caption = (
            f"{LABEL} {PICTURES[c.clip_index]} On-screen text: {screen}. "
            f"Picture: mostly blue (60%); brightness 0.5{c.clip_index} (mid). "
            f'One continuous shot. Speech: "{speech}".'
        )
        updates.append(
            {
                "clip_index": c.clip_index,
                "transcript": speech,
                "transcript_model": "fake",
                "ocr_text": ocr,
                "ocr_model": "fake",
                "caption": caption,
                "caption_model": "x",
            }
        )
    ctx.library.update_clips(vid, updates)


def run(ctx: IngestContext) -> int:
    stage = Summarize()
    pending = stage.pending(ctx)
    if pending:
        with tqdm(total=len(pending), disable=True) as bar:
            stage.run(ctx, pending, bar)
    return len(pending)


def index_text(ctx: IngestContext) -> str:
    vid = ctx.video.video_id
    parts = [s.text for s in ctx.library.transcript(vid)]
    for c in ctx.library.clips(vid):
        parts += [c.caption, c.transcript, c.ocr_text]
    return "\n".join(parts)


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def digest_lines(text: str) -> list[tuple[str, str]]:
    """``(MM:SS, sentence)`` of each digest line under the header."""
    head, *rest = text.split("\n")
    assert head == HEADER
    out = []
    for line in rest:
        match = re.fullmatch(r"\[(\d\d:\d\d)\] (.+)", line)
        assert match, line
        out.append((match.group(1), match.group(2)))
    return out


@pytest.fixture
def ctx(tmp_path: Path, small_video: Path) -> IngestContext:
    context = make_ctx(Library(tmp_path / "lib"), small_video)
    assert is_smoke_test_llm(context.settings.spec("llm"))
    indexed(context)
    return context


def test_the_digest_is_verbatim_in_time_order_and_never_repeats(ctx: IngestContext) -> None:
    assert run(ctx) == 3
    stored = ctx.library.artifact(ctx.video.video_id, "summary", "global")
    assert stored is not None and stored.data["method"] == "extractive"
    lines = digest_lines(stored.text)
    source = index_text(ctx)
    assert 3 <= len(lines) <= budget(ctx.video.duration)[0]
    for _, sentence in lines:
        assert sentence in source  # traceable: verbatim from the index
    assert [t for t, _ in lines] == sorted(t for t, _ in lines)
    sentences = [s for _, s in lines]
    assert len(set(sentences)) == len(sentences), sentences  # the repeated speech is said once
    assert "The old lighthouse lamp was restored last spring." in sentences
    shots = [x for x in stored.data["sentences"] if x["source"] == "shot"]
    assert 1 <= len(shots) <= -(-budget(ctx.video.duration)[0] // 4)


def test_the_digest_carries_no_prompt_word_the_index_lacks(ctx: IngestContext) -> None:
    run(ctx)
    text = ctx.library.global_summary(ctx.video.video_id)
    prompt_only = words(load_prompt("videoagent2_summary")) - STOP_WORDS - words(index_text(ctx))
    assert {"clips", "captions", "camera", "wearer", "summarize"} <= prompt_only  # a real check
    assert words(text) & prompt_only == set()


def test_switching_the_summary_setting_redoes_it(
    tmp_path: Path, small_video: Path, ctx: IngestContext
) -> None:
    run(ctx)
    assert run(ctx) == 0  # fresh
    llm = FakeAdapter.scripted(["A MODEL SUMMARY"])
    model = make_ctx(ctx.library, small_video, llm, summary="model")
    assert run(model) == 3
    stored = ctx.library.artifact(ctx.video.video_id, "summary", "global")
    assert stored is not None
    assert (stored.text, stored.data["method"]) == ("A MODEL SUMMARY", "model")
    assert len(llm.requests) == 1
    assert run(make_ctx(ctx.library, small_video)) == 3  # back to auto: the digest again
    stored = ctx.library.artifact(ctx.video.video_id, "summary", "global")
    assert stored is not None and stored.data["method"] == "extractive"
    assert stored.text.startswith(HEADER)


def test_a_real_llm_writes_the_summary_under_auto(tmp_path: Path, small_video: Path) -> None:
    llm = FakeAdapter.scripted(["MODEL"])
    ctx = make_ctx(Library(tmp_path / "lib"), small_video, llm, llm="openai:gpt-4o")
    indexed(ctx)
    run(ctx)
    stored = ctx.library.artifact(ctx.video.video_id, "summary", "global")
    assert stored is not None and (stored.text, stored.data["method"]) == ("MODEL", "model")


def test_extractive_is_forced_for_any_llm_and_new_speech_redoes_it(
    tmp_path: Path, small_video: Path
) -> None:
    ctx = make_ctx(
        Library(tmp_path / "lib"), small_video, llm="openai:gpt-4o", summary="extractive"
    )
    indexed(ctx)
    run(ctx)
    vid = ctx.video.video_id
    ctx.library.update_clips(vid, [{"clip_index": 0, "ocr_text": "HARBOUR MUSEUM\nCLOSED"}])
    assert run(ctx) == 3
    stored = ctx.library.artifact(vid, "summary", "global")
    assert stored is not None and stored.data["method"] == "extractive"


def test_the_digest_reuses_the_embed_stages_vectors(tmp_path: Path, small_video: Path) -> None:
    """After the embed stage, the clips' texts are not embedded again; the digest is the one
    made without the stored vectors (the centroid is the same mean)."""
    alone = make_ctx(Library(tmp_path / "alone"), small_video)
    indexed(alone)
    run(alone)
    ctx = make_ctx(Library(tmp_path / "lib"), small_video)
    indexed(ctx)
    embed = Embed()
    with tqdm(disable=True) as bar:
        embed.run(ctx, embed.pending(ctx), bar)
    adapter = ctx.models.client("embed").adapter
    assert isinstance(adapter, FakeAdapter)
    adapter.requests.clear()
    run(ctx)
    sent = [t for r in adapter.requests for t in r.texts]
    clip_texts = [clip_text(c) for c in ctx.library.clips(ctx.video.video_id)]
    assert sent and not set(sent) & set(clip_texts)
    made = [alone, ctx]
    assert len({c.library.global_summary(c.video.video_id) for c in made}) == 1


def test_mmr_never_picks_a_near_duplicate() -> None:
    import numpy as np

    a = np.array([1.0, 0.0, 0.0])
    near = np.array([0.95, np.sqrt(1 - 0.95**2), 0.0])  # cosine 0.95 to a
    far = np.array([0.0, 0.0, 1.0])
    vectors = np.stack([a, near, far])  # (3, 3)
    chosen = select(vectors, np.array([1.0, 0.2, 0.3]), [5, 5, 5], (3, 100))
    assert sorted(chosen) == [1, 2]  # the closer to the centroid of the two near-duplicates
    assert float(vectors[0] @ vectors[1]) >= REDUNDANT
