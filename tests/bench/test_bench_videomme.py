"""Video-MME: a parquet file in the dataset's own form, scored like ``eval_your_results.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vidagent.bench import evaluate, get_benchmark

videomme = get_benchmark("videomme")

OPTS = ["A. A red car.", "B. A blue bus.", "C. A bike.", "D. Nothing."]


def _row(qid: str, video: str, duration: str, domain: str, task: str, answer: str) -> dict:
    return {
        "video_id": qid.split("-")[0], "duration": duration, "domain": domain,
        "sub_category": "Football" if domain == "Sports Competition" else "Astronomy",
        "url": f"https://www.youtube.com/watch?v={video}", "videoID": video, "question_id": qid,
        "task_type": task, "question": f"Question {qid}?", "options": OPTS, "answer": answer,
    }  # fmt: skip


ROWS = [
    _row("001-1", "vidShort1", "short", "Knowledge", "Counting Problem", "A"),
    _row("001-2", "vidShort1", "short", "Knowledge", "OCR Problems", "B"),
    _row("001-3", "vidShort1", "short", "Knowledge", "Counting Problem", "C"),
    _row("601-1", "vidLong01", "long", "Sports Competition", "Action Reasoning", "B"),
    _row("601-2", "vidLong01", "long", "Sports Competition", "Counting Problem", "D"),
    _row("601-3", "vidLong01", "long", "Sports Competition", "Action Reasoning", "B"),
]
#: Responses and the letter the official rule reads from each (worked out by hand).
RESPONSES = {
    "001-1": ("The best answer is A", "A"),
    "001-2": ("Clearly it is B.", "C"),  # the first capital A-D anywhere: the C of "Clearly"
    "001-3": ("", ""),  # unanswered
    "601-1": ("Best answer: B", "B"),  # "Best answer:" is never stripped; its B is read
    "601-2": ("i think it is d", ""),  # lower case: no letter, unanswered
    "601-3": ("(C) A bike.", "C"),
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "Video-MME"
    (folder / "videomme").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ROWS), folder / "videomme" / "test-00000-of-00001.parquet")
    (folder / "data").mkdir()
    (folder / "data" / "vidLong01.mkv").write_bytes(b"x")
    (folder / "subtitle").mkdir()
    (folder / "subtitle" / "vidLong01.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nhello\n")
    return folder


def _official_file(path: Path) -> Path:
    videos: dict[str, dict] = {}
    for row in ROWS:
        video = videos.setdefault(row["video_id"], {
            "video_id": row["video_id"], "duration_category": row["duration"],
            "video_category": row["domain"], "video_subcategory": row["sub_category"],
            "questions": [],
        })  # fmt: skip
        video["questions"].append({
            "question_id": row["question_id"], "task_type": row["task_type"],
            "question": row["question"], "choices": OPTS, "answer": row["answer"],
            "response": RESPONSES[row["question_id"]][0],
        })  # fmt: skip
    path.write_text(json.dumps(list(videos.values())))
    return path


def test_official_results_file_scored_like_the_official_script(data: Path, tmp_path: Path) -> None:
    loaded = videomme.load(data)
    preds = videomme.read_predictions(_official_file(tmp_path / "results.json"), loaded.samples)
    read = {qid: "ABCD"[v] if v is not None else "" for qid, v in preds.items()}
    assert read == {qid: letter for qid, (_, letter) in RESPONSES.items()}

    scores = evaluate(videomme, loaded, preds)
    # answered: 001-1 right, 001-2 wrong, 601-1 right, 601-3 wrong; 001-3 and 601-2 left out
    assert scores.overall.score == 50.0 and scores.overall.strict == pytest.approx(100 / 3)
    assert scores.missing == 2 and scores.rule == "answered"
    assert scores.sections["duration"]["short"].score == 50.0
    assert scores.sections["duration"]["long"].score == 50.0
    assert scores.sections["domain"]["Sports Competition"].strict == pytest.approx(100 / 3)
    tasks = scores.sections["task type"]
    assert tasks["Counting Problem"].score == 100.0 and tasks[
        "Counting Problem"
    ].strict == pytest.approx(100 / 3)
    assert tasks["OCR Problems"].score == 0.0 and "Spatial Perception" not in tasks
    assert scores.sections["sub-category"]["Football"].answered == 2


def test_duration_split_subtitles_and_plain_letter_files(data: Path, tmp_path: Path) -> None:
    long = videomme.load(data, split="long", subtitles=True)
    assert long.split == "long+subtitles" and [s.id for s in long.samples] == [
        "601-1",
        "601-2",
        "601-3",
    ]
    first = long.samples[0]
    assert first.videos == (data / "data" / "vidLong01.mkv",) and long.missing == ()
    assert first.extras["subtitle"] == str(data / "subtitle" / "vidLong01.srt")
    assert first.options == ("A red car.", "A blue bus.", "A bike.", "Nothing.")
    assert (
        videomme.prompt(first)
        == "Question 601-1?\n(A) A red car.\n(B) A blue bus.\n(C) A bike.\n(D) Nothing."
    )
    letters = tmp_path / "letters.json"
    letters.write_text(json.dumps({"601-1": "B", "601-2": "(D)", "601-3": None}))
    scores = evaluate(videomme, long, videomme.read_predictions(letters, long.samples))
    assert scores.overall.score == 100.0 and scores.overall.strict == pytest.approx(200 / 3)
    short = videomme.load(data, split="short")
    assert short.missing_samples == 3 and short.missing[0].path == data / "data" / "vidShort1.mp4"


def test_official_letter_rule() -> None:
    assert videomme.official_letter("The correct answer is D.") == "D"
    assert videomme.official_letter("A") == "A"
    assert (
        videomme.official_letter("no idea at all, sorry, honestly I cannot tell from this video")
        == ""
    )
