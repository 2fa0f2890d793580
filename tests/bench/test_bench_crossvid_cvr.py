"""``vidagent bench run crossvid --strategy cvr`` end to end on a small CrossVid-format folder of
generated clips and drone-view frames: per-task scores, C/T/M averages, CCQA through the judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchkit import SPECS
from clirun import vidagent

from vidagent.agents.cvr.protocol import TASKS, master_prompt
from vidagent.app.benchmarks import RunConfig, run_benchmark
from vidagent.bench.rundir import read_rows
from vidagent.config import load_settings
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.trace import ChildStarted, PhaseChanged, Trace

FOUR = ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"]
QA: dict[str, list[dict[str, Any]]] = {
    "BU": [
        {
            "id": 0,
            "question": "Which videos show a moving scene?",
            "options": FOUR,
            "videos": [f"movie/m{i}.mp4" for i in range(1, 5)],
            "answer": ["A", "C"],
        }
    ],
    "NC": [
        {
            "id": 0,
            "question": "Which film ends in a wedding?",
            "options": FOUR,
            "videos": [f"movie/m{i}.mp4" for i in range(1, 5)],
            "answer": "B",
        }
    ],
    "PEA": [
        {
            "id": 0,
            "question": "Which video has the error?",
            "options": FOUR[:3],
            "videos": ["cook/c1.mp4", "cook/c2.mp4", "cook/c3.mp4"],
            "begin": [0, 1, 2],
            "end": [3, 4, 5],
            "answer": "A",
        }
    ],
    "PI": [
        {
            "id": 0,
            "video": "movie/m1.mp4",
            "beginning": [[0, 1.5]],
            "ending": [[2.5, 4]],
            "options": [f"{c}. event {c}" for c in "ABCDEF"],
            "answer": "E",
        }
    ],
    "FSA": [
        {
            "id": 0,
            "video A": "cook/c1.mp4",
            "video B": "cook/c2.mp4",
            "ref_segment": [1, 3],
            "answer": [2, 4],
        }
    ],
    "PSS": [
        {
            "id": 0,
            "video": "cook/c3.mp4",
            "segments": {"1": [[0, 2]], "2": [[2, 4]], "3": [[4, 6]]},
            "answer": "2->3->1",
        }
    ],
    "MSR": [
        {
            "id": 0,
            "vid": "0001-02",
            "question": "Where is {A1} relative to {B2}?",
            "objects": [{"id": 7}, {"id": 9}],
            "options": ["A. {A1} is left of {B2}", "B. {A1} is right of {B2}"],
            "answer": "A",
        }
    ],
    "CCQA": [
        {
            "id": 0,
            "video A": "cook/c1.mp4",
            "video B": "cook/c2.mp4",
            "question": "How do the cooks differ?",
            "answer": "A fries; B boils.",
            "scoring_points": ["A fries", "B boils"],
        }
    ],
}
# What the scripted master answers: right everywhere but NC (C for B); FSA overlaps half.
ANSWERS = {
    "BU": ["C", "A"],
    "NC": "C",
    "PEA": "A",
    "PI": "E",
    "FSA": [2, 3],
    "PSS": "2->3->1",
    "MSR": "A",
    "CCQA": "Video 1 fries the onions while Video 2 boils them.",
}
JUDGE = '<score>{"coverage": [true, true], "correctness": [true, false]}</score>'


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import cv2
    import numpy as np

    from vidagent.media.synth import make_video

    root = tmp_path_factory.mktemp("crossvid")
    (root / "QA").mkdir()
    for task, rows in QA.items():
        (root / "QA" / f"{task}.json").write_text(json.dumps(rows))
    for folder, names, seconds in (("movie", "m1 m2 m3 m4", 4), ("cook", "c1 c2 c3", 6)):
        (root / "videos" / folder).mkdir(parents=True)
        for n, name in enumerate(names.split()):
            make_video(
                root / "videos" / folder / f"{name}.mp4",
                duration=seconds,
                fps=10,
                size=(160, 96),
                shots=1 + n % 2,
                audio="tone",
            )
    for view in (1, 2):
        frames = root / "uav" / "frames" / str(view) / f"0001-02-{view}"
        frames.mkdir(parents=True)
        for i in range(12):
            cv2.imwrite(str(frames / f"{i:07d}.jpg"), np.full((270, 480, 3), 30 * view, np.uint8))
        (root / "uav" / "bbox" / str(view)).mkdir(parents=True)
        boxes = [
            {
                "id": obj,
                "bbox": {
                    str(i): {"xtl": 10, "ytl": 10, "xbr": 60, "ybr": 40} for i in range(3, 12)
                },
            }
            for obj in (7, 9)
        ]
        (root / "uav" / "bbox" / str(view) / "0001-02.json").write_text(json.dumps(boxes))
    return root


def master(seen: dict[str, list[dict[str, Any]]]) -> FakeAdapter:
    """Looks at every video once side by side, listens to Video 1 where the task allows, then
    answers ``ANSWERS``; records each question's first user turn by task."""
    prompts = {master_prompt(t): t for t in TASKS}

    def reply(request: ChatRequest) -> str:
        task = prompts[request.messages[0].text]
        user = json.loads(request.messages[1].text)
        seen.setdefault(task, []).append(user)
        observed = sum(m.text.startswith("[TOOL OBS]") for m in request.messages)
        videos = user["videos"]
        if observed == 0:
            targets = [{"video_index": v["video_index"], "num_frames": 2} for v in videos]
            params = {"observation_targets": targets, "focus_prompt": "What happens?"}
            return json.dumps({"action": "observe", "thought": "look at all", "params": params})
        if observed == 1 and task not in ("BU", "PEA", "MSR", "MOC"):
            params = {"video_index": 1}
            return json.dumps({"action": "get_caption", "thought": "listen", "params": params})
        return json.dumps({"action": "answer", "thought": "decided", "final_answer": ANSWERS[task]})

    return FakeAdapter.function(reply)


def test_every_task_runs_and_scores_with_crossvids_averages(data: Path, tmp_path: Path) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    settings = load_settings(SPECS)
    models = Models.from_adapters(
        {
            "llm": master(seen),
            "vlm": FakeAdapter("echo", {"reply": "a kitchen"}),
            "embed": FakeAdapter("hash", {"dim": "32"}),
            "asr": FakeAdapter("echo", {"text": "now we stir"}),
        },
        settings,
    )
    out = tmp_path / "run"
    summary = run_benchmark(
        RunConfig("crossvid", data, strategy="cvr"), models=models, settings=settings, out=out
    )
    assert (summary.questions, summary.ran, summary.errors) == (8, 8, 0)
    rows = read_rows(out / "predictions.jsonl")
    parsed = {k: r["parsed"] for k, r in rows.items()}
    assert parsed == {
        "BU-0": [0, 2],
        "NC-0": 2,
        "PEA-0": 0,
        "PI-0": 4,
        "FSA-0": [2.0, 3.0],
        "PSS-0": [2, 3, 1],
        "MSR-0": 0,
        "CCQA-0": "Video 1 fries the onions while Video 2 boils them.",
    }
    # what the master was told: clip lengths (PEA's begin/end, PI's and PSS's pieces of one
    # file), frame counts for the drone views, where the boxed objects are
    assert [v["duration_seconds"] for v in seen["PEA"][0]["videos"]] == [3.0, 3.0, 3.0]
    assert [v["duration_seconds"] for v in seen["PI"][0]["videos"]] == [1.5, 1.5]
    assert [v["duration_seconds"] for v in seen["PSS"][0]["videos"]] == [2.0, 2.0, 2.0]
    assert seen["PSS"][0]["query"].startswith("Review these video clips.")
    assert "Reference Segment (Video 1): [1, 3]s" in seen["FSA"][0]["query"]
    msr = seen["MSR"][0]
    assert [v.get("total_frames") for v in msr["videos"]] == [12, 12]
    assert msr["query"].startswith("Where is obj_1 relative to obj_2?")
    assert (
        "obj_1 is boxed and labelled in green in Video 1's frames (first at frame 3)"
        in msr["query"]
    )
    assert msr["possible_answers"] == ["A. obj_1 is left of obj_2", "B. obj_1 is right of obj_2"]

    scores = summary.scores
    assert scores is None or "CCQA" not in scores.sections["task"]  # CCQA waits for the judge
    trace = Trace.load(out / rows["PSS-0"]["trace"])
    assert [c.name for c in trace.of(ChildStarted)] == ["visual_agent", "audio_agent"]
    videos = trace.of(PhaseChanged)[0].data["videos"]
    assert [v["spans"] for v in videos] == [[[0.0, 2.0]], [[2.0, 4.0]], [[4.0, 6.0]]]

    # the report scores CCQA through the judge: 3 of 4 points
    judged = vidagent(
        "bench",
        "report",
        str(out),
        "--judge",
        f"fake:echo?reply={JUDGE}",
        "--no-plots",
        "--resamples",
        "0",
        "--json",
        "--out",
        str(tmp_path / "rep"),
        home=tmp_path / "home",
    )
    assert judged.returncode == 0, judged.stderr
    report = json.loads(judged.stdout)["runs"][0]
    tasks = {k: v["score"] for k, v in report["scores"]["sections"]["task"].items()}
    assert tasks == {
        "BU": 100.0,
        "NC": 0.0,
        "PEA": 100.0,
        "PI": 100.0,
        "FSA": 50.0,
        "PSS": 100.0,
        "MSR": 100.0,
        "CCQA": 75.0,
    }
    dims = {k: v["score"] for k, v in report["scores"]["sections"]["dimension"].items()}
    assert dims == pytest.approx({"C.Avg": 200 / 3, "T.Avg": 250 / 3, "M.Avg": 100.0})


def test_the_cli_runs_crossvid_with_cvr(data: Path, tmp_path: Path) -> None:
    replies = [
        json.dumps(
            {
                "action": "observe",
                "thought": "all",
                "params": {
                    "observation_targets": [{"video_index": i, "num_frames": 2} for i in (1, 2, 3)],
                    "focus_prompt": "steps?",
                },
            }
        ),
        json.dumps({"action": "answer", "thought": "done", "final_answer": "2->3->1"}),
    ]
    env = {f"VIDAGENT_{k.upper()}": v for k, v in SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=" + json.dumps(replies)
    env["VIDAGENT_VLM"] = "perception:describer?answer=0"
    out = tmp_path / "run"
    ran = vidagent(
        "bench",
        "run",
        "crossvid",
        "--data",
        str(data),
        "--split",
        "PSS",
        "--strategy",
        "cvr",
        "--out",
        str(out),
        "-q",
        home=tmp_path / "home",
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    assert "PSS" in ran.stdout and "100.0" in ran.stdout
    (row,) = read_rows(out / "predictions.jsonl").values()
    assert row["prediction"] == "2->3->1" and row["correct"] is True and row["frames"] == 6
