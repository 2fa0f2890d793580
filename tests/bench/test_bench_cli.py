"""``vidagent bench score`` as a user runs it: a real process, real files, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import vidagent


def test_hga_val_scores_as_published(shared_benchmarks: Path, _isolated_home: Path) -> None:
    val = shared_benchmarks / "nextqa"
    args = (
        "bench",
        "score",
        "nextqa",
        "--data",
        str(val),
        "--predictions",
        str(val / "hga_val_predictions.json"),
    )
    out = vidagent(*args, "--json", home=_isolated_home)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert round(report["overall"]["score"], 2) == 49.74
    groups = {k: round(v["score"], 2) for k, v in report["sections"]["group"].items()}
    assert groups == {"C": 46.26, "T": 50.74, "D": 59.33}
    assert report["overall"]["questions"] == 4996 and report["predictions"] == 4996

    text = vidagent(*args, home=_isolated_home).stdout
    assert text.splitlines()[0] == "NExT-QA val: 4996 questions, 4996 predictions, 0 unanswered"
    assert "accuracy: 49.74  (official rule: every question counts; strict 49.74)" in text
    assert "  C   46.26   46.26   2607/2607   Acc_C" in text


def test_an_id_list_restricts_the_questions(
    shared_benchmarks: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    val = shared_benchmarks / "nextqa"
    ids = tmp_path / "atp_hard.json"
    ids.write_text(json.dumps(["4010069381_6", "4882821564_1"]))  # HGA: wrong, right
    out = vidagent(
        "bench",
        "score",
        "next-qa",
        "--data",
        str(val),
        "--predictions",
        str(val / "hga_val_predictions.json"),
        "--ids",
        str(ids),
        "--json",
        home=_isolated_home,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["overall"]["questions"] == 2 and report["overall"]["score"] == 50.0
    assert (
        "4994 predictions match no question of the listed ids of this split and were ignored"
        in report["notes"]
    )


@pytest.mark.parametrize("rows", [1, 2])
def test_a_runner_file_of_one_row_scores_as_a_longer_one(
    rows: int, shared_benchmarks: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    # One JSONL line is also a whole JSON document: it must still read as one runner row.
    val = shared_benchmarks / "nextqa"
    row = {"id": "4882821564_1", "parsed": 2, "answer": "(C)", "error": None, "steps": 3}
    other = {"id": "4010069381_6", "parsed": 1, "answer": "(B)", "error": None, "steps": 2}
    preds = tmp_path / "predictions.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in [row, other][:rows]))
    out = vidagent(
        "bench",
        "score",
        "nextqa",
        "--data",
        str(val),
        "--predictions",
        str(preds),
        "--json",
        home=_isolated_home,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["predictions"] == rows
    assert report["overall"]["answered"] == rows
    # 4882821564_1's answer is 2 (right), 4010069381_6's is 0 (wrong): one right of 4996 either way
    assert report["overall"]["score"] == round(100 / 4996, 2)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "error: predictions file not found: "),
        ("not json", "neither JSON"),
        ("wrong ids", "error: none of the 1 predictions matches a nextqa val question"),
        ("bad split", "error: nextqa has no split 'train'; choose one of: val, test"),
        ("bad bench", "error: unknown benchmark 'nextqb'; choose one of: egoschema, nextqa"),
        ("latin-1", "p.json: not UTF-8 text (byte 10); save the predictions as UTF-8"),
        ("0 bytes", "p.json: the predictions file is empty"),
        ("{}", "p.json: holds no predictions"),
        ("[]", "p.json: not a predictions file; expected "),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    setup: str, message: str, shared_benchmarks: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    preds = tmp_path / "p.json"
    if setup == "not json":
        preds.write_text("{oops")
    elif setup == "latin-1":
        preds.write_bytes('{"1_0": "Réponse"}'.encode("latin-1"))
    elif setup == "0 bytes":
        preds.write_bytes(b"")
    elif setup in ("{}", "[]"):
        preds.write_text(setup)
    elif setup != "missing":
        preds.write_text(json.dumps({"12345_1": 0}))
    bench = "nextqb" if setup == "bad bench" else "nextqa"
    extra = ("--split", "train") if setup == "bad split" else ()
    out = vidagent(
        "bench",
        "score",
        bench,
        "--data",
        str(shared_benchmarks / "nextqa"),
        "--predictions",
        str(preds),
        *extra,
        home=_isolated_home,
    )
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and message in out.stderr
    assert "Traceback" not in out.stderr


def test_crossvid_open_answers_judged_by_the_configured_model(
    tmp_path: Path, _isolated_home: Path
) -> None:
    (tmp_path / "QA").mkdir()
    rows = [
        {
            "id": 0,
            "video A": "a.mp4",
            "video B": "b.mp4",
            "question": "How do they differ?",
            "answer": "A fries, B boils.",
            "scoring_points": ["A fries", "B boils"],
        }
    ]
    (tmp_path / "QA" / "CCQA.json").write_text(json.dumps(rows))
    preds = tmp_path / "CCQA_result.json"
    preds.write_text(json.dumps([{"id": 0, "answer": "A fries the onions."}]))
    verdict = '<score>{"coverage": [true, false], "correctness": [true, false]}</score>'
    args = (
        "bench",
        "score",
        "crossvid",
        "--data",
        str(tmp_path),
        "--split",
        "CCQA",
        "--predictions",
        str(preds),
    )
    out = vidagent(*args, "--judge", f"fake:echo?reply={verdict}", "--json", home=_isolated_home)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sections"]["task"]["CCQA"]["score"] == 50.0
    env = {"VIDAGENT_LLM": f"fake:echo?reply={verdict}"}  # without --judge: the llm role
    assert (
        json.loads(vidagent(*args, "--json", home=_isolated_home, env=env).stdout)["overall"][
            "score"
        ]
        == 50.0
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("answer x", "{data}: not in the benchmark's format (invalid literal for int() with"),
        ("no question", "{data}: not in the benchmark's format (no 'question')"),
        ("latin-1", "{data}: not UTF-8 text (byte "),
        ("bom", None),  # as a spreadsheet saves it: read as it is
        ("header only", "nextqa val: the annotation files hold no question"),
        # each was read and scored wrong whatever was answered; two rows of one id disagreed
        ("answer 7", "{data}: question '4010069381_6': answer 7 is not one of its 5 options"),
        ("answer -1", "{data}: question '4010069381_6': answer -1 is not one of its 5 options"),
        ("blank option", "{data}: question '4010069381_6': option 2 is empty"),
        ("duplicate", "{data}: question id '4010069381_6' is given twice; ids must be unique"),
    ],
)
def test_an_annotation_file_out_of_its_format_is_one_line(
    change: str,
    message: str | None,
    shared_benchmarks: Path,
    tmp_path: Path,
    _isolated_home: Path,
) -> None:
    lines = (shared_benchmarks / "nextqa" / "val.csv").read_text().splitlines()[:11]
    header = lines[0].split(",")
    if change == "answer x":  # the first question's answer
        row = lines[1].split(",")
        row[header.index("answer")] = "x"
        lines[1] = ",".join(row)
    elif change == "no question":
        lines[0] = lines[0].replace(",question,", ",query,")
    elif change == "header only":
        del lines[1:]
    elif change.startswith("answer "):
        row = lines[1].split(",")
        row[header.index("answer")] = change.split()[1]
        lines[1] = ",".join(row)
    elif change == "blank option":
        row = lines[1].split(",")
        row[header.index("a2")] = " "
        lines[1] = ",".join(row)
    elif change == "duplicate":
        lines.insert(2, lines[1])
    text = "\n".join(lines) + "\n"
    data = tmp_path / "nextqa"
    data.mkdir()
    raw = text.encode("utf-8")
    if change == "latin-1":
        raw = text.replace("the instrument", "l'instrument à vent").encode("latin-1")
    elif change == "bom":
        raw = b"\xef\xbb\xbf" + raw
    (data / "val.csv").write_bytes(raw)
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps({"4882821564_1": 2}))
    out = vidagent(
        "bench", "score", "nextqa", "--data", str(data), "--predictions", str(preds),
        "--json", home=_isolated_home,
    )  # fmt: skip
    if message is None:
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["overall"]["questions"] == 10
        return
    assert out.returncode == 1 and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: ") and message.format(data=data) in line
    assert change == "header only" or line.startswith("error: the nextqa annotation files in")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("folder", "is a folder; give the predictions file in it"),
        ("fields", "p.json: a prediction object without 'prediction'; expected {"),
        ("bom csv", None),
    ],
)
def test_predictions_out_of_their_form_are_one_line(
    setup: str, message: str | None, shared_benchmarks: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    preds = tmp_path / "p.json"
    if setup == "folder":
        preds.mkdir()
    elif setup == "fields":  # NExT-QA's own form is {id: {"prediction": ...}}
        preds.write_text(json.dumps({"4010069381_6": {"pred": 0}}))
    else:  # EgoSchema's Kaggle CSV, saved by a spreadsheet (a UTF-8 BOM first)
        preds = tmp_path / "p.csv"
        q_uid = next(
            iter(json.loads((shared_benchmarks / "egoschema/subset_answers.json").read_text()))
        )
        preds.write_bytes(f"\ufeffq_uid,answer\n{q_uid},2\n".encode())
    bench = "egoschema" if setup == "bom csv" else "nextqa"
    out = vidagent(
        "bench", "score", bench, "--data", str(shared_benchmarks / bench),
        "--predictions", str(preds), "--json", home=_isolated_home,
    )  # fmt: skip
    if message is None:
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["predictions"] == 1
        return
    assert out.returncode == 1 and out.stderr.strip().count("\n") == 0
    assert message in out.stderr and "Traceback" not in out.stderr


def test_bench_list_names_every_benchmark_bench_takes(_isolated_home: Path) -> None:
    from vidagent.bench import BENCHMARKS, get_benchmark

    out = vidagent("bench", "list", "--json", home=_isolated_home)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["benchmarks"]
    assert [r["name"] for r in rows] == list(BENCHMARKS)
    for r in rows:  # each name is one `bench run` takes, with its default split first
        module = get_benchmark(r["name"])
        assert r["splits"][0] == module.DEFAULT_SPLIT and set(r["splits"]) == set(module.SPLITS)
    shown = vidagent("bench", "list", home=_isolated_home).stdout
    assert "nextqa          NExT-QA: val, test" in shown
