"""Wall-clock time: a video that knows when it was recorded (its container's creation time,
or ``vidagent index --started-at``) shows every time also as an ISO-8601 wall-clock time: in
search, ``show``, citations and exports."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from clirun import vidagent
from factories import INDEX_SPECS

from vidagent.app import Session
from vidagent.cli.render import render_answer
from vidagent.config import load_settings
from vidagent.media import probe
from vidagent.media.synth import make_video
from vidagent.timecode import wall_clock
from vidagent.trace import Answered, Citation

RECORDED = "2026-05-01T09:30:00Z"


def test_the_container_creation_time_is_read_and_a_placeholder_is_not(tmp_path: Path) -> None:
    make_video(tmp_path / "a.mp4", duration=1, creation_time="2026-05-01T09:30:00.000000Z")
    make_video(tmp_path / "b.mp4", duration=1, creation_time="1970-01-01T00:00:00.000000Z")
    make_video(tmp_path / "c.mp4", duration=1)
    assert [probe(tmp_path / n).created_at for n in ("a.mp4", "b.mp4", "c.mp4")] == [
        RECORDED,
        "",
        "",
    ]
    assert wall_clock(RECORDED, 75.5) == "2026-05-01T09:31:15.500Z"
    assert wall_clock("2026-05-01T09:30:00+02:00", 60) == "2026-05-01T09:31:00+02:00"
    assert wall_clock("", 60) == ""


def test_search_show_citations_and_exports_read_as_wall_clock_time(tmp_path: Path) -> None:
    video = tmp_path / "cam.mp4"
    make_video(video, duration=10, size=(320, 180), audio="tone", creation_time=RECORDED)
    settings = load_settings({**INDEX_SPECS, "home": str(tmp_path / "home")}, env={})
    with Session(settings, library=tmp_path / "lib") as session:
        (report,) = session.index([video])
        vid = report.result.structure.video.video_id
        assert session.show(vid).video.recorded_at == RECORDED
        hit = session.search("a short test video", top=1)[0].to_json()
        assert hit["wall_t0"] == wall_clock(RECORDED, hit["t0"]) and hit["wall_t0"].startswith(
            "2026-05-01T09:30"
        )
        sheet = session.sheet(vid, out=tmp_path / "s.png", count=4).to_json()
        assert sheet["wall_t1"] == "2026-05-01T09:30:10Z"
        # JSON gives times to the millisecond: a live window's clip ended at 6.133711111111111
        detail = session.show(vid)
        noisy = [dataclasses.replace(c, t1=c.t1 + 1 / 9000) for c in detail.clips]
        shown_json = dataclasses.replace(detail, clips=noisy).to_json()
        assert [c["t1"] for c in shown_json["clips"]] == [round(c.t1, 3) for c in noisy]
        found = session.search("a short test video", top=1)[0]
        moved = dataclasses.replace(found.hit, clip=noisy[found.hit.clip.clip_index])
        assert dataclasses.replace(found, hit=moved).to_json()["t1"] == round(moved.clip.t1, 3)
    run = {"home": tmp_path / "home", "env": {"VIDAGENT_LIBRARY": str(tmp_path / "lib")}}
    shown = vidagent("show", vid, **run).stdout
    assert f"recorded: {RECORDED}" in shown and "00:00:05-00:00:10  2026-05-01T09:30:05Z" in shown
    cited = Answered(
        0.0, "At 5 s.", None, True, False, "", None, [],
        citations=[Citation(vid, 5.0, 6.0, [5.0, 6.0], "found", 1.0, "speech", "hello", 0)],
    )  # fmt: skip
    block = render_answer(cited, {vid: "cam.mp4"}, [], {vid: RECORDED})
    assert "cam.mp4 00:00:05–00:00:06 (2026-05-01T09:30:05Z)" in block


def test_started_at_given_at_indexing_wins_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    video = tmp_path / "cam.mp4"
    make_video(video, duration=3, size=(320, 180), creation_time=RECORDED)
    other = tmp_path / "other.mp4"
    make_video(other, duration=2, size=(320, 180))
    run = {"home": tmp_path / "home", "env": {"VIDAGENT_LIBRARY": str(tmp_path / "lib"), **{
        f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}}}  # fmt: skip
    done = vidagent(
        "index",
        str(video),
        "--stages",
        "transcribe",
        "--started-at",
        "2026-06-02T08:00:00+02:00",
        **run,
    )
    assert done.returncode == 0, done.stderr
    listed = vidagent("show", "cam.mp4", "--json", **run).stdout
    assert '"recorded_at": "2026-06-02T08:00:00+02:00"' in listed
    again = vidagent("index", str(video), "--stages", "transcribe", **run)  # kept on re-indexing
    assert again.returncode == 0
    assert (
        '"recorded_at": "2026-06-02T08:00:00+02:00"'
        in vidagent("show", "cam.mp4", "--json", **run).stdout
    )
    for args, message in [
        (("--started-at", "yesterday"), "not an ISO-8601 date and time"),
        (("--started-at", RECORDED, str(other)), "2 files were named"),
    ]:
        failed = vidagent("index", str(video), *args, **run)
        assert failed.returncode == 2 and message in failed.stderr.splitlines()[-1]
        assert "Traceback" not in failed.stderr


@pytest.mark.parametrize("text", ["2026-05-01T09:30:00Z", "2026-05-01 09:30:00+00:00"])
def test_a_recording_start_is_kept_in_one_form(tmp_path: Path, text: str) -> None:
    from vidagent.timecode import parse_wall_clock

    assert parse_wall_clock(text) == RECORDED
