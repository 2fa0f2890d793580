"""Tiny benchmarks built by the tests: generated videos, known answers, official file formats."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from factories import INDEX_SPECS

from vidagent.config import Settings, load_settings
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter

#: Index with fast fakes; the llm is each test's own.
SPECS = {k: v for k, v in INDEX_SPECS.items() if k != "llm"}  # the llm is each run's own

#: NExT-QA rows: (video, qid, question, answer index, type). Video v3 is never generated.
NEXTQA = [
    ("v1", 0, "what colour is the ball", 1, "CW"),
    ("v1", 1, "how many people are there", 1, "DC"),
    ("v1", 2, "when does the light turn on", 0, "TC"),
    ("v2", 0, "why does the man wave", 1, "CW"),
    ("v2", 1, "what happens after the door opens", 2, "TN"),
    ("v3", 0, "where is the dog", 1, "DL"),
]
RUNNABLE = {f"{v}_{q}" for v, q, *_ in NEXTQA if v != "v3"}
HEADER = "video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4"


def make_videos(folder: Path, *names: str) -> None:
    from vidagent.media.synth import make_video

    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        make_video(folder / f"{name}.mp4", duration=3, size=(160, 96), fps=10)


def make_nextqa(data: Path) -> Path:
    """``data/val.csv`` in NExT-QA's format and videos v1, v2 (not v3) in ``data/videos``."""
    make_videos(data / "videos", "v1", "v2")
    with (data / "val.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER.split(","))
        for video, qid, question, answer, qtype in NEXTQA:
            writer.writerow(
                [
                    video,
                    30,
                    160,
                    96,
                    question,
                    answer,
                    qid,
                    qtype,
                    "zero",
                    "one",
                    "two",
                    "three",
                    "four",
                ]
            )
    return data


def make_lvbench(data: Path, questions: list[dict[str, Any]]) -> Path:
    """``data/video_info.meta.jsonl`` in LVBench's format, one line per video key."""
    keys = sorted({q["key"] for q in questions})
    make_videos(data / "videos", *keys)
    with (data / "video_info.meta.jsonl").open("w", encoding="utf-8") as f:
        for key in keys:
            qa = [{k: v for k, v in q.items() if k != "key"} for q in questions if q["key"] == key]
            f.write(json.dumps({"key": key, "type": "cartoon", "qa": qa}) + "\n")
    return data


def settings_with(llm: str = "fake:echo?reply=B", **more: Any) -> Settings:
    return load_settings({**SPECS, "llm": llm, **more})


def hub(settings: Settings, llm: FakeAdapter) -> Models:
    """Every role a fake; ``llm`` is the test's."""
    return Models.from_adapters(
        {
            "llm": llm,
            "vlm": FakeAdapter("echo", {"reply": "a frame"}),
            "embed": FakeAdapter("hash", {"dim": "32"}),
            "asr": FakeAdapter("echo", {"text": "hello there"}),
            "ocr": FakeAdapter(),
            "detector": FakeAdapter(),
        },
        settings,
    )


def rows_in(path: Path) -> list[dict[str, Any]]:
    """Every line of a predictions file, duplicates included."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
