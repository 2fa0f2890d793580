"""One ask plan at the app seam: a question is resolved once (strategy, notice, options, trace
path) before anything runs, every front end runs that plan, and a caller stops a run by
passing ``should_stop``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from factories import INDEX_SPECS

from vidagent.app import AskResult, Session, asking
from vidagent.app.results import GroundResult
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ConfigError
from vidagent.trace import Trace

OFFLINE = "llamacpp:smollm2-135m"  # the embedded model: no endpoint
ENDPOINT = "openai:gpt-4o-mini"


def _settings(llm: str, home: Path, specs: dict[str, str] | None = None) -> Settings:
    """``specs`` with ``llm``, read from no environment, under ``home``."""
    return load_settings({**(specs or {}), "llm": llm, "home": str(home)}, env={})


def test_a_plan_names_its_strategy_notice_and_trace_before_anything_runs(
    tmp_path: Path,
) -> None:
    with Session(_settings(OFFLINE, tmp_path), library=tmp_path / "lib") as session:
        plan = session.plan_ask("not-indexed-yet", "What text appears?")
        assert plan.strategy == "retrieval" and plan.agent.name == "retrieval"
        assert plan.notice.startswith("no model endpoint is configured")
        assert plan.trace_path is not None and plan.trace_path.parent == session.traces_folder
        assert "-retrieval-" in plan.trace_path.name
        assert not plan.trace_path.exists()  # nothing ran: no trace, the reference not resolved
        named = session.plan_ask(["a", "b"], "Q?", strategy="dvd", trace=False)
        assert named.agent.name == "dvd" and named.trace_path is None
        assert "5 of 13 right" in named.notice and named.videos == ("a", "b")
    with Session(_settings(ENDPOINT, tmp_path), library=tmp_path / "lib") as session:
        plan = session.plan_ask("v", "the door opens", task="ground", trace=tmp_path / "g.jsonl")
        assert (plan.strategy, plan.notice, plan.task) == ("avi", "", "ground")
        assert plan.trace_path == tmp_path / "g.jsonl"


@pytest.mark.parametrize(
    ("question", "asked", "message"),
    [
        ("Q?", {"strategy": "nope"}, "unknown strategy 'nope'"),
        ("Q?", {"strategy": "dvd", "strategy_options": {"nope": 1}}, "dvd has no option nope"),
        ("Q?", {"options": [f"o{i}" for i in range(27)]}, "27 options given"),
        ("  ", {}, "the question is empty"),
        ("  ", {"task": "ground"}, "the event description is empty"),
        # read as the letters a, b and c; and a task that is neither was answered
        ("Q?", {"options": "abc"}, "options is one string: give a list"),
        ("Q?", {"task": "bogus"}, "task 'bogus' is not 'answer' or 'ground'"),
    ],
)
def test_a_question_that_cannot_run_is_refused_in_one_line_when_planned(
    tmp_path: Path, question: str, asked: dict[str, Any], message: str
) -> None:
    session = Session(_settings(OFFLINE, tmp_path), library=tmp_path / "lib")
    with session, pytest.raises(ConfigError) as refused:
        session.plan_ask("v", question, **asked)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert not session.traces_folder.exists() or not list(session.traces_folder.iterdir())


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Record every resolution of a question's strategy, by whichever caller."""
    picked: list[str | None] = []
    pick = asking.pick_strategy

    def counted(settings: Any, strategy: str | None, task: Any = "answer") -> tuple[str, str]:
        picked.append(strategy)
        return pick(settings, strategy, task)

    monkeypatch.setattr(asking, "pick_strategy", counted)
    return picked


@pytest.mark.parametrize("command", [["ask", "no-such-video", "Q?"], ["ground", "nope", "E"]])
def test_the_cli_resolves_a_question_once(
    monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    from vidagent.cli import cli

    picked = _counting(monkeypatch)
    done = CliRunner().invoke(cli, command)
    assert done.exit_code != 0  # the reference is resolved by the run, after the plan
    assert picked == [None]


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Library holding the small clip, indexed with the fake models."""
    library = tmp_path_factory.mktemp("asking") / "lib"
    Session(load_settings(INDEX_SPECS), library=library).index_file(small_video)
    return library


def _action(name: str, **arguments: Any) -> str:
    return json.dumps({"thought": name, "action": {"name": name, "arguments": arguments}})


SCRIPT = [_action("clip_search", event_description="HELLO"), _action("answer", answer="(B)")]


@pytest.mark.parametrize(("stop_after", "calls"), [("run_started", 0), ("observed", 1)])
def test_should_stop_ends_a_run_at_its_next_check_and_the_trace_records_it(
    indexed: Path, small_video: Path, tmp_path: Path, stop_after: str, calls: int
) -> None:
    log = tmp_path / "calls.jsonl"
    llm = f"fake:scripted?log={log}&replies=" + json.dumps(SCRIPT)
    settings = load_settings({**INDEX_SPECS, "llm": llm})
    seen: list[str] = []
    with Session(settings, library=indexed) as session:
        plan = session.plan_ask(
            small_video,
            "What text appears?",
            options=["BYE", "HELLO VIDAGENT"],
            trace=tmp_path / "run.jsonl",
            tool_mode="json",
        )
        result = plan.run(
            on_event=lambda e: seen.append(e.kind), should_stop=lambda: stop_after in seen
        )
    assert type(result) is AskResult and result.answer is not None
    assert result.answer.reason == "stopped" and result.answer.forced
    calls_made = log.read_text().splitlines() if log.exists() else []
    assert len(calls_made) == calls  # no model call once it said stop
    saved = Trace.load(tmp_path / "run.jsonl")
    assert saved.answer is not None and saved.answer.reason == "stopped"
    assert [e.kind for e in saved.events][-2:] == ["answer", "run_finished"]
    assert seen[-2:] == ["answer", "run_finished"]


def test_a_plan_to_ground_returns_a_ground_result(
    indexed: Path, small_video: Path, tmp_path: Path
) -> None:
    settings = _settings(OFFLINE, tmp_path, INDEX_SPECS)
    with Session(settings, library=indexed) as session:
        plan = session.plan_ask(small_video, "HELLO shown", task="ground", trace=False)
        result = plan.run()
    assert plan.strategy == "retrieval" and isinstance(result, GroundResult)
    assert result.notice == plan.notice and "interval" in result.to_json()
