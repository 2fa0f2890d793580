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
