"""MMBench-Video: the TSV loader, the official 0-3 LLM judge and VLMEvalKit's aggregation.

The official rule (VLMEvalKit ``vlmeval/dataset/mmbench_video.py`` ``MMBenchVideo.evaluate`` and
``vlmeval/dataset/utils/mmbench_video.py`` ``get_dimension_rating``): a question without a
prediction is not judged; a judge reply is the score only when it is an integer, else -1;
the ``valid`` rating (official here) is the mean of the scores >= 0, the ``all`` rating (strict
here) the mean with -1 as 0; a question counts in each of its fine-grained dimensions, in each
coarse dimension one of whose fine-grained dimensions it has, and in Perception / Reasoning.
"""

from __future__ import annotations

import ast
import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
from benchkit import make_videos, settings_with
from clirun import vidagent

from vidagent.bench import evaluate, get_benchmark
from vidagent.bench.base import BenchmarkDataError
from vidagent.bench.judge import Judge
from vidagent.bench.tasks.mmbench_video import (
    DIMENSIONS,
    GROUPS,
    JUDGE_SYSTEM,
    judge_prompt,
    parse_rating,
)
from vidagent.exceptions import ServerError, UserError
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter

mmbv = get_benchmark("mmbench-video")

HEADER = ["index", "video", "video_type", "question", "answer", "dimensions", "video_path"]
#: (index, video, question, answer, dimensions). Video v3 is never generated.
QUESTIONS = [
    (1, "v1", "What is the video about?", "A cooking show", ["Video Topic"]),
    (
        2,
        "v1",
        "How many eggs break, and why?",
        "Three, the pan is too hot",
        ["Counting", "Causal Reasoning"],
    ),
    (3, "v2", "Is there a dog?", "No", ["Hallucination"]),
    (4, "v2", "What does the sign say?", "OPEN", ["OCR"]),
    (
        5,
        "v3",
        "How are the two people related?",
        "Siblings",
        ["Social Relation", "Human Interaction"],
    ),
    (6, "v3", "What is 3 + 4 eggs?", "7", ["Mathematical Calculation"]),
]
#: Question 4 unanswered; the judge's reply for 3 is not an integer.
PREDICTIONS = {"1": "A cookery programme", "2": "two", "3": "The dog", "5": "friends", "6": "9"}
REPLIES = {"1": "3", "2": " 1\n", "3": "Score: 2", "5": "2", "6": "0"}


def write_tsv(data: Path, rows: list[tuple[Any, ...]] = QUESTIONS) -> Path:
    """``data/MMBench-Video.tsv`` as released: tab-separated, dimensions as a list literal."""
    data.mkdir(parents=True, exist_ok=True)
    with (data / "MMBench-Video.tsv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(HEADER)
        for index, video, question, answer, dims in rows:
            writer.writerow(
                [index, video, "cooking", question, answer, str(dims), f"./video/{video}.mp4"]
            )
    return data


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = write_tsv(tmp_path / "data")
    for name in ("v1", "v2"):
        (data / "video").mkdir(exist_ok=True)
        (data / "video" / f"{name}.mp4").write_bytes(b"x")
    return data


def judge_of(calls: list[ChatRequest], workers: int = 8) -> Judge:
    """A judge replying per question (REPLIES), whatever order the threads ask in."""

    def reply(request: ChatRequest) -> str:
        calls.append(request)
        question = request.messages[-1].text.split("\n")[0].removeprefix("Question: ")
        index = next(str(i) for i, _, q, *_ in QUESTIONS if q == question)
        return REPLIES[index]

    return Judge(Models.from_adapters({"llm": FakeAdapter.function(reply)}), workers=workers)


def get_dimension_rating(scores: dict[str, int]) -> dict[str, dict[str, float]]:
    """VLMEvalKit's ``get_dimension_rating`` written out over ``{index: score or -1}``."""
    coarse_dims = {**DIMENSIONS}
    for group, members in GROUPS.items():
        coarse_dims[group] = tuple(d for m in members for d in DIMENSIONS[m])
    coarse: dict[str, list[int]] = {k: [] for k in coarse_dims}
    fine: dict[str, list[int]] = {d: [] for dims in DIMENSIONS.values() for d in dims}
    for index, _, _, _, dims in QUESTIONS:
        cates = ast.literal_eval(str(dims))
        for c in cates:
            fine[c].append(scores[str(index)])
        for d, members in coarse_dims.items():
            if any(x in members for x in cates):
                coarse[d].append(scores[str(index)])

    def mean(v: list[int]) -> float:
        return sum(v) / len(v) if v else math.nan

    return {
        "coarse_all": {k: mean([max(x, 0) for x in v]) for k, v in coarse.items()},
        "coarse_valid": {k: mean([x for x in v if x >= 0]) for k, v in coarse.items()},
        "fine_all": {k: mean([max(x, 0) for x in v]) for k, v in fine.items()},
        "fine_valid": {k: mean([x for x in v if x >= 0]) for k, v in fine.items()},
    }


def test_scores_are_vlmevalkits_valid_and_all_ratings(data: Path) -> None:
    """Valid (official) = mean of scores >= 0 = (3 + 1 + 2 + 0) / 4; all (strict) = the same sum
    over all 6 questions; the failed judgement and the unanswered question are both -1."""
    calls: list[ChatRequest] = []
    scores = evaluate(mmbv, mmbv.load(data), PREDICTIONS, judge=judge_of(calls))

    assert len(calls) == 5  # question 4 has no prediction: not judged
    o = scores.overall
    assert (o.score, o.strict, o.questions, o.answered) == (1.5, 1.0, 6, 4)
    assert scores.metric == "mean judge score (0-3)" and scores.rule == "answered"
    assert scores.missing == 1
    assert scores.notes == (
        (
            "the judge gave no usable score for 1 answers: left out of the official (valid) "
            "mean, 0 in the strict (all) one, as VLMEvalKit does"
        ),
    )
    coarse, fine = scores.sections["coarse"], scores.sections["fine"]
    assert list(coarse) == ["CP", "FP-S", "FP-C", "HL", "LR", "RR", "TR", "Perception", "Reasoning"]
    assert (coarse["Perception"].score, coarse["Perception"].strict) == (2.0, 1.2)
    assert (coarse["FP-S"].score, coarse["FP-S"].strict) == (1.0, 0.5)
    assert coarse["HL"].answered == 0 and coarse["HL"].strict == 0.0

    official = get_dimension_rating({"1": 3, "2": 1, "3": -1, "4": -1, "5": 2, "6": 0})
    for name, groups, rating in (("coarse", coarse, "coarse"), ("fine", fine, "fine")):
        for key, g in groups.items():
            assert g.strict == pytest.approx(official[f"{rating}_all"][key]), (name, key)
            valid = official[f"{rating}_valid"][key]
            assert g.score == pytest.approx(0.0 if math.isnan(valid) else valid), (name, key)
    assert set(fine) == {
        "Video Topic",
        "Counting",
        "Causal Reasoning",
        "Hallucination",
        "OCR",
        "Social Relation",
        "Human Interaction",
        "Mathematical Calculation",
    }


def test_the_judge_gets_the_official_prompts_at_temperature_0(data: Path) -> None:
    calls: list[ChatRequest] = []
    evaluate(mmbv, mmbv.load(data), {"2": "two {P} eggs"}, judge=judge_of(calls))
    (request,) = calls
    system, user = request.messages
    assert request.temperature == 0.0 and system.role == "system" and system.text == JUDGE_SYSTEM
    assert JUDGE_SYSTEM.startswith("\nAs an AI assistant, your task is to evaluate a candidate")
    assert JUDGE_SYSTEM.endswith("Your response should be a single integer from 0, 1, 2, or 3.\n")
    assert "Your assessment should range from 0 to 3, based solely on the semantic similarity" in (
        JUDGE_SYSTEM
    )
    assert user.text == (
        "Question: How many eggs break, and why?\nGroundtruth answer: Three, the pan is too hot\n"
        "Candidate answer: two {P} eggs\nYour response: "
    )
    assert judge_prompt(mmbv.load(data).samples[0], "x").endswith(
        "Candidate answer: x\nYour response: "
    )


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("2", 2),
        (" 3\n", 3),
        ("0", 0),
        ("+1", 1),
        ("Score: 2", None),
        ("2.", None),
        ("two", None),
        ("-1", None),
        ("", None),
        ("5", 5),
    ],
)
def test_a_reply_is_a_score_only_when_it_is_an_integer(reply: str, score: int | None) -> None:
    """``int(x) if istype(x, int) else -1``; -1 (any negative) is the failure mark; 5 is kept."""
    assert parse_rating(reply).score == score


def test_scores_above_3_are_kept_and_noted_and_provider_errors_fail(data: Path) -> None:
    def reply(request: ChatRequest) -> str:
        if "Is there a dog?" in request.messages[-1].text:
            raise ServerError("down", status=503)
        return "4"

    waits: list[float] = []  # the backoff before each retry, recorded rather than slept
    models = Models.from_adapters({"llm": FakeAdapter.function(reply)}, sleep=waits.append)
    judge = Judge(models, workers=1)
    scores = evaluate(mmbv, mmbv.load(data), {"1": "a", "3": "b"}, judge=judge)
    assert (scores.overall.score, scores.overall.strict, scores.overall.answered) == (4.0, 4 / 6, 1)
    assert scores.notes[1] == "1 judge scores above 3 kept as given, as VLMEvalKit keeps them"
    assert scores.missing == 4
    assert len(waits) == models.settings.max_retries  # the 503 was retried, then failed


def test_loader_reads_the_released_tsv_and_lists_missing_videos(data: Path) -> None:
    loaded = mmbv.load(data)
    assert len(loaded.samples) == 6 and loaded.split == "all"
    s = loaded.samples[1]
    assert (s.id, s.question, s.answer, s.options, s.task) == (
        "2",
        "How many eggs break, and why?",
        "Three, the pan is too hot",
        (),
        "open",
    )
    assert s.categories == ("Counting", "Causal Reasoning")
    assert s.videos == (data / "video" / "v1.mp4",) and s.extras["video"] == "v1"
    assert mmbv.prompt(s) == "How many eggs break, and why?"
    assert [m.sample_id for m in loaded.missing] == ["5", "6"] and loaded.missing_samples == 2
    assert loaded.missing[0].path == data / "video" / "v3.mp4"


def test_answers_need_a_judge_and_no_answers_need_none(data: Path) -> None:
    loaded = mmbv.load(data)
    with pytest.raises(UserError, match="free-form answers need an LLM judge"):
        evaluate(mmbv, loaded, {"1": "text"})
    empty = evaluate(mmbv, loaded, {"1": None, "2": ""})  # null and "" are no answer (NaN)
    assert (empty.overall.answered, empty.missing, empty.overall.strict) == (0, 6, 0.0)


def test_prediction_forms(data: Path, tmp_path: Path) -> None:
    samples = mmbv.load(data).samples
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps({"1": "a show", 2: {"prediction": "two"}, "3": None}))
    assert mmbv.read_predictions(as_json, samples) == {"1": "a show", "2": "two", "3": None}
    runner = tmp_path / "p.jsonl"
    runner.write_text('{"id": "1", "parsed": "a show"}\n{"id": "4", "parsed": null}\n')
    assert mmbv.read_predictions(runner, samples) == {"1": "a show", "4": None}
    table = tmp_path / "model_MMBench-Video.tsv"  # VLMEvalKit's result table, saved as TSV
    table.write_text("index\tvideo\tquestion\tprediction\n1\tv1\tq\ta show\n2\tv1\tq\t\n")
    assert mmbv.read_predictions(table, samples) == {"1": "a show", "2": None}


def test_cli_scores_with_the_judge_spec(data: Path, tmp_path: Path, _isolated_home: Path) -> None:
    """Three answers, the scripted judge rates two 3 and fails one (whichever it is): valid 3.00,
    all 6 / 6 questions = 1.00."""
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps({"1": "a show", "2": "two", "3": "no"}))
    judge = 'fake:scripted?replies=["3", "3", "a three"]'
    out = vidagent(
        "bench",
        "score",
        "mmbench_video",
        "--data",
        str(data),
        "--predictions",
        str(preds),
        "--judge",
        judge,
        home=_isolated_home,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "MMBench-Video all: 6 questions, 3 predictions, 3 unanswered"
    assert lines[1] == (
        "mean judge score (0-3): 3.00  (official rule: questions without an answer left out; "
        "strict 1.00)"
    )
    assert lines[-1].startswith("note: the judge gave no usable score for 1 answers")
    env = {"VIDAGENT_LLM": "fake:echo?reply=2"}  # without --judge: the llm role
    out = vidagent(
        "bench",
        "score",
        "mmbench-video",
        "--data",
        str(data),
        "--predictions",
        str(preds),
        "--json",
        home=_isolated_home,
        env=env,
    )
    report = json.loads(out.stdout)
    assert report["overall"] == {"score": 2.0, "strict": 1.0, "questions": 6, "answered": 3}
    assert report["sections"]["coarse"]["CP"]["score"] == 2.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "p.json: the predictions file is empty"),
        (b"{}", "p.json: holds no predictions"),
        (b"[]", "p.json: holds no predictions (an empty list)"),
        (b'{"99": "x"}', "none of the 1 predictions matches a mmbench_video all question"),
        (b'["x"]', "p.json: not a predictions file; expected"),
    ],
)
def test_bad_predictions_are_one_line_and_exit_1(
    content: bytes, message: str, data: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    preds = tmp_path / "p.json"
    preds.write_bytes(content)
    out = vidagent(
        "bench",
        "score",
        "mmbench_video",
        "--data",
        str(data),
        "--predictions",
        str(preds),
        "--judge",
        "fake:echo?reply=2",
        home=_isolated_home,
    )
    assert out.returncode == 1 and out.stderr.strip().count("\n") == 0
    assert message in out.stderr and "Traceback" not in out.stderr


def test_bad_data_is_one_line_and_exit_1(tmp_path: Path, _isolated_home: Path) -> None:
    preds = tmp_path / "p.json"
    preds.write_text('{"1": "x"}')
    (tmp_path / "empty").mkdir()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "MMBench-Video.tsv").write_text("index\tvideo\tquestion\n1\tv1\tq\n")
    for folder, message in (
        (tmp_path / "empty", "MMBench-Video.tsv not found in"),
        (bad, "MMBench-Video.tsv: no 'answer' column; expected tab-separated columns"),
    ):
        out = vidagent(
            "bench",
            "score",
            "mmbench_video",
            "--data",
            str(folder),
            "--predictions",
            str(preds),
            home=_isolated_home,
        )
        assert out.returncode == 1 and out.stderr.strip().count("\n") == 0
        assert message in out.stderr and "Traceback" not in out.stderr


def test_a_run_writes_free_text_answers_that_score_reads(tmp_path: Path) -> None:
    """``bench run``: each row's parsed answer is the agent's text; the runner cannot judge, so
    rows carry no verdict and ``bench score`` judges the run's JSONL."""
    from vidagent.app.benchmarks import RunConfig, run_benchmark

    data = write_tsv(tmp_path / "data", QUESTIONS[:2])
    make_videos(data / "video", "v1")
    out = tmp_path / "run"
    settings = settings_with("fake:echo?reply=A cooking show")
    summary = run_benchmark(RunConfig("mmbench_video", data), settings=settings, out=out)
    assert (summary.questions, summary.ran, summary.errors) == (2, 2, 0)
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {r["id"]: r["parsed"] for r in rows} == {"1": "A cooking show", "2": "A cooking show"}
    assert all(r["correct"] is None for r in rows)
    loaded = mmbv.load(data)
    found = mmbv.read_predictions(out / "predictions.jsonl", loaded.samples)
    judge = Judge(Models.from_adapters({"llm": FakeAdapter.scripted(["3", "0"])}), workers=1)
    assert evaluate(mmbv, loaded, found, judge=judge).overall.score == 1.5


def test_bad_dimensions_and_splits_are_refused(tmp_path: Path) -> None:
    data = write_tsv(tmp_path / "d", [(1, "v1", "q", "a", ["OCR"])])
    text = (data / "MMBench-Video.tsv").read_text().replace("['OCR']", "['OCR'")
    (data / "MMBench-Video.tsv").write_text(text)
    with pytest.raises(BenchmarkDataError, match=r"line 2: dimensions \"\['OCR'\" is not a list"):
        mmbv.load(data)
    with pytest.raises(UserError, match="mmbench_video has no split 'test'"):
        mmbv.load(data, split="test")
