"""The graph stage: AVI's Fig. 8 extraction over the captions, windows, retries, idempotence."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from tqdm import tqdm

from vidagent.config import load_settings
from vidagent.exceptions import ContextOverflowError
from vidagent.ingest.base import IngestContext
from vidagent.ingest.graph import (
    RETRY_NOTE,
    SCHEMA,
    CaptionLine,
    Graph,
    caption_budget,
    windows,
)
from vidagent.ingest.pipeline import STAGES, default_stages, run_stage
from vidagent.ingest.structure import index_structure
from vidagent.library import Library
from vidagent.models.base import Adapter, Capabilities, ChatRequest, Message
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.prompts import load_prompt, prompt_hash

CAPTIONS = [
    "Subject_1, a man in a red shirt, walks in and waves at Subject_2.",
    "Subject_1 hands Subject_2 a book; Subject_3 watches.",
    "Subject_2 reads the book alone.",
]


def fig8(request: ChatRequest) -> str:
    """A well-behaved extractor: the people and interactions of the captions above."""
    return json.dumps(
        {
            "video_analysis": [
                {
                    "subject_id": "Subject_1",
                    "subject_name": "Man in red shirt",
                    "appearance_timeline": [["00:00:00", "00:00:10"]],
                    "attributes": ["red shirt"],
                    "actions_events": [{"action": "waves", "timestamp": ["00:00:02", "00:00:03"]}],
                },
                {
                    "subject_id": "Subject_2",
                    "subject_name": "Reader",
                    "appearance_timeline": [["00:00:00", "00:00:12"]],
                    "attributes": [],
                    "actions_events": [],
                },
                {
                    "subject_id": "Subject_3",
                    "subject_name": "Onlooker",
                    "appearance_timeline": [["00:00:05", "00:00:10"]],
                    "attributes": [],
                    "actions_events": [],
                },
            ],
            "interactions": [
                {
                    "subjects_involved": ["Subject_1", "Subject_2"],
                    "interaction_description": "Subject_1 hands Subject_2 a book",
                    "timestamp": ["00:00:05", "00:00:08"],
                },
            ],
        }
    )


def make_ctx(tmp_path: Path, video: Path, adapters: dict[str, Adapter]) -> IngestContext:
    config = load_settings({"cache": "off", "embed": "fake:hash?dim=32"})
    lib = Library(tmp_path / "lib")
    report = index_structure(lib, video, config)
    hub = Models.from_adapters({"embed": FakeAdapter("hash", {"dim": "32"}), **adapters}, config)
    ctx = IngestContext(lib, hub, config, report.video, video)
    ctx.library.update_clips(
        ctx.video.video_id,
        [{"clip_index": i, "caption": c, "caption_model": "x"} for i, c in enumerate(CAPTIONS)],
    )
    return ctx


def run(stage: Graph, ctx: IngestContext) -> int:
    pending = stage.pending(ctx)
    if pending:
        with tqdm(total=len(pending), disable=True) as bar:
            stage.run(ctx, pending, bar)
    return len(pending)


def test_the_extractor_reads_the_captions_with_fig_8_and_the_graph_is_stored(
    tmp_path: Path, small_video: Path
) -> None:
    llm = FakeAdapter.function(fig8)
    ctx = make_ctx(tmp_path, small_video, {"llm": llm})
    stage = Graph()
    assert run(stage, ctx) == 3

    (request,) = llm.requests
    assert request.messages == (
        Message("system", load_prompt("avi_graph")),
        Message(
            "user",
            "[0s–5s] " + CAPTIONS[0] + "\n[5s–10s] " + CAPTIONS[1] + "\n[10s–12s] " + CAPTIONS[2],
        ),
    )
    assert request.response_schema == SCHEMA and request.temperature == 0.0
    graph = ctx.library.entity_graph(ctx.video.video_id)
    assert graph is not None
    assert {i: (n.name, n.clips) for i, n in graph.nodes.items()} == {
        "Subject_1": ("Man in red shirt", [0, 1]),
        "Subject_2": ("Reader", [0, 1, 2]),
        "Subject_3": ("Onlooker", [1]),
    }
    (edge,) = graph.edges
    assert (edge.src, edge.dst, edge.relation, edge.span) == (
        "Subject_1",
        "Subject_2",
        "Subject_1 hands Subject_2 a book",
        (5.0, 8.0),
    )
    assert all(
        n.name_vector is not None and n.name_vector.shape == (32,) for n in graph.nodes.values()
    )
    assert graph.nodes["Subject_2"].freq == 1.0  # on screen longest, in every clip
    assert stage.note == "3 people, 1 edges, 0 super-nodes from 1 windows"
    found = graph.retrieve("What does the man in red shirt give?", None)
    assert "(Subject_1: Man in red shirt) --[Subject_1 hands Subject_2 a book]--> " in found.text


def test_a_rerun_with_the_same_fingerprint_does_nothing_and_new_captions_rebuild(
    tmp_path: Path, small_video: Path
) -> None:
    llm = FakeAdapter.function(fig8)
    ctx = make_ctx(tmp_path, small_video, {"llm": llm})
    vid = ctx.video.video_id
    first = run_stage(Graph(), ctx)
    assert first.clips == 3 and len(llm.requests) == 1
    assert ctx.video.stages["graph"]["model"] == Graph().fingerprint(ctx.settings)
    graph_id = ctx.library.artifact(vid, "graph").data["graph_id"]  # type: ignore[union-attr]

    again = run_stage(Graph(), ctx)
    assert again.clips == 0 and len(llm.requests) == 1
    assert ctx.library.artifact(vid, "graph").data["graph_id"] == graph_id  # type: ignore[union-attr]

    ctx.library.update_clips(vid, [{"clip_index": 2, "caption": "Subject_2 leaves."}])
    assert run_stage(Graph(), ctx).clips == 3 and len(llm.requests) == 2
    assert "[10s–12s] Subject_2 leaves." in llm.requests[1].messages[1].text


def test_the_fingerprint_names_the_extractor_its_prompt_and_the_embedder() -> None:
    settings = load_settings({"llm": "openai:qwen3-32b", "embed": "fake:hash?dim=8"})
    assert Graph().fingerprint(settings) == (
        f"openai:qwen3-32b|{prompt_hash('avi_graph')}|embed=fake:hash?dim=8"
    )


def test_an_unreadable_reply_is_asked_once_more(tmp_path: Path, small_video: Path) -> None:
    replies = iter(["Sure! Here are the people I found: a man and a reader.", fig8(None)])  # type: ignore[arg-type]
    llm = FakeAdapter.function(lambda request: next(replies))
    ctx = make_ctx(tmp_path, small_video, {"llm": llm})
    run(Graph(), ctx)
    assert len(llm.requests) == 2
    retry = llm.requests[1].messages
    assert retry[-2:] == (
        Message("assistant", "Sure! Here are the people I found: a man and a reader."),
        Message("user", RETRY_NOTE),
    )
    graph = ctx.library.entity_graph(ctx.video.video_id)
    assert graph is not None and len(graph.nodes) == 3


def test_a_window_unreadable_twice_is_left_empty_with_a_note(
    tmp_path: Path, small_video: Path
) -> None:
    llm = FakeAdapter.function(lambda request: "I'd rather not.")
    ctx = make_ctx(tmp_path, small_video, {"llm": llm})
    run_ = run_stage(Graph(), ctx)
    assert len(llm.requests) == 2
    assert run_.note == (
        "0 people, 0 edges, 0 super-nodes from 1 windows; 1 of 1 windows unreadable, left "
        "empty (0s-12s)"
    )
    graph = ctx.library.entity_graph(ctx.video.video_id)
    assert graph is not None and graph.nodes == {}
    assert graph.notes == ["1 of 1 windows unreadable, left empty (0s-12s)"]
    assert graph.retrieve("who?", None).text.startswith("The entity graph of video")
    assert ctx.video.stages["graph"]["note"] == run_.note


def lines(n: int, words: int = 1) -> list[CaptionLine]:
    return [CaptionLine(5.0 * i, 5.0 * i + 5, f"c{i:03d} " + "w " * words) for i in range(n)]


def test_without_a_declared_context_windows_are_60_captions_sharing_6() -> None:
    parts = windows(lines(130), None)
    assert [(p[0].t0 / 5, p[-1].t0 / 5) for p in parts] == [(0, 59), (54, 113), (108, 129)]
    assert windows(lines(60), None) == [lines(60)]


def test_a_declared_context_fills_windows_up_to_the_budget() -> None:
    caps = Capabilities(roles=frozenset({"llm"}), context_tokens=4096, local=True)
    client = Models.from_adapters({"llm": FakeAdapter.function(fig8, capabilities=caps)}).client(
        "llm"
    )
    budget = caption_budget(client)
    assert budget == 4096 - (len(load_prompt("avi_graph")) // 3 + 16) - 2048
    many = lines(400, words=20)  # ~17 tokens a line: about 90 fit

    def cost(part: list[CaptionLine]) -> int:
        return sum((len(str(x)) + 1) // 3 + 1 for x in part)

    parts = windows(many, budget)
    assert all(cost(p) <= budget for p in parts)
    first = parts[0]
    assert len(first) > 60 and cost(many[: len(first) + 1]) > budget  # filled, not cut at 60
    assert [x for p in parts for x in p][-1] == many[-1]
    assert all(a[-1].t0 >= b[0].t0 for a, b in itertools.pairwise(parts))  # they overlap


@pytest.mark.parametrize(
    ("llm", "graph"),
    [("llamacpp:smollm2-135m", False), ("fake:echo", False), ("openai:qwen3-32b", True)],
)
def test_a_plain_index_builds_the_graph_only_with_a_capable_llm(llm: str, graph: bool) -> None:
    chosen = default_stages(load_settings({"llm": llm}))
    assert ("graph" in chosen) is graph
    assert [s for s in chosen if s != "graph"] == list(STAGES)
    if graph:
        assert chosen.index("graph") == chosen.index("embed") + 1  # before summarize


def test_a_strategy_or_the_user_names_the_stage(tmp_path: Path, small_video: Path) -> None:
    from factories import INDEX_SPECS

    from vidagent.ingest import index_video

    settings = load_settings({**INDEX_SPECS, "llm": "fake:scripted"})
    llm: Any = FakeAdapter.function(fig8)
    hub = Models.from_adapters({"llm": llm, "embed": FakeAdapter("hash", {"dim": "32"})}, settings)
    result = index_video(
        small_video,
        library=tmp_path / "lib",
        settings=settings,
        models=hub,
        stages=("graph",),
    )
    assert [r.stage for r in result.stages] == ["graph"]
    assert result.video is not None and "graph" in result.video.stages
    # No captions yet: an empty graph that says why, without asking the extractor.
    assert llm.requests == [] and "no captions" in result.stages[0].note


def test_a_window_the_endpoint_refuses_as_too_long_is_asked_in_halves() -> None:
    shown: list[int] = []

    def server(request: ChatRequest) -> str:
        captions = request.messages[-1].text.splitlines()
        if len(captions) > 20:
            raise ContextOverflowError("context_length_exceeded")
        shown.append(len(captions))
        return fig8(request)

    caps = Capabilities(roles=frozenset({"llm"}), supports_json_schema=True, local=False)
    client = Models.from_adapters({"llm": FakeAdapter.function(server, capabilities=caps)}).client(
        "llm"
    )
    stage = Graph()
    found = stage.extract(client, lines(60))
    assert shown == [15, 15, 15, 15] and stage.windows == 4 and not stage.failed
    assert [s.subject_id for s in found.subjects] == ["Subject_1", "Subject_2", "Subject_3"]
    assert len(found.interactions) == 1  # the four halves' copies are one interaction
