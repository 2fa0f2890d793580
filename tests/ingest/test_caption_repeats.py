"""``caption_skip_repeats``: a clip whose picture repeats the clip before reuses its caption
instead of calling the captioner, recorded with where the caption came from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tqdm import tqdm

from vidagent.config import load_settings
from vidagent.ingest.base import IngestContext
from vidagent.ingest.caption import Caption
from vidagent.ingest.structure import index_structure
from vidagent.library import Library
from vidagent.media import probe
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter


def start_of(request: ChatRequest) -> str:
    """The clip's start as the Table 9 prompt gives it."""
    text = request.messages[1].content[0]
    assert isinstance(text, str)
    return text.split('"clip_start_time": "')[1][:8]


def answer(caption: str) -> str:
    return json.dumps(
        {
            "new_subject_registry": {},
            "clip_description": {"subjects_present": [], "captions": caption},
        }
    )


def index(
    tmp_path: Path, video: Path, calls: list[str], **settings: object
) -> tuple[IngestContext, Caption]:
    def reply(request: ChatRequest) -> str:
        calls.append(start_of(request))
        return answer(f"caption of the clip at {start_of(request)}")

    config = load_settings({"cache": "off", "vlm": "fake:function", **settings})
    lib = Library(tmp_path / "lib")
    video_row = index_structure(lib, video, config).video
    models = Models.from_adapters({"vlm": FakeAdapter.function(reply)}, config)
    ctx = IngestContext(lib, models, config, video_row, video)
    stage = Caption()
    pending = stage.pending(ctx)
    with tqdm(total=len(pending), disable=True) as bar:
        stage.start()
        stage.run(ctx, pending, bar)
        stage.flush(ctx)
    return ctx, stage


def test_repeated_pictures_reuse_the_previous_caption(tmp_path: Path, slide_video: Path) -> None:
    calls: list[str] = []
    ctx, stage = index(tmp_path, slide_video, calls, caption_skip_repeats=0.05)
    assert calls == ["00:00:00", "00:00:15", "00:00:20", "00:00:25", "00:00:30", "00:00:35"]
    clips = ctx.library.clips(ctx.video.video_id)
    assert [c.caption for c in clips[:4]] == ["caption of the clip at 00:00:00"] * 3 + [
        "caption of the clip at 00:00:15"
    ]
    fp = Caption().fingerprint(ctx.settings)
    assert [c.caption_model for c in clips[:4]] == [fp, f"{fp}|reused=0", f"{fp}|reused=0", fp]
    assert "2 clip(s) reused the caption of the clip before" in stage.note
    assert Caption().pending(ctx) == []  # reused captions are done while the setting is on


def test_without_the_setting_every_clip_is_captioned(tmp_path: Path, slide_video: Path) -> None:
    calls: list[str] = []
    _, stage = index(tmp_path, slide_video, calls)
    assert len(calls) == 8 and "reused" not in stage.note


def test_turned_off_the_reused_captions_are_written_again(
    tmp_path: Path, slide_video: Path
) -> None:
    ctx, _ = index(tmp_path, slide_video, [], caption_skip_repeats=0.05)
    off = dataclasses.replace(ctx, settings=load_settings({"cache": "off", "vlm": "fake:function"}))
    # from the first reused clip on: each caption after it carries the registry
    assert [c.clip_index for c in Caption().pending(off)] == list(range(1, 8))


def test_the_estimate_says_it_cannot_know_the_repeats(slide_video: Path) -> None:
    info = probe(slide_video)
    on = load_settings({"vlm": "openai:gpt-4o", "caption_skip_repeats": 0.05})
    off = load_settings({"vlm": "openai:gpt-4o"})
    est, base = Caption().estimate(info, 8, on), Caption().estimate(info, 8, off)
    assert (est.calls, est.input_tokens) == (base.calls, base.input_tokens)
    assert any("a dry run decodes nothing" in n for n in est.notes)
    assert not any("caption_skip_repeats" in n for n in base.notes)


def test_a_video_indexed_before_has_its_repeats_counted_off(
    tmp_path: Path, slide_video: Path
) -> None:
    from vidagent.ingest.pipeline import estimate_path

    config = load_settings({"vlm": "openai:gpt-4o", "caption_skip_repeats": 0.05})
    lib = Library(tmp_path / "lib")
    fresh = estimate_path(slide_video, config, ("caption",), lib).stages[1]
    assert fresh.calls == 8  # not in the Library: nothing to know it by
    index_structure(lib, slide_video, config)  # the thumbnails, as an offline index leaves them
    known = estimate_path(slide_video, config, ("caption",), lib).stages[1]
    assert (known.calls, known.frames) == (6, 60)  # clips 1 and 2 repeat clip 0
    assert known.input_tokens == round(fresh.input_tokens * 6 / 8)
    assert "2 of 8 clips repeat the previous clip's picture" in known.notes[-1]
    off = config.model_copy(update={"caption_skip_repeats": 0.0})
    assert estimate_path(slide_video, off, ("caption",), lib).stages[1].calls == 8
