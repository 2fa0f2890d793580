"""Scripted and function-driven models for tests, shipped with the package.

- ``FakeAdapter.scripted([...])`` answers chat requests from a list, in order: a string, a
  :class:`ToolCall` (or a tuple of them), or a full :class:`ChatResponse`.
- ``FakeAdapter.function(fn)`` answers with ``fn(request)``, which returns any of the above.
- From a spec string: ``fake:echo`` repeats the last user text (``?reply=TEXT`` answers TEXT
  instead); ``fake:scripted?replies=["a","b"]`` takes a JSON list; ``fake:hash?dim=64`` embeds
  text as a deterministic hashed bag of words (texts that share words are similar), which also
  serves ``embed_images`` by colour histogram. Options for any of them: ``delay=SECONDS`` sleeps
  in every chat and transcribe call, ``log=PATH`` appends one JSON line per chat call (its
  text and image count) and per transcribe call (its audio seconds), for tests that count
  calls across processes.

Every request is recorded in ``.requests`` so tests can assert on what an agent sent, and the
labels of every ``detect`` call in ``.detect_labels`` (the fake detector has an open vocabulary:
``detect_fn`` answers per image, and callers filter by label as they do for any detector).
Token counts are whitespace word counts, so accounting tests have exact numbers.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import ConfigError
from vidagent.models.base import (
    Adapter,
    Capabilities,
    ChatRequest,
    ChatResponse,
    Detection,
    EmbedRequest,
    EmbedResponse,
    Segment,
    TextLine,
    ToolCall,
    TranscribeRequest,
    Transcript,
    Usage,
)
from vidagent.roles import ROLES

if TYPE_CHECKING:
    from vidagent.config import Settings

Reply = str | ToolCall | tuple[ToolCall, ...] | ChatResponse
ALL_ROLES = frozenset(ROLES)


def hash_embed(text: str, dim: int = 64) -> np.ndarray:
    """A deterministic bag-of-words vector: each lower-cased word adds to one hashed slot."""
    v = np.zeros(dim, np.float32)  # (D,)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        v[
            int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % dim
        ] += 1
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


class FakeAdapter(Adapter):
    """A model for tests that answers from a script or a function."""

    provider = "fake"
    capabilities = Capabilities(
        roles=ALL_ROLES,
        supports_tools=True,
        supports_images=True,
        supports_json_schema=True,
        max_images=64,
        batch_size=64,
        local=True,
        scripted=True,
    )

    def __init__(
        self,
        model: str = "echo",
        options: dict[str, str] | None = None,
        *,
        replies: Iterable[Reply] | None = None,
        function: Callable[[ChatRequest], Reply] | None = None,
        transcript: Transcript | None = None,
        read_text_fn: Callable[[np.ndarray], list[TextLine]] | None = None,
        detect_fn: Callable[[np.ndarray], list[Detection]] | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        super().__init__(model, options)
        if replies is None and "replies" in self.options:
            replies = json.loads(self.options["replies"])
        self._replies = list(replies) if replies is not None else None
        self._function = function
        self._transcript = transcript
        self._read_text_fn = read_text_fn
        self._detect_fn = detect_fn
        if capabilities is not None:
            self.capabilities = capabilities
        self.dim = int(self.options.get("dim", 64))
        self.requests: list[Any] = []
        self.detect_labels: list[tuple[str, ...] | None] = []  # per detect call, as asked
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, model: str, options: dict[str, str], settings: Settings) -> FakeAdapter:
        return cls(model or "echo", options)

    @classmethod
    def scripted(cls, replies: Iterable[Reply], **kwargs: Any) -> FakeAdapter:
        return cls("scripted", replies=replies, **kwargs)

    @classmethod
    def function(cls, fn: Callable[[ChatRequest], Reply], **kwargs: Any) -> FakeAdapter:
        return cls("function", function=fn, **kwargs)

    def _next_reply(self, request: ChatRequest) -> Reply:
        if self._function is not None:
            return self._function(request)
        if self._replies is not None:
            if not self._replies:
                raise ConfigError("fake model: the script has no replies left")
            return self._replies.pop(0)
        if "reply" in self.options:
            return self.options["reply"]
        return request.messages[-1].text if request.messages else ""

    def _log_call(self, request: ChatRequest) -> None:
        if "log" in self.options:
            line = json.dumps(
                {
                    "text": request.messages[-1].text if request.messages else "",
                    "images": request.image_count(),
                }
            )
            with open(self.options["log"], "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def chat(self, request: ChatRequest) -> ChatResponse:
        if "delay" in self.options:
            time.sleep(float(self.options["delay"]))
        with self._lock:
            self.requests.append(request)
            reply = self._next_reply(request)
            self._log_call(request)
        if isinstance(reply, ChatResponse):
            return reply
        calls = (
            (reply,) if isinstance(reply, ToolCall) else reply if isinstance(reply, tuple) else ()
        )
        text = reply if isinstance(reply, str) else ""
        prompt_words = sum(len(m.text.split()) for m in request.messages)
        return ChatResponse(
            text=text,
            tool_calls=calls,
            usage=Usage(prompt_words, len(text.split()) + len(calls)),
            finish_reason="tool_calls" if calls else "stop",
            model=self.spec,
        )

    def embed(self, request: EmbedRequest) -> EmbedResponse:
        self.requests.append(request)
        vectors = (
            np.stack([hash_embed(t, self.dim) for t in request.texts])
            if request.texts
            else np.zeros((0, self.dim), np.float32)
        )
        return EmbedResponse(vectors, Usage(sum(len(t.split()) for t in request.texts)))

    def embed_images(self, images: list[np.ndarray]) -> np.ndarray:
        rows = []
        for rgb in images:  # (H, W, 3) uint8 -> 4x4x4 colour histogram
            hist = np.histogramdd(rgb.reshape(-1, 3), bins=(4, 4, 4), range=[(0, 256)] * 3)[0]
            v = hist.reshape(-1).astype(np.float32)
            rows.append(v / (np.linalg.norm(v) or 1.0))
        return np.stack(rows) if rows else np.zeros((0, 64), np.float32)

    def transcribe(self, request: TranscribeRequest) -> Transcript:
        if "delay" in self.options:
            time.sleep(float(self.options["delay"]))
        seconds = len(request.audio) / 16000
        with self._lock:
            self.requests.append(request)
            if "log" in self.options:
                with open(self.options["log"], "a", encoding="utf-8") as f:
                    f.write(json.dumps({"audio_seconds": round(seconds, 3)}) + "\n")
        if self._transcript is not None:
            return self._transcript
        text = self.options.get("text", "")
        return Transcript("en", (Segment(0.0, seconds, text),) if text else ())

    def read_text(self, images: list[np.ndarray]) -> list[list[TextLine]]:
        fn = self._read_text_fn or (lambda _img: [])
        return [fn(img) for img in images]

    def detect(
        self, images: list[np.ndarray], labels: Sequence[str] | None = None
    ) -> list[list[Detection]]:
        self.detect_labels.append(None if labels is None else tuple(labels))
        fn = self._detect_fn or (lambda _img: [])
        return [fn(img) for img in images]
