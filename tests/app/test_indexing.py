"""Indexing through the application layer: one pipeline call, stopped and resumed through its
own callbacks (what the HTTP API's index jobs use for progress and cancelling)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from factories import INDEX_SPECS

from vidagent.app import Session
from vidagent.config import load_settings


class Stop(Exception):
    """What a front end raises to stop indexing (the server raises its JobCancelled)."""


def test_a_run_stopped_before_a_stage_keeps_what_ended_and_resumes_without_duplicates(
    small_video: Path, tmp_path: Path
) -> None:
    settings = load_settings({**INDEX_SPECS, "library": str(tmp_path / "library")})
    started: list[str] = []

    def before_stage(name: str) -> None:
        started.append(name)
        if name == "caption":
            raise Stop

    with Session(settings) as session:
        with pytest.raises(Stop):
            session.index_file(small_video, before_stage=before_stage)
        # transcribe, read_text and detect run at once: each is announced before they start
        assert started == [
            "structure",
            "transcribe",
            "read_text",
            "detect",
            "speakers",
            "caption",
        ]
        (video,) = session.videos()
        assert {"transcribe", "read_text", "detect"} <= set(video.stages)
        assert not {"caption", "embed", "summarize"} & set(video.stages)
        cut = session.library.clips(video.video_id)
        assert cut and all(c.transcript_model and not c.caption_model for c in cut)

        ended: list[str] = []
        result = session.index_file(small_video, on_stage=lambda run: ended.append(run.stage))
        assert result.error is None and ended == [r.stage for r in result.stages]
        done = {r.stage: r.clips for r in result.stages}
        assert done["transcribe"] == done["read_text"] == done["detect"] == 0  # not redone
        assert done["caption"] == len(cut)
        clips = session.library.clips(video.video_id)
        assert [c.clip_index for c in clips] == [c.clip_index for c in cut]  # none twice
        assert [c.transcript for c in clips] == [c.transcript for c in cut]
        assert all(c.caption_model for c in clips)
        assert {"caption", "embed", "summarize"} <= set(session.videos()[0].stages)


def test_one_video_indexed_twice_at_once_is_indexed_once(small_video: Path, tmp_path: Path) -> None:
    # Two index jobs of one file (the HTTP API's, or an ask by path while it is indexed) each
    # wrote their stages' rows, and the later transcript dropped the speaker labels the other
    # had set: the second waits, then finds the stages done.
    settings = load_settings({**INDEX_SPECS, "library": str(tmp_path / "library")})
    events: list[tuple[str, str]] = []
    holding, go = threading.Event(), threading.Event()

    def first_before(name: str) -> None:
        events.append(("first", name))
        if name == "structure":
            holding.set()
            assert go.wait(60)

    with Session(settings) as session:
        first = threading.Thread(
            target=session.index_file, args=(small_video,), kwargs={"before_stage": first_before}
        )
        first.start()
        assert holding.wait(60)
        runs: list[Any] = []
        second = threading.Thread(
            target=lambda: runs.append(
                session.index_file(
                    small_video, before_stage=lambda name: events.append(("second", name))
                )
            )
        )
        second.start()
        time.sleep(0.5)  # time enough for the second to start its stages, were it let
        go.set()
        first.join(120)
        second.join(120)
        (result,) = runs
    whose = [who for who, _ in events]
    assert whose == sorted(whose, key=["first", "second"].index)  # one after the other
    assert result.error is None and all(r.clips == 0 for r in result.stages)  # nothing redone


def test_a_strategys_plan_captions_as_a_full_index_does(small_video: Path, tmp_path: Path) -> None:
    # The offline describer writes a clip's caption from the perception stages' rows, so a plan
    # naming caption runs detection too (retrieval's names none): otherwise its captions said
    # "People were not checked." or counted people by whether `vidagent index` ran before.
    captions = []
    for name in ("plan", "full"):
        settings = load_settings({**INDEX_SPECS, "library": str(tmp_path / name)})
        with Session(settings) as session:
            if name == "plan":
                plan = session.plan_ask("v", "What?", strategy="retrieval").agent.index_plan()
                assert "detect" not in plan.stages
                result = session.index_file(small_video, plan=plan)
            else:
                result = session.index_file(small_video)
            assert result.video is not None and "detect" in result.video.stages
            captions.append([c.caption for c in session.library.clips(result.video.video_id)])
    assert captions[0] == captions[1] and "People were not checked" not in str(captions)


def test_a_plan_captioned_by_a_vision_model_runs_only_its_stages(tmp_path: Path) -> None:
    from vidagent.agents.types import DESCRIBER_READS, IndexPlan
    from vidagent.ingest.pipeline import STAGES

    assert STAGES[: len(DESCRIBER_READS)] == DESCRIBER_READS  # the pipeline's first, in order
    plan = IndexPlan(("speakers", "caption", "embed"))
    vlm = load_settings({**INDEX_SPECS, "vlm": "openai:gpt-4o"})
    assert plan.stages_run(vlm) == plan.stages
    describer = load_settings(INDEX_SPECS)
    assert plan.stages_run(describer) == (*DESCRIBER_READS, "speakers", "caption", "embed")
    assert IndexPlan(("transcribe", "embed")).stages_run(describer) == ("transcribe", "embed")
    unheard = IndexPlan(("caption",), {"caption_transcripts": False})  # captions see no speech
    assert unheard.stages_run(describer) == ("read_text", "detect", "caption")


def test_a_file_that_changes_while_it_is_indexed_says_so(small_video: Path, tmp_path: Path) -> None:
    # a recording still being written: indexed as it stood, in silence, and later taken for
    # the finished file ("up to date")
    import shutil

    growing = tmp_path / "growing.mp4"
    shutil.copy(small_video, growing)
    settings = load_settings({**INDEX_SPECS, "library": str(tmp_path / "library")})

    def write_more(name: str) -> None:
        if name == "caption":  # the recorder appends while the stages run
            with growing.open("ab") as f:
                f.write(b"\0" * 1000)

    with Session(settings) as session:
        result = session.index_file(growing, before_stage=write_more)
        assert result.error is None and len(result.warnings) == 1
        assert result.warnings[0].startswith(f"{growing} changed while it was indexed (")
        assert "vidagent watch" in result.warnings[0]
        steady = session.index_file(small_video)
        assert steady.error is None and steady.warnings == []
        # indexed again once complete: the index of it as it stood is named, with its remedy
        again = session.index_file(growing)
        (said,) = again.warnings
        assert said.startswith(f"{growing} was indexed before with other content (")
        assert f"`vidagent remove {result.video.video_id}`" in said
