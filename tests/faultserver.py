"""A loopback OpenAI-compatible server that misbehaves on cue, for client-layer tests.

Script a queue of :class:`Behaviour` values; each request takes the next one (an empty queue
answers with a valid response). Every request body is recorded, and the server counts how many
requests it is serving at once. Sleeps wait on a stop event, so shutdown is prompt.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_SLEEP_S = 10.0  # bound on any scripted delay, so a broken test cannot hang the suite


@dataclass
class Behaviour:
    """What the server does with one request.

    ``status``/``body``/``headers`` form the reply (``body`` of None: a valid completion or
    embedding list for the path); ``delay`` seconds pass first; ``raw`` sends bytes verbatim.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None


def completion(
    text: str = "hello",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    prompt_tokens: int = 12,
    completion_tokens: int = 3,
    model: str = "fault-model",
) -> dict[str, Any]:
    """A valid chat completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def embeddings(texts: list[str], dim: int = 4) -> dict[str, Any]:
    """A valid embeddings body: vector i is ``[i + 1, 1, 0, …]`` (not normalised)."""
    data = [
        {"object": "embedding", "index": i, "embedding": [float(i + 1), 1.0] + [0.0] * (dim - 2)}
        for i in range(len(texts))
    ]
    # Reversed on purpose: clients must order by "index".
    return {
        "object": "list",
        "data": data[::-1],
        "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
    }


# Ready-made misbehaviours.
def rate_limited(retry_after: str = "0") -> Behaviour:
    return Behaviour(
        429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": retry_after}
    )


def server_error(status: int = 500) -> Behaviour:
    return Behaviour(status, {"error": {"message": "internal error"}})


def not_json() -> Behaviour:
    return Behaviour(200, raw=b"<html>gateway</html>", headers={"Content-Type": "text/html"})


def missing_choices() -> Behaviour:
    return Behaviour(200, {"id": "x", "object": "chat.completion", "usage": {}})


def rejected(message: str = "messages[0].content must not be empty") -> Behaviour:
    return Behaviour(400, {"error": {"message": message, "type": "invalid_request_error"}})


def slow(seconds: float, body: Any = None) -> Behaviour:
    return Behaviour(200, body, delay=seconds)


class FaultServer:
    """The server, running in a thread on 127.0.0.1 and a free port.

    Attributes:
        requests: ``(path, body)`` of every request received, in arrival order.
        auth: the ``Authorization`` header of every request (None when absent).
        max_in_flight: the most requests served at once (from arrival until the reply is ready).
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.auth: list[str | None] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._queue: deque[Behaviour] = deque()
        #: checks every request first: a Behaviour it returns answers instead of the script
        #: (a server that validates parameters as a real one does)
        self.gate: Callable[[str, Any], Behaviour | None] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        port = self._httpd.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours for the next requests, in order."""
        with self._lock:
            self._queue.extend(behaviours)

    def bodies(self, path_suffix: str = "") -> list[Any]:
        with self._lock:
            return [b for p, b in self.requests if p.endswith(path_suffix)]

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # -- request handling -------------------------------------------------------------------

    def _next(self, path: str, body: Any, auth: str | None) -> Behaviour:
        with self._lock:
            self.requests.append((path, body))
            self.auth.append(auth)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            refused = self.gate(path, body) if self.gate is not None else None
            if refused is not None:
                return refused
            return self._queue.popleft() if self._queue else Behaviour()

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _reply(self, path: str, body: Any, b: Behaviour) -> tuple[int, dict[str, str], bytes]:
        if b.delay:
            self._stop.wait(min(b.delay, MAX_SLEEP_S))
        if b.raw is not None:
            return b.status, b.headers, b.raw
        payload = b.body
        if payload is None:
            is_embed = path.endswith("/embeddings")
            payload = embeddings(list(body.get("input", []))) if is_embed else completion()
        headers = {"Content-Type": "application/json", **b.headers}
        return b.status, headers, json.dumps(payload).encode()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                behaviour = server._next(self.path, body, self.headers.get("Authorization"))
                try:
                    status, headers, data = server._reply(self.path, body, behaviour)
                finally:
                    # counted out before the reply is sent: a client that has its answer may
                    # start its next request at once, and must not find this one still counted
                    server._done()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(status, headers, data)  # unless the client gave up (timeouts)

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler
