"""Charades-STA: R@1 at IoU 0.3/0.5/0.7 and mIoU on lines in the official format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vidagent.bench import evaluate, get_benchmark
from vidagent.bench.base import BenchmarkDataError

charades = get_benchmark("charades_sta")

LINES = """\
3MSZA 24.3 30.4##person turn a light on.
3MSZA 24.3 30.4##person flipped the light switch near the door.
AO8RW 0.0 6.9##a person is putting a book on a shelf.
0IH69 10.0 20.0##a person opens a door.
J30YV 5.0 15.0##person sitting on a chair.
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "charades_sta_test.txt").write_text(LINES)
    return tmp_path


def calculate_iou(i0: Any, i1: Any) -> float:
    """The Charades-STA authors' IoU (TALL ``main.py``), its rule written out: no clamp."""
    union = (min(i0[0], i1[0]), max(i0[1], i1[1]))
    inter = (max(i0[0], i1[0]), min(i0[1], i1[1]))
    return (inter[1] - inter[0]) / (union[1] - union[0])


def test_a_string_pair_is_not_an_interval(data: Path, tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text(json.dumps({"3MSZA_0": "24.3,30.4"}))
    loaded = charades.load(data)
    (first,) = charades.score(loaded.samples[:1], charades.read_predictions(path, loaded.samples))
    assert first.earned == 0.0 and first.answered


def test_recall_at_each_threshold_and_mean_iou(data: Path, tmp_path: Path) -> None:
    preds = {
        "3MSZA_0": [24.3, 30.4],  # IoU 1
        "3MSZA_1": [27.35, 33.45],  # overlap 3.05 over 9.15 -> 1/3
        "AO8RW_0": [6.9, 0.0],  # reversed: calculate_IoU gives -1, a miss (0 in mIoU)
        "0IH69_0": [12.0, 20.0],  # 8 / 10 = 0.8
        # J30YV_0 unanswered: IoU 0
    }
    path = tmp_path / "preds.json"
    path.write_text(json.dumps(preds))
    loaded = charades.load(data)
    scores = evaluate(charades, loaded, charades.read_predictions(path, loaded.samples))
    ious = [1.0, 1 / 3, 0.0, 0.8, 0.0]
    assert scores.metric == "mIoU"
    assert scores.overall.score == pytest.approx(100 * sum(ious) / 5)
    assert scores.extra == pytest.approx(
        {"R@1 IoU=0.3": 60.0, "R@1 IoU=0.5": 40.0, "R@1 IoU=0.7": 40.0}
    )
    # R@1 is the dataset authors' rule on every prediction: calculate_IoU(gt, pred) >= m
    gts = {s.id: s.answer for s in loaded.samples}
    for m, recall in ((0.3, 60.0), (0.5, 40.0), (0.7, 40.0)):
        hits = sum(calculate_iou(gts[k], v) >= m for k, v in preds.items())
        assert 100.0 * hits / 5 == recall
    assert scores.missing == 1


def test_ids_count_each_videos_queries(data: Path) -> None:
    loaded = charades.load(data, videos=data / "none")
    assert [s.id for s in loaded.samples] == ["3MSZA_0", "3MSZA_1", "AO8RW_0", "0IH69_0", "J30YV_0"]
    first = loaded.samples[0]
    assert first.answer == (24.3, 30.4) and first.task == "interval"
    assert first.question == "person turn a light on."
    assert '"person turn a light on."' in charades.prompt(first)
    assert loaded.missing_samples == 5 and loaded.missing[0].path == data / "none" / "3MSZA.mp4"


def test_unreadable_answers_score_zero_and_bad_lines_fail(data: Path, tmp_path: Path) -> None:
    loaded = charades.load(data)
    outcomes = charades.score(loaded.samples, {"3MSZA_0": "about 25 s", "3MSZA_1": (1.0,)})
    assert [o.earned for o in outcomes[:2]] == [0.0, 0.0] and outcomes[0].answered
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "charades_sta_test.txt").write_text("3MSZA 24.3 person turns on a light\n")
    with pytest.raises(BenchmarkDataError, match="line 1: expected 'video start end##sentence'"):
        charades.load(tmp_path / "bad")


def test_avi_grounds_each_sentence_and_the_run_scores_r_at_m_and_miou(tmp_path: Path) -> None:
    from benchkit import make_videos, settings_with

    from vidagent.app.benchmarks import RunConfig, run_benchmark

    data = tmp_path / "data"
    data.mkdir()
    (data / "charades_sta_test.txt").write_text(
        "V1 1.0 2.5##a person waves.\nV2 0.5 1.0##a door opens.\n"
    )
    make_videos(data / "videos", "V1", "V2")
    log = tmp_path / "calls.jsonl"
    # No tool call in retrieve or perceive moves on; review answers in AVI's grounding format.
    reply = "**Answer:**[1.0s,2.0s]"
    settings = settings_with(f"fake:echo?reply={reply}&log={log}")
    summary = run_benchmark(
        RunConfig("charades_sta", data, strategy="avi"), settings=settings, out=tmp_path / "run"
    )
    assert summary.errors == 0 and summary.scores is not None
    # V1: IoU([1, 2], [1, 2.5]) = 1/1.5; V2: IoU([1, 2], [0.5, 1]) = 0.
    assert summary.scores.overall.score == pytest.approx(100 * (1 / 1.5) / 2, abs=0.01)
    assert summary.scores.extra == {"R@1 IoU=0.3": 50.0, "R@1 IoU=0.5": 50.0, "R@1 IoU=0.7": 0.0}
    asked = [json.loads(line)["text"] for line in log.read_text().splitlines()]
    assert sum('Localize this event in the video: "a person waves."' in a for a in asked) == 1
