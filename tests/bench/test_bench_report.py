"""``vidagent bench report``: official beside strict, per category, bootstrap intervals, cost
means, and the Markdown, JSON and PNG files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from benchkit import hub, make_lvbench, settings_with
from clirun import vidagent

from vidagent.app.benchmarks import RunConfig, run_benchmark
from vidagent.bench.base import Outcome, Sample
from vidagent.bench.report import bootstrap, intervals
from vidagent.bench.tasks import nextqa
from vidagent.exceptions import BackendMissingError
from vidagent.models.base import ChatRequest
from vidagent.models.fake import FakeAdapter

OPTIONS = "\n(A) a cat\n(B) a dog\n(C) a car\n(D) a tree"
#: Eight LVBench questions: (uid, video key, categories, answer). B is right for 1, 2, 5, 6.
QUESTIONS = [
    ("1", "k1", ["entity recognition"], "B"),
    ("2", "k1", ["entity recognition", "reasoning"], "B"),
    ("3", "k1", ["reasoning"], "A"),
    ("4", "k1", ["temporal grounding"], "C"),
    ("5", "k2", ["entity recognition"], "B"),
    ("6", "k2", ["reasoning"], "B"),
    ("7", "k2", ["temporal grounding"], "D"),
    ("8", "k2", ["reasoning"], "A"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs on the same LVBench: 'always-b' answers every question B; 'unsure' was stopped
    before questions 3, 4 and 5 got a row (unanswered: left out of LVBench's official number,
    which counts the uids present in the answers file)."""
    root = tmp_path_factory.mktemp("lvbench")
    data = make_lvbench(
        root / "data",
        [
            {
                "key": key,
                "uid": uid,
                "question": f"Question {uid}: what is shown?{OPTIONS}",
                "answer": answer,
                "question_type": categories,
                "time_reference": "",
            }
            for uid, key, categories, answer in QUESTIONS
        ],
    )
    home = {"home": root / "home"}
    always = run_benchmark(
        RunConfig("lvbench", data), settings=settings_with(**home), out=root / "always-b"
    )

    def unsure(request: ChatRequest) -> str:
        text = request.messages[-1].text
        return "I cannot tell." if any(f"Question {n}:" in text for n in "345") else "B"

    settings = settings_with(**home)
    with hub(settings, FakeAdapter.function(unsure)) as models:
        other = run_benchmark(
            RunConfig("lvbench", data), settings=settings, out=root / "unsure", models=models
        )
    rows = other.out / "predictions.jsonl"
    kept = [r for r in rows.read_text().splitlines() if json.loads(r)["id"] not in "345"]
    rows.write_text("".join(f"{r}\n" for r in kept))
    return always.out, other.out


def test_report_puts_official_beside_strict_per_category_and_writes_files(
    runs: tuple[Path, Path], tmp_path: Path, _isolated_home: Path
) -> None:
    pytest.importorskip("matplotlib", reason="the plots need the bench extra")
    out = tmp_path / "report"
    result = vidagent("bench", "report", *map(str, runs), "--out", str(out), home=_isolated_home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("LVBench all: accuracy; official (unanswered questions left out)")
    assert lines[1].split() == [
        "accuracy",
        "always-b",
        "official",
        "always-b",
        "strict",
        "unsure",
        "official",
        "unsure",
        "strict",
    ]
    # always-b: 4 of 8 right. unsure: 3 right (1, 2, 6) of 5 answered; strict 3 of 8.
    overall = lines[2]
    assert overall.startswith("overall")
    cells = [c.split(" [")[0] for c in overall.split("]")[:-1]]
    assert [c.split()[-1] for c in cells] == ["50.0", "50.0", "60.0", "37.5"]
    er = next(line for line in lines if line.strip().startswith("ER (entity recognition)"))
    assert er.split()[3:4] == ["100.0"] and "66.7 [" in er  # unsure: 2 of 2 answered, 2 of 3
    assert any(
        line.startswith("per question (means over the rows without an error, 95% percentile")
        for line in lines
    )

    body = json.loads((out / "report.json").read_text())
    assert (body["level"], body["resamples"], body["seed"]) == (0.95, 1000, 0)
    unsure = body["runs"][1]
    assert unsure["name"] == "unsure" and unsure["scores"]["rule"] == "answered"
    assert (
        unsure["scores"]["overall"]["score"] == 60.0
        and unsure["scores"]["overall"]["strict"] == 37.5
    )
    assert unsure["counts"] == {
        "questions": 8,
        "answered": 5,
        "errors": 0,
        "missing_videos": 0,
        "not_run": 3,
        "scored": 8,
    }
    assert unsure["means"]["steps"] == 1.0 and unsure["means"]["tokens"] > 0
    # Risk–coverage over the 5 answered questions, ranked by their citation check's support.
    curve = unsure["risk_coverage"]
    assert curve["source"] == "support" and curve["answers"] == 5
    assert curve["points"][-1] == [1.0, 0.4]  # all kept: 2 of 5 wrong
    assert 0.0 <= curve["aurc"] <= 1.0
    assert (out / "risk_coverage.png").read_bytes()[:4] == b"\x89PNG"
    # The means carry seeded bootstrap intervals too (steps: 1 on every row, so no spread).
    assert unsure["mean_intervals"]["steps"] == [1.0, 1.0]
    for key in ("tokens", "latency_s"):
        low, high = unsure["mean_intervals"][key]
        assert low <= unsure["means"][key] <= high, key
    assert unsure["models"]["llm"] == "fake:function" and unsure["strategy"] == "dvd"
    for key, interval in unsure["intervals"].items():
        section, _, name = key.partition("/")
        cell = (
            unsure["scores"]["overall"]
            if key == "overall"
            else unsure["scores"]["sections"][section][name]
        )
        assert interval["score"][0] <= cell["score"] <= interval["score"][1], key
        assert interval["strict"][0] <= cell["strict"] <= interval["strict"][1], key
        assert interval["methods"] == {"score": "wilson", "strict": "wilson"}, key
    # ER: 2 right of 2 answered (official, over the answered), of 3 questions (strict)
    er_interval = unsure["intervals"]["category/ER"]
    assert er_interval["score"] == pytest.approx(wilson(2, 2), abs=1e-4)
    assert er_interval["strict"] == pytest.approx(wilson(2, 3), abs=1e-4)

    markdown = (out / "report.md").read_text()
    assert (
        "| accuracy | always-b official | always-b strict | unsure official | unsure strict |"
        in markdown
    )
    assert "| *category* |" in markdown and "| cost $ | latency s |" in markdown
    for name in ("accuracy_by_category.png", "accuracy_vs_cost.png"):
        png = (out / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000

    again = vidagent(
        "bench",
        "report",
        *map(str, runs),
        "--out",
        str(tmp_path / "again"),
        "--no-plots",
        home=_isolated_home,
    )
    assert again.stdout.splitlines()[:-1] == lines[:-1]  # seeded: the same intervals
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == ["report.json", "report.md"]
    args = ("bench", "report", str(runs[0]), "--out", str(tmp_path / "no"), "--no-plots")
    plain = vidagent(*args, "--resamples", "0", home=_isolated_home).stdout
    assert "without intervals (0 resamples)" in plain and "bootstrap" not in plain


def test_report_errors_are_one_line(tmp_path: Path, _isolated_home: Path) -> None:
    result = vidagent("bench", "report", str(tmp_path), home=_isolated_home)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: {tmp_path}: not a benchmark run folder (no manifest.json in it)"
    )


def test_damaged_run_files_are_one_line_errors_or_skipped_rows(
    runs: tuple[Path, Path], tmp_path: Path, _isolated_home: Path
) -> None:
    import shutil

    run = Path(shutil.copytree(runs[0], tmp_path / "run"))
    with (run / "predictions.jsonl").open("ab") as f:  # a line of bytes that are not UTF-8
        f.write(b'{"id": "9", "parsed": "\xff\xfe"}\n')
    written = ["--no-plots", "--out", str(tmp_path / "report")]
    read = vidagent("bench", "report", str(run), *written, home=_isolated_home)
    assert read.returncode == 0, read.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["benchmark"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    ladder = tmp_path / "ladder"
    ladder.mkdir()
    (ladder / "ladder.json").write_text('{"frames": ["many"]}')
    for path, message in [
        (run, f"{run / 'manifest.json'}: a damaged run manifest (its 'benchmark' is missing"),
        (ladder, f"{ladder / 'ladder.json'}: a damaged ladder file (invalid literal"),
    ]:
        out = vidagent("bench", "report", str(path), *written, home=_isolated_home)
        assert out.returncode == 1 and out.stderr.startswith(f"error: {message}")
        assert out.stderr.count("\n") == 1


def test_runs_side_by_side_are_told_apart(
    runs: tuple[Path, Path], tmp_path: Path, _isolated_home: Path
) -> None:
    import shutil

    a = Path(shutil.copytree(runs[0], tmp_path / "a" / "run"))
    b = Path(shutil.copytree(runs[0], tmp_path / "b" / "run"))  # the same folder name
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["samples"] = manifest["samples"][:6]  # as --limit 6 would
    manifest["strategy_options"] = {"top_k": 1}
    manifest["calls"] = ["embed"]  # a strategy that calls no llm
    (b / "manifest.json").write_text(json.dumps(manifest))
    out = vidagent("bench", "report", str(a), str(b), "--no-plots", "--resamples", "0",
                   "--out", str(tmp_path / "r"), home=_isolated_home)  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "a/run" in text and "b/run" in text
    assert (
        "note: these runs are over different questions (a/run 8, b/run 6; 6 in all of them)" in text
    )
    cost = {line.split()[0]: line for line in text.splitlines() if line.startswith(("a/", "b/"))}
    assert "dvd (top_k=1)" in cost["b/run"] and "– (calls none)" in cost["b/run"]
    assert "fake:echo?reply=B" in cost["a/run"]  # dvd calls its llm


def wilson(right: int, over: int) -> list[float]:
    from scipy.stats import binomtest

    ci = binomtest(right, over).proportion_ci(method="wilson")
    return [100 * ci.low, 100 * ci.high]


def test_a_share_of_right_answers_gets_wilsons_interval_of_some_width() -> None:
    samples = [Sample(f"q{i}", (), "?", ("a", "b"), answer=0, categories=("CW",)) for i in range(3)]
    perfect = [Outcome(s.id, 1.0) for s in samples]  # 3 of 3: a bootstrap said [100, 100]
    scores = nextqa.aggregate(samples, perfect)
    found = intervals(nextqa, samples, perfect, scores)
    assert list(found["overall"].score) == pytest.approx(wilson(3, 3))
    assert found["overall"].score[0] < 50 and found["overall"].methods == ("wilson", "wilson")
    # points that are not right-or-wrong (an IoU): the bootstrap's percentile interval
    partial = [Outcome(s.id, 0.5 + 0.1 * k) for k, s in enumerate(samples)]
    scores = nextqa.aggregate(samples, partial)
    found = intervals(nextqa, samples, partial, scores, seed=3)
    assert found["overall"].methods == ("bootstrap", "bootstrap")
    assert found["overall"] == bootstrap(nextqa, samples, partial, seed=3)["overall"]


def test_a_share_is_counted_from_its_questions_never_inferred_from_its_number() -> None:
    from vidagent.bench.base import unanswered
    from vidagent.bench.tasks import crossvid, nextgqa

    # CrossVid's overall is the mean of its task means: 1 of 1 right (NC) and 0 of 3 (PI) is
    # 50%, which read as "2 of 4" and got Wilson's interval; the one-task cells are shares
    def cv(uid: str, task: str) -> Sample:
        return Sample(uid, (Path("x"),), "q", ("a", "b"), 0, (task,))

    samples = [cv("nc1", "NC")] + [cv(f"pi{i}", "PI") for i in range(3)]
    outcomes = [Outcome("nc1", 1.0)] + [Outcome(f"pi{i}", 0.0) for i in range(3)]
    found = intervals(crossvid, samples, outcomes, crossvid.aggregate(samples, outcomes))
    assert found["overall"].methods == ("bootstrap", "bootstrap")
    assert found["task/NC"].methods == ("wilson", "wilson")
    assert list(found["task/PI"].score) == pytest.approx(wilson(0, 3))
    # an official rule over the answered: 0 right of 2 answered (of 10) is over the 2
    samples = [cv(f"nc{i}", "NC") for i in range(10)]
    outcomes = [Outcome("nc0", 0.0), Outcome("nc1", 0.0)] + [unanswered(x) for x in samples[2:]]
    scores = crossvid.aggregate(samples, outcomes)
    found = intervals(crossvid, samples, outcomes, scores)
    assert scores.rule == "answered"
    assert list(found["overall"].score) == pytest.approx(wilson(0, 2))
    assert list(found["overall"].strict) == pytest.approx(wilson(0, 10))
    # none answered: the official number is over nothing, so its interval is the whole range
    outcomes = [unanswered(x) for x in samples]
    found = intervals(crossvid, samples, outcomes, crossvid.aggregate(samples, outcomes))
    assert found["overall"].score == (0.0, 100.0)
    assert found["overall"].methods == ("no answered question", "wilson")
    # a binary benchmark's extra numbers (NExT-GQA's IoU, IoP) keep their bootstrap intervals
    samples = [
        Sample(f"v_{i}", (Path("x"),), "q", ("a", "b", "c"), 0, ("CW",),
               extras={"locations": [[0.0, 10.0]]})
        for i in range(6)
    ]  # fmt: skip
    predictions = {
        x.id: {"prediction": i % 2, "answer": 0, "location": [0.0, 5.0 + i]}
        for i, x in enumerate(samples)
    }
    outcomes = nextgqa.score(samples, predictions)
    scores = nextgqa.aggregate(samples, outcomes)
    found = intervals(nextgqa, samples, outcomes, scores, resamples=100)
    assert {f"extra/{k}" for k in scores.extra} <= set(found)
    assert found["overall"].methods == ("wilson", "wilson")


def test_a_category_only_a_later_run_has_joins_its_section() -> None:
    from vidagent.bench.report import RunReport, score_table

    def run(name: str, types: list[str]) -> RunReport:
        samples = [
            Sample(f"q{k}", (), "?", ("a", "b"), answer=0, categories=(t, t[0]))
            for k, t in enumerate(types)
        ]
        scores = nextqa.aggregate(samples, [Outcome(s.id, 1.0) for s in samples])
        return RunReport(name, Path(name), {}, scores)

    _, rows = score_table([run("a", ["CH"]), run("b", ["CH", "CW"])])
    assert [r[0] for r in rows] == ["overall", "type", "CH (How)", "CW (Why)", "group", "C (Acc_C)"]


def test_intervals_are_percentiles_of_seeded_resamples() -> None:
    samples = [
        Sample(f"q{i}", (), "?", ("a", "b"), answer=0, categories=("CW", "C")) for i in range(100)
    ]
    outcomes = [Outcome(s.id, float(i % 2)) for i, s in enumerate(samples)]
    intervals = bootstrap(nextqa, samples, outcomes, resamples=1000, seed=7)
    lo, hi = intervals["overall"].score
    assert 38 < lo < 45 and 55 < hi < 62  # a binomial 50% of 100 spans about +-10 points
    assert intervals == bootstrap(nextqa, samples, outcomes, resamples=1000, seed=7)
    assert intervals["type/CW"] == intervals["overall"]  # the same questions, the same draws
    perfect = [Outcome(s.id, 1.0) for s in samples]
    assert bootstrap(nextqa, samples, perfect)["overall"].score == (100.0, 100.0)


def test_plots_without_matplotlib_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from vidagent.bench.plots import require_matplotlib

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(BackendMissingError, match=r"pip install 'vidagent\[bench\]'"):
        require_matplotlib()


def test_a_run_whose_llm_has_no_price_reports_no_price_not_zero(
    runs: tuple[Path, Path], tmp_path: Path, _isolated_home: Path
) -> None:
    import dataclasses

    always, _ = runs
    data = Path(json.loads((always / "manifest.json").read_text())["data"])
    settings = settings_with(home=tmp_path / "home")
    # a hosted model (not run in this process) that neither the settings nor genai-prices price
    remote = dataclasses.replace(FakeAdapter.capabilities, local=False)
    with hub(settings, FakeAdapter.function(lambda _r: "B", capabilities=remote)) as models:
        run = run_benchmark(
            RunConfig("lvbench", data), settings=settings, out=tmp_path / "remote", models=models
        )
    rows = [json.loads(r) for r in (run.out / "predictions.jsonl").read_text().splitlines()]
    assert rows and all(r["cost_usd"] is None and r["tokens"] > 0 for r in rows)
    result = vidagent(
        "bench",
        "report",
        str(always),
        str(run.out),
        "--no-plots",
        "--json",
        "--out",
        str(tmp_path / "report"),
        home=_isolated_home,
    )
    assert result.returncode == 0, result.stderr
    means = {r["name"]: r["means"]["cost_usd"] for r in json.loads(result.stdout)["runs"]}
    assert means == {"always-b": 0.0, "remote": None}  # fakes run locally: free, not unknown
    text = vidagent(
        "bench",
        "report",
        str(always),
        str(run.out),
        "--no-plots",
        "--out",
        str(tmp_path / "r"),
        home=_isolated_home,
    )
    (row,) = [line for line in text.stdout.splitlines() if line.startswith("remote ")]
    assert "no price" in row


def test_a_damaged_line_of_a_run_is_said_in_the_report(
    runs: tuple[Path, Path], tmp_path: Path, _isolated_home: Path
) -> None:
    # bench score refuses such a file outright; a run's own file is read around the damage,
    # and the report says so rather than count the question as never asked in silence
    import shutil

    run = tmp_path / "damaged"
    shutil.copytree(runs[0], run)
    rows = (run / "predictions.jsonl").read_bytes().splitlines(keepends=True)
    rows[1] = b"not json\n"
    rows[2] = b"\xff\xfe\n"
    (run / "predictions.jsonl").write_bytes(b"".join(rows))
    written = ["--no-plots", "--out", str(tmp_path / "report")]
    out = vidagent("bench", "report", str(run), *written, home=_isolated_home)
    assert out.returncode == 0, out.stderr
    assert "2 line(s) of predictions.jsonl could not be read (damaged)" in out.stdout
