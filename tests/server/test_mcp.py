"""``vidagent mcp``: the MCP SDK's own client against the server over a real Library (a small
clip indexed with fake models), in-process and as a stdio subprocess."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from factories import INDEX_SPECS
from liveserver import free_port
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ImageContent, TextContent
from PIL import Image as PILImage

from vidagent.app import Session
from vidagent.config import Settings, load_settings
from vidagent.exceptions import UserError
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.models.base import Capabilities
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.server.mcp import MediaRoots, build_server, http_app

pytestmark = pytest.mark.anyio

#: a token long enough for a public bind
TOKEN = "s3cret-0123456789abcdef"

JSON_ONLY = Capabilities(
    roles=frozenset({"llm"}), supports_tools=False, supports_json_schema=True, local=True
)
SCRIPT = [
    json.dumps(
        {
            "thought": "look",
            "action": {"name": "clip_search", "arguments": {"event_description": "HELLO"}},
        }
    ),
    json.dumps(
        {"thought": "found it", "action": {"name": "answer", "arguments": {"answer": "(B)"}}}
    ),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory, small_video: Path) -> Path:
    """The media root: a folder holding the small clip as ``small.mp4``."""
    root = tmp_path_factory.mktemp("media-root")
    shutil.copy(small_video, root / "small.mp4")
    return root


@pytest.fixture(scope="module")
def library_dir(tmp_path_factory: pytest.TempPathFactory, media: Path) -> Path:
    """A Library with the small clip indexed by fake models (shared, read-only in tests)."""
    root = tmp_path_factory.mktemp("lib")
    result = index_video(
        media / "small.mp4", library=Library(root), settings=load_settings(INDEX_SPECS)
    )
    assert result.video is not None
    return root


@pytest.fixture
def settings() -> Settings:
    return load_settings(INDEX_SPECS)  # after the per-test home is set


def hub(settings: Settings, *replies: str) -> Models:
    llm = FakeAdapter.scripted(list(replies), capabilities=JSON_ONLY)
    vlm = FakeAdapter.function(lambda req: f"saw {req.image_count()} images")
    embed = FakeAdapter("hash", {"dim": "32"})
    return Models.from_adapters({"llm": llm, "vlm": vlm, "embed": embed}, settings)


@pytest.fixture
def session(settings: Settings, library_dir: Path) -> Iterator[Session]:
    with Session(settings, library=library_dir, models=hub(settings, *SCRIPT)) as s:
        yield s


@pytest.fixture
async def client(session: Session, media: Path) -> AsyncIterator[Client]:
    async with Client(build_server(session, MediaRoots([media]))) as c:
        yield c


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def body(result: CallToolResult) -> Any:
    assert not result.is_error, text(result)
    return json.loads(text(result))


async def read_json(client: Client, uri: str) -> Any:
    found = await client.read_resource(uri)
    return json.loads(found.contents[0].text)  # type: ignore[union-attr]


async def test_the_tools_are_listed_with_typed_arguments(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "list_videos",
        "list_streams",
        "index_video",
        "search",
        "ask",
        "get_frames",
        "export_evidence",
    }
    from vidagent.cli.mcp import mcp as command

    said = " ".join(str(command.help).split())  # `vidagent mcp --help` names them all
    assert [name for name in tools if f" {name}" not in said] == []
    ask = tools["ask"].input_schema
    assert ask["required"] == ["question", "videos"]
    steps = {"minimum": 1, "maximum": 1000, "type": "integer"}
    assert ask["properties"]["max_steps"]["anyOf"][0] == steps
    frames = tools["get_frames"].input_schema["properties"]["times"]
    assert frames["maxItems"] == 16 and frames["items"]["minimum"] == 0
    assert all(t.description for t in tools.values())


async def test_list_videos_and_search_answer_from_the_library(client: Client) -> None:
    videos = body(await client.call_tool("list_videos", {}))["videos"]
    assert [v["name"] for v in videos] == ["small.mp4"] and videos[0]["duration"] == pytest.approx(
        12, abs=0.1
    )
    hits = body(await client.call_tool("search", {"query": "a short test video", "top": 2}))["hits"]
    assert len(hits) == 2 and hits[0]["video_id"] == videos[0]["video_id"]
    assert 0 <= hits[0]["t0"] < hits[0]["t1"] <= 12.1 and hits[0]["start"].startswith("00:00:")
    # a path relative to the media root, as ask and index_video take it (it was read from the
    # server's own working directory: "no video")
    for ref in ("./small.mp4", "small.mp4"):
        named = {"query": "a short test video", "top": 2, "videos": [ref]}
        assert body(await client.call_tool("search", named))["hits"] == hits
        frames = await client.call_tool("get_frames", {"video": ref, "times": [1]})
        assert not frames.is_error, text(frames)


async def test_list_streams_shows_a_watched_source_and_search_reads_it(
    tmp_path: Path, media: Path
) -> None:
    from livemedia import ts_stream

    source = tmp_path / "feed.ts"
    ts_stream(source, 4.0)
    settings = load_settings({**INDEX_SPECS, "library": str(tmp_path / "library")})
    with Session(settings) as session:
        report = session.watch(
            str(source),
            window_seconds=2,
            stages=["transcribe", "embed"],
            stall_seconds=0.5,
            give_up_seconds=1.0,
        ).run()
        async with Client(build_server(session, MediaRoots([media]))) as client:
            (shown,) = body(await client.call_tool("list_streams", {}))["streams"]
            hits = body(
                await client.call_tool(
                    "search", {"query": "hello there", "videos": [shown["video_id"]], "last": "2s"}
                )
            )["hits"]
            videos = body(await client.call_tool("list_videos", {}))["videos"]
    assert shown["video_id"] == report.video_id and shown["source"] == str(source)
    assert shown["state"] == "ended" and shown["windows"] == report.windows >= 2
    assert shown["live_edge"] == pytest.approx(4.0, abs=0.3) and shown["recorded_at"]
    assert shown["outages"] == [] and shown["name"] == "feed.ts (live)"
    assert [v["video_id"] for v in videos] == [report.video_id]  # a stream is a video
    # the last two seconds before the live edge only
    assert hits and all(h["video_id"] == report.video_id for h in hits)
    assert all(h["t1"] > shown["live_edge"] - 2.0 - 1e-6 for h in hits)


async def test_index_video_indexes_a_file_inside_the_media_root(
    settings: Settings, media: Path, tmp_path: Path
) -> None:
    with Session(settings, library=tmp_path / "new-lib") as session:
        async with Client(build_server(session, MediaRoots([media]))) as client:
            assert body(await client.call_tool("list_videos", {}))["videos"] == []
            report = body(await client.call_tool("index_video", {"path": "small.mp4"}))
            assert (
                report["name"] == "small.mp4"
                and report["clips"] >= 1
                and "embed" in report["stages"]
            )
            videos = body(await client.call_tool("list_videos", {}))["videos"]
    assert [v["video_id"] for v in videos] == [report["video_id"]]


async def test_a_cancelled_ask_stops_at_its_next_step(
    settings: Settings, library_dir: Path, media: Path
) -> None:
    # The client gives up on a question while its first model call runs: the run stops before
    # its next step (it went on to the end before: the SDK's worker thread heard no cancel).
    import anyio

    from vidagent.server import mcp
    from vidagent.trace import Answered, Trace

    calls: list[Any] = []
    started = threading.Event()

    def slow(request: Any) -> str:
        """The first call lasts until the cancel has reached the work (its stop flag)."""
        calls.append(request)
        started.set()
        stop = mcp._STOP.get()
        assert stop is not None and stop.wait(60)
        return SCRIPT[min(len(calls), 2) - 1]

    llm = FakeAdapter.function(slow, capabilities=JSON_ONLY)
    models = Models.from_adapters(
        {"llm": llm, "embed": FakeAdapter("hash", {"dim": "32"})}, settings
    )
    with Session(settings, library=library_dir, models=models) as session:
        async with Client(build_server(session, MediaRoots([media]))) as client:
            (video,) = body(await client.call_tool("list_videos", {}))["videos"]
            asked = {"question": "What text appears?", "videos": [video["video_id"]]}
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "ask", asked | {"strategy": "dvd"})
                assert await anyio.to_thread.run_sync(started.wait, 60)
                group.cancel_scope.cancel()
            traces = session.traces_folder
            for _ in range(300):  # the run ends at its next check, on its own thread
                done = [p for p in traces.glob("*.jsonl") if "run_finished" in p.read_text()]
                if done:
                    break
                await anyio.sleep(0.1)
    (path,) = done
    (answered,) = Trace.load(path).of(Answered)
    assert answered.reason == "stopped" and len(calls) == 1


@pytest.mark.parametrize(
    "path", ["../outside.mp4", "{outside}", "link.mp4", "sub/../../outside.mp4"]
)
async def test_a_path_outside_the_media_root_is_refused(
    settings: Settings, small_video: Path, tmp_path: Path, path: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside.mp4"
    shutil.copy(small_video, outside)
    (root / "link.mp4").symlink_to(outside)  # a link inside that escapes
    with Session(settings, library=tmp_path / "lib") as session:
        async with Client(build_server(session, MediaRoots([root]))) as client:
            result = await client.call_tool("index_video", {"path": path.format(outside=outside)})
            asked = await client.call_tool("ask", {"question": "q?", "videos": [str(outside)]})
    for refused in (result, asked):
        assert refused.is_error and "outside the media roots" in text(refused)
        assert str(root) in text(refused) and "Traceback" not in text(refused)
        assert len(text(refused).splitlines()) == 1
    assert not (tmp_path / "lib").exists()  # nothing was indexed


async def test_without_a_model_endpoint_ask_answers_by_retrieval_and_says_so(
    settings: Settings, library_dir: Path, media: Path
) -> None:
    offline = settings.model_copy(update={"llm": "llamacpp:smollm2-135m"})  # no endpoint
    with Session(offline, library=library_dir, models=hub(offline)) as session:  # no reply
        async with Client(build_server(session, MediaRoots([media]))) as client:
            args = {"question": "What text?", "videos": ["small.mp4"], "options": ["BYE", "HELLO"]}
            answered = body(await client.call_tool("ask", args))
    assert answered["notice"].startswith(
        "no model endpoint is configured: questions are answered from the"
    )
    assert answered["answer"]["parsed"] and answered["totals"]["steps"] == 1
    trace = Path(answered["trace"]).read_text()
    assert '"strategy": "retrieval"' in trace.splitlines()[0]


async def test_ask_returns_the_answer_evidence_and_a_readable_trace(client: Client) -> None:
    args = {"question": "What text appears?", "videos": ["small.mp4"], "options": ["BYE", "HELLO"]}
    answered = body(await client.call_tool("ask", args))
    assert answered["letter"] == "B" and answered["answer"]["parsed"] is True
    # abstain left out: the server's setting (FAKE_SPECS), not an "auto" filled in
    assert answered["answer"]["abstain_policy"] == "never"
    assert answered["totals"]["steps"] == 2 and Path(answered["trace"]).is_file()
    for video_id, start, end in answered["answer"]["evidence"]:
        assert isinstance(video_id, str) and 0 <= start <= end <= 12.1

    listed = await read_json(client, "vidagent://traces")
    assert [t["trace_id"] for t in listed] == [answered["trace_id"]]
    trace = await read_json(client, f"vidagent://traces/{answered['trace_id']}")
    kinds = [e["kind"] for e in trace["events"]]
    assert kinds[0] == "run_started" and "answer" in kinds and kinds[-1] == "run_finished"
    assert trace["letter"] == "B" and trace["events"][0]["question"] == "What text appears?"


async def test_export_evidence_writes_the_answers_bundle_under_the_home(
    client: Client, settings: Settings
) -> None:
    import jsonschema

    from vidagent.app.export import export_schema

    nothing = await client.call_tool("export_evidence", {})
    assert nothing.is_error and "no answer to export" in text(nothing)
    args = {"question": "What text appears?", "videos": ["small.mp4"], "options": ["BYE", "HELLO"]}
    answered = body(await client.call_tool("ask", args))
    bundle = body(await client.call_tool("export_evidence", {"trace_id": answered["trace_id"]}))
    assert Path(bundle["path"]) == settings.home / "exports" / answered["trace_id"]
    jsonschema.validate(bundle["index"], export_schema())
    assert bundle["index"]["question"] == "What text appears?"
    assert json.loads((Path(bundle["path"]) / "index.json").read_text()) == bundle["index"]
    again = body(await client.call_tool("export_evidence", {"zip": True}))  # the last answer
    assert again["path"].endswith(f"{answered['trace_id']}-2.zip") and Path(again["path"]).is_file()
    missing = await client.call_tool("export_evidence", {"trace_id": "nope"})
    assert missing.is_error and "no trace 'nope'" in text(missing)


async def test_get_frames_returns_jpeg_images_and_a_line_with_the_times(client: Client) -> None:
    got = await client.call_tool(
        "get_frames", {"video": "small.mp4", "times": [1, 5.5, 9], "size": 256}
    )
    assert not got.is_error, text(got)
    images = [c for c in got.content if isinstance(c, ImageContent)]
    assert len(images) == 3 and all(i.mime_type == "image/jpeg" for i in images)
    for image in images:
        decoded = PILImage.open(io.BytesIO(base64.b64decode(image.data)))
        assert decoded.format == "JPEG" and max(decoded.size) == 256
    assert "3 frames of small.mp4" in text(got) and text(got).endswith(
        "at 1 s (00:00:01), 5.5 s (00:00:05.5), 9 s (00:00:09)"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"video": "small.mp4", "times": [0.5] * 17}, "at most 16 items"),
        ({"video": "small.mp4", "times": []}, "at least 1 item"),
        ({"video": "small.mp4", "times": [-1]}, "greater than or equal to 0"),
        ({"video": "small.mp4", "times": [30]}, "30 s: outside small.mp4"),
        ({"video": "nope", "times": [1]}, "no video 'nope'"),
    ],
)
async def test_get_frames_refuses_bad_requests(
    client: Client, arguments: dict[str, Any], message: str
) -> None:
    got = await client.call_tool("get_frames", arguments)
    assert (
        got.is_error
        and message in text(got)
        and not any(isinstance(c, ImageContent) for c in got.content)
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        (
            "search",
            {"query": "x", "top": 0},
            "search: top: Input should be greater than or equal to 1",
        ),
        ("search", {"top": 3}, "search: query: Field required"),
        # JSON's own types only: true was 1 clip, "yes" a zip, and "NaN" "less than 0"
        ("search", {"query": "x", "top": True}, "search: top: Input should be a valid integer"),
        ("search", {"query": "x", "top": "5"}, "search: top: Input should be a valid integer"),
        ("export_evidence", {"zip": "yes"}, "export_evidence: zip: Input should be a valid bool"),
        (
            "get_frames",
            {"video": "small", "times": ["NaN"]},
            "get_frames: times.0: Input should be a valid number",
        ),
        (
            "ask",
            {"question": "q?", "videos": ["small.mp4"], "max_steps": 2.5},
            "ask: max_steps: Input should be a valid integer",
        ),
        ("search", {"query": "x", "limit": 3}, "search: unknown argument(s) limit; it takes"),
        ("search", {"query": "x" * 2001}, "search: query: String should have at most 2000"),
        ("search", {"query": "x", "videos": []}, "search: videos: List should have at least 1"),
        (
            "search",
            {"query": "\ud800"},
            "search: query: Input should be a valid string, unable to parse raw data as a unicode",
        ),
        ("index_video", {"path": "a\x00b.mp4"}, "index_video: path: contains a NUL character"),
        (
            "index_video",
            {"path": "small.mp4", "stages": []},
            "index_video: stages: List should have at least 1 item",
        ),
        ("index_video", {"path": "x" * 256 + ".mp4"}, "path: has a name longer than 255 bytes"),
        (
            "ask",
            {"question": "q?", "videos": ["small.mp4"], "options": [f"o{i}" for i in range(27)]},
            "ask: options: 27 options given; a multiple-choice question takes at most 26",
        ),
        (
            "ask",
            {"question": "q?", "videos": ["small.mp4"], "strategy": "nope"},
            "unknown strategy 'nope'",
        ),
        ("ask", {"question": "q?", "videos": ["ghost"]}, "no video 'ghost'"),
        # the argument by its name here, not the CLI's option (--last)
        ("search", {"query": "x", "last": "soon"}, "`last`: 'soon' is not a length"),
        ("index_video", {"path": "missing.mp4"}, "missing.mp4"),
    ],
)
async def test_a_bad_argument_is_a_tool_error_with_its_message(
    client: Client, tool: str, arguments: dict[str, Any], message: str
) -> None:
    got = await client.call_tool(tool, arguments)
    assert got.is_error and message in text(got) and "Traceback" not in text(got)
    assert len(text(got).splitlines()) == 1 and "x" * 300 not in text(got)


async def test_the_video_resources_read_the_library(client: Client) -> None:
    videos = await read_json(client, "vidagent://videos")
    assert [v["name"] for v in videos] == ["small.mp4"]
    shown = await read_json(client, f"vidagent://videos/{videos[0]['video_id']}")
    assert shown["video"]["video_id"] == videos[0]["video_id"] and shown["summary"]
    assert len(shown["clips"]) >= 1 and shown["clips"][0]["t0"] == 0
    with pytest.raises(MCPError, match="no video 'nope'"):
        await client.read_resource("vidagent://videos/nope")
    with pytest.raises(MCPError, match="no trace 'nope'"):
        await client.read_resource("vidagent://traces/nope")


def test_http_beyond_loopback_needs_a_token(session: Session) -> None:
    from starlette.testclient import TestClient

    server = build_server(session, MediaRoots())
    with pytest.raises(
        UserError,
        match="refusing to listen on 0.0.0.0 without a token: pass --token or set VIDAGENT_TOKEN",
    ):
        http_app(server, host="0.0.0.0")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"accept": "application/json, text/event-stream"}
    app = http_app(server, host="0.0.0.0", token=TOKEN)
    with TestClient(app, base_url="http://127.0.0.1") as web:
        assert web.post("/mcp", json=init, headers=accept).status_code == 401
        wrong = {**accept, "authorization": "Bearer nope"}
        assert web.post("/mcp", json=init, headers=wrong).status_code == 401
        right = {**accept, "authorization": f"Bearer {TOKEN}"}
        assert web.post("/mcp", json=init, headers=right).status_code == 200
        # The HTTP API's Host and Origin rule, whatever the bind (the SDK's is on for loopback only).
        rebound = web.post("/mcp", json=init, headers={**right, "host": "attacker.example:8001"})
        assert rebound.status_code == 421
        foreign = {**right, "origin": "http://attacker.example"}
        assert web.post("/mcp", json=init, headers=foreign).status_code == 403
    with pytest.raises(UserError, match="at least 16 characters"):
        http_app(server, host="0.0.0.0", token="short")


def test_the_cli_refuses_a_public_bind_without_a_token(_isolated_home: Path) -> None:
    from clirun import vidagent

    assert "VIDAGENT_TOKEN" not in os.environ  # _isolated_home leaves no VIDAGENT_* set
    out = vidagent("mcp", "--transport", "http", "--host", "0.0.0.0", home=_isolated_home)
    assert out.returncode == 1 and out.stdout == ""
    assert (
        out.stderr.startswith("error: refusing to listen on 0.0.0.0 without a token")
        and len(out.stderr.splitlines()) == 1
    )


def test_the_cli_refuses_a_port_in_use_or_out_of_range_in_one_line(
    _isolated_home: Path,
) -> None:
    import socket

    from clirun import vidagent

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = vidagent("mcp", "--transport", "http", "--port", str(port), home=_isolated_home)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f"error: cannot serve on 127.0.0.1:{port}: Address already in use; give another --port"
    ]
    out = vidagent("mcp", "--transport", "http", "--port", "99999", home=_isolated_home)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "Invalid value for '--port': 99999 is not in the range 0<=x<=65535" in out.stderr


async def test_vidagent_mcp_over_stdio(
    library_dir: Path, media: Path, _isolated_home: Path
) -> None:
    env = {
        **os.environ,
        "VIDAGENT_HOME": str(_isolated_home),
        "HF_HUB_OFFLINE": "1",
        **{f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()},
    }
    args = ["-m", "vidagent", "--library", str(library_dir), "mcp", "--media-root", str(media)]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with Client(params, read_timeout_seconds=60) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        videos = body(await client.call_tool("list_videos", {}))["videos"]
    assert {"list_videos", "ask", "get_frames"} <= names
    assert [v["name"] for v in videos] == ["small.mp4"]


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes], log: Path, seconds: float = 120
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listened on port {port} within {seconds} s: {log.read_text()}")


@pytest.fixture
def http_server(library_dir: Path, _isolated_home: Path, tmp_path: Path) -> Iterator[str]:
    """``vidagent mcp --transport http`` with a token, as a process; yields its URL once it
    listens, which it does once its Library is open (``vidagent mcp`` opens it first)."""
    port = free_port()
    env = {**os.environ, "VIDAGENT_HOME": str(_isolated_home), "VIDAGENT_TOKEN": TOKEN}
    args = ["--library", str(library_dir), "mcp", "--transport", "http", "--port", str(port)]
    log = tmp_path / "server.log"
    with log.open("wb") as out:  # a file: a pipe nobody reads until the end can fill and block
        proc = subprocess.Popen(
            [sys.executable, "-m", "vidagent", *args], env=env, stdout=out, stderr=out
        )
    try:
        wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_vidagent_mcp_over_streamable_http_with_a_token(http_server: str) -> None:
    # The SDK's own client's timeouts (30 s, 300 s to read a stream): httpx's default of 5 s
    # is no MCP client's, and a loaded machine (the test suite's two workers) can pass it.
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(timeout=timeout) as anonymous:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert (await anonymous.post(http_server, json=ping)).status_code == 401
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout)
    async with http, Client(streamable_http_client(http_server, http_client=http)) as client:
        videos = body(await client.call_tool("list_videos", {}))["videos"]
    assert [v["name"] for v in videos] == ["small.mp4"]
