"""NExT-GQA: the loader on the official annotations (a sample of val, tests/data/nextgqa, MIT) and
the scorer's numbers worked out by hand by ``eval_ground``'s rules. The scorer equals the official
``eval_ground`` on random clean and messy files: ``benchmarks/nextgqa_official.py`` runs both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vidagent.bench import get_benchmark
from vidagent.bench.base import LoadResult, evaluate
from vidagent.bench.tasks.nextgqa import ground

DATA = Path(__file__).resolve().parents[1] / "data" / "nextgqa"
BENCH = get_benchmark("nextgqa")


@pytest.fixture(scope="module")
def loaded() -> LoadResult:
    return BENCH.load(DATA, split="val")


def test_the_loader_reads_questions_with_their_gold_spans(loaded: LoadResult) -> None:
    assert len(loaded.samples) == 32
    s = next(s for s in loaded.samples if s.id == "4882821564_1")
    assert s.options[s.answer] == "unwrap it"  # the CSV names the answer by its text
    assert s.extras["locations"] == [(13.8, 29.8)] and s.categories == ("CW",)
    several = next(s for s in loaded.samples if s.id == "2435100235_1")
    assert len(several.extras["locations"]) == 4
    assert s.videos[0].parts[-2:] == ("1104", "4882821564.mp4")  # map_vid_vidorID.json


def test_get_tiou_rules() -> None:
    assert ground((13.8, 29.8), (13.8, 21.8)) == pytest.approx((0.5, 1.0))
    assert ground((9.7, 11.3), (11.3, 11.3)) == (0.0, 1.0)  # a point on the gold end: inside
    assert ground((9.7, 11.3), (12.0, 12.0)) == (0.0, 0.0)
    assert ground((64.3, 77.6), (77.6, 64.3)) == (0.0, 0.0)  # reversed: nothing


def predictions(loaded: LoadResult) -> dict[str, Any]:
    answer = {s.id: s.answer for s in loaded.samples}
    return {
        # IoU 0.5, IoP 1, right: one point
        "4882821564_1": {"prediction": answer["4882821564_1"], "location": [13.8, 21.8]},
        # a point inside the gold span: IoU 0, IoP 1; right (by its text): one point
        "4882821564_0": {
            "prediction": option_text(loaded, "4882821564_0"),
            "location": [11.3, 11.3],
        },
        # the best of four gold spans, IoU = IoP = 7/8; the answer wrong: no point
        "2435100235_1": {
            "prediction": (answer["2435100235_1"] + 1) % 5,
            "location": [50.0, 58.0],
        },
        # right, but the span reversed: no point
        "4882821564_2": {"prediction": answer["4882821564_2"], "location": [77.6, 64.3]},
        # an answer without a span leaves the denominator, as eval_ground skips it
        "4882821564_3": {"prediction": answer["4882821564_3"]},
    }


def option_text(loaded: LoadResult, sid: str) -> str:
    s = next(s for s in loaded.samples if s.id == sid)
    return s.options[s.answer]


def _check(scores: Any) -> None:
    assert scores.overall.score == pytest.approx(50.0)  # Acc@GQA: 2 of the 4 with a span
    assert scores.overall.strict == pytest.approx(100 * 2 / 32)
    assert scores.extra == pytest.approx(
        {
            "mIoP": 100 * (1 + 1 + 7 / 8 + 0) / 4,
            "IoP@0.3": 75.0,
            "IoP@0.5": 75.0,
            "mIoU": 100 * (0.5 + 0 + 7 / 8 + 0) / 4,
            "IoU@0.3": 50.0,
            "IoU@0.5": 50.0,
            "Acc@QA": 75.0,
        }
    )
    assert scores.missing == 28


def test_scores_by_hand(loaded: LoadResult, tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text(json.dumps(predictions(loaded)))
    _check(evaluate(BENCH, loaded, BENCH.read_predictions(path, loaded.samples)))


def test_the_official_pair_of_files_scores_the_same(loaded: LoadResult, tmp_path: Path) -> None:
    combined = predictions(loaded)
    ground_file = {k: v["location"] for k, v in combined.items() if "location" in v}
    qa = {s.id: {"answer": s.answer, "prediction": None} for s in loaded.samples}
    qa |= {
        k: {"answer": qa[k]["answer"], "prediction": v["prediction"]} for k, v in combined.items()
    }
    (tmp_path / "val_ground.json").write_text(json.dumps(ground_file))
    (tmp_path / "val-res.json").write_text(json.dumps(qa))
    found = BENCH.read_predictions(tmp_path / "val_ground.json", loaded.samples)
    _check(evaluate(BENCH, loaded, found))


def test_runner_rows_use_the_first_evidence_span(loaded: LoadResult, tmp_path: Path) -> None:
    answer = {s.id: s.answer for s in loaded.samples}
    rows = [
        {
            "id": "4882821564_1",
            "parsed": answer["4882821564_1"],
            "error": None,
            "evidence": [["v", 13.8, 21.8], ["v", 80.0, 85.0]],
        },
        {"id": "4882821564_0", "parsed": answer["4882821564_0"], "error": None, "evidence": []},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scores = evaluate(BENCH, loaded, BENCH.read_predictions(path, loaded.samples))
    assert scores.overall.score == 100.0 and scores.overall.answered == 1
    assert scores.extra["mIoU"] == pytest.approx(50.0)
