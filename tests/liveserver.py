"""A live vidagent server for tests, and the fake models it answers with.

Importable from any test folder (``tests/`` is on ``sys.path``), unlike a ``conftest`` module:
pytest imports every ``conftest.py`` under the one module name ``conftest``, so ``from conftest
import …`` gets whichever folder's conftest was imported last. The fixtures that use these
live in ``tests/server/conftest.py``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from vidagent.config import Settings
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
