"""The global summary with the embedded smoke-test llm: an extractive digest of the index.

The llm spec names the embedded SmolLM2 (a weak reasoner, as its adapter declares), but the hub is given
explicit adapters: no GGUF is loaded, and the llm raises if the digest ever calls it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tqdm import tqdm

from vidagent.config import load_settings
from vidagent.ingest.base import IngestContext
from vidagent.ingest.caption import Caption
from vidagent.ingest.digest import (
    HEADER,
    REDUNDANT,
    budget,
    candidates,
    select,
    sentences,
    shot_sentences,
)
from vidagent.ingest.embed import Embed, clip_text
from vidagent.ingest.structure import index_structure
from vidagent.ingest.summarize import Summarize
from vidagent.library import Library
from vidagent.library.schema import ClipRow, DescriberFacts, TranscriptSegment
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import LABEL, PerceptionDescriber
from vidagent.models.registry import declared_capabilities
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
        picture = f"Picture: mostly blue (60%); brightness 0.5{c.clip_index} (mid)."
        caption = (
            f"{LABEL} {PICTURES[c.clip_index]} On-screen text: {screen}. "
            f'{picture} One continuous shot. Speech: "{speech}".'
        )
        seen = () if PICTURES[c.clip_index].startswith("No ") else (PICTURES[c.clip_index],)
        facts = DescriberFacts(
            lines=tuple(ocr.splitlines()), picture=picture, speech=speech, report=(*seen, picture)
        )
        updates.append(
            {
                "clip_index": c.clip_index,
                "transcript": speech,
                "transcript_model": "fake",
                "ocr_text": ocr,
                "ocr_model": "fake",
                "caption": caption,
                "facts": facts.to_json(),
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
    assert declared_capabilities(context.settings.spec("llm"), "llm").weak_reasoner
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


# -- shot sentences from the describer's facts -----------------------------------------------------

#: How digest1 took shot sentences out of a describer's caption, kept to show the facts give the
#: same ones: the label and the quotes removed, then sentences of absence skipped.
DIGEST1_SKIPPED = re.compile(
    r"^(Speech:|On-screen text:|No [a-z -]+\.$|One continuous shot\.$|.* was not [a-z]+\.$)"
)
DIGEST1_QUOTED = re.compile(r'Speech: ".*"\.$|On-screen text: ".*?"\.(?=\s|$)', re.DOTALL)


def digest1_shots(caption: str) -> list[str]:
    text = DIGEST1_QUOTED.sub(" ", caption.replace(LABEL, " ").strip())
    return [x for x in sentences(text) if not DIGEST1_SKIPPED.match(x)]


def described(tmp_path: Path, video: Path, clips: dict[int, dict[str, Any]]) -> list[ClipRow]:
    """The clips of ``video`` with these perception rows, captioned by the describer."""
    config = load_settings({"cache": "off", "llm": SMOKE})
    library = Library(tmp_path / "described")
    report = index_structure(library, video, config)
    models = Models.from_adapters({"vlm": PerceptionDescriber()}, config)
    ctx = IngestContext(library, models, config, report.video, video)
    vid = ctx.video.video_id
    ctx.library.update_clips(vid, [{"clip_index": i, **row} for i, row in clips.items()])
    stage = Caption()
    pending = stage.pending(ctx)
    with tqdm(total=len(pending), disable=True) as bar:
        stage.start()
        stage.run(ctx, pending, bar)
        stage.flush(ctx)
    return ctx.library.clips(vid)


def perceived(detections: list[dict[str, Any]], ocr: str, speech: str) -> dict[str, Any]:
    return {
        "detections": json.dumps(detections),
        "detect_model": "opencv:hog+haar",
        "ocr_text": ocr,
        "ocr_model": "rapidocr:pp-ocr",
        "transcript": speech,
        "transcript_model": "faster-whisper:tiny.en",
    }


def test_shot_sentences_from_the_facts_are_digest1s(tmp_path: Path, small_video: Path) -> None:
    person, face = [200, 40, 380, 340], [420, 40, 480, 100]
    clips = described(
        tmp_path,
        small_video,
        {
            0: perceived(
                [
                    {"t": 1.0, "label": "person", "box": person, "score": 0.9},
                    {"t": 1.0, "label": "face", "box": face, "score": 0.8},
                    {"t": 4.0, "label": "person", "box": person, "score": 0.9},
                ],
                "OPEN HOUSE\nHARBOUR MUSEUM",
                "Welcome! The lamp is lit. Come in?",
            ),
            1: perceived([], "TICKETS FREE", ""),
            2: perceived([{"t": 10.0, "label": "dog", "box": face, "score": 0.7}], "", "Bye."),
        },
    )
    shots = [shot_sentences(c) for c in clips]
    assert shots == [digest1_shots(c.caption) for c in clips]
    assert [len(s) for s in shots] == [5, 2, 2]  # person, face, also seen, picture, cut; ...
    found = [x for x in candidates(clips, []) if x.source == "shot"]
    assert [x.text for x in found] == [x for s in shots for x in s]


def test_shot_sentences_never_hold_a_quote_or_an_unchecked_stage(
    tmp_path: Path, small_video: Path
) -> None:
    # A quoted line with a sentence end of its own cut digest1's quote short, and
    # "People were not checked." slipped past its list of absences.
    quoted = 'He said "stop". Then left'
    clips = described(
        tmp_path,
        small_video,
        {1: {"ocr_text": quoted, "ocr_model": "rapidocr:pp-ocr"}},
    )
    assert f'On-screen text: "{quoted}".' in clips[1].caption
    assert 'Then left".' in digest1_shots(clips[1].caption)
    assert "People were not checked." in digest1_shots(clips[1].caption)
    facts = clips[1].describer_facts()
    assert facts is not None
    assert shot_sentences(clips[1]) == [facts.picture, "Shot cut at 00:00:08."]


def test_shot_sentences_of_captions_without_facts() -> None:
    vlm = ClipRow("v", 0, 0.0, 5.0, caption="A man waves. No one else is there.")
    assert shot_sentences(vlm) == ["A man waves.", "No one else is there."]
    # The describer's caption from before its facts were stored: nothing is taken from its
    # prose (re-indexing writes the facts).
    old = ClipRow("v", 0, 0.0, 5.0, caption=f'{LABEL} No people detected. Speech: "hi".')
    assert shot_sentences(old) == []
