"""An index job is one pipeline call: a cancel between its stages stops the work there, and the
job run again finishes only what is left, writing no row twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from factories import INDEX_SPECS
from liveserver import fake_models

from vidagent.config import load_settings
from vidagent.server.app import create_app
from vidagent.server.jobs import Job, JobCancelled


def test_a_cancelled_index_job_stops_between_stages_and_resumes_without_duplicates(
    small_video: Path, tmp_path: Path
) -> None:
    settings = load_settings({**INDEX_SPECS, "home": str(tmp_path / "home")})
    server = create_app(settings, models=fake_models(settings), media_roots=[tmp_path])
    work = server.state.server
    job = Job("j1", "index", {"path": str(small_video), "stages": None}, "running")
    emitted: list[dict[str, Any]] = []

    def emit(kind: str, data: dict[str, Any]) -> None:
        emitted.append(data)
        if data["stage"] == "detect":  # the user cancels once detection is done
            job._cancel.set()

    job.emit = emit  # type: ignore[method-assign]
    with pytest.raises(JobCancelled):
        work.index_work(job)
    ends = [(e["stage"], e["done"]) for e in emitted]  # a start repeats the last end's
    assert [e for k, e in enumerate(ends) if k == 0 or e != ends[k - 1]] == [
        ("structure", 0),
        ("structure", 1),
        ("transcribe", 2),
        ("read_text", 3),
        ("detect", 4),
    ]
    (video,) = work.session.videos()
    assert "detect" in video.stages and "caption" not in video.stages  # stopped before caption
    cut = work.session.library.clips(video.video_id)

    again = Job("j2", "index", dict(job.params), "running")
    result = work.index_work(again)
    stages = result["stages"]
    assert [stages[s]["clips"] for s in ("transcribe", "read_text", "detect")] == [0, 0, 0]
    assert stages["caption"]["clips"] == len(cut) and result["clips"] == len(cut)
    clips = work.session.library.clips(video.video_id)
    assert [c.clip_index for c in clips] == [c.clip_index for c in cut]
    assert all(c.caption_model for c in clips)
    done = [data for kind, data in again.events if kind == "progress"][-1]
    assert done == {"stage": "summarize", "done": 8, "total": 8, "running": []}  # structure + 7
    work.jobs.close()
    work.session.close()


def test_a_cancel_inside_a_stage_stops_it_after_the_clip_it_is_on(
    small_video: Path, tmp_path: Path
) -> None:
    # The user cancels while the first clip is captioned: the job ends cancelled after that
    # clip, not after the stage (on an hour of video, minutes); that clip's caption is kept.
    settings = load_settings({**INDEX_SPECS, "home": str(tmp_path / "home")})
    models = fake_models(settings)
    server = create_app(settings, models=models, media_roots=[tmp_path])
    work = server.state.server
    job = Job("j1", "index", {"path": str(small_video), "stages": None}, "running")
    vlm = models._adapters["vlm"]  # type: ignore[index]
    caption = vlm.chat
    vlm.chat = lambda request: (job._cancel.set(), caption(request))[1]  # type: ignore[method-assign]
    with pytest.raises(JobCancelled):
        work.index_work(job)
    (video,) = work.session.videos()
    clips = work.session.library.clips(video.video_id)
    assert 1 <= sum(1 for c in clips if c.caption_model) < len(clips)
    assert "caption" not in video.stages
    assert job.progress["running"] == []  # it said captioning was still running
    work.jobs.close()
    work.session.close()
