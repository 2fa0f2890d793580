"""``vidagent bench compare``: two runs paired question by question — the joint-correctness
table, the exact McNemar test, paired bootstrap intervals — and several runs as one family —
Cochran's Q, every pair with Holm's adjustment — checked against SciPy and statsmodels on known
tables, by hand, and on three small LVBench runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from benchkit import hub, make_lvbench, settings_with
from clirun import vidagent

from vidagent.app.benchmarks import RunConfig, run_benchmark
from vidagent.bench.compare import (
    cochran_q,
    compare_many,
    compare_runs,
    mcnemar_exact,
    mean_difference,
    newcombe_paired,
    paired_interval,
)
from vidagent.exceptions import UserError
from vidagent.models.base import ChatRequest
from vidagent.models.fake import FakeAdapter

pytest.importorskip("statsmodels", reason="the McNemar test needs the bench extra")
# SciPy's stats is imported by the tests that use it: at the top it took 0.5 CPU-s of the
# collection in every test worker.

OPTIONS = "\n(A) a cat\n(B) a dog\n(C) a car\n(D) a tree"
#: (uid, video key, categories, answer, run B's answer); run A answers B to every question.
QUESTIONS = [
    ("1", "k1", ["entity recognition"], "B", "B"),
    ("2", "k1", ["entity recognition", "reasoning"], "B", "A"),
    ("3", "k1", ["reasoning"], "A", "A"),
    ("4", "k1", ["temporal grounding"], "C", "C"),
    ("5", "k2", ["entity recognition"], "B", "B"),
    ("6", "k2", ["reasoning"], "B", "B"),
    ("7", "k2", ["temporal grounding"], "D", "A"),
    ("8", "k2", ["reasoning"], "A", "A"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Run A answers B everywhere (right on 1, 2, 5, 6) and its row of 8 is gone (not run);
    run B answers the last column (right on 1, 3, 4, 5, 6, 8) and its row of 7 records an
    error. Paired: 1-6; both right 1, 5, 6; A only 2; B only 3, 4."""
    root = tmp_path_factory.mktemp("compare")
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
            for uid, key, categories, answer, _ in QUESTIONS
        ],
    )
    home = {"home": root / "home"}
    a = run_benchmark(RunConfig("lvbench", data), settings=settings_with(**home), out=root / "a")
    said = {uid: letter for uid, *_, letter in QUESTIONS}

    def b_answers(request: ChatRequest) -> str:
        text = request.messages[-1].text
        return next((said[u] for u in said if f"Question {u}:" in text), "B")

    settings = settings_with(**home)
    with hub(settings, FakeAdapter.function(b_answers)) as models:
        b = run_benchmark(
            RunConfig("lvbench", data), settings=settings, out=root / "b", models=models
        )
    _edit_rows(a.out, lambda r: None if r["id"] == "8" else r)
    _edit_rows(b.out, lambda r: r | {"error": "boom"} if r["id"] == "7" else r)
    return a.out, b.out


@pytest.fixture(scope="module")
def third(runs: tuple[Path, Path]) -> Path:
    """Run C, over the same questions and index: it answers A everywhere (right on 3 and 8)."""
    root = runs[0].parent
    settings = settings_with("fake:echo?reply=A", home=root / "home")
    return run_benchmark(RunConfig("lvbench", root / "data"), settings=settings, out=root / "c").out


def _edit_rows(run: Path, edit: object) -> None:
    path = run / "predictions.jsonl"
    rows = [edit(json.loads(line)) for line in path.read_text().splitlines()]  # type: ignore[operator]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r is not None))


# -- the statistics against SciPy and statsmodels on known tables --------------------------------


@pytest.mark.parametrize(("a_only", "b_only"), [(1, 9), (5, 5), (0, 7), (12, 30), (3, 0)])
def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_pairs(
    a_only: int, b_only: int
) -> None:
    from scipy import stats
    from statsmodels.stats.contingency_tables import mcnemar

    expected = stats.binomtest(a_only, a_only + b_only, 0.5).pvalue
    assert mcnemar_exact(a_only, b_only) == pytest.approx(expected, rel=1e-12)
    table = [[40, a_only], [b_only, 17]]  # the concordant cells do not enter the exact test
    assert mcnemar_exact(a_only, b_only) == pytest.approx(mcnemar(table, exact=True).pvalue)


def test_mcnemar_by_hand_on_one_table() -> None:
    # 1 against 9 discordant pairs: 2 * P(X <= 1 | n = 10, p = 1/2) = 2 * 11 / 1024
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024)
    assert mcnemar_exact(0, 0) == 1.0


def test_mean_difference_is_scipys_paired_bootstrap() -> None:
    from scipy import stats

    rng = np.random.default_rng(3)
    a = rng.normal(10, 2, 60)
    b = a + rng.normal(1.5, 1, 60)  # B costs 1.5 more per question, paired
    d = mean_difference(a, b, resamples=2000, seed=7)
    expected = stats.bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        paired=True,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(7),
    ).confidence_interval
    assert (d.low, d.high) == pytest.approx((expected.low, expected.high))
    assert d.low < d.diff < d.high and d.low > 1.0  # paired: far narrower than the spread of a
    assert d == mean_difference(a, b, resamples=2000, seed=7)  # seeded: the same twice


def test_the_accuracy_interval_resamples_pairs_as_scipys_paired_bootstrap() -> None:
    from scipy import stats

    rng = np.random.default_rng(1)
    a = (rng.random(80) < 0.5).astype(float)  # (80,) right or wrong, run A
    b = (rng.random(80) < 0.65).astype(float)  # (80,) run B on the same questions
    low, high = paired_interval(
        80, lambda pick: [b[pick].mean() - a[pick].mean()], resamples=999, seed=5
    )
    expected = stats.bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        paired=True,
        n_resamples=999,
        method="percentile",
        rng=np.random.default_rng(5),
    ).confidence_interval
    assert (low[0], high[0]) == pytest.approx((expected.low, expected.high))


def test_newcombes_paired_interval_gives_the_published_one() -> None:
    # Fagerland, Lydersen and Laake, Statistical Analysis of Contingency Tables (2017), ch. 8:
    # complete response before and after consolidation therapy (Cavo et al., 2012),
    # [[59, 6], [16, 80]]: -0.0621 (95% CI -0.1186 to -0.0046)
    low, high = newcombe_paired(59, 6, 16, 80)
    assert (low, high) == pytest.approx((-0.1186, -0.0046), abs=5e-5)


def test_with_few_discordant_pairs_the_interval_agrees_with_the_exact_test() -> None:
    # A right on 100 questions, B wrong on 4 of them: McNemar p = 0.125, nothing shown. The
    # percentile bootstrap said -8 to -1 (it rarely draws none of the 4); Newcombe's holds 0.
    assert mcnemar_exact(4, 0) == pytest.approx(0.125)
    a, b = np.ones(100), np.r_[np.zeros(4), np.ones(96)]
    _, high = paired_interval(100, lambda pick: [b[pick].mean() - a[pick].mean()], seed=0)
    assert high[0] < 0  # the bootstrap's claim the test does not back
    low_n, high_n = newcombe_paired(96, 0, 4, 0)  # B's share first: B only 0, A only 4
    assert low_n < -0.04 < 0 < high_n


@pytest.mark.parametrize(("table", "diff"), [((2, 0, 0, 0), 0.0), ((0, 0, 1, 0), -1.0)])
def test_a_tiny_or_unanimous_set_gets_an_interval_of_some_width(
    table: tuple[int, int, int, int], diff: float
) -> None:
    low, high = newcombe_paired(*table)  # a bootstrap's was [diff, diff]
    assert low <= diff <= high and high - low > 0.5


def test_newcombes_interval_covers_the_true_difference_as_it_says() -> None:
    rng = np.random.default_rng(11)
    cells = [0.85, 0.05, 0.03, 0.07]  # both right, B only, A only, both wrong
    true = cells[1] - cells[2]
    draws = rng.multinomial(60, cells, size=600)
    covered = [lo <= true <= hi for lo, hi in (newcombe_paired(*map(int, t)) for t in draws)]
    assert np.mean(covered) >= 0.93


# -- two runs -----------------------------------------------------------------------------------


def test_compare_pairs_the_questions_both_answered_and_says_what_it_left_out(
    runs: tuple[Path, Path],
) -> None:
    from scipy import stats

    c = compare_runs(*runs, resamples=500)
    assert c.left_out == {
        "no row in run A (not run, or its video missing)": 1,
        "an error in run B": 1,
    }
    o = c.overall
    assert o.questions == 6
    assert {k: v["questions"] for k, v in o.table.items()} == {
        "both right": 3,
        "A only": 1,
        "B only": 2,
        "both wrong": 0,
    }
    assert o.table["both right"]["steps"] == 0.0 and o.table["both wrong"]["steps"] is None
    assert (o.mcnemar.a_only, o.mcnemar.b_only) == (1, 2)
    assert o.mcnemar.pvalue == pytest.approx(stats.binomtest(1, 3).pvalue)
    assert (o.official.a, o.official.b) == pytest.approx((400 / 6, 500 / 6))
    assert o.official.method == "newcombe"  # every answer is right or wrong: a share
    low, high = newcombe_paired(3, 2, 1, 0)
    assert (o.official.low, o.official.high) == pytest.approx((100 * low, 100 * high))
    assert o.strict.diff == pytest.approx(100 / 6)
    assert c.means["steps"] is not None and (c.means["steps"].low, c.means["steps"].high) == (0, 0)
    # per category: reasoning holds 2 (A only), 3 (B only) and 6 (both right)
    reasoning = c.categories["Rea"]
    assert reasoning.questions == 3 and (reasoning.mcnemar.a_only, reasoning.mcnemar.b_only) == (
        1,
        1,
    )
    assert c.categories["TG"].table["B only"]["questions"] == 1
    # each category's p adjusted over all of them by Holm's method
    from statsmodels.stats.multitest import multipletests

    raw = [p.mcnemar.pvalue for p in c.categories.values()]
    assert [p.mcnemar.holm for p in c.categories.values()] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )


def test_an_official_rule_over_the_answered_is_no_share_of_all_the_pairs() -> None:
    # CrossVid's official number is over the answered questions: with some unanswered and none
    # right it matched the share of all the pairs (0 = 0), and took all of them for its count
    from vidagent.bench.base import Outcome, Sample, unanswered
    from vidagent.bench.compare import _paired, _Stats
    from vidagent.bench.report import RunReport
    from vidagent.bench.tasks import crossvid

    samples = [Sample(f"q{i}", (Path("x"),), "q", ("a", "b"), 0, ("NC",)) for i in range(6)]
    answered = [Outcome(x.id, 0.0) for x in samples[:2]] + [unanswered(x) for x in samples[2:]]
    rows = {x.id: {"steps": 1} for x in samples}

    def run(name: str) -> RunReport:
        scores = crossvid.aggregate(samples, answered)
        return RunReport(name, Path(name), {}, scores, outcomes={o.id: o for o in answered},
                         rows=rows)  # fmt: skip

    ids = [x.id for x in samples]
    paired = _paired(crossvid, run("a"), run("b"), ids, {x.id: x for x in samples}, "",
                     _Stats(0.5, 200, 0, 0.95))  # fmt: skip
    assert crossvid.aggregate(samples, answered).rule == "answered"
    assert (paired.official.method, paired.strict.method) == ("bootstrap", "newcombe")


def test_compare_refuses_runs_of_different_benchmarks(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    manifest = json.loads((runs[1] / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps(manifest | {"split": "elsewhere"}))
    (other / "predictions.jsonl").write_text((runs[1] / "predictions.jsonl").read_text())
    with pytest.raises(UserError, match="a is a run of lvbench all and other of lvbench else"):
        compare_runs(runs[0], other, resamples=10)
    with pytest.raises(UserError, match="is given twice: compare different runs"):
        compare_runs(runs[0], runs[0].parent / "." / runs[0].name, resamples=10)


def test_compare_says_when_the_runs_were_asked_different_questions(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    import shutil

    halves = []
    for k, run in enumerate(runs):
        copy = Path(shutil.copytree(run, tmp_path / f"half{k}"))
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["samples"] = manifest["samples"][k::2]  # disjoint, as two --ids files would be
        (copy / "manifest.json").write_text(json.dumps(manifest))
        halves.append(copy)
    # it said they "share no question that both ran without an error": no error was the cause
    with pytest.raises(UserError, match=r"were asked different questions \(4 and 4, none in"):
        compare_runs(*halves, resamples=10)


def test_cli_compare_prints_json_and_writes_the_plot(
    runs: tuple[Path, Path], tmp_path: Path, _isolated_home: Path
) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs the bench extra")
    out = tmp_path / "cmp"
    args = ("bench", "compare", *map(str, runs), "--resamples", "200", "--out", str(out))
    result = vidagent(*args, "--json", home=_isolated_home)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["overall"]["questions"] == 6 and body["seed"] == 0
    assert body["overall"]["mcnemar"] == {"a_only": 1, "b_only": 2, "pvalue": 1.0}
    assert set(body["means"]) == {"steps", "frames", "tokens", "cost_usd", "latency_s"}
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "compare.json").read_text())["left_out"] == body["left_out"]
    text = vidagent(*args, "--no-plots", home=_isolated_home)
    assert text.returncode == 0, text.stderr
    assert (
        "6 questions both ran without an error (a row without a parsable answer counts wrong)"
        in text.stdout
        and "left out: 2" in text.stdout
    )
    assert "exact McNemar: A only 1, B only 2" in text.stdout


# -- several runs -------------------------------------------------------------------------------


def test_cochrans_q_with_two_runs_is_mcnemars_chi_square() -> None:
    from scipy import stats

    rng = np.random.default_rng(3)
    right = rng.random((40, 2)) < [0.4, 0.65]
    a_only = int(np.sum(right[:, 0] & ~right[:, 1]))
    b_only = int(np.sum(~right[:, 0] & right[:, 1]))
    q = cochran_q(right.tolist(), resamples=200)
    chi2 = (a_only - b_only) ** 2 / (a_only + b_only)  # McNemar's, without continuity correction
    assert (q.statistic, q.df, q.discordant) == (pytest.approx(chi2), 1, a_only + b_only)
    assert q.pvalue == pytest.approx(stats.chi2.sf(chi2, 1))


def test_cochrans_q_by_hand_and_its_exact_permutation_p() -> None:
    import itertools

    # the family's table below: questions 1-6, runs a, b, c
    right = [[1, 1, 0], [1, 0, 0], [0, 1, 1], [0, 1, 0], [1, 1, 0], [1, 1, 0]]
    # Q = (k - 1)(k * sum(columns^2) - N^2) / (k * N - sum(rows^2)): columns 4, 5, 1; N 10
    expected = 2 * (3 * (16 + 25 + 1) - 100) / (3 * 10 - 18)
    q = cochran_q(right, resamples=50_000)  # (3!)^6 = 46,656 permutations: all of them
    assert q.statistic == pytest.approx(expected) and q.df == 2
    assert q.pvalue == pytest.approx(np.exp(-expected / 2))  # χ² with 2 df
    assert q.resamples == 6**6 and q.discordant == 6
    # under the null each question's row is equally likely in any of its 3 arrangements
    arrangements = [sorted(set(itertools.permutations(row))) for row in right]
    qs = []
    for pick in itertools.product(*arrangements):
        m = np.array(pick, dtype=float)
        col, row = m.sum(axis=0), m.sum(axis=1)
        qs.append(2 * (3 * (col**2).sum() - row.sum() ** 2) / (3 * row.sum() - (row**2).sum()))
    assert q.permutation_pvalue == pytest.approx(np.mean(np.array(qs) >= expected - 1e-9))
    # questions every run got right, or every run wrong, change neither Q nor its p
    padded = cochran_q([*right, *[[1, 1, 1], [0, 0, 0]] * 20], resamples=50_000)
    assert (padded.statistic, padded.permutation_pvalue, padded.discordant) == pytest.approx(
        (q.statistic, q.permutation_pvalue, 6)
    )
    assert padded.pvalue == pytest.approx(q.pvalue)
    # no question on which the runs differ: nothing to test, and no 0/0
    same = cochran_q([[1, 1, 1], [0, 0, 0]], resamples=10)
    assert (same.statistic, same.pvalue, same.permutation_pvalue) == (0.0, 1.0, 1.0)


def test_many_runs_are_one_family_on_the_questions_every_run_answered(
    runs: tuple[Path, Path], third: Path
) -> None:
    from statsmodels.stats.multitest import multipletests

    f = compare_many([*runs, third], resamples=300)
    assert f.questions == 6  # 8 has no row in a, 7 an error in b
    assert f.left_out == {
        "no row in run a (not run, or its video missing)": 1,
        "an error in run b": 1,
    }
    assert [(r.name, r.right) for r in f.runs] == [("a", 4), ("b", 5), ("c", 1)]
    assert [r.official for r in f.runs] == pytest.approx([400 / 6, 500 / 6, 100 / 6])
    assert f.cochran.statistic == pytest.approx(52 / 12)  # the table by hand, above
    assert [(c.a, c.b) for c in f.pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    # each pair as two runs compared alone, where those two share the family's questions
    alone = compare_runs(*runs, resamples=300)
    pair = f.pairs[0]
    assert replace(pair.overall, mcnemar=replace(pair.overall.mcnemar, holm=None)) == alone.overall
    assert (pair.means, pair.categories) == (alone.means, alone.categories)
    # the pairs' McNemar p-values adjusted over the three pairs
    raw = [c.overall.mcnemar.pvalue for c in f.pairs]
    assert [c.overall.mcnemar.holm for c in f.pairs] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )
    assert (f.pairs[2].overall.mcnemar.a_only, f.pairs[2].overall.mcnemar.b_only) == (4, 0)
    first = compare_many([*runs, third], against_first=True, resamples=300)
    assert [(c.a, c.b) for c in first.pairs] == [("a", "b"), ("a", "c")]
    with pytest.raises(UserError, match="is given twice"):
        compare_many([runs[0], runs[1], runs[0]], resamples=10)


def test_cli_compares_three_runs_as_a_family(
    runs: tuple[Path, Path], third: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs the bench extra")
    out = tmp_path / "family"
    args = ("bench", "compare", *map(str, runs), str(third), "--resamples", "200")
    result = vidagent(*args, "--out", str(out), "--json", home=_isolated_home)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["questions"] == 6 and body["pairs_compared"] == "every pair"
    assert [r["right"] for r in body["runs"]] == [4, 5, 1] and len(body["pairs"]) == 3
    assert body["cochran_q"]["df"] == 2 and "holm_pvalue" in body["pairs"][0]["overall"]["mcnemar"]
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    text = vidagent(*args, "--against-first", home=_isolated_home)
    assert text.returncode == 0, text.stderr
    assert "3 runs of lvbench all on the 6 questions every run ran without an error" in text.stdout
    assert "Cochran's Q" in text.stdout and "each run against the first" in text.stdout
    assert "c − b" not in text.stdout and "c − a" in text.stdout
    twice = vidagent("bench", "compare", str(runs[0]), str(runs[1]), str(runs[0]),
                     home=_isolated_home)  # fmt: skip
    assert twice.returncode != 0 and "is given twice" in twice.stderr
    assert "Traceback" not in twice.stderr
