"""Caption (DVD Table 9 + progressive registry, or the perception describer) and summarize."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from tqdm import tqdm

from vidagent.config import load_settings
from vidagent.exceptions import ContextOverflowError, RequestRejectedError
from vidagent.ingest.base import IngestContext, Stage
from vidagent.ingest.caption import FIX_JSON, Caption
from vidagent.ingest.structure import index_structure
from vidagent.ingest.summarize import LOCAL_REPLY, Summarize
from vidagent.library import Library
from vidagent.library.schema import Artifact
from vidagent.library.views import Line
from vidagent.media import probe
from vidagent.models.base import Adapter, Capabilities, ChatRequest, ChatResponse, Message
from vidagent.models.client import Client, Models
from vidagent.models.context import CHARS_PER_TOKEN, estimate_tokens
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import LABEL, PerceptionDescriber
from vidagent.prompts import load_prompt

SUBJECT_A = {
    "name": "unknown",
    "appearance": ["short black hair", "red jacket"],
    "identity": ["presenter"],
    "first_seen": "00:00:01",
}


def make_ctx(
    tmp_path: Path, video: Path, adapters: dict[str, Adapter], **settings: Any
) -> IngestContext:
    config = load_settings({"cache": "off", **settings})
    lib = Library(tmp_path / "lib")
    report = index_structure(lib, video, config)
    return IngestContext(lib, Models.from_adapters(adapters, config), config, report.video, video)


def run(stage: Stage, ctx: IngestContext) -> int:
    """The pipeline contract; returns how many clips were pending."""
    pending = stage.pending(ctx)
    if pending:
        with tqdm(total=len(pending), disable=True) as bar:
            stage.start()
            stage.run(ctx, pending, bar)
            stage.flush(ctx)
    return len(pending)


def answer(
    caption: str, present: tuple[str, ...] | list[str] = (), new: dict[str, Any] | None = None
) -> str:
    return json.dumps(
        {
            "clip_start_time": "00:00:00",
            "clip_end_time": "00:00:05",
            "new_subject_registry": new or {},
            "clip_description": {"subjects_present": list(present), "captions": caption},
        }
    )


def expected_prompt(transcript: str, subjects: str, start: str, end: str) -> str:
    return (
        load_prompt("dvd_caption")
        .replace("BENCHMARK_CUSTOM_PLACEHOLDER", "")
        .replace("[TRANSCRIPTS]", transcript)
        .replace("[SUBJECTS]", subjects)
        .replace("CLIP_START_TIME", f'"{start}"')
        .replace("CLIP_END_TIME", f'"{end}"')
    )


def user_text(request: ChatRequest) -> str:
    content = request.messages[1].content
    assert isinstance(content, tuple) and isinstance(content[0], str)
    return content[0]


def clip_rows(ctx: IngestContext) -> list[tuple[str, list[str]]]:
    return [(c.caption, json.loads(c.subjects)) for c in ctx.library.clips(ctx.video.video_id)]


def registry(ctx: IngestContext) -> Artifact:
    stored = ctx.library.artifact(ctx.video.video_id, "registry")
    assert stored is not None
    return stored


# ---------------------------------------------------------------------------------------------
# VLM path


def test_vlm_gets_table_9_verbatim_with_frames_and_carries_the_registry(
    tmp_path: Path, small_video: Path
) -> None:
    vlm = FakeAdapter.scripted(
        [
            answer("A presenter in a red jacket.", ["person_A"], {"person_A": SUBJECT_A}),
            answer(
                "The presenter greets a man in blue.",
                ["subject_1", "new_guy"],
                {"new_guy": {"name": "Bob", "appearance": "blue shirt", "identity": []}},
            ),
            # the model reuses a taken id for a new subject, and names an id that does not exist
            answer("A woman enters.", ["subject_1", "ghost"], {"subject_1": {"name": "Ann"}}),
        ]
    )
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:scripted")
    vid = ctx.video.video_id
    ctx.library.update_clips(vid, [{"clip_index": 1, "transcript": "hello there"}])
    stage = Caption()

    assert run(stage, ctx) == 3

    first, second, third = vlm.requests
    assert first.messages[0] == Message("system", load_prompt("dvd_caption_system"))
    assert user_text(first) == expected_prompt("No transcript.", "{}", "00:00:00", "00:00:05")
    assert (first.temperature, first.json_mode) == (0.0, True)
    # 2 fps per clip of 5, 5 and 2 seconds, each image after its time label
    assert [r.image_count() for r in vlm.requests] == [10, 10, 4]
    content = first.messages[1].content
    assert content[1:6:2] == ("t=00:00:00", "t=00:00:00.5", "t=00:00:01")
    image = cv2.imdecode(np.frombuffer(first.messages[1].images[0].data, np.uint8), 1)
    assert image is not None and image.shape == (360, 640, 3)  # 720p at most, never upscaled
    # clip 2 sees clip 1's subject under its runtime id, and its own transcript
    history = {"subject_1": SUBJECT_A}
    assert user_text(second) == expected_prompt(
        "hello there", json.dumps(history), "00:00:05", "00:00:10"
    )
    history["subject_2"] = {
        "name": "Bob",
        "appearance": ["blue shirt"],
        "identity": [],
        "first_seen": "00:00:05",
    }
    assert user_text(third) == expected_prompt(
        "No transcript.", json.dumps(history), "00:00:10", "00:00:12"
    )

    assert clip_rows(ctx) == [
        ("A presenter in a red jacket.", ["subject_1"]),
        ("The presenter greets a man in blue.", ["subject_1", "subject_2"]),
        ("A woman enters.", ["subject_3"]),  # the proposed "subject_1" was new: renumbered
    ]
    assert {c.caption_model for c in ctx.library.clips(vid)} == {stage.fingerprint(ctx.settings)}
    stored = registry(ctx)
    assert (stored.producer, stored.inputs_hash) == (stage.fingerprint(ctx.settings), "2")
    data = stored.data
    assert list(data) == ["subject_1", "subject_2", "subject_3"]
    assert data["subject_3"]["name"] == "Ann"
    assert data["subject_3"]["first_clip"] == 2

    assert run(Caption(), ctx) == 0  # finished clips are never asked again
    assert len(vlm.requests) == 3


def test_benchmark_hint_fills_the_placeholder_and_the_fingerprint(
    tmp_path: Path, small_video: Path
) -> None:
    vlm = FakeAdapter.function(lambda request: answer("x"))
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:echo", clip_seconds=12)
    stage = Caption(benchmark_hint="This is an egocentric video.")
    run(stage, ctx)
    assert user_text(vlm.requests[0]).startswith(
        "There are consecutive frames from a video. This is an egocentric video. Please"
    )
    assert stage.fingerprint(ctx.settings) != Caption().fingerprint(ctx.settings)
    assert run(Caption(), ctx) == 1  # another hint is another caption


def test_answers_are_parsed_leniently_and_unparsable_ones_stored_raw(
    tmp_path: Path, small_video: Path
) -> None:
    fenced = "```json\n" + answer("Fenced.", ["a"], {"a": SUBJECT_A}) + "\n```\nHope this helps!"
    listed = answer("Bare times.", ["x"]).replace(
        '"new_subject_registry": {}', '"new_subject_registry": [{"subject_id": "x", "name": "Zed"}]'
    )
    bare_time = "Sure {here}: " + listed.replace('"00:00:00"', "00:00:10")
    vlm = FakeAdapter.scripted([fenced, "no json here", "still none", "nope", bare_time])
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:scripted")
    stage = Caption()

    run(stage, ctx)

    assert clip_rows(ctx) == [
        ("Fenced.", ["subject_1"]),
        ("nope", []),  # three answers, none JSON: the last raw text, no subjects
        ("Bare times.", ["subject_2"]),  # after prose, bare times, entries as a list
    ]
    assert len(vlm.requests) == 5
    retry = vlm.requests[2].messages
    assert retry[-2:] == (Message("assistant", "no json here"), Message("user", FIX_JSON))
    assert stage.note == "1 clip(s) stored as raw text (unparsable JSON)"
    assert list(registry(ctx).data) == ["subject_1", "subject_2"]


def test_content_filter_leaves_the_caption_blank(tmp_path: Path, small_video: Path) -> None:
    filtered = RequestRejectedError("HTTP 400: content_filter", status=400)

    def reply(request: ChatRequest) -> str | ChatResponse:
        start = user_text(request).split('"clip_start_time": "')[1][:8]
        if start == "00:00:05":
            raise filtered
        if start == "00:00:10":
            return ChatResponse(text="", finish_reason="content_filter")
        return answer("Fine.")

    vlm = FakeAdapter.function(reply)
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:function")
    stage = Caption()

    run(stage, ctx)

    assert clip_rows(ctx) == [("Fine.", []), ("", []), ("", [])]
    assert len(vlm.requests) == 3  # a rejection is not retried
    assert run(Caption(), ctx) == 0  # and a blank clip is finished, as in the paper
    assert stage.note == "2 clip(s) left blank (request rejected)"


def test_rejections_from_the_first_clip_on_are_a_configuration_error(
    tmp_path: Path, small_video: Path
) -> None:
    def reject(request: ChatRequest) -> str:
        raise RequestRejectedError("HTTP 400: unsupported response_format", status=400)

    ctx = make_ctx(
        tmp_path, small_video, {"vlm": FakeAdapter.function(reject)}, vlm="fake:f", clip_seconds=3
    )
    with pytest.raises(RequestRejectedError, match="first 3 clips were all rejected"):
        run(Caption(), ctx)
    assert [c.caption_model for c in ctx.library.clips(ctx.video.video_id)] == [""] * 4


def test_an_authentication_error_is_raised_at_once(tmp_path: Path, small_video: Path) -> None:
    def reject(request: ChatRequest) -> str:
        raise RequestRejectedError("HTTP 401: bad key", status=401)

    vlm = FakeAdapter.function(reject)
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:f")
    with pytest.raises(RequestRejectedError, match="401"):
        run(Caption(), ctx)
    assert len(vlm.requests) == 1


def test_frames_are_capped_by_max_images(tmp_path: Path, small_video: Path) -> None:
    from dataclasses import replace

    vlm = FakeAdapter.function(lambda request: answer("x"))
    vlm.capabilities = replace(vlm.capabilities, max_images=4)
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:f", clip_seconds=12)
    run(Caption(), ctx)
    labels = [p for p in vlm.requests[0].messages[1].content[1:] if isinstance(p, str)]
    assert labels == ["t=00:00:00", "t=00:00:04", "t=00:00:07.5", "t=00:00:11.5"]


class Crash(Exception):
    pass


def start_of(request: ChatRequest) -> str:
    return user_text(request).split('"clip_start_time": "')[1][:8]


def test_resume_after_a_crash_continues_the_registry_chain(
    tmp_path: Path, small_video: Path
) -> None:
    armed = [True]

    def reply(request: ChatRequest) -> str:
        start = start_of(request)
        if start == "00:00:06" and armed[0]:
            raise Crash("killed")
        return answer(f"Clip at {start}.", ["new"], {"new": {"name": f"p{start}"}})

    vlm = FakeAdapter.function(reply)
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:f", clip_seconds=3)
    vid = ctx.video.video_id

    with pytest.raises(Crash):
        run(Caption(), ctx)
    fp = Caption().fingerprint(ctx.settings)
    assert [c.caption_model == fp for c in ctx.library.clips(vid)] == [True, True, False, False]
    assert registry(ctx).inputs_hash == "1"

    armed[0] = False
    vlm.requests.clear()
    assert run(Caption(), ctx) == 2

    assert [start_of(r) for r in vlm.requests] == ["00:00:06", "00:00:09"]
    assert '"subject_2": {"name": "p00:00:03"' in user_text(vlm.requests[0])
    assert [c.clip_index for c in ctx.library.clips(vid)] == [0, 1, 2, 3]
    assert [s for _, s in clip_rows(ctx)] == [[f"subject_{i}"] for i in (1, 2, 3, 4)]
    assert list(registry(ctx).data) == [f"subject_{i}" for i in (1, 2, 3, 4)]


def test_a_registry_that_does_not_fit_the_first_pending_clip_is_rebuilt(
    tmp_path: Path, small_video: Path
) -> None:
    def reply(request: ChatRequest) -> str:
        start = start_of(request)
        if start == "00:00:06" and len(vlm.requests) < 4:
            raise Crash("killed")
        return answer(f"Clip at {start}.", ["new"], {"new": SUBJECT_A})

    vlm = FakeAdapter.function(reply)
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:f", clip_seconds=3)
    vid = ctx.video.video_id
    with pytest.raises(Crash):
        run(Caption(), ctx)
    # As if written by something else: subject_2 lost, subject_9 from a clip not yet redone.
    stale = {"subject_1": {**SUBJECT_A, "first_clip": 0}, "subject_9": {"first_clip": 2}}
    ctx.library.put_artifact(Artifact(vid, "registry", data=stale, producer="other"))

    run(Caption(), ctx)

    placeholder = {"name": "unknown", "appearance": [], "identity": [], "first_seen": "00:00:03"}
    history = {"subject_1": SUBJECT_A, "subject_2": placeholder}
    assert user_text(vlm.requests[3]) == expected_prompt(
        "No transcript.", json.dumps(history), "00:00:06", "00:00:09"
    )
    assert [s for _, s in clip_rows(ctx)][2:] == [["subject_3"], ["subject_4"]]


# ---------------------------------------------------------------------------------------------
# Perception describer path


def test_describer_writes_labelled_factual_captions_and_reidentifies_people(
    tmp_path: Path, small_video: Path
) -> None:
    ctx = make_ctx(tmp_path, small_video, {"vlm": PerceptionDescriber()})
    vid = ctx.video.video_id
    person = [200, 40, 380, 340]  # pixels of the 640x360 video: centre, large
    # Shots change hue at 4 s and 8 s: the person at 4 s and 6 s is in the same shot.
    detections = {
        0: [{"t": 1.0, "label": "person", "box": person, "score": 0.9}]
        + [{"t": 4.0, "label": "person", "box": person, "score": 0.9}],
        1: [{"t": 6.0, "label": "person", "box": person, "score": 0.8}],
        2: [],
    }
    ctx.library.update_clips(
        vid,
        [
            {
                "clip_index": i,
                "detections": json.dumps(dets),
                "detect_model": "opencv:hog+haar",
                "ocr_text": "HELLO VIDAGENT" if i == 1 else "",
                "ocr_model": "rapidocr:pp-ocr",
            }
            for i, dets in detections.items()
        ],
    )

    run(Caption(), ctx)

    rows = ctx.library.clips(vid)
    assert all(c.caption.startswith(LABEL + " ") for c in rows)
    assert '"HELLO VIDAGENT"' in rows[1].caption
    assert "HELLO" not in rows[0].caption + rows[2].caption
    assert "No on-screen text." in rows[0].caption
    assert "1 person in view at 00:00:01 (subject_1 at centre, large)." in rows[0].caption
    assert "Also seen: subject_2 at 00:00:04 (centre, large)." in rows[0].caption
    assert "Shot cut at 00:00:04." in rows[0].caption
    assert "Shot cut at 00:00:08." in rows[1].caption
    assert "No people detected." in rows[2].caption
    assert "Speech was not transcribed." in rows[2].caption
    assert "Picture: mostly " in rows[2].caption
    assert [json.loads(c.subjects) for c in rows] == [["subject_1", "subject_2"], ["subject_2"], []]
    data = registry(ctx).data
    assert list(data) == ["subject_1", "subject_2"]
    assert data["subject_2"]["first_seen"] == "00:00:04"
    assert data["subject_2"]["identity"] == ["person detected by opencv:hog+haar"]
    assert data["subject_1"]["name"] == "unknown"
    assert rows[0].caption_model.startswith("perception:describer|")
    assert ctx.models.ledger.records() == []  # no model was called


def test_describer_stores_its_facts_beside_the_caption(tmp_path: Path, small_video: Path) -> None:
    ctx = make_ctx(tmp_path, small_video, {"vlm": PerceptionDescriber()})
    vid = ctx.video.video_id
    person, face = [200, 40, 380, 340], [420, 40, 480, 100]  # a face outside the person's box
    detections = {
        0: [
            {"t": 1.0, "label": "person", "box": person, "score": 0.9},
            {"t": 1.0, "label": "face", "box": face, "score": 0.8},
            {"t": 2.0, "label": "dog", "box": face, "score": 0.7},
        ],
        1: [],
        2: [],
    }
    ctx.library.update_clips(
        vid,
        [
            {
                "clip_index": i,
                "detections": json.dumps(dets),
                "detect_model": "opencv:hog+haar",
                # the second line a misreading, kept out of the caption and its facts
                "ocr_text": "HELLO VIDAGENT\not urjd aoqt ena prnsog" if i == 1 else "",
                "ocr_model": "rapidocr:pp-ocr",
                "transcript": "lift off. we have lift off" if i == 1 else "",
                "transcript_model": "faster-whisper:tiny.en" if i < 2 else "",
            }
            for i, dets in detections.items()
        ],
    )

    run(Caption(), ctx)

    rows = ctx.library.clips(vid)
    facts = [c.describer_facts() for c in rows]
    assert all(f is not None for f in facts)
    first, second, third = (f for f in facts if f is not None)
    assert (first.people, first.faces, first.objects) == (1, 1, {"dog": 1})
    assert (third.people, third.faces, third.objects) == (0, 0, {})
    assert (first.lines, second.lines) == ((), ("HELLO VIDAGENT",))
    assert (first.speech, second.speech, third.speech) == ("", "lift off. we have lift off", None)
    assert (first.cuts, second.cuts, third.cuts) == ((4.0,), (8.0,), ())
    for row, f in zip(rows, facts, strict=True):
        assert f is not None
        assert f.picture.startswith("Picture: mostly ") and f.picture in row.caption
        assert f.brightness in ("dark", "dim", "mid", "bright")
        assert (
            f.brightness_level is not None and f"brightness {f.brightness_level:.2f}" in f.picture
        )
        assert f.colours and all(f"{name} ({share:.0%})" in f.picture for name, share in f.colours)
        assert all(sentence in row.caption for sentence in f.report)  # verbatim
    assert first.report == (
        "1 person in view at 00:00:01 (subject_1 at centre, large).",
        "1 face in view at 00:00:01 (subject_2 at right, small).",
        "1 dog in view at 00:00:02 (at right, small).",
        first.picture,
        "Shot cut at 00:00:04.",
    )
    assert third.report == (third.picture,)  # "No people detected." etc. report no finding
    assert json.loads(rows[1].facts)["lines"] == ["HELLO VIDAGENT"]


def test_a_vlm_caption_replaces_the_describers_facts_and_old_captions_get_theirs(
    tmp_path: Path, small_video: Path
) -> None:
    ctx = make_ctx(tmp_path, small_video, {"vlm": PerceptionDescriber()})
    vid = ctx.video.video_id
    run(Caption(), ctx)
    described = ctx.library.clips(vid)
    assert all(c.describer_facts() is not None for c in described)

    # A describer's captions from before schema version 3 have no facts: they are written again,
    # the same, with their facts (no model is called).
    ctx.library.update_clips(vid, [{"clip_index": i, "facts": "{}"} for i in (1, 2)])
    assert run(Caption(), ctx) == 2
    assert ctx.library.clips(vid) == described
    assert run(Caption(), ctx) == 0

    vlm = FakeAdapter.scripted([answer("A man waves."), answer("A dog."), answer("Rain.")])
    config = load_settings({"cache": "off", "vlm": "fake:scripted"})
    models = Models.from_adapters({"vlm": vlm}, config)
    as_vlm = IngestContext(ctx.library, models, config, ctx.video, ctx.path)
    assert run(Caption(), as_vlm) == 3
    rows = ctx.library.clips(vid)
    assert [c.caption for c in rows] == ["A man waves.", "A dog.", "Rain."]
    assert all(c.facts == "{}" and c.describer_facts() is None for c in rows)  # none left stale
    assert run(Caption(), as_vlm) == 0  # a VLM's caption needs no facts


# ---------------------------------------------------------------------------------------------
# Summarize


def captioned(ctx: IngestContext, captions: list[str]) -> None:
    ctx.library.update_clips(
        ctx.video.video_id,
        [
            {"clip_index": i, "caption": text, "caption_model": "x"}
            for i, text in enumerate(captions)
        ],
    )


def summary_prompt(lines: str) -> str:
    return load_prompt("videoagent2_summary").replace("{C}", "\n" + lines + "\n")


def test_summary_gets_the_verbatim_prompt_and_is_redone_only_when_captions_change(
    tmp_path: Path, small_video: Path
) -> None:
    llm = FakeAdapter.scripted(["SUMMARY ONE", "SUMMARY TWO"])
    ctx = make_ctx(tmp_path, small_video, {"llm": llm}, summary="model")
    vid = ctx.video.video_id
    captioned(ctx, ["A man walks\nin.", "He sits.", ""])
    stage = Summarize()

    assert run(stage, ctx) == 3
    (request,) = llm.requests
    assert request.messages == (
        Message("user", summary_prompt("0s-5s: A man walks in.\n5s-10s: He sits.")),
    )
    assert request.temperature == 0.0
    stored = ctx.library.artifact(vid, "summary", "global")
    assert stored is not None
    assert (stored.text, stored.producer) == ("SUMMARY ONE", stage.fingerprint(ctx.settings))

    assert run(Summarize(), ctx) == 0
    assert len(llm.requests) == 1

    ctx.library.update_clips(vid, [{"clip_index": 2, "caption": "He leaves."}])
    assert run(Summarize(), ctx) == 3
    assert "10s-12s: He leaves." in llm.requests[1].messages[0].text
    stored = ctx.library.artifact(vid, "summary", "global")
    assert stored is not None and stored.text == "SUMMARY TWO"


def test_long_captions_are_summarised_hierarchically(tmp_path: Path, small_video: Path) -> None:
    replies = iter(["part one", "part two", "FINAL"])
    llm = FakeAdapter.function(lambda request: next(replies))
    ctx = make_ctx(tmp_path, small_video, {"llm": llm}, clip_seconds=3, summary="model")
    words = "word " * 40  # ~50 tokens per line: two lines fit a budget of 120, three do not
    captioned(ctx, [f"clip {i} {words}" for i in range(4)])
    stage = Summarize()
    stage.token_budget = 120  # type: ignore[misc]

    run(stage, ctx)

    lines = [f"{a}s-{a + 3}s: clip {i} {words.strip()}" for i, a in enumerate((0, 3, 6, 9))]
    assert [r.messages[0].text for r in llm.requests] == [
        summary_prompt("\n".join(lines[:2])),
        summary_prompt("\n".join(lines[2:])),
        summary_prompt("0s-6s: part one\n6s-12s: part two"),
    ]
    stored = ctx.library.artifact(ctx.video.video_id, "summary", "global")
    assert stored is not None and stored.text == "FINAL"
    assert stored.data["levels"] == [
        [{"t0": 0.0, "t1": 6.0, "text": "part one"}, {"t0": 6.0, "t1": 12.0, "text": "part two"}]
    ]
    assert stage.note == "hierarchical: 3 llm calls over 2 levels"


def test_registry_gets_temporal_spans_with_a_one_clip_gap_tolerance(
    tmp_path: Path, small_video: Path
) -> None:
    ctx = make_ctx(
        tmp_path, small_video, {"llm": FakeAdapter.scripted(["S"])}, clip_seconds=3, summary="model"
    )
    vid = ctx.video.video_id
    captioned(ctx, ["a", "b", "c", "d"])
    subjects = [["subject_1", "subject_2"], [], ["subject_1"], ["subject_2"]]
    ctx.library.update_clips(
        vid, [{"clip_index": i, "subjects": json.dumps(s)} for i, s in enumerate(subjects)]
    )
    entry = {**SUBJECT_A, "first_clip": 0}
    chain = Artifact(vid, "registry", data={"subject_1": entry}, producer="m", inputs_hash="3")
    ctx.library.put_artifact(chain)

    run(Summarize(), ctx)

    stored = registry(ctx)
    assert (stored.producer, stored.inputs_hash) == ("m", "3")  # the caption chain's checkpoint
    data = stored.data
    assert data["subject_1"] == {**entry, "temporal_spans": [[0.0, 9.0]]}
    assert data["subject_2"]["name"] == "unknown"  # named by clips, missing from the registry
    assert data["subject_2"]["temporal_spans"] == [[0.0, 3.0], [9.0, 12.0]]
    assert run(Summarize(), ctx) == 0


def _lines(n: int, words: int = 60) -> list[Line]:
    return [Line(4.0 * i, 4.0 * i + 4, f"clip {i} " + "word " * words) for i in range(n)]


def _hub(fn: Any, *, context: int | None, local: bool) -> Client:
    caps = Capabilities(roles=frozenset({"llm"}), context_tokens=context, local=local)
    return Models.from_adapters({"llm": FakeAdapter.function(fn, capabilities=caps)}).client("llm")


def fitting_budget_of(context: int) -> int:
    prompt = len(load_prompt("videoagent2_summary")) // CHARS_PER_TOKEN + 16
    return context - prompt - 2 * LOCAL_REPLY


def test_a_declared_window_is_filled_but_never_overflowed() -> None:
    """Chunks fill what the window leaves after the prompt and room for the reply (twice the
    cap, for the one retry of a cut reply): no request is cut by the client's fitting."""
    seen: list[ChatRequest] = []
    llm = _hub(lambda r: seen.append(r) or "S", context=2048, local=True)
    text, data = Summarize().summarize_lines(llm, _lines(40))  # ~12k tokens of captions
    assert text == "S" and data["levels"]
    for request in seen:
        assert request.max_tokens == LOCAL_REPLY
        assert estimate_tokens(request.messages) + 2 * LOCAL_REPLY <= 2048
        assert "cut to fit" not in request.messages[0].text


def test_an_undeclared_window_gets_the_papers_single_call_uncapped() -> None:
    seen: list[ChatRequest] = []
    llm = _hub(lambda r: seen.append(r) or "S", context=None, local=False)
    assert Summarize().summarize_lines(llm, _lines(200))[0] == "S"
    assert len(seen) == 1 and seen[0].max_tokens is None


def test_an_endpoint_that_refuses_the_length_gets_halved_chunks() -> None:
    """An endpoint that does not say its window answers 'too long': the hierarchy is rebuilt
    with half the budget until every request fits."""
    accepted: list[int] = []

    def server(request: ChatRequest) -> str:
        size = len(request.messages[0].text)
        if size > 6000:
            raise ContextOverflowError("context_length_exceeded")
        accepted.append(size)
        return "S"

    stage = Summarize()
    text, data = stage.summarize_lines(_hub(server, context=None, local=False), _lines(60))
    assert text == "S" and data["levels"] and accepted and max(accepted) <= 6000


def test_a_reply_cut_by_its_cap_is_asked_again_then_kept_and_counted() -> None:
    caps: list[int | None] = []

    def cut(request: ChatRequest) -> ChatResponse:
        caps.append(request.max_tokens)
        return ChatResponse("half a summ", finish_reason="length")

    stage = Summarize()
    text, data = stage.summarize_lines(_hub(cut, context=8192, local=True), _lines(3))
    assert caps == [LOCAL_REPLY, 2 * LOCAL_REPLY]  # once more with twice the cap
    assert text == "half a summ" and data["cut"] == 1 and "cut by the output limit" in stage.note

    replies = iter([ChatResponse("half", finish_reason="length"), ChatResponse("WHOLE")])
    stage = Summarize()
    text, data = stage.summarize_lines(
        _hub(lambda r: next(replies), context=8192, local=True), _lines(3)
    )
    assert text == "WHOLE" and data["cut"] == 0 and stage.note == ""


# ---------------------------------------------------------------------------------------------
# Estimates


def test_estimates_count_calls_frames_and_tokens(small_video: Path) -> None:
    info = probe(small_video)
    vlm = load_settings({"vlm": "openai:gpt-4.1-mini"})
    est = Caption().estimate(info, 3, vlm)
    assert (est.calls, est.frames, est.output_tokens) == (3, 24, 750)  # 12 s at 2 fps
    assert est.input_tokens > 24 * 425  # 640x360 frames: 2 tiles at high detail
    describer = Caption().estimate(info, 3, load_settings())
    assert (describer.calls, describer.input_tokens) == (0, 0)
    assert Summarize().estimate(info, 3, vlm).calls == 1
    model = load_settings({"vlm": "openai:gpt-4.1-mini", "summary": "model"})
    local = Summarize().estimate(info, 720, model)  # the default llm: SmolLM2's 8k window
    assert local.calls == 1 + -(-720 * 250 // fitting_budget_of(8192))
    remote = Summarize().estimate(info, 720, load_settings({"llm": "openai:gpt-4o"}))
    assert remote.calls == 1  # the paper's one call; no window is declared
