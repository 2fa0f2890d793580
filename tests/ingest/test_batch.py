"""``batch``: the entity graph's windows and AVI's captions through OpenAI's Batch API, against a loopback server
that serves ``/files`` and ``/batches``: half the price, its state in the Library so a rerun
polls the batch it submitted instead of submitting again, and one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenserver import TokenServer

from vidagent.config import Settings, load_settings
from vidagent.exceptions import RequestRejectedError
from vidagent.ingest.base import IngestContext
from vidagent.ingest.caption import Caption
from vidagent.ingest.graph import Graph
from vidagent.ingest.pipeline import run_stage
from vidagent.ingest.structure import index_structure
from vidagent.library import Library
from vidagent.media import probe
from vidagent.models.client import Models

CAPTIONS = [
    "Subject_1, a man in a red shirt, walks in and waves at Subject_2.",
    "Subject_1 hands Subject_2 a book; Subject_3 watches.",
    "Subject_2 reads the book alone.",
]


class Stop(Exception):
    """The process is killed while it waits for the batch."""


@pytest.fixture
def server() -> Iterator[TokenServer]:
    with TokenServer() as s:
        yield s


def config(tmp_path: Path, server: TokenServer, **extra: Any) -> Settings:
    return load_settings(
        {
            "home": tmp_path,
            "cache": "off",
            "openai_base_url": server.base_url,
            "llm": "openai:gpt-4o",
            "embed": "openai:text-embedding-3-small",
            "prices": {"openai:gpt-4o": {"input": 2.5, "output": 10.0}},
            "batch": True,
            **extra,
        },
        env={},
    )


def captioned(tmp_path: Path, video: Path, settings: Settings) -> IngestContext:
    lib = Library(tmp_path / "lib")
    record = index_structure(lib, video, settings).video
    updates = [{"clip_index": i, "caption": c} for i, c in enumerate(CAPTIONS)]
    lib.update_clips(record.video_id, updates)
    return IngestContext(lib, Models(settings), settings, record, video)


def direct(server: TokenServer) -> list[Any]:
    """The chat requests sent one by one (not in a batch)."""
    return [body for path, body, _, _ in server.requests if path == "/v1/chat/completions"]


def graph_calls(ctx: IngestContext) -> list[Any]:
    return [r for r in ctx.models.ledger.records() if r.role == "llm"]


def test_the_graph_windows_go_through_one_batch_at_half_price(
    tmp_path: Path, server: TokenServer, small_video: Path
) -> None:
    ctx = captioned(tmp_path, small_video, config(tmp_path, server))
    run = run_stage(Graph(), ctx)
    assert len(server.batches) == 1 and direct(server) == []
    (sent,) = server.bodies("batch:/v1/chat/completions")
    assert "Subject_1 hands Subject_2 a book" in sent["messages"][1]["content"]
    (call,) = graph_calls(ctx)
    assert call.operation == "chat_batch"
    full = (call.input_tokens * 2.5 + call.output_tokens * 10.0) / 1e6
    assert call.cost_usd == pytest.approx(full / 2)
    assert "1 windows through the Batch API at half price" in run.note
    assert ctx.library.entity_graph(ctx.video.video_id) is not None
    job = ctx.library.artifact(ctx.video.video_id, "batch", "graph")
    assert job is not None and [b["id"] for b in job.data["batches"]] == list(server.batches)


def test_a_rerun_polls_the_batch_it_submitted_instead_of_submitting_again(
    tmp_path: Path, server: TokenServer, small_video: Path
) -> None:
    settings = config(tmp_path, server)
    ctx = captioned(tmp_path, small_video, settings)
    server.batch_states = ["validating", "in_progress"]

    def killed(seconds: float) -> None:
        raise Stop

    ctx.models = Models(settings, sleep=killed)
    with pytest.raises(Stop):
        run_stage(Graph(), ctx)
    assert len(server.batches) == 1
    ctx.models = Models(settings, sleep=lambda s: None)
    run_stage(Graph(), ctx)
    assert len(server.batches) == 1  # polled again, not submitted again
    assert ctx.library.entity_graph(ctx.video.video_id) is not None
    assert [r.operation for r in graph_calls(ctx)] == ["chat_batch"]


def test_a_failed_batch_is_one_line_and_the_next_run_submits_it_anew(
    tmp_path: Path, server: TokenServer, small_video: Path
) -> None:
    ctx = captioned(tmp_path, small_video, config(tmp_path, server))
    server.fail_batches = True
    with pytest.raises(RequestRejectedError) as failed:
        run_stage(Graph(), ctx)
    message = str(failed.value)
    assert "\n" not in message and "failed: The input file has no valid lines." in message
    server.fail_batches = False
    run_stage(Graph(), ctx)
    assert len(server.batches) == 2
    assert ctx.library.entity_graph(ctx.video.video_id) is not None


def test_a_request_the_batch_rejects_is_sent_alone_and_said(
    tmp_path: Path, server: TokenServer, small_video: Path
) -> None:
    ctx = captioned(tmp_path, small_video, config(tmp_path, server))
    server.reject_ids = {"window-0"}
    run = run_stage(Graph(), ctx)
    assert len(direct(server)) == 1  # the one window, one by one
    assert "window 1 failed in the batch" in run.note and "Invalid image." in run.note
    assert [r.operation for r in graph_calls(ctx)] == ["chat"]


def test_without_the_setting_no_batch_is_made_and_the_estimate_says_so(
    tmp_path: Path, server: TokenServer, small_video: Path
) -> None:
    ctx = captioned(tmp_path, small_video, config(tmp_path, server, batch=False))
    run_stage(Graph(), ctx)
    assert server.batches == {} and len(direct(server)) == 1
    info = probe(small_video)
    on = Graph().estimate(info, 3, config(tmp_path, server))
    off = Graph().estimate(info, 3, ctx.settings)
    assert on.batch and not off.batch and on.input_tokens == off.input_tokens


# ---------------------------------------------------------------------------------------------
# AVI's captions (each clip on its own, so they can go in a batch); DVD's chain cannot


def caption(tmp_path: Path, server: TokenServer, video: Path, **extra: Any) -> Any:
    settings = config(tmp_path, server, vlm="openai:gpt-4o", **extra)
    lib = Library(tmp_path / "lib")
    record = index_structure(lib, video, settings).video
    ctx = IngestContext(lib, Models(settings), settings, record, video)
    return ctx, run_stage(Caption(), ctx)


def test_avi_captions_go_through_a_batch_and_repeated_pictures_stay_out_of_it(
    tmp_path: Path, server: TokenServer, slide_video: Path
) -> None:
    ctx, run = caption(
        tmp_path, server, slide_video, caption_style="avi", caption_skip_repeats=0.05
    )
    (batch,) = server.batches.values()
    assert batch["lines"] == 6 and direct(server) == []  # clips 1 and 2 repeat clip 0
    clips = ctx.library.clips(ctx.video.video_id)
    assert all(c.caption.startswith("A presenter in a red jacket") for c in clips)
    assert clips[1].caption_model.endswith("|reused=0")
    calls = [r for r in ctx.models.ledger.records() if r.role == "captioner"]
    assert [r.operation for r in calls] == ["chat_batch"] * 6
    assert "6 clip(s) captioned through the Batch API at half price" in run.note
    assert "2 clip(s) reused the caption" in run.note


def test_dvd_registry_captions_are_not_batched_and_the_note_says_why(
    tmp_path: Path, server: TokenServer, small_video: Path
) -> None:
    ctx, run = caption(tmp_path, server, small_video)
    assert server.batches == {} and len(direct(server)) == 3
    assert "batch: not for DVD's registry captions" in run.note
    est = Caption().estimate(probe(small_video), 3, ctx.settings)
    assert not est.batch and "not batched: the registry is a chain" in est.notes
    avi = ctx.settings.model_copy(update={"caption_style": "avi"})
    assert Caption().estimate(probe(small_video), 3, avi).batch


def test_the_dry_run_prices_batched_stages_at_half(tmp_path: Path, small_video: Path) -> None:
    import json

    from clirun import vidagent

    env = {
        "VIDAGENT_VLM": "openai:gpt-4o",
        "VIDAGENT_LLM": "openai:gpt-4o",
        "VIDAGENT_OPENAI_API_KEY": "sk-test",
        "VIDAGENT_PRICES": json.dumps({"openai:gpt-4o": {"input": 2.5, "output": 10.0}}),
    }
    args = ["index", str(small_video), "--dry-run", "--json", "--stages", "caption,graph"]
    rows = {}
    for flag in ("--no-batch", "--batch"):
        out = vidagent(*args, "--caption-style", "avi", flag, home=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        rows[flag] = {s["stage"]: s for s in json.loads(out.stdout)["stages"]}
    for stage in ("caption", "graph"):
        plain, batched = rows["--no-batch"][stage], rows["--batch"][stage]
        assert batched["input_tokens"] == plain["input_tokens"]
        assert batched["batch"] and batched["cost_usd"] == pytest.approx(plain["cost_usd"] / 2)


def test_a_batched_reply_that_is_not_the_json_is_asked_again_at_once(
    tmp_path: Path, small_video: Path
) -> None:
    from tokenserver import scripted_reply

    replies = iter(["Sorry, I cannot help with that."])

    def reply(body: dict[str, Any]) -> str:
        return next(replies, None) or scripted_reply(body)

    with TokenServer(reply) as server:
        ctx = captioned(tmp_path, small_video, config(tmp_path, server))
        run = run_stage(Graph(), ctx)
        (again,) = direct(server)
    assert again["messages"][-2] == {
        "role": "assistant",
        "content": "Sorry, I cannot help with that.",
    }
    assert "JSON object" in again["messages"][-1]["content"]
    assert [r.operation for r in graph_calls(ctx)] == ["chat_batch", "chat"]
    assert "unreadable" not in run.note and ctx.library.entity_graph(ctx.video.video_id)


def test_requests_over_a_files_limit_are_cut_into_batches_and_all_answered(
    tmp_path: Path, server: TokenServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.models import client as client_module
    from vidagent.models import load_model
    from vidagent.models.base import ChatRequest, Message

    monkeypatch.setattr(client_module, "BATCH_MAX_BYTES", 50)  # two 22-character requests a batch
    client = load_model("openai:gpt-4o", config(tmp_path, server))
    requests = {f"r{i}": ChatRequest((Message("user", f"question {i} " * 2),)) for i in range(5)}
    saved: list[int] = []
    answers = client.chat_batch(requests, None, lambda state: saved.append(len(state["batches"])))
    assert [b["lines"] for b in server.batches.values()] == [2, 2, 1]
    assert set(answers) == set(requests) and all(a.text for a in answers.values())
    assert saved == [1, 2, 3]  # the state is stored after each submission
