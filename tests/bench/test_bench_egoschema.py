"""EgoSchema on the real subset answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vidagent.bench import evaluate, get_benchmark
from vidagent.bench.base import BenchmarkDataError

egoschema = get_benchmark("egoschema")


@pytest.fixture
def answers(shared_benchmarks: Path) -> dict[str, int]:
    return json.loads((shared_benchmarks / "egoschema" / "subset_answers.json").read_text())


def test_subset_accuracy_from_a_json_and_a_kaggle_csv(
    shared_benchmarks: Path, answers: dict[str, int], tmp_path: Path
) -> None:
    uids = sorted(answers)
    preds = {u: answers[u] for u in uids[:300]}  # 300 right
    preds |= {u: (answers[u] + 1) % 5 for u in uids[300:450]}  # 150 wrong; 50 unanswered
    right = sum(preds[u] == answers[u] for u in preds)
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps(preds))
    as_csv = tmp_path / "submission.csv"
    as_csv.write_text("q_uid,answer\n" + "".join(f"{u},{a}\n" for u, a in preds.items()))

    loaded = egoschema.load(shared_benchmarks / "egoschema")
    assert len(loaded.samples) == 500 and loaded.samples[0].question == ""
    assert loaded.notes == (
        "questions.json not found: the subset has answers but no question text",
    )
    for path in (as_json, as_csv):
        scores = evaluate(egoschema, loaded, egoschema.read_predictions(path, loaded.samples))
        assert scores.overall.score == pytest.approx(100.0 * right / 500) == 60.0
        assert scores.overall.answered == 450 and scores.missing == 50


def test_predictions_that_name_no_option_are_counted_in_a_note(
    shared_benchmarks: Path, answers: dict[str, int], tmp_path: Path
) -> None:
    """A sixth letter, an index past the five options and free text count wrong, as the official
    comparison counts them, and a note says how many: without question text too."""
    uids = sorted(answers)
    preds: dict[str, object] = {u: answers[u] for u in uids}
    preds |= {uids[0]: "Z", uids[1]: 7, uids[2]: "maybe", uids[3]: "E"}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(preds))
    loaded = egoschema.load(shared_benchmarks / "egoschema")
    scores = evaluate(egoschema, loaded, egoschema.read_predictions(path, loaded.samples))
    assert scores.overall.answered == 500
    assert scores.overall.score == pytest.approx(100.0 * (497 - (answers[uids[3]] != 4)) / 500)
    assert scores.notes[-1] == (
        "3 predictions name none of the question's options (e.g. 25 (Z), 7 (H), 'maybe') "
        "and count wrong"
    )
    right = {u: answers[u] for u in uids}
    path.write_text(json.dumps(right))
    scores = evaluate(egoschema, loaded, egoschema.read_predictions(path, loaded.samples))
    assert not any("options" in note for note in scores.notes)


def test_json_and_csv_read_a_value_the_same_way(
    shared_benchmarks: Path, answers: dict[str, int], tmp_path: Path
) -> None:
    """An index, a digit string and a letter mean the same option in a JSON file and a CSV."""
    uids = sorted(answers)[:3]
    written = [str(answers[uids[0]]), "ABCDE"[answers[uids[1]]], answers[uids[2]]]
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps(dict(zip(uids, written, strict=False))))
    as_csv = tmp_path / "p.csv"
    as_csv.write_text(
        "q_uid,answer\n" + "".join(f"{u},{w}\n" for u, w in zip(uids, written, strict=False))
    )
    loaded = egoschema.load(shared_benchmarks / "egoschema")
    read = [egoschema.read_predictions(path, loaded.samples) for path in (as_json, as_csv)]
    assert read[0] == read[1] == {u: answers[u] for u in uids}


def _questions(tmp_path: Path, answers: dict[str, int]) -> Path:
    labelled = sorted(answers)[:2]
    rows = [
        {"q_uid": uid, "google_drive_id": "g", "question": f"What did C do? ({uid[:4]})"}
        | {f"option {i}": f"option text {i}" for i in range(5)}
        for uid in [*labelled, "unlabelled-uid"]
    ]
    data = tmp_path / "egoschema"
    data.mkdir()
    (data / "questions.json").write_text(json.dumps(rows))
    (data / "subset_answers.json").write_text(json.dumps({u: answers[u] for u in labelled}))
    return data


def test_full_split_scores_only_the_public_answers(answers: dict[str, int], tmp_path: Path) -> None:
    data = _questions(tmp_path, answers)
    (data / "videos").mkdir()
    (data / "videos" / "unlabelled-uid.mp4").write_bytes(b"x")
    full = egoschema.load(data, split="full")
    assert [s.answer is None for s in full.samples] == [False, False, True]
    assert full.missing_samples == 2 and full.runnable()[0].id == "unlabelled-uid"
    assert egoschema.prompt(full.samples[2]).splitlines()[1:3] == [
        "(A) option text 0",
        "(B) option text 1",
    ]
    first = full.samples[0]
    scores = evaluate(egoschema, full, {first.id: first.answer, "unlabelled-uid": 0})
    assert scores.overall.questions == 2 and scores.overall.score == 50.0
    assert "1 questions without a public answer left out" in scores.notes
    subset = egoschema.load(data)
    assert [s.id for s in subset.samples] == [s.id for s in full.samples[:2]]


def test_full_split_needs_the_questions_file(shared_benchmarks: Path) -> None:
    with pytest.raises(BenchmarkDataError, match="questions.json not found"):
        egoschema.load(shared_benchmarks / "egoschema", split="full")


def test_a_split_without_answers_cannot_be_scored(answers: dict[str, int], tmp_path: Path) -> None:
    data = _questions(tmp_path, answers)
    (data / "subset_answers.json").unlink()
    with pytest.raises(BenchmarkDataError, match="no public answers"):
        evaluate(egoschema, egoschema.load(data, split="full"), {"unlabelled-uid": 1})


def test_csv_without_the_kaggle_columns_is_refused(shared_benchmarks: Path, tmp_path: Path) -> None:
    bad = tmp_path / "p.csv"
    bad.write_text("id,pred\nx,1\n")
    with pytest.raises(BenchmarkDataError, match="q_uid,answer"):
        egoschema.read_predictions(bad, ())
