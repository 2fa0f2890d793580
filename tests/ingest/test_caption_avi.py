"""Caption under ``caption_style = "avi"``: AVI's Fig. 7, each clip captioned on its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tqdm import tqdm

from vidagent.agents.base import IndexPlan
from vidagent.config import load_settings
from vidagent.exceptions import RequestRejectedError
from vidagent.ingest.base import IngestContext, Stage
from vidagent.ingest.caption import FIX_JSON, Caption
from vidagent.ingest.structure import index_structure
from vidagent.ingest.summarize import derive_registry
from vidagent.library import Library
from vidagent.models.base import Adapter, ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import PerceptionDescriber
from vidagent.prompts import load_prompt


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


def answer(caption: str) -> str:
    """A Table 9 answer (DVD's registry style)."""
    body = {"new_subject_registry": {}, "clip_description": {"captions": caption}}
    return json.dumps(body)


PERSON = {
    "name": "man in red shirt",
    "appearance": ["red shirt", "short hair"],
    "identity": ["presenter"],
    "first_seen": 1.5,
}


def fig7(caption: str, registry: dict[str, Any] | None = None, start: float = 0.0) -> str:
    return json.dumps(
        {
            "clip_start_time": start,
            "clip_end_time": start + 5,
            "subject_registry": registry or {},
            "clip_description": caption,
        }
    )


def prompt_of(request: ChatRequest) -> str:
    (message,) = request.messages  # Fig. 7 is one user prompt: no system message
    assert message.role == "user" and isinstance(message.content, tuple)
    text = message.content[0]
    assert isinstance(text, str)
    return text


def expected(start: str, end: str) -> str:
    return (
        load_prompt("avi_caption")
        .replace("CLIP_START_TIME_IN_SECONDS", start)
        .replace("CLIP_END_TIME_IN_SECONDS", end)
    )


def start_of(request: ChatRequest) -> float:
    return float(prompt_of(request).split("clip_start_time”: ")[1].split(",")[0])


def rows(ctx: IngestContext) -> list[tuple[str, Any, str]]:
    clips = ctx.library.clips(ctx.video.video_id)
    return [(c.caption, json.loads(c.subjects), c.caption_model) for c in clips]


def avi_ctx(tmp_path: Path, video: Path, vlm: FakeAdapter, **settings: Any) -> IngestContext:
    return make_ctx(tmp_path, video, {"vlm": vlm}, vlm="fake:f", caption_style="avi", **settings)


def test_the_prompt_file_is_fig_7_as_printed() -> None:
    text = load_prompt("avi_caption")
    assert text.startswith("You are an expert video analysis assistant.")
    assert "subject_registry”: { subject_i: {" in text  # the paper's garbled quotes, kept
    assert text.count("CLIP_START_TIME_IN_SECONDS") == 1
    assert "[SUBJECTS]" not in text and "TRANSCRIPT" not in text


def test_each_clip_gets_fig_7_with_its_seconds_and_its_frames_and_no_history(
    tmp_path: Path, small_video: Path
) -> None:
    replies = [
        fig7("A man in a red shirt waves.", {"subject_1": PERSON}),
        fig7("A woman sits down.", {"subject_1": {"name": "woman", "first_seen": "00:00:07"}}),
        fig7("The room is empty."),
    ]
    vlm = FakeAdapter.scripted(replies)
    ctx = avi_ctx(tmp_path, small_video, vlm)
    ctx.library.update_clips(ctx.video.video_id, [{"clip_index": 1, "transcript": "hello there"}])
    stage = Caption()

    assert run(stage, ctx) == 3

    first, second, third = vlm.requests
    assert prompt_of(first) == expected("0.0", "5.0")
    assert prompt_of(second) == expected("5.0", "10.0")  # no transcript, no earlier subjects
    assert prompt_of(third) == expected("10.0", "12.0")
    assert (first.temperature, first.json_mode) == (0.0, True)
    # 2 fps per clip of 5, 5 and 2 seconds, each image after its time in seconds
    assert [r.image_count() for r in vlm.requests] == [10, 10, 4]
    labels = [p for p in second.messages[0].content[1:] if isinstance(p, str)]
    assert labels == [f"t={5 + k / 2:g}s" for k in range(10)]

    fp = stage.fingerprint(ctx.settings)
    assert fp.endswith("|avi") and fp.startswith("fake:f|")
    assert rows(ctx) == [
        ("A man in a red shirt waves.", {"subject_1": PERSON}, fp),
        (
            "A woman sits down.",  # the clip's own subject_1: a local id, not the man
            {"subject_1": {"name": "woman", "appearance": [], "identity": [], "first_seen": 7.0}},
            fp,
        ),
        ("The room is empty.", {}, fp),
    ]
    assert ctx.library.artifact(ctx.video.video_id, "registry") is None  # nothing merged
    assert run(Caption(), ctx) == 0


def test_answers_are_parsed_leniently_retried_and_rejections_leave_the_clip_blank(
    tmp_path: Path, small_video: Path
) -> None:
    listed = fig7("Listed.").replace(
        '"subject_registry": {}', '"subject_registry": [{"name": "dog", "appearance": "brown"}]'
    )
    script: list[str | Exception] = [
        "```json\n" + fig7("Fenced.", {"s": PERSON}) + "\n```\nHope this helps!",
        "not json",
        "Sure: " + listed,
        RequestRejectedError("HTTP 400: content_filter", status=400),
        "no json, three times",
        "still none",
        "nope",
    ]

    def reply(request: ChatRequest) -> str:
        item = script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    vlm = FakeAdapter.function(reply)
    ctx = avi_ctx(tmp_path, small_video, vlm, clip_seconds=3)
    stage = Caption()
    run(stage, ctx)

    dog = {"name": "dog", "appearance": ["brown"], "identity": [], "first_seen": None}
    assert [(c, s) for c, s, _ in rows(ctx)] == [
        ("Fenced.", {"s": PERSON}),  # after a code fence, prose after it
        ("Listed.", {"subject_1": dog}),  # after prose, the entries as a list, asked twice
        ("", {}),  # rejected by a content filter: blank, as in the paper
        ("nope", {}),  # three answers, none JSON: the last raw text
    ]
    assert vlm.requests[2].messages[-1].content == FIX_JSON  # a follow-up turn, not a repeat
    assert len(vlm.requests) == 1 + 2 + 1 + 3
    assert stage.note == (
        "1 clip(s) left blank (request rejected); 1 clip(s) stored as raw text (unparsable JSON)"
    )


def test_rejections_from_the_first_clip_on_are_a_configuration_error(
    tmp_path: Path, small_video: Path
) -> None:
    def reply(request: ChatRequest) -> str:
        raise RequestRejectedError("HTTP 400: unsupported response_format", status=400)

    ctx = avi_ctx(tmp_path, small_video, FakeAdapter.function(reply), clip_seconds=3)
    with pytest.raises(RequestRejectedError, match="first 3 clips were all rejected"):
        run(Caption(), ctx)


def test_switching_the_style_captions_every_clip_again(tmp_path: Path, small_video: Path) -> None:
    def reply(request: ChatRequest) -> str:
        if request.messages[0].role == "system":  # DVD's Table 9
            return answer("Registry caption.")
        return fig7("AVI caption.")

    vlm = FakeAdapter.function(reply)
    ctx = make_ctx(tmp_path, small_video, {"vlm": vlm}, vlm="fake:f")
    assert run(Caption(), ctx) == 3
    registry_fp = Caption().fingerprint(ctx.settings)

    ctx.settings = ctx.settings.model_copy(update={"caption_style": "avi"})
    avi_fp = Caption().fingerprint(ctx.settings)
    assert avi_fp != registry_fp
    assert run(Caption(), ctx) == 3
    assert {c for c, _, _ in rows(ctx)} == {"AVI caption."}
    assert run(Caption(), ctx) == 0

    ctx.settings = ctx.settings.model_copy(update={"caption_style": "registry"})
    assert run(Caption(), ctx) == 3
    assert {c for c, _, _ in rows(ctx)} == {"Registry caption."}


class Crash(Exception):
    pass


def test_resume_redoes_only_the_clips_that_are_missing(tmp_path: Path, small_video: Path) -> None:
    armed = [True]

    def reply(request: ChatRequest) -> str:
        start = start_of(request)
        if start == 6.0 and armed[0]:
            raise Crash("killed")
        return fig7(f"Clip at {start:g}.", {"subject_1": {"name": f"p{start:g}"}}, start)

    vlm = FakeAdapter.function(reply)
    ctx = avi_ctx(tmp_path, small_video, vlm, clip_seconds=3)
    vid = ctx.video.video_id
    fp = Caption().fingerprint(ctx.settings)

    with pytest.raises(Crash):
        run(Caption(), ctx)
    assert [m == fp for _, _, m in rows(ctx)] == [True, True, False, False]

    armed[0] = False
    # no chain: a clip later than a missing one is not redone, nor one before it
    ctx.library.update_clips(vid, [{"clip_index": 3, "caption": "kept", "caption_model": fp}])
    ctx.library.update_clips(vid, [{"clip_index": 0, "caption_model": "stale"}])
    vlm.requests.clear()
    assert run(Caption(), ctx) == 2

    assert sorted(start_of(r) for r in vlm.requests) == [0.0, 6.0]
    assert [c for c, _, _ in rows(ctx)] == ["Clip at 0.", "Clip at 3.", "Clip at 6.", "kept"]
    assert rows(ctx)[2][1] == {
        "subject_1": {"name": "p6", "appearance": [], "identity": [], "first_seen": None}
    }


def test_the_perception_describer_writes_the_same_captions_under_another_fingerprint(
    tmp_path: Path, small_video: Path
) -> None:
    registry = make_ctx(tmp_path / "a", small_video, {"vlm": PerceptionDescriber()})
    avi = make_ctx(tmp_path / "b", small_video, {"vlm": PerceptionDescriber()}, caption_style="avi")
    run(Caption(), registry)
    run(Caption(), avi)

    assert [(c, s) for c, s, _ in rows(avi)] == [(c, s) for c, s, _ in rows(registry)]
    fps = {m for _, _, m in rows(avi)}
    # the fingerprint, then the perception stages the describer read (none ran here)
    assert fps == {Caption().fingerprint(avi.settings) + "|facts="}
    assert fps != {m for _, _, m in rows(registry)} and "|avi|" in next(iter(fps))


def test_per_clip_registries_stay_out_of_the_video_registry(
    tmp_path: Path, small_video: Path
) -> None:
    vlm = FakeAdapter.function(lambda request: fig7("x", {"subject_1": PERSON}))
    ctx = avi_ctx(tmp_path, small_video, vlm)
    run(Caption(), ctx)
    assert derive_registry({}, ctx.library.clips(ctx.video.video_id)) == {}


def test_the_style_is_a_setting_an_index_plan_sets_and_a_trace_records() -> None:
    assert load_settings({}).caption_style == "registry"
    assert load_settings({}, env={"VIDAGENT_CAPTION_STYLE": "avi"}).caption_style == "avi"
    plan = IndexPlan(("caption", "embed"), {"caption_style": "avi"})
    described = plan.describe(load_settings({}))
    assert described["caption_style"] == "avi"
    assert IndexPlan(("caption",)).describe(load_settings({}))["caption_style"] == "registry"


def test_the_estimate_counts_fig_7_without_history(small_video: Path) -> None:
    from vidagent.media import probe

    info = probe(small_video)
    registry = load_settings({"vlm": "openai:gpt-4.1-mini"})
    avi = load_settings({"vlm": "openai:gpt-4.1-mini", "caption_style": "avi"})
    dvd, fig = Caption().estimate(info, 3, registry), Caption().estimate(info, 3, avi)
    assert (fig.calls, fig.frames) == (dvd.calls, dvd.frames) == (3, 24)
    # the prompt and 10 images per call, less the 6 the 2 s last clip does not have
    image = 425 + 8  # a 640x360 frame: 2 x 1 tiles of 512 px at high detail
    assert fig.input_tokens == 3 * (len(load_prompt("avi_caption")) // 4 + 10 * image) - 6 * image
    assert "calls are independent (AVI, Fig. 7)" in fig.notes
