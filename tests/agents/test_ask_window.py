"""``ask``, ``ground`` and ``search`` with ``--last``, ``--since`` and ``--until``, as a user runs
them: only the window of the video is seen, on a finished file and on one that grows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentkit import INDEX_SPECS, action
from clirun import vidagent
from growkit import grow

from vidagent.library import Library
from vidagent.trace import Observed, RunStarted, Trace

STARTED = "2026-11-28T14:00:00Z"


def fake_env(*replies: str) -> dict[str, str]:
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    if replies:
        env["VIDAGENT_LLM"] = "fake:scripted?replies=" + json.dumps(list(replies))
    return env


def index(video: Path, home: Path, *more: str) -> str:
    out = vidagent("index", str(video), *more, "--json", home=home, env=fake_env())
    assert out.returncode == 0, out.stderr
    return str(Library(home / "library").listed_ids()[0])


def search(home: Path, *args: str) -> list[dict[str, object]]:
    out = vidagent(
        "search", "all", "hello", "--top", "10", *args, "--json", home=home, env=fake_env()
    )
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


def spans(hits: list[dict[str, object]]) -> list[tuple[object, object]]:
    return sorted((h["t0"], h["t1"]) for h in hits)


def started(trace: Path) -> RunStarted:
    first = Trace.load(trace).events[0]
    assert isinstance(first, RunStarted)
    return first


def test_retrieval_answers_from_the_last_seconds_only(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    args = ["ask", str(small_video), "What text appears?", "-s", "retrieval", "--json"]
    whole = json.loads(vidagent(*args, home=_isolated_home, env=fake_env()).stdout)
    assert min(t0 for _, t0, _ in whole["answer"]["evidence"]) < 10  # it cites earlier clips
    trace = tmp_path / "last.jsonl"
    out = vidagent(
        *args, "--last", "2s", "--trace", str(trace), home=_isolated_home, env=fake_env()
    )
    assert out.returncode == 0, out.stderr
    answered = json.loads(out.stdout)
    answer = answered["answer"]
    assert answer["evidence"] and all(t0 >= 10 for _, t0, _ in answer["evidence"])
    assert all(c["t0"] >= 10 for c in answer["citations"])
    (video,) = started(trace).videos
    assert video["window"] == [10.0, 12.0] and video["duration"] == 12.0
    assert "windows" not in whole
    assert answered["windows"] == [
        {"video_id": video["video_id"], "t0": 10.0, "t1": 12.0, "wall_t0": None, "wall_t1": None}
    ]


def test_a_scripted_dvd_searches_and_looks_only_inside_the_window(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    script = (
        action("clip_search", "look", event_description="HELLO"),
        action(
            "frame_inspect", "before", question="what?", time_ranges_hhmmss=[["0:00:00", "0:00:03"]]
        ),
        action("frame_inspect", "inside", question="what?", time_ranges_hhmmss=[[0, 30]]),
        action("answer", "done", answer="HELLO"),
    )
    trace = tmp_path / "dvd.jsonl"
    args = ["ask", str(small_video), "What text appears?", "-s", "dvd", "--tool-mode", "json"]
    out = vidagent(
        *args, "--last", "2s", "--trace", str(trace), home=_isolated_home, env=fake_env(*script)
    )
    assert out.returncode == 0, out.stderr
    assert "  window: small.mp4 00:00:10–00:00:12" in out.stdout.splitlines()
    seen = [e for e in Trace.load(trace).events if isinstance(e, Observed)]
    searched, before, inside = seen[:3]
    assert searched.evidence and all(t0 >= 10 for _, t0, _ in searched.evidence)
    assert "00:00:00" not in searched.text and "00:00:05" not in searched.text
    assert before.error and "ends before the part of the video" in before.text
    assert [e[1:] for e in inside.evidence] == [[10.0, 12.0]]  # clamped into the window
    assert inside.frames > 0
    # the same script without a window sees the earlier clips
    again = tmp_path / "whole.jsonl"
    vidagent(*args, "--trace", str(again), home=_isolated_home, env=fake_env(*script))
    whole = next(e for e in Trace.load(again).events if isinstance(e, Observed))
    assert min(t0 for _, t0, _ in whole.evidence) < 10


def test_eea_looks_at_frames_of_the_window_only(small_video: Path, _isolated_home: Path) -> None:
    index(small_video, _isolated_home)
    args = ["ask", "small.mp4", "What text?", "-o", "A", "-o", "B", "-s", "eea", "--json"]

    def frames(*window: str) -> list[float]:
        out = vidagent(*args, "--max-steps", "3", *window, home=_isolated_home, env=fake_env())
        assert out.returncode == 0, out.stderr
        return [t0 for _, t0, _ in json.loads(out.stdout)["answer"]["evidence"]]

    assert min(frames()) < 7  # the whole video: earlier frames too
    seen = frames("--last", "5s")
    assert seen and min(seen) >= 7


@pytest.mark.parametrize("strategy", ["avi", "videoagent2", "cvr"])
def test_every_strategy_answers_within_a_window(
    strategy: str, small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    index(small_video, _isolated_home)
    trace = tmp_path / f"{strategy}.jsonl"
    out = vidagent(
        "ask",
        "small.mp4",
        "What text?",
        "-o",
        "A",
        "-o",
        "B",
        "-s",
        strategy,
        "--json",
        "--max-steps",
        "2",
        "--last",
        "5s",
        "--trace",
        str(trace),
        home=_isolated_home,
        env=fake_env(),
    )
    assert out.returncode == 0, out.stderr
    assert started(trace).videos[0]["window"] == [7.0, 12.0]
    evidence = json.loads(out.stdout)["answer"]["evidence"]
    assert all(t1 > 7 for _, _, t1 in evidence)


def test_last_follows_the_live_edge_of_a_growing_video(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    vid = index(small_video, _isolated_home)
    assert spans(search(_isolated_home, "--last", "5s")) == [(5.0, 10.0), (10.0, 12.0)]
    grow(Library(_isolated_home / "library"), vid, 22.0)  # clips 12-17 and 17-22 arrive
    assert spans(search(_isolated_home, "--last", "5s")) == [(17.0, 22.0)]
    assert len(search(_isolated_home)) == 5
    trace = tmp_path / "live.jsonl"
    out = vidagent(
        "ask",
        vid[:8],
        "What happens?",
        "-s",
        "retrieval",
        "--last",
        "5s",
        "--json",
        "--trace",
        str(trace),
        home=_isolated_home,
        env=fake_env(),
    )
    assert out.returncode == 0, out.stderr
    assert started(trace).videos[0]["window"] == [17.0, 22.0]
    evidence = json.loads(out.stdout)["answer"]["evidence"]
    assert evidence and all(t0 >= 17 for _, t0, _ in evidence)


def test_since_and_until_read_wall_clock_times_of_the_recording(
    small_video: Path, _isolated_home: Path, tmp_path: Path
) -> None:
    index(small_video, _isolated_home, "--started-at", STARTED)
    hits = search(_isolated_home, "--since", "14:00:10")
    assert spans(hits) == [(10.0, 12.0)] and hits[0]["wall_t0"] == "2026-11-28T14:00:10Z"
    assert spans(search(_isolated_home, "--until", "14:00:04")) == [(0.0, 5.0)]
    both = search(_isolated_home, "--since", "2026-11-28T15:00:06+01:00", "--until", "14:00:09")
    assert spans(both) == [(5.0, 10.0)]
    trace = tmp_path / "since.jsonl"
    out = vidagent(
        "ask",
        str(small_video),
        "What text?",
        "-s",
        "retrieval",
        "--since",
        "14:00:10",
        "--trace",
        str(trace),
        home=_isolated_home,
        env=fake_env(),
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    window = "  window: small.mp4 00:00:10–00:00:12 (2026-11-28T14:00:10Z to 2026-11-28T14:00:12Z)"
    assert window in lines
    assert any("(2026-11-28T14:00:1" in line for line in lines if "00:00:1" in line)


def test_ground_looks_for_the_event_in_the_window(small_video: Path, _isolated_home: Path) -> None:
    index(small_video, _isolated_home, "--started-at", STARTED)

    def ground(*window: str) -> list[float]:
        args = ["ground", "small.mp4", "HELLO VIDAGENT", "-s", "retrieval", "--json", *window]
        out = vidagent(*args, home=_isolated_home, env=fake_env())
        assert out.returncode == 0, out.stderr
        return list(json.loads(out.stdout)["interval"])

    assert ground()[0] >= 6  # the whole video: found after the window below
    start, end = ground("--until", "14:00:06")
    assert start < 6 and start < end


def test_bad_windows_stop_with_one_line(small_video: Path, _isolated_home: Path) -> None:
    index(small_video, _isolated_home)
    cases = {
        (
            "--last",
            "10x",
        ): "error: --last: '10x' is not a length; use e.g. 10m, 90s, 1h30m, 2h or 7d",
        ("--last", "0"): "error: --last: '0' is no length of time; give more than 0 s",
        ("--last", "5m", "--since", "10:00"): "error: --last counts back from the live edge",
        ("--since", "10:00"): "error: small.mp4 has no recording start time",
        ("--until", "tomorrow"): "error: --until: 'tomorrow' is not a time",
    }
    for given, message in cases.items():
        for command in (["search", "small.mp4", "hello"], ["ask", "small.mp4", "What?"]):
            out = vidagent(*command, *given, home=_isolated_home, env=fake_env())
            assert out.returncode == 1, (given, out.stdout)
            assert out.stderr.startswith(message) and out.stderr.count("\n") == 1, out.stderr
            assert "--started-at" in out.stderr or given != ("--since", "10:00")
    vidagent(
        "index", str(small_video), "--started-at", STARTED, home=_isolated_home, env=fake_env()
    )
    late = vidagent(
        "ask", "small.mp4", "What?", "--since", "15:00", home=_isolated_home, env=fake_env()
    )
    assert late.returncode == 1
    assert late.stderr == (
        "error: small.mp4: --since 15:00 holds nothing of it (its indexed times: 00:00:00 to "
        "00:00:12 = 2026-11-28T14:00:00Z to 2026-11-28T14:00:12Z)\n"
    )
