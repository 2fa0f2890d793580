"""A loopback OpenAI-compatible server that bills every request as OpenAI would, for cost tests.

It answers ``/chat/completions`` and ``/embeddings`` and reports ``usage`` the way OpenAI does,
counted here from the request itself, independently of vidagent's estimates:

- text: an approximation of OpenAI's BPE tokenizers (``o200k``), never the estimate's four
  characters a token: a word of up to six letters or digits is one token and longer ones one per
  six; a run of punctuation is one token per two characters; whitespace is free. Each message
  adds 4 tokens of framing and the reply 3, as OpenAI's counting guide says;
- an image: OpenAI's documented rule, read from the JPEG's own size and the part's ``detail``:
  ``low`` is 85 tokens; ``high`` (and ``auto`` or none, as gpt-4o bills a frame larger than
  512 px) fits the image into 2048 px, then its shortest side into 768 px, and adds 170 per
  512 px tile.

Replies are scripted by what the request asks (a Table 9 or Fig. 7 caption, a Fig. 8 graph, or
plain text), each the length the dry run assumes (250, 1,500 and 500 tokens), so that what
follows from them (the captions the graph and summary read) checks the estimate's arithmetic
rather than a guess at a model's verbosity; counted with the same rule. ``requests`` keeps every
``(path, body, prompt_tokens, completion_tokens)``. Importable from tests and benchmarks
(``tests/`` is on their ``sys.path``).

It also serves OpenAI's Batch API as the adapter uses it: ``POST /files`` (multipart, the JSONL
kept), ``POST /batches`` (its lines answered at once, each logged as a chat request under the
path ``batch:/v1/chat/completions``), ``GET /batches/{id}`` (the states in ``batch_states``
first, one a look, then ``completed``; a batch created while ``fail_batches`` is set reports
``failed``) and ``GET /files/{id}/content``; a line whose ``custom_id`` is in ``reject_ids``
goes to the error file with a 400.
"""

from __future__ import annotations

import base64
import email.parser
import hashlib
import io
import itertools
import json
import math
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from PIL import Image

if TYPE_CHECKING:
    from typing_extensions import Self

_WORD = re.compile(r"\w+")
_PUNCT = re.compile(r"[^\w\s]+")

#: A caption of about 220 tokens, so that a Table 9 reply is the 250 tokens the dry run
#: assumes (``Caption.output_tokens``): the rows after captioning (embed, graph, summarize)
#: then check the estimate's arithmetic, not a guess at a model's length.
CAPTION = " ".join(
    ["A presenter in a red jacket stands beside a whiteboard and points at a chart while"]
    + ["a second person in a blue shirt nods, writes a note and turns to the camera."] * 11
)


def text_tokens(text: str) -> int:
    """Tokens of ``text`` by the rule in the module docstring."""
    words = sum(math.ceil(len(w) / 6) for w in _WORD.findall(text))
    return words + sum(math.ceil(len(p) / 2) for p in _PUNCT.findall(text))


def image_tokens(data_url: str, detail: str | None) -> int:
    """OpenAI's tokens for one image part (module docstring), from the image's own size."""
    if detail == "low":
        return 85
    raw = base64.b64decode(data_url.split(",", 1)[1])
    w, h = (float(x) for x in Image.open(io.BytesIO(raw)).size)
    fit = min(1.0, 2048 / max(w, h))
    w, h = w * fit, h * fit
    short = min(1.0, 768 / min(w, h))
    w, h = w * short, h * short
    return 85 + 170 * math.ceil(round(w) / 512) * math.ceil(round(h) / 512)


def prompt_tokens(body: dict[str, Any]) -> int:
    """A chat body's prompt tokens: framing, text and images."""
    total = 3
    for message in body.get("messages", []):
        total += 4
        content = message.get("content") or ""
        if isinstance(content, str):
            total += text_tokens(content)
            continue
        for part in content:
            if part.get("type") == "text":
                total += text_tokens(part["text"])
            else:
                image = part["image_url"]
                total += image_tokens(image["url"], image.get("detail"))
    return total


def scripted_reply(body: dict[str, Any]) -> str:
    """A reply in the shape the request asks for: Table 9, Fig. 7, Fig. 8 or plain text."""
    prompt = " ".join(
        m["content"] if isinstance(m["content"], str) else str(m["content"][0].get("text", ""))
        for m in body["messages"]
        if m.get("content")
    )
    if "new_subject_registry" in prompt or "clip_description" in prompt:
        return json.dumps(
            {
                "new_subject_registry": {},
                "subject_registry": {},
                "clip_description": {"subjects_present": [], "captions": CAPTION},
            }
            if "new_subject_registry" in prompt
            else {"subject_registry": {}, "clip_description": CAPTION}
        )
    if "video_analysis" in prompt:
        person = {
            "subject_id": None,
            "subject_name": "Man in red jacket",
            "appearance_timeline": [[0, 5]],
            "attributes": ["red jacket"],
            "actions_events": [{"action": "points at a chart", "timestamp": [0, 5]}],
        }
        return json.dumps({"video_analysis": [person] * 24, "interactions": []})
    return "The video shows a presenter explaining a chart to a colleague. " * 33


class TokenServer:
    """The server, on 127.0.0.1 and a free port, in a thread.

    Args:
        reply: the reply text for a chat body (default :func:`scripted_reply`).
    """

    def __init__(self, reply: Callable[[dict[str, Any]], str] = scripted_reply) -> None:
        self.reply = reply
        self.requests: list[tuple[str, Any, int, int]] = []
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_states: list[str] = []  # states a batch reports before "completed"
        self.fail_batches = False
        self.reject_ids: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def bodies(self, suffix: str = "/chat/completions") -> list[Any]:
        with self._lock:
            return [body for path, body, _, _ in self.requests if path.endswith(suffix)]

    def tokens(self, suffix: str = "/chat/completions") -> tuple[int, int, int]:
        """``(calls, prompt tokens, completion tokens)`` billed for ``suffix``'s requests."""
        with self._lock:
            rows = [(p, c) for path, _, p, c in self.requests if path.endswith(suffix)]
        return len(rows), sum(p for p, _ in rows), sum(c for _, c in rows)

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/embeddings"):
            texts = list(body.get("input", []))
            used = sum(text_tokens(t) for t in texts)
            self._log(path, body, used, 0)
            data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(texts)]
            return {"object": "list", "data": data, "usage": {"prompt_tokens": used}}
        text = self.reply(body)
        used, out = prompt_tokens(body), text_tokens(text)
        self._log(path, body, used, out)
        return {
            "id": "chatcmpl-token",
            "object": "chat.completion",
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": used, "completion_tokens": out, "total_tokens": used + out},
        }

    # -- the Batch API ----------------------------------------------------------------------

    def upload(self, content_type: str, raw: bytes) -> dict[str, Any]:
        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        message = email.parser.BytesParser().parsebytes(head + raw)
        data = next(p.get_payload(decode=True) for p in message.walk() if p.get_filename())
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = data
        return {"id": file_id, "object": "file", "purpose": "batch"}

    def create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        batch_id = f"batch_{next(self._ids)}"
        lines = [json.loads(x) for x in self.files[body["input_file_id"]].splitlines() if x]
        batch = {"id": batch_id, "lines": len(lines), "looks": 0, "failed": self.fail_batches}
        if not self.fail_batches:
            out, errors = [], []
            for line in lines:
                cid = line["custom_id"]
                if cid in self.reject_ids:
                    error = {"message": "Invalid image.", "code": "invalid_image"}
                    response = {"status_code": 400, "body": {"error": error}}
                    errors.append({"custom_id": cid, "response": response, "error": None})
                    continue
                answer = self.answer("batch:" + line["url"], line["body"])
                out.append({"custom_id": cid, "response": {"status_code": 200, "body": answer}})
            batch["output"] = self._file(out)
            batch["errors"] = self._file(errors) if errors else None
        self.batches[batch_id] = batch
        return self.batch(batch_id)

    def batch(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        batch["looks"] += 1
        if batch["failed"]:
            reason = {"data": [{"message": "The input file has no valid lines."}]}
            return {"id": batch_id, "status": "failed", "errors": reason}
        states = self.batch_states
        state = states[batch["looks"] - 1] if batch["looks"] <= len(states) else "completed"
        done = state == "completed"
        return {
            "id": batch_id,
            "object": "batch",
            "status": state,
            "output_file_id": batch["output"] if done else None,
            "error_file_id": batch["errors"] if done else None,
        }

    def _file(self, rows: list[dict[str, Any]]) -> str:
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
        return file_id

    def _log(self, path: str, body: Any, used: int, out: int) -> None:
        with self._lock:
            self.requests.append((path, body, used, out))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.endswith("/files"):
                    reply = server.upload(self.headers["Content-Type"], raw)
                elif self.path.endswith("/batches"):
                    reply = server.create_batch(json.loads(raw))
                else:
                    reply = server.answer(self.path, json.loads(raw))
                self._send(json.dumps(reply).encode(), "application/json")

            def do_GET(self) -> None:
                name = self.path.rstrip("/").split("/")
                if name[-1] == "content":
                    self._send(server.files[name[-2]], "application/jsonl")
                else:
                    self._send(json.dumps(server.batch(name[-1])).encode(), "application/json")

            def _send(self, data: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _vector(text: str, dim: int = 16) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255 for b in digest[:dim]]
