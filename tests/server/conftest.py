"""Shared fixtures of the server tests: a real indexed clip, fake models, a live server.

The small generated clip is indexed once per session with the fake models below into a
template Library; each test gets its own copy (so removing a video in one test touches no
other) under its own ``VIDAGENT_HOME``. :func:`live_server` starts the real app under uvicorn
on a free loopback port in a thread and stops it with ``should_exit``.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from factories import INDEX_SPECS

from vidagent.config import Settings, load_settings
from vidagent.models.base import ChatRequest, ToolCall
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter

#: What the fake reasoning model answers: one clip_search, then this answer.
ANSWER = "(B) HELLO VIDAGENT"


def reply(request: ChatRequest) -> Any:
    """A DVD run in two steps (clip_search, then answer); plain text for any other call."""
    if not request.tools:
        return "A short test video."
    step = sum(1 for m in request.messages if m.role == "assistant")
    if step == 0:
        return ToolCall("c0", "clip_search", json.dumps({"event_description": "HELLO"}))
    return ToolCall(f"c{step}", "answer", json.dumps({"answer": ANSWER}))


def fake_models(settings: Settings, delay: float = 0.0) -> Models:
    """A hub of fake adapters for every role; ``delay`` seconds per llm call."""
    options = {"delay": str(delay)} if delay else {}
    return Models.from_adapters(
        {
            "llm": FakeAdapter("function", options, function=reply),
            "vlm": FakeAdapter.function(lambda r: "a person holds a sign that says HELLO"),
            "embed": FakeAdapter("hash", {"dim": "32"}),
            "asr": FakeAdapter("echo", {"text": "hello there"}),
            "ocr": FakeAdapter("echo"),
            "detector": FakeAdapter("echo"),
        },
        settings,
    )


@pytest.fixture(scope="session")
def template_library(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Library holding the small clip, indexed through the default stages with fake models."""
    from vidagent.app import Session

    root = tmp_path_factory.mktemp("server-library") / "library"
    settings = load_settings({**INDEX_SPECS, "library": str(root)})
    with Session(settings, models=fake_models(settings)) as session:
        (report,) = session.index([small_video])
    assert report.ok, report.error
    return root


@pytest.fixture
def media(tmp_path: Path, small_video: Path) -> Path:
    """A media root holding a copy of the small clip as ``clip.mp4``."""
    root = tmp_path / "media"
    root.mkdir()
    shutil.copy(small_video, root / "clip.mp4")
    return root


@pytest.fixture
def api_settings(template_library: Path, tmp_path: Path, _isolated_home: Path) -> Settings:
    """Fake specs over this test's own copy of the indexed Library."""
    library = tmp_path / "library"
    shutil.copytree(template_library, library)
    return load_settings({**INDEX_SPECS, "library": str(library)})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Live:
    """A running server: its base URL and the app."""

    url: str
    app: Any
    server: Any
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def serve(app: Any) -> Live:
    """``app`` under a real uvicorn on a free loopback port, in a thread, once it listens."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    return Live(f"http://127.0.0.1:{port}", app, server, thread)


@pytest.fixture
def live_server(api_settings: Settings, media: Path) -> Iterator[Callable[..., Live]]:
    """A factory: ``live_server(**create_app options)`` starts a server (fake models, the
    ``media`` root unless given); every one started is stopped after the test."""
    from vidagent.server.app import create_app

    started: list[Live] = []

    def start(settings: Settings | None = None, delay: float = 0.0, **options: Any) -> Live:
        settings = settings or api_settings
        options.setdefault("media_roots", [media])
        app = create_app(settings, models=fake_models(settings, delay), **options)
        started.append(serve(app))
        return started[-1]

    yield start
    for live in started:
        live.stop()
