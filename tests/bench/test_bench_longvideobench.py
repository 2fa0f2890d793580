"""LongVideoBench: duration groups, question categories and the Long subset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vidagent.bench import evaluate, get_benchmark
from vidagent.bench.base import BenchmarkDataError

lvb = get_benchmark("longvideobench")


def _row(qid: str, group: int, category: str, answer: int) -> dict:
    return {
        "video_id": f"v{qid}",
        "question": f"What happens in {qid}?",
        "question_wo_referring_query": "",
        "candidates": ["one", "two", "three", "four"],
        "correct_choice": answer,
        "position": [1],
        "topic_category": "NP-News-Programs",
        "question_category": category,
        "level": "L2-Relation",
        "id": qid,
        "video_path": f"v{qid}.mp4",
        "subtitle_path": f"v{qid}_en.json",
        "duration_group": group,
        "starting_timestamp_for_subtitles": 0,
        "duration": group * 0.9,
    }


ROWS = [
    _row("a1", 15, "S2E", 0),
    _row("a2", 600, "T3O", 1),
    _row("a3", 3600, "S2E", 2),
    _row("a4", 3600, "T3O", 3),
    _row("a5", 3600, "E2O", 0),
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "lvb_val.json").write_text(json.dumps(ROWS))
    test_rows = [{k: v for k, v in r.items() if k != "correct_choice"} for r in ROWS]
    (tmp_path / "lvb_test_wo_gt.json").write_text(json.dumps(test_rows))
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "va3.mp4").write_bytes(b"x")
    return tmp_path


def test_groups_categories_and_unanswered(data: Path, tmp_path: Path) -> None:
    preds = tmp_path / "submission.json"
    preds.write_text(
        json.dumps({"a1": "A", "a2": "C", "a3": "C", "a4": "the fourth one"})
    )  # a5 none
    loaded = lvb.load(data)
    scores = evaluate(lvb, loaded, lvb.read_predictions(preds, loaded.samples))
    assert scores.overall.score == scores.overall.strict == 40.0  # 2 of 5, every question counts
    groups = scores.sections["duration group"]
    assert list(groups) == ["15", "600", "3600"] and groups["3600"].score == pytest.approx(100 / 3)
    assert scores.labels["3600"] == "900-3600 s"
    cats = scores.sections["question category"]
    assert (
        list(cats) == ["E2O", "S2E", "T3O"]
        and cats["S2E"].score == 100.0
        and cats["T3O"].score == 0.0
    )
    assert scores.missing == 1


def test_long_subset_and_paths(data: Path) -> None:
    long = lvb.load(data, subset="long")
    assert long.split == "val-long" and [s.id for s in long.samples] == ["a3", "a4", "a5"]
    a3 = long.samples[0]
    assert a3.videos == (data / "videos" / "va3.mp4",) and a3.answer == 2
    assert a3.extras["subtitle"] == str(data / "subtitles" / "va3_en.json")
    assert long.missing_samples == 2
    assert lvb.prompt(a3) == "What happens in a3?\n(A) one\n(B) two\n(C) three\n(D) four"
    with pytest.raises(BenchmarkDataError, match="the subset is 'long'"):
        lvb.load(data, subset="short")


def test_test_split_has_no_answers_to_score(data: Path) -> None:
    test = lvb.load(data, split="test")
    assert all(s.answer is None for s in test.samples)
    with pytest.raises(BenchmarkDataError, match="no public answers"):
        evaluate(lvb, test, {"a1": 0})
