"""NExT-QA on the real val annotations and HGA's real predictions."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from vidagent.bench import evaluate, get_benchmark
from vidagent.bench.base import BenchmarkDataError
from vidagent.bench.predictions import read_id_list

nextqa = get_benchmark("nextqa")

#: HGA (BERT-FT) on val, as NExT-QA's README publishes it (the numbers ``eval_mc.py`` prints).
PUBLISHED_HGA = {"C": 46.26, "T": 50.74, "D": 59.33, "overall": 49.74}


def eval_mc(val_csv: Path, preds: dict[str, int], ids: set[str] | None = None) -> dict[str, float]:
    """Accuracy per type, group and overall computed here, the way ``eval_mc.py`` computes it."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    with val_csv.open(newline="") as f:
        for row in csv.DictReader(f):
            qid = f"{row['video']}_{row['qid']}"
            if ids is not None and qid not in ids:
                continue
            qtype = "TN" if row["type"] == "TP" else row["type"]
            ok = preds.get(qid) == int(row["answer"])
            for key in (qtype, qtype[0], "overall"):
                total[key] += 1
                right[key] += ok
    return {k: 100.0 * right[k] / total[k] for k in total}


@pytest.fixture
def val(shared_benchmarks: Path) -> Path:
    return shared_benchmarks / "nextqa"


@pytest.fixture
def hga(val: Path) -> dict[str, int]:
    raw = json.loads((val / "hga_val_predictions.json").read_text())
    return {k: v["prediction"] for k, v in raw.items()}


def test_hga_val_reproduces_the_published_accuracy_per_group(
    val: Path, hga: dict[str, int]
) -> None:
    loaded = nextqa.load(val, split="val")
    assert len(loaded.samples) == 4996
    scores = evaluate(
        nextqa, loaded, nextqa.read_predictions(val / "hga_val_predictions.json", loaded.samples)
    )

    groups = scores.sections["group"]
    got = {k: round(groups[k].score, 2) for k in "CTD"} | {
        "overall": round(scores.overall.score, 2)
    }
    assert got == PUBLISHED_HGA

    expected = eval_mc(val / "val.csv", hga)
    for qtype in ("CW", "CH", "TN", "TC", "DC", "DL", "DO"):
        assert scores.sections["type"][qtype].score == pytest.approx(expected[qtype])
    assert list(scores.sections["type"]) == ["CW", "CH", "TN", "TC", "DC", "DL", "DO"]
    assert scores.sections["type"]["TN"].questions == 895 + 54  # TP merged into TN
    assert scores.labels["TN"] == "Bef&Aft" and scores.rule == "all"
    assert scores.missing == 0 and scores.overall.strict == scores.overall.score


def test_every_prediction_format_gives_the_same_numbers(
    val: Path, hga: dict[str, int], tmp_path: Path
) -> None:
    loaded = nextqa.load(val)
    indices = tmp_path / "indices.json"
    indices.write_text(json.dumps(hga))
    runner = tmp_path / "run.jsonl"
    runner.write_text(
        "".join(json.dumps({"id": k, "parsed": v, "raw": "..."}) + "\n" for k, v in hga.items())
    )
    results = [
        evaluate(nextqa, loaded, nextqa.read_predictions(path, loaded.samples)).overall.score
        for path in (indices, runner)
    ]
    assert results == [pytest.approx(PUBLISHED_HGA["overall"], abs=0.005)] * 2


def test_values_compare_as_eval_mc_compares_them(val: Path, tmp_path: Path) -> None:
    """``eval_mc.py`` counts ``answer == pred``: a letter is never an index, True is 1, and the
    reference is the ``answer`` the result file carries."""
    loaded = nextqa.load(val)
    first, second, third = loaded.samples[:3]
    results = {
        first.id: {"prediction": "ABCDE"[first.answer], "answer": first.answer},  # type: ignore[index]
        second.id: {"prediction": True, "answer": 1},
        third.id: {"prediction": 4, "answer": 4},  # the file's reference, whatever the CSV says
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    outcomes = nextqa.score(loaded.samples[:3], nextqa.read_predictions(path, loaded.samples))
    assert [o.earned for o in outcomes] == [0.0, 1.0, 1.0]


def test_missing_and_unparsable_predictions_count_as_wrong(val: Path, hga: dict[str, int]) -> None:
    loaded = nextqa.load(val)
    kept = dict(list(hga.items())[:4000])
    preds: dict[str, object] = {**kept, **dict.fromkeys(list(hga)[4000:4100])}  # 100 unparsable
    scores = evaluate(nextqa, loaded, preds)
    assert scores.missing == 996
    assert scores.overall.answered == 4000
    assert scores.overall.score == pytest.approx(eval_mc(val / "val.csv", kept)["overall"])


def test_atp_hard_id_list_scores_only_those_questions(
    val: Path, hga: dict[str, int], tmp_path: Path
) -> None:
    with (val / "val.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["type"] in ("CW", "TN", "TP", "TC")][::7]
    ids = {f"{r['video']}_{r['qid']}" for r in rows}
    as_lines = tmp_path / "atp_hard.txt"
    as_lines.write_text("\n".join(sorted(ids)) + "\n")
    as_csv = tmp_path / "atp_hard.csv"
    as_csv.write_text(
        "video,qid,type\n" + "".join(f"{r['video']},{r['qid']},{r['type']}\n" for r in rows)
    )
    expected = eval_mc(val / "val.csv", hga, ids)
    for path in (as_lines, as_csv):
        subset = nextqa.load(val).only(read_id_list(path))
        assert len(subset.samples) == len(ids)
        scores = evaluate(nextqa, subset, hga)
        assert scores.overall.score == pytest.approx(expected["overall"])
        assert set(scores.sections["group"]) == {"C", "T"}  # no descriptive questions listed
        assert scores.sections["group"]["T"].score == pytest.approx(expected["T"])


def test_ids_outside_the_split_are_reported(val: Path) -> None:
    loaded = nextqa.load(val).only(["4010069381_6", "no_such_1"])
    assert [s.id for s in loaded.samples] == ["4010069381_6"]
    assert loaded.notes == ("1 listed id is not a nextqa val question",)
    with pytest.raises(BenchmarkDataError, match="none of the 1 listed ids"):
        nextqa.load(val).only(["no_such_1"])


def test_samples_prompt_and_missing_videos(val: Path, tmp_path: Path) -> None:
    (tmp_path / "0000").mkdir()
    (tmp_path / "0000" / "4010069381.mp4").write_bytes(b"x")  # found by stem in a sub-folder
    loaded = nextqa.load(val, videos=tmp_path)
    first = loaded.samples[0]
    assert first.id == "4010069381_6" and first.answer == 0 and first.categories == ("CH", "C")
    assert first.videos == (tmp_path / "0000" / "4010069381.mp4",)
    assert nextqa.prompt(first) == (
        "how do the two man play the instrument\n(A) roll the handle\n(B) tap their feet\n"
        "(C) strum the string\n(D) hit with sticks\n(E) pat with hand"
    )
    videos = {s.extras["video"] for s in loaded.samples}
    with_video = sum(s.extras["video"] == "4010069381" for s in loaded.samples)
    assert loaded.missing_samples == len(loaded.samples) - with_video
    assert len(loaded.runnable()) == with_video
    assert {m.path.name for m in loaded.missing} == {f"{v}.mp4" for v in videos - {"4010069381"}}


def test_vidor_map_places_videos_in_their_folders(val: Path, tmp_path: Path) -> None:
    data = tmp_path / "nextqa"
    data.mkdir()
    with (val / "val.csv").open() as f:
        data.joinpath("val.csv").write_text("".join(f.readlines()[:3]))
    (data / "map_vid_vidorID.json").write_text(json.dumps({"4010069381": "1009/4010069381"}))
    root = tmp_path / "vids"
    (root / "1009").mkdir(parents=True)
    (root / "1009" / "4010069381.mp4").write_bytes(b"x")
    loaded = nextqa.load(tmp_path, videos=root)  # the CSV may sit in data/nextqa
    assert loaded.samples[0].videos == (root / "1009" / "4010069381.mp4",)
    assert [m.sample_id for m in loaded.missing] == [loaded.samples[1].id]
