"""TimeLens-Bench: our scorer against ``evaluation/compute_metrics.py``'s rules on one file, and
Charades-TimeLens read beside the original Charades-STA spans."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from vidagent.bench import evaluate, get_benchmark
from vidagent.bench.base import BenchmarkDataError
from vidagent.bench.tasks.timelens import extract_time

timelens = get_benchmark("timelens")
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "timelens"


def official_metrics(datas: dict[str, Any], timestamps_of: Any) -> dict[str, float]:
    """``compute_metrics.py``'s loop, written out from its published code: the gold span from
    the key, the first predicted pair (``(-100, -100)`` when none), ``timelens.utils.iou``, and
    every entry of the file in the denominator."""
    ious = []
    for key, pred in datas.items():
        _, _, gt_text = key.split(">>>")
        gt = json.loads(gt_text)
        pairs = timestamps_of(pred) or [(-100, -100)]
        a, b = gt, pairs[0]
        inter = max(min(a[1], b[1]) - max(a[0], b[0]), 0)
        ious.append(inter / (max(a[1], b[1]) - min(a[0], b[0])))
    n = len(datas)
    out = {f"R@1 IoU={m}": sum(i >= m for i in ious) * 100 / n for m in (0.3, 0.5, 0.7)}
    return out | {"mIoU": sum(ious) * 100 / n}


def official_pairs(pred: dict[str, Any]) -> Any:
    return pred["timestamps"] if "timestamps" in pred else extract_time(pred["answers"])


#: Keys as ``eval_dataloader.py`` writes them: ``<video>.mp4>>><query>>>><span>``.
RESULTS = {
    "3MSZA.mp4>>>A person turns on the light by the door>>>[24.0, 30.5]": {
        "timestamps": [[24.0, 30.0], [0.0, 1.0]],  # the first pair is scored
        "answers": "The event happens in 24.0 - 30.0 seconds.",
    },
    "3MSZA.mp4>>>A person walks into the room holding a towel>>>[0.0, 6.2]": {
        "answers": "The event happens in 00:01 - 00:05 seconds."  # read from the text: (1, 5)
    },
    "AO8RW.mp4>>>A person is putting a book on a shelf>>>[1.5, 7.0]": {
        "timestamps": [[7.0, 1.5]]  # reversed: IoU 0
    },
    "0IH69.mp4>>>A person opens a door>>>[10.0, 18.5]": {"timestamps": []},  # none: IoU 0
}


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_metrics_equal_compute_metrics_on_an_official_file(tmp_path: Path) -> None:
    loaded = timelens.load(SAMPLE)
    path = write(tmp_path / "charades-timelens.json", RESULTS)
    scores = evaluate(timelens, loaded, timelens.read_predictions(path, loaded.samples))
    want = official_metrics(RESULTS, official_pairs)
    assert scores.overall.score == pytest.approx(want.pop("mIoU"))
    assert {k: v for k, v in scores.extra.items() if k.startswith("R@1")} == pytest.approx(want)
    assert scores.unknown == 0 and scores.missing == 0
    # By hand: 6/6.5, 4/6.2, 0, 0
    assert scores.overall.score == pytest.approx(100 * (6 / 6.5 + 4 / 6.2) / 4)


def test_the_official_jsonl_and_a_query_it_lacks(tmp_path: Path) -> None:
    entries = list(RESULTS.items())[:2]
    path = tmp_path / "charades-timelens.jsonl"
    path.write_text("\n".join(json.dumps({k: v}) for k, v in entries) + "\n")
    loaded = timelens.load(SAMPLE)
    scores = evaluate(timelens, loaded, timelens.read_predictions(path, loaded.samples))
    want = official_metrics(dict(entries), official_pairs)
    assert scores.overall.score == pytest.approx(want["mIoU"])  # over the file's 2 entries
    assert scores.overall.strict == pytest.approx(want["mIoU"] / 2)  # over all 4 queries
    assert scores.missing == 2


def test_runner_rows_and_null(tmp_path: Path) -> None:
    rows = [
        {"id": "3MSZA_0", "parsed": [24.0, 30.5]},
        {"id": "3MSZA_1", "parsed": None},  # no time in the answer: IoU 0, still counted
    ]
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    loaded = timelens.load(SAMPLE)
    scores = evaluate(timelens, loaded, timelens.read_predictions(path, loaded.samples))
    assert scores.overall.score == pytest.approx(50.0)
    assert scores.extra["R@1 IoU=0.7"] == pytest.approx(50.0)
    assert scores.overall.answered == 2 and scores.missing == 2


def test_charades_is_read_both_ways_on_the_same_queries(tmp_path: Path) -> None:
    loaded = timelens.load(SAMPLE)
    # The original file beside it: two queries match by text; "turns on the light by the door"
    # re-words Charades-STA's "turn a light on", and the towel query has no original.
    matched = {
        s.id: s.extras["original_span"] for s in loaded.samples if "original_span" in s.extras
    }
    assert matched == {"AO8RW_0": (0.0, 6.9), "0IH69_0": (10.0, 20.0)}
    assert loaded.notes == ("2 of 4 queries match a Charades-STA test query",)
    path = write(tmp_path / "p.json", {"AO8RW_0": [1.5, 7.0], "0IH69_0": [10.0, 20.0]})
    scores = evaluate(timelens, loaded, timelens.read_predictions(path, loaded.samples))
    both = scores.sections["original"]
    assert both["TimeLens spans"].score == pytest.approx(100 * (1.0 + 8.5 / 10) / 2)
    assert both["Charades-STA spans"].score == pytest.approx(100 * (5.4 / 7.0 + 1.0) / 2)
    assert both["TimeLens spans"].questions == 2
    assert scores.extra["Charades-STA spans, same queries: R@1 IoU=0.7"] == pytest.approx(100.0)
    assert scores.extra["TimeLens spans, same queries: R@1 IoU=0.7"] == pytest.approx(100.0)
    # Without the original file there is no such section
    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(SAMPLE / "charades-timelens.json", only)
    plain = timelens.load(only)
    assert plain.notes == ()
    assert "original" not in evaluate(timelens, plain, {"AO8RW_0": (1.5, 7.0)}).sections


def test_ids_queries_videos_and_prompt() -> None:
    loaded = timelens.load(SAMPLE)
    assert [s.id for s in loaded.samples] == ["3MSZA_0", "3MSZA_1", "AO8RW_0", "0IH69_0"]
    second = loaded.samples[1]
    assert second.question == "A person walks into the room holding a towel"  # parse_query
    assert second.answer == (0.0, 6.2) and second.task == "interval"
    assert loaded.missing[0].path == SAMPLE / "videos" / "charades" / "3MSZA.mp4"
    assert '"A person walks into the room holding a towel"' in timelens.prompt(second)


def test_extract_time_follows_the_official_order() -> None:
    assert extract_time("The event happens in 0:05 - 1:02:03.5 seconds") == [(5.0, 3723.5)]
    assert extract_time("from 3.5 to 9 seconds") == [(3.5, 9.0)]
    assert extract_time("Starting time: 0.8 seconds. Ending time: 1.1 seconds") == [(0.8, 1.1)]
    assert extract_time("12 - 15 and 20 - 25") == [(12.0, 15.0), (20.0, 25.0)]
    # One clock time makes no pair, so the numbers are paired instead: 0, 05, 7, 9
    assert extract_time("0:05 only, then 7 and 9") == [(0.0, 5.0), (7.0, 9.0)]
    assert extract_time("no time here") == []


def test_bad_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkDataError, match="charades-timelens.json not found"):
        timelens.load(tmp_path)
    with pytest.raises(Exception, match="no split 'test'"):
        timelens.load(SAMPLE, split="test")
    path = write(tmp_path / "p.json", {"a.mp4>>>q": {"timestamps": [[0, 1]]}})
    with pytest.raises(BenchmarkDataError, match="is not '<video>>>><query>>>><span>'"):
        timelens.read_predictions(path, ())


def test_random_files_score_as_compute_metrics(tmp_path: Path) -> None:
    """Random official files (a random subset of the queries; first pairs near the span or not,
    reversed, several pairs, none; answers-only entries) against the written-out loop."""
    rng = random.Random(0)
    loaded = timelens.load(SAMPLE)
    keys = list(RESULTS)
    spans = [json.loads(k.split(">>>")[2]) for k in keys]
    for trial in range(300):
        doc: dict[str, Any] = {}
        for key, (s, e) in zip(keys, spans, strict=True):
            if rng.random() < 0.3:
                continue
            pairs = [
                [round(s + rng.uniform(-4, 4), 1), round(e + rng.uniform(-4, 4), 1)]
                for _ in range(rng.choice([0, 1, 1, 2]))
            ]
            if rng.random() < 0.5:
                doc[key] = {"timestamps": pairs}
            else:
                text = " and ".join(f"{a} - {b}" for a, b in pairs) or "I cannot tell."
                doc[key] = {"answers": f"The event happens in {text} seconds."}
        if not doc:
            continue
        path = write(tmp_path / f"r{trial}.json", doc)
        scores = evaluate(timelens, loaded, timelens.read_predictions(path, loaded.samples))
        want = official_metrics(doc, official_pairs)
        assert scores.overall.score == pytest.approx(want.pop("mIoU")), doc
        got = {k: v for k, v in scores.extra.items() if k.startswith("R@1")}
        assert got == pytest.approx(want), doc


def test_several_predicted_spans_score_as_timelens2_does(tmp_path: Path) -> None:
    """TimeLens2's multi-span IoU: the predicted spans merged, the time shared with the gold span
    over the time either covers; one span in a list scores as that span."""
    loaded = timelens.load(SAMPLE)
    gold = {s.id: s.answer for s in loaded.samples}
    (g0, g1), (h0, h1) = gold["3MSZA_0"], gold["3MSZA_1"]
    length = g1 - g0
    preds = {
        "3MSZA_0": [[g0, (g0 + g1) / 2], [(g0 + g1) / 2 - 0.5, g1]],  # two overlapping halves: 1
        "3MSZA_1": [[h0, h1], [h1 + 10, h1 + 20]],  # the gold span and 10 s elsewhere
    }
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(preds))
    outcomes = timelens.score(loaded.samples, timelens.read_predictions(path, loaded.samples))
    iou = {o.id: o.earned for o in outcomes if o.answered}
    assert iou["3MSZA_0"] == pytest.approx(1.0)  # the first pair alone would give about 0.5
    assert iou["3MSZA_1"] == pytest.approx((h1 - h0) / (h1 - h0 + 10))
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"3MSZA_0": [[g0, g0 + length / 2]]}))
    (one,) = [
        o
        for o in timelens.score(loaded.samples, timelens.read_predictions(single, loaded.samples))
        if o.answered
    ]
    assert one.earned == pytest.approx(0.5)
