"""LVBench: the official rule (a uid missing from the file is left out; a present one, null
included, counts; answers compared as strings) against strict, on a file in the real format."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from vidagent.bench import evaluate, get_benchmark
from vidagent.bench.base import BenchmarkDataError

lvbench = get_benchmark("lvbench")

OPTIONS = "\n(A) red\n(B) blue\n(C) green\n(D) white"
VIDEOS = [
    {
        "key": "abc123",
        "type": "sports",
        "video_info": {"duration_minutes": 70.2},
        "qa": [
            {
                "uid": 1,
                "question": "What colour is the ball?" + OPTIONS,
                "answer": "B",
                "question_type": ["key information retrieval"],
                "time_reference": "00:10-00:12",
            },
            {
                "uid": 2,
                "question": "Who scores first?" + OPTIONS,
                "answer": "A",
                "question_type": ["entity recognition", "temporal grounding"],
                "time_reference": "",
            },
            {
                "uid": 3,
                "question": "Why does the game stop?" + OPTIONS,
                "answer": "D",
                "question_type": ["reasoning"],
                "time_reference": "",
            },
        ],
    },
    {
        "key": "def456",
        "type": "documentary",
        "qa": [
            {
                "uid": 4,
                "question": "When does the storm start?" + OPTIONS,
                "answer": "C",
                "question_type": ["event understanding", "temporal grounding"],
                "time_reference": "",
            },
            {
                "uid": 5,
                "question": "What is the film about?" + OPTIONS,
                "answer": "A",
                "question_type": ["summarization"],
                "time_reference": "",
            },
            {
                "uid": 6,
                "question": "Which tool is used\nat the end?" + OPTIONS,
                "answer": "B",
                "question_type": ["key information retrieval", "reasoning"],
                "time_reference": "",
            },
        ],
    },
]
#: uid 3 unanswered; uid 5 answered with a word, which names no option.
ANSWERS = {"1": "B", "2": "C", "4": "C", "5": "none of them", "6": "B"}


def compute_accuracy(answers: dict[str, str], meta: list[dict]) -> dict[str, float]:
    """LVBench's ``lvbench/metrics/compute_accuracy.py``, its rule written out: every uid in the
    file counts, and an answer is right only when it equals the answer letter."""
    right, total = defaultdict(int), defaultdict(int)
    n_right = n_total = 0
    for video in meta:
        for qa in video["qa"]:
            uid = str(qa["uid"])
            if uid in answers:
                for c in qa["question_type"]:
                    total[c] += 1
                    right[c] += answers[uid] == qa["answer"]
                n_right += answers[uid] == qa["answer"]
                n_total += 1
    return {c: 100.0 * right[c] / total[c] for c in total} | {"acc": 100.0 * n_right / n_total}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "LVBench"
    (folder / "data").mkdir(parents=True)
    lines = "".join(json.dumps(v) + "\n" for v in VIDEOS)
    (folder / "data" / "video_info.meta.jsonl").write_text(lines)
    (folder / "videos").mkdir()
    (folder / "videos" / "abc123.mp4").write_bytes(b"x")
    return folder


def test_official_rule_leaves_unanswered_out_and_strict_counts_them_wrong(
    data: Path, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(ANSWERS))
    loaded = lvbench.load(data)
    scores = evaluate(lvbench, loaded, lvbench.read_predictions(answers, loaded.samples))

    official = compute_accuracy(ANSWERS, VIDEOS)
    assert scores.rule == "answered"
    assert scores.overall.score == pytest.approx(official["acc"]) == 60.0  # 3 of 5 answered
    assert scores.overall.strict == pytest.approx(50.0)  # 3 of 6
    assert scores.missing == 1 and scores.overall.answered == 5

    categories = scores.sections["category"]
    for name, short in lvbench.CATEGORIES.items():
        assert categories[short].score == pytest.approx(official[name]), short
    assert categories["Rea"].score == 100.0 and categories["Rea"].strict == 50.0
    assert categories["TG"].questions == 2  # questions 2 and 4 are in TG and in another category
    assert scores.labels["KIR"] == "key information retrieval"
    types = scores.sections["video type"]
    assert types["sports"].score == 50.0 and types["sports"].strict == pytest.approx(100 / 3)
    assert types["documentary"].score == pytest.approx(200 / 3)


def test_dvd_results_and_runner_rows_read_the_same(data: Path, tmp_path: Path) -> None:
    loaded = lvbench.load(data)
    dvd = tmp_path / "benchmark_results.json"
    dvd.write_text(
        json.dumps(
            {u: {"question": "...", "answer": a, "reasoning": "..."} for u, a in ANSWERS.items()}
        )
    )
    runner = tmp_path / "run.jsonl"
    rows = [{"id": "1", "parsed": 1}, {"id": "2", "parsed": 2}, {"id": "3", "parsed": None}]
    runner.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert lvbench.read_predictions(dvd, loaded.samples) == ANSWERS  # compared as written
    from_runner = evaluate(lvbench, loaded, lvbench.read_predictions(runner, loaded.samples))
    # uid 3's row is written with parsed null: in the file, so it counts (wrong)
    assert from_runner.overall.score == pytest.approx(100 / 3) and from_runner.overall.answered == 3
    assert from_runner.missing == 3


@pytest.mark.parametrize(
    "answers",
    [
        {"1": None, "2": "A", "3": "D"},  # null is present: counted wrong
        {"1": "(B)", "2": "A.", "3": "D ", "4": "C"},  # only the bare letter equals the answer
        {"1": "b", "2": "A", "5": "A", "6": "B"},
    ],
)
def test_the_official_number_is_compute_accuracys_on_every_file(
    answers: dict[str, str | None], data: Path, tmp_path: Path
) -> None:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    loaded = lvbench.load(data)
    scores = evaluate(lvbench, loaded, lvbench.read_predictions(path, loaded.samples))
    official = compute_accuracy(answers, VIDEOS)  # type: ignore[arg-type]
    assert scores.overall.score == pytest.approx(official["acc"])
    assert scores.overall.answered == len(answers)
    for name, short in lvbench.CATEGORIES.items():
        if name in official:
            assert scores.sections["category"][short].score == pytest.approx(official[name])


def test_options_are_split_off_the_question(data: Path) -> None:
    loaded = lvbench.load(data)
    last = loaded.samples[-1]
    assert last.question == "Which tool is used\nat the end?"
    assert last.options == ("red", "blue", "green", "white") and last.answer == 1
    assert last.categories == ("KIR", "Rea") and last.extras["video_type"] == "documentary"
    assert lvbench.prompt(last).endswith("at the end?\n(A) red\n(B) blue\n(C) green\n(D) white")
    assert loaded.samples[0].videos == (data / "videos" / "abc123.mp4",)
    assert loaded.missing_samples == 3  # def456 is not there


def test_a_question_type_that_is_no_list_is_refused(data: Path) -> None:
    # Iterated as compute_accuracy.py does, "reasoning" would count under r, e, a, s, o, n, i, g.
    meta = data / "data" / "video_info.meta.jsonl"
    videos = [json.loads(line) for line in meta.read_text().splitlines()]
    videos[0]["qa"][0]["question_type"] = "reasoning"
    meta.write_text("".join(json.dumps(v) + "\n" for v in videos))
    uid = videos[0]["qa"][0]["uid"]
    with pytest.raises(BenchmarkDataError, match=rf"question {uid}: question_type is not a list"):
        lvbench.load(data)
