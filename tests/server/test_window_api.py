"""``last``, ``since`` and ``until`` over HTTP (``/api/search``, ``/api/ask``, grounding
included) and MCP (``search``, ``ask``): only that window of each video is searched or seen."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from liveserver import fake_models
from mcp import Client
from mcp_types import CallToolResult, TextContent

from vidagent.app import Session
from vidagent.config import Settings
from vidagent.server.app import create_app
from vidagent.server.mcp import MediaRoots, build_server


@pytest.fixture
def api(api_settings: Settings, media: Path) -> TestClient:
    app = create_app(api_settings, models=fake_models(api_settings), media_roots=[media])
    return TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def spans(hits: list[dict[str, Any]]) -> list[tuple[float, float]]:
    return sorted((h["t0"], h["t1"]) for h in hits)


def finished(api: TestClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = api.get(f"/api/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return dict(job)
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def test_search_takes_a_window(api: TestClient) -> None:
    search = {"query": "hello there", "top": 10}
    assert len(api.post("/api/search", json=search).json()["hits"]) == 3
    hits = api.post("/api/search", json=search | {"last": "2s"}).json()["hits"]
    assert spans(hits) == [(10.0, 12.0)]
    vid = hits[0]["video_id"]
    api.app.state.server.session.set_recorded_at(vid, "2026-11-28T14:00:00Z")
    early = api.post("/api/search", json=search | {"until": "14:00:04"}).json()["hits"]
    assert spans(early) == [(0.0, 5.0)] and early[0]["wall_t0"] == "2026-11-28T14:00:00Z"


def test_ask_and_ground_run_inside_the_window_and_trace_it(api: TestClient) -> None:
    vid = api.get("/api/videos").json()["videos"][0]["video_id"]
    api.app.state.server.session.set_recorded_at(vid, "2026-11-28T14:00:00Z")
    for task in ("answer", "ground"):
        body = {"videos": [vid], "question": "HELLO", "strategy": "retrieval", "task": task}
        r = api.post("/api/ask", json=body | {"last": "2s"})
        assert r.status_code == 202, r.text
        job = finished(api, r.json()["job_id"])
        assert job["state"] == "done", job
        evidence = job["result"]["answer"]["evidence"]
        assert evidence and all(t0 >= 10 for _, t0, _ in evidence)
        started = api.get(f"/api/traces/{r.json()['trace']}").json()["events"][0]
        assert started["videos"][0]["window"] == [10.0, 12.0]
        (window,) = job["result"]["windows"]
        assert (window["t0"], window["t1"], window["wall_t0"]) == (
            10.0,
            12.0,
            "2026-11-28T14:00:10Z",
        )


def test_a_window_that_cannot_be_placed_is_the_requests_fault(api: TestClient) -> None:
    vid = api.get("/api/videos").json()["videos"][0]["video_id"]
    bad = api.post("/api/search", json={"query": "x", "last": "10x"})
    assert bad.status_code == 400 and bad.json()["detail"].startswith("`last`: '10x'")
    mixed = api.post("/api/search", json={"query": "x", "last": "5m", "until": "10:00"})
    assert mixed.status_code == 400
    asked = api.post("/api/ask", json={"videos": [vid], "question": "Q?", "since": "10:00"})
    assert asked.status_code == 400  # before any job starts
    assert asked.json()["detail"].startswith("small.mp4 has no recording start time")
    assert "--started-at" in asked.json()["detail"]
    assert api.get("/api/jobs").json()["jobs"] == []


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.mark.anyio
async def test_mcp_search_and_ask_take_a_window(api_settings: Settings, media: Path) -> None:
    with Session(api_settings, models=fake_models(api_settings)) as session:
        async with Client(build_server(session, MediaRoots([media]))) as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            assert {"last", "since", "until"} <= set(tools["search"]["properties"])
            assert {"last", "since", "until"} <= set(tools["ask"]["properties"])
            found = await client.call_tool("search", {"query": "hello", "top": 10, "last": "2s"})
            assert spans(json.loads(text(found))["hits"]) == [(10.0, 12.0)]
            asked = {"question": "HELLO", "videos": ["small.mp4"], "strategy": "retrieval"}
            answered = await client.call_tool("ask", asked | {"last": "2s"})
            evidence = json.loads(text(answered))["answer"]["evidence"]
            assert evidence and all(t0 >= 10 for _, t0, _ in evidence)
            refused = await client.call_tool("ask", asked | {"since": "10:00"})
            assert refused.is_error and "no recording start time" in text(refused)
