"""On-disk cache of model responses, keyed by the full request, so runs can be replayed.

The key is the SHA-256 of the canonical JSON of ``(spec, operation, request.canonical())``:
every field of the request counts (messages, images by content hash, tools, schema, temperature,
seed, max tokens, stop). Changing any of them, or the model spec, is a miss.

Requests with ``temperature > 0`` are cached too. A sampled answer is one valid answer, and
recording it is what makes a run replayable; a caller that wants fresh samples changes the
``seed`` (part of the key) or sets the cache mode to ``off``.

Modes (``settings.cache``):

* ``off``: no file is opened; every call goes to the model.
* ``on``: read, and on a miss call the model and write the answer.
* ``replay``: read only; a miss raises :class:`~vidagent.exceptions.CacheMissError`, so a
  replayed run provably makes no model calls.

Only chat and text-embedding responses are cached (see :mod:`vidagent.models.client`).

On-disk format: one SQLite file ``<cache_dir>/responses.sqlite`` in WAL mode, so several
threads and processes can share it. ``PRAGMA user_version`` holds :data:`FORMAT_VERSION`.
Table ``responses``: ``key`` (hex SHA-256), ``spec``, ``operation``, ``meta`` (JSON: a chat
response, or an embedding's dtype, shape and usage), ``blob`` (embedding bytes, C order),
``created`` (Unix seconds).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from vidagent.exceptions import CacheMissError, ConfigError
from vidagent.models.base import (
    ChatRequest,
    ChatResponse,
    EmbedRequest,
    EmbedResponse,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from vidagent.config import Settings

FORMAT_VERSION = 1
FILE_NAME = "responses.sqlite"
CacheMode = Literal["off", "on", "replay"]
CachedResponse = ChatResponse | EmbedResponse
CacheableRequest = ChatRequest | EmbedRequest

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    operation TEXT NOT NULL,
    meta TEXT NOT NULL,
    blob BLOB,
    created REAL NOT NULL
)
"""


def cache_key(spec: str, operation: str, request: CacheableRequest) -> str:
    """Hex SHA-256 of the canonical JSON of the spec, operation and full request."""
    payload = {"spec": spec, "operation": operation, "request": request.canonical()}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# (De)serialisation


def _usage_dict(u: Usage) -> dict[str, int]:
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}


def _encode(response: CachedResponse) -> tuple[dict[str, Any], bytes | None]:
    if isinstance(response, ChatResponse):
        meta = {
            "kind": "chat",
            "text": response.text,
            "tool_calls": [[c.id, c.name, c.arguments] for c in response.tool_calls],
            "usage": _usage_dict(response.usage),
            "finish_reason": response.finish_reason,
            "model": response.model,
        }
        return meta, None
    vectors = np.ascontiguousarray(response.vectors)
    meta = {
        "kind": "embed",
        "dtype": vectors.dtype.str,
        "shape": list(vectors.shape),
        "usage": _usage_dict(response.usage),
    }
    return meta, vectors.tobytes()


def _decode(meta: dict[str, Any], blob: bytes | None) -> CachedResponse:
    """A response flagged ``cached``; token counts kept, cost zero (nothing was paid)."""
    usage = Usage(**meta["usage"])
    if meta["kind"] == "chat":
        return ChatResponse(
            text=meta["text"],
            tool_calls=tuple(ToolCall(*c) for c in meta["tool_calls"]),
            usage=usage,
            finish_reason=meta["finish_reason"],
            model=meta["model"],
            cached=True,
        )
    # (N, D) as recorded; copy so callers may write to it.
    vectors = np.frombuffer(blob or b"", dtype=np.dtype(meta["dtype"])).reshape(meta["shape"])
    return EmbedResponse(vectors=vectors.copy(), usage=usage, cached=True)


# ---------------------------------------------------------------------------------------------
# Cache


class ResponseCache:
    """Thread-safe, multi-process-safe response cache. Opens its file on first use.

    Args:
        directory: where ``responses.sqlite`` lives (``settings.cache_dir``).
        mode: ``off``, ``on`` or ``replay``.
    """

    def __init__(self, directory: str | Path | None, mode: CacheMode = "on") -> None:
        if mode not in ("off", "on", "replay"):
            raise ConfigError(f"cache mode {mode!r} must be off, on or replay")
        if mode != "off" and directory is None:
            raise ConfigError(f"cache mode {mode!r} needs a cache directory")
        self.mode: CacheMode = mode
        self.path = Path(directory) / FILE_NAME if directory is not None else None
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ResponseCache:
        return cls(settings.cache_dir, settings.cache)

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def lookup(self, spec: str, operation: str, request: CacheableRequest) -> CachedResponse | None:
        """The recorded response, or ``None`` on a miss (``on``/``off`` modes).

        Raises:
            CacheMissError: in ``replay`` mode when nothing was recorded for this request.
        """
        if not self.enabled:
            return None
        key = cache_key(spec, operation, request)
        with self._lock:
            row = (
                self._connect()
                .execute("SELECT meta, blob FROM responses WHERE key = ?", (key,))
                .fetchone()
            )
        if row is not None:
            return _decode(json.loads(row[0]), row[1])
        if self.mode == "replay":
            raise CacheMissError(
                f"replay mode: no recorded {operation} response for this request (key {key[:12]}); "
                "run once with cache 'on' to record it",
                endpoint=spec,
            )
        return None

    def store(
        self, spec: str, operation: str, request: CacheableRequest, response: CachedResponse
    ) -> None:
        """Record ``response`` (only in ``on`` mode; ``replay`` never writes)."""
        if self.mode != "on":
            return
        meta, blob = _encode(response)
        row = (cache_key(spec, operation, request), spec, operation, json.dumps(meta), blob)
        with self._lock:
            conn = self._connect()
            with conn:  # one transaction
                conn.execute(
                    "INSERT OR REPLACE INTO responses (key, spec, operation, meta, blob, created) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (*row, time.time()),
                )

    def __len__(self) -> int:
        if not self.enabled:
            return 0
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def _connect(self) -> sqlite3.Connection:
        """The shared connection, opened and migrated on first use (caller holds the lock)."""
        if self._conn is not None:
            return self._conn
        assert self.path is not None  # enabled modes always have a path (checked in __init__)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection guarded by our lock serves all threads; the busy timeout lets
        # several processes take turns writing.
        conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > FORMAT_VERSION:
            conn.close()
            raise ConfigError(
                f"{self.path} was written by a newer vidagent (cache format {version}); "
                "upgrade vidagent or point VIDAGENT_HOME elsewhere"
            )
        with conn:
            conn.execute(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        self._conn = conn
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
