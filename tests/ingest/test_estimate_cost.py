"""``index --dry-run`` against what a run reports: an endpoint that bills every request as
OpenAI does (``tests/tokenserver.py``), each endpoint stage's calls, input tokens and the total
cost within ±25% of the dry run's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tokenserver import TokenServer

from vidagent.config import Settings, load_settings
from vidagent.ingest import estimate_path, index_path
from vidagent.library import Library
from vidagent.models.client import Models
from vidagent.models.prices import call_cost

STAGES = ("caption", "embed", "graph", "summarize")
ROLE = {"caption": "captioner", "embed": "embed", "graph": "llm", "summarize": "llm"}
PRICES = {
    "openai:gpt-4o": {"input": 2.5, "output": 10.0},
    "openai:text-embedding-3-small": {"input": 0.02, "output": 0.0},
}


@pytest.fixture(scope="module")
def silent_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 s at 640x360 without audio (speech is a guess of the dry run's: none here)."""
    from vidagent.media.synth import make_video

    path = tmp_path_factory.mktemp("cost") / "silent.mp4"
    make_video(path, duration=20, shots=2, text_overlays=[(5.0, 9.0, "QUARTERLY PLAN")])
    return path


@pytest.fixture(scope="module")
def server() -> Any:
    with TokenServer() as s:
        yield s


def settings(tmp_path: Path, server: TokenServer, vlm: str = "openai:gpt-4o") -> Settings:
    return load_settings(
        {
            "home": tmp_path,
            "cache": "off",
            "openai_base_url": server.base_url,
            "vlm": vlm,
            "llm": "openai:gpt-4o",
            "embed": "openai:text-embedding-3-small",
            "prices": PRICES,
        },
        env={},
    )


def reported(video: Path, config: Settings) -> dict[str, tuple[int, int, float]]:
    """``(calls, input tokens, cost)`` by stage from the run's usage ledger (the stage's role)."""
    models = Models(config)
    marks: dict[str, int] = {}
    out: dict[str, tuple[int, int, float]] = {}

    def before(name: str) -> None:
        marks[name] = len(models.ledger.records())

    def after(run: Any) -> None:
        made = models.ledger.records()[marks[run.stage] :]
        own = [r for r in made if r.role == ROLE[run.stage]]
        cost = sum(r.cost_usd for r in made)
        out[run.stage] = (len(own), sum(r.input_tokens for r in own), cost)

    with models:
        index_path(
            video,
            library=Library(config.library_uri),
            settings=config,
            models=models,
            stages=STAGES,
            before_stage=before,
            on_stage=after,
        )
    return out


@pytest.mark.parametrize("vlm", ["openai:gpt-4o", "openai:gpt-4o?detail=low"])
def test_the_dry_run_is_within_a_quarter_of_what_the_endpoint_bills(
    tmp_path: Path, server: TokenServer, silent_video: Path, vlm: str
) -> None:
    config = settings(tmp_path, server, vlm)
    rows = {r.stage: r for r in estimate_path(silent_video, config, STAGES).stages}
    actual = reported(silent_video, config)
    for stage in STAGES:
        calls, tokens, _ = actual[stage]
        assert rows[stage].calls == calls, stage
        assert 0.75 <= rows[stage].input_tokens / tokens <= 1.25, (stage, rows[stage], tokens)
    guessed = sum(
        call_cost(r.spec, r.input_tokens, r.output_tokens, config, local=False) or 0.0
        for r in rows.values()
        if r.stage in STAGES
    )
    assert 0.75 <= guessed / sum(cost for _, _, cost in actual.values()) <= 1.25
