"""Frame-budget ladders: ``bench run --frames 1,100000`` runs once per budget in one folder, every
row says what it cost and whether a budget capped it, and ``bench report`` reads the ladder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchkit import hub, make_lvbench, rows_in, settings_with
from clirun import vidagent

from vidagent.app.benchmarks import RunConfig, run_ladder
from vidagent.app.core import SessionCore
from vidagent.exceptions import UserError
from vidagent.models.base import ChatRequest, ToolCall
from vidagent.models.fake import FakeAdapter

OPTIONS = "\n(A) a cat\n(B) a dog\n(C) a car\n(D) a tree"
ROW_FIELDS = {"frames", "input_tokens", "output_tokens", "latency_s", "capped", "error"}


def browse_then_answer(request: ChatRequest) -> str | ToolCall:
    """Inspect the frames of the first seconds once, then answer B."""
    if request.tools and not any(m.role == "tool" for m in request.messages):
        arguments = {"question": "what is shown", "time_ranges_hhmmss": [["00:00:00", "00:00:02"]]}
        return ToolCall("call_1", "frame_inspect", json.dumps(arguments))
    return "B"


@pytest.fixture(scope="module")
def ladder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ladder")
    data = make_lvbench(
        root / "data",
        [
            {
                "key": "k1",
                "uid": uid,
                "question": f"Question {uid}: what is shown?{OPTIONS}",
                "answer": answer,
                "question_type": ["reasoning"],
                "time_reference": "",
            }
            for uid, answer in (("1", "B"), ("2", "A"), ("3", "B"))
        ],
    )
    settings = settings_with(home=root / "home")
    with (
        hub(settings, FakeAdapter.function(browse_then_answer)) as models,
        SessionCore(settings, models=models) as session,
    ):
        summaries = run_ladder(
            RunConfig("lvbench", data, concurrency=1), [100000, 1], session, out=root / "ladder"
        )
    assert [s.out.name for s in summaries] == ["frames-1", "frames-100000"]  # in budget order
    return root / "ladder"


def test_each_rung_is_a_run_folder_with_its_budget_and_rows_that_say_what_they_cost(
    ladder: Path,
) -> None:
    assert json.loads((ladder / "ladder.json").read_text())["frames"] == [1, 100000]
    for rung, cap in (("frames-1", 1), ("frames-100000", 100000)):
        manifest = json.loads((ladder / rung / "manifest.json").read_text())
        assert manifest["budget"]["frames"] == cap
        rows = rows_in(ladder / rung / "predictions.jsonl")
        assert len(rows) == 3 and all(r.keys() >= ROW_FIELDS for r in rows)
    tight = rows_in(ladder / "frames-1" / "predictions.jsonl")
    loose = rows_in(ladder / "frames-100000" / "predictions.jsonl")
    # the browse looked at more than one frame: the tight rung was stopped there, the loose not
    assert all(r["capped"] and r["reason"] == "budget:frames" for r in tight)
    assert not any(r["capped"] for r in loose) and all(r["frames"] > 1 for r in loose)
    assert all(r["input_tokens"] > 0 and r["output_tokens"] > 0 for r in tight + loose)


def test_report_reads_a_ladder_as_its_rungs_and_plots_accuracy_against_frames(
    ladder: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    pytest.importorskip("matplotlib", reason="the plots need the bench extra")
    out = tmp_path / "report"
    result = vidagent(
        "bench", "report", str(ladder), "--out", str(out), "--resamples", "50", home=_isolated_home
    )
    assert result.returncode == 0, result.stderr
    runs = json.loads((out / "report.json").read_text())["runs"]
    assert [r["name"] for r in runs] == ["frames-1", "frames-100000"]
    assert (out / "accuracy_vs_frames.png").read_bytes()[:4] == b"\x89PNG"
    table = result.stdout.split("per question")[1]
    assert "frames cap" in table and "100000" in table


def test_a_ladder_needs_positive_budgets(tmp_path: Path) -> None:
    with (
        SessionCore(settings_with(home=tmp_path)) as session,
        pytest.raises(UserError, match="--frames"),
    ):
        run_ladder(RunConfig("lvbench", tmp_path), [0, 32], session, out=tmp_path / "l")


def test_cli_refuses_a_ladder_and_one_budget_together(tmp_path: Path, _isolated_home: Path) -> None:
    args = ("bench", "run", "lvbench", "--data", str(tmp_path), "--frames", "32,128")
    result = vidagent(*args, "--max-frames", "64", home=_isolated_home)
    assert result.returncode != 0 and "not both" in result.stderr


def test_cli_runs_a_ladder_into_one_folder(
    ladder: Path, tmp_path: Path, _isolated_home: Path
) -> None:
    from benchkit import SPECS

    env = {f"VIDAGENT_{k.upper()}": v for k, v in SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:echo?reply=B"
    out = tmp_path / "cli-ladder"
    args = ("bench", "run", "lvbench", "--data", str(ladder.parent / "data"), "--frames", "64,8")
    result = vidagent(*args, "--out", str(out), "-q", "--json", home=_isolated_home, env=env)
    assert result.returncode == 0, result.stderr
    summaries = json.loads(result.stdout)
    assert [Path(s["out"]).name for s in summaries] == ["frames-8", "frames-64"]
    assert all(s["questions"] == 3 for s in summaries)
    assert json.loads((out / "ladder.json").read_text())["frames"] == [8, 64]
