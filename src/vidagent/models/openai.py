"""Any OpenAI-compatible server over HTTP: OpenAI, Azure, vLLM, SGLang, Ollama, LM Studio, llama.cpp.

Spec options (``openai:<model>?key=value&…``) override settings:

=================  =========================================================================
``base_url``       server root including ``/v1`` (default ``settings.openai_base_url``)
``api_key_env``    name of the environment variable holding the key
``timeout``        seconds per request (default ``settings.request_timeout``)
``tools``          ``1``/``0``: native tool calls (default 1)
``images``         ``1``/``0``: image parts in messages (default 1)
``json_schema``    ``1``/``0``: schema-constrained output (default 1); ``0`` sends JSON mode
``schema_style``   ``openai`` (default): ``{"type": "json_schema", …}``;
                   ``inline``: ``{"type": "json_object", "schema": …}`` as llama-cpp-python's
                   server (0.3.x) and Anyscale-style servers expect
``max_images``     images per request, at least 1 (default 50: the DVD paper's layout)
``reasoning``      ``1``/``0``: a reasoning model (default: inferred from the model name, see
                   below)
``reasoning_effort`` ``minimal``, ``low``, ``medium`` or ``high``, sent as is (reasoning models)
``max_output_tokens`` a cap on every reply of this model, whatever the caller asks for
``context_tokens`` the model's context window (prompt and reply); every request is then fitted
                   into it (:mod:`vidagent.models.context`), as for local models
``stream``         ``1``/``0``: read chat replies as they are generated (default 0, below)
``detail``         ``low``, ``high`` or ``auto``: OpenAI's ``detail`` on every image part (default:
                   none sent, which OpenAI reads as ``auto``). ``low`` bills an image 85 tokens
                   whatever its size, at a 512 px view of it; ``high`` 85 + 170 per 512 px tile
                   (:func:`image_tokens`). It changes what the model sees, not what vidagent
                   sends: the DVD paper's frames (2 fps, 720p) are the same bytes either way
=================  =========================================================================

Degenerate replies. With ``stream=1`` a chat reply is read as Server-Sent Events while the
server generates it (``"stream": true`` with ``stream_options.include_usage``), and one whose last
128 characters are one unit of at most 16 characters repeated (a small model's ``1. 1. 1. …``),
or that ends in a unit of up to 256 characters written 5 times in a row
(:class:`~vidagent.models.repetition.RepetitionGuard`), is cut there: the connection is closed,
which stops the generation on llama.cpp's server, vLLM and OpenAI, and the reply so far comes
back with ``finish_reason`` ``"repetition"``. Streaming is off by default because a server may
not report usage in a stream (llama-cpp-python's 0.3 does not: then the reply's chunks count as
its tokens and the prompt as 0);
it is worth turning on for a small local model. Without it, a reply cut by its cap
(``finish_reason`` ``"length"``) that ends in such a loop is labelled ``"repetition"``, so that
callers do not ask again with a larger cap. A streamed reply also ends, its connection closed,
when its run is stopped or its time is spent (:mod:`vidagent.models.interrupt`); one read
whole runs to its end.

Reasoning models (OpenAI's o-series and GPT-5, and any model named with ``reasoning=1``) take
different parameters, and OpenAI answers 400 to the others: no ``temperature`` other than the
default is accepted, so none is sent; a cap is ``max_completion_tokens``, never ``max_tokens``;
and a caller's cap (a 512-token caption, a 120-token segment) would be eaten by hidden reasoning
tokens before any text appears, so callers' caps are not sent to a reasoning model: its only cap
is the spec's ``max_output_tokens``. Inference: the model's name after any ``provider/`` prefix
starts with ``o`` and a digit (``o1``, ``o3-mini``, ``o4-mini``) or with ``gpt-5``; a deployment
with another name (Azure) says ``reasoning=1``.

A key is sent only to the server it was configured for: ``settings.openai_api_key`` goes to
``settings.openai_base_url``; a spec that names another ``base_url`` brings its own key through
``api_key_env`` (or none, as local servers need none).

Errors are mapped by type, never by message text: timeouts → ProviderTimeout; connection failures
(refused, reset, protocol errors) → ServerError, because a server restarting looks exactly like
that and the client layer bounds the retries; 408 → ProviderTimeout; 429 → RateLimitError with
``Retry-After``; 5xx → ServerError; an error whose ``code`` is ``context_length_exceeded`` →
ContextOverflowError; other 4xx and 3xx → RequestRejectedError; a body that is not
JSON or lacks the fields the protocol promises → MalformedResponseError.

The Batch API (``capabilities.supports_batch``): :meth:`OpenAIAdapter.batch_submit` uploads chat
requests as a JSONL file (``/files``, ``purpose=batch``, each line ``{"custom_id", "method",
"url": "/v1/chat/completions", "body"}``) and starts a batch of it (``/batches``, 24 h window);
:meth:`~OpenAIAdapter.batch_status` reads ``/batches/{id}``; :meth:`~OpenAIAdapter.batch_results`
reads its output and error files (``/files/{id}/content``), a failed line becoming its error.
Submitting, polling, resuming and pricing are :meth:`vidagent.models.client.Client.chat_batch`'s.

The adapter never retries, caches or counts: :mod:`vidagent.models.client` does.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import math
import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import httpx
import numpy as np

from vidagent.exceptions import (
    ConfigError,
    ContextOverflowError,
    EndpointUnreachable,
    MalformedResponseError,
    ProviderTimeout,
    RateLimitError,
    RequestRejectedError,
    ServerError,
)
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    BatchStatus,
    Capabilities,
    ChatRequest,
    ChatResponse,
    EmbedRequest,
    EmbedResponse,
    ImagePart,
    Message,
    ToolCall,
    TranscribeRequest,
    Transcript,
    Usage,
    option_flag,
)
from vidagent.models.interrupt import check_call
from vidagent.models.repetition import FINISH_REASON, RepetitionGuard

if TYPE_CHECKING:
    from vidagent.config import Settings

OPENAI_HOST = "api.openai.com"
DEFAULT_MAX_IMAGES = 50  # the DVD paper's layout: 50 images a request (Azure's limit)
_ROLES = frozenset({"llm", "vlm", "embed", "asr"})
_KNOWN_OPTIONS = (
    "base_url",
    "api_key_env",
    "timeout",
    "tools",
    "images",
    "json_schema",
    "schema_style",
    "max_images",
    "reasoning",
    "reasoning_effort",
    "max_output_tokens",
    "context_tokens",
    "stream",
    "detail",
)
EFFORTS = ("minimal", "low", "medium", "high")
DETAILS = ("low", "high", "auto")
#: OpenAI's image tokens (gpt-4o, gpt-4.1, o-series): a base per image, and per 512 px tile at
#: high detail, after the image is fitted into 2048 px and then its shortest side into 768 px.
IMAGE_BASE_TOKENS = 85
IMAGE_TILE_TOKENS = 170
_REASONING_NAME = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
_ERROR_TEXT_LIMIT = 300


# ---------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class Parameters:
    """Which request parameters the model takes (see the module docstring).

    Attributes:
        reasoning: a reasoning model: no temperature, ``max_completion_tokens``, no caller caps.
        effort: ``reasoning_effort`` to send, if any.
        max_output: the spec's cap on every reply, if any.
        stream: read chat replies as Server-Sent Events, cutting degenerate ones.
        detail: OpenAI's ``detail`` for image parts, if the spec sets one.
    """

    reasoning: bool = False
    effort: str | None = None
    max_output: int | None = None
    stream: bool = False
    detail: str | None = None

    @classmethod
    def of(cls, model: str, options: dict[str, str]) -> Parameters:
        """The parameters of ``model`` with the spec's ``options``.

        Raises:
            ConfigError: a bad ``reasoning``, ``reasoning_effort`` or ``max_output_tokens``.
        """
        inferred = bool(_REASONING_NAME.match(model.rsplit("/", 1)[-1]))
        effort = options.get("reasoning_effort")
        if effort is not None and effort not in EFFORTS:
            raise ConfigError(
                f"spec option reasoning_effort={effort!r} must be one of {', '.join(EFFORTS)}"
            )
        cap = options.get("max_output_tokens")
        max_output = int(_number(options, "max_output_tokens", 1)) if cap is not None else None
        stream = option_flag(options, "stream", False)
        detail = options.get("detail")
        if detail is not None and detail not in DETAILS:
            raise ConfigError(f"spec option detail={detail!r} must be one of {', '.join(DETAILS)}")
        return cls(option_flag(options, "reasoning", inferred), effort, max_output, stream, detail)


def image_tokens(width: int, height: int, detail: str | None = None) -> int:
    """Input tokens OpenAI bills for one ``width`` x ``height`` image at ``detail``.

    OpenAI's documented rule: ``low`` is a flat :data:`IMAGE_BASE_TOKENS`; ``high`` fits the
    image into 2048 x 2048, then scales it down so its shortest side is at most 768 px, and adds
    :data:`IMAGE_TILE_TOKENS` per 512 px tile. ``auto`` (and no ``detail``, which OpenAI reads
    as ``auto``) is counted as ``high``: that is what gpt-4o bills for a frame larger than
    512 px, so an estimate errs high rather than low.
    """
    if detail == "low":
        return IMAGE_BASE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    tiles = math.ceil(round(w) / 512) * math.ceil(round(h) / 512)
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * tiles


@dataclass(frozen=True)
class _Resolved:
    """Spec options merged over settings."""

    base_url: str
    api_key: str
    key_source: str
    timeout: float
    capabilities: Capabilities
    schema_style: str


def _number(options: dict[str, str], name: str, default: float, *, zero_ok: bool = False) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"spec option {name}={raw!r} must be a number") from None
    if value < 0 or (value == 0 and not zero_ok):
        raise ConfigError(f"spec option {name}={raw!r} must be {'≥ 0' if zero_ok else '> 0'}")
    return value


def _base_url(options: dict[str, str], settings: Settings) -> str:
    url = (options.get("base_url") or settings.openai_base_url).rstrip("/")
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise ConfigError(
            f"OpenAI base URL {url!r} must look like http://host:port/v1 or https://host/v1"
        )
    return url


def _api_key(options: dict[str, str], settings: Settings, base_url: str) -> tuple[str, str]:
    """The key and where it came from; a settings key is only sent to the settings server."""
    env_name = options.get("api_key_env")
    if env_name:
        return os.environ.get(env_name, ""), f"${env_name}"
    if base_url == settings.openai_base_url.rstrip("/"):
        return settings.openai_api_key, "settings.openai_api_key"
    return "", "none"


def _resolve(options: dict[str, str], settings: Settings) -> _Resolved:
    unknown = sorted(set(options) - set(_KNOWN_OPTIONS))
    if unknown:
        raise ConfigError(
            f"unknown openai spec option(s) {', '.join(unknown)}; known: {', '.join(_KNOWN_OPTIONS)}"
        )
    style = options.get("schema_style", "openai")
    if style not in ("openai", "inline"):
        raise ConfigError(f"spec option schema_style={style!r} must be 'openai' or 'inline'")
    base_url = _base_url(options, settings)
    key, source = _api_key(options, settings, base_url)
    if int(_number(options, "max_images", DEFAULT_MAX_IMAGES, zero_ok=True)) < 1:
        raise ConfigError("spec option max_images must be at least 1 (images=0 sends none)")
    caps = Capabilities(
        roles=_ROLES,
        supports_tools=option_flag(options, "tools", True),
        supports_images=option_flag(options, "images", True),
        supports_json_schema=option_flag(options, "json_schema", True),
        max_images=int(_number(options, "max_images", DEFAULT_MAX_IMAGES, zero_ok=True)),
        context_tokens=int(_number(options, "context_tokens", 1))
        if "context_tokens" in options
        else None,
        batch_size=64,
        local=False,
        supports_batch=True,
    )
    timeout = _number(options, "timeout", settings.request_timeout)
    return _Resolved(base_url, key, source, timeout, caps, style)


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    """Whether the spec is usable: a key is configured, or the server is not api.openai.com.

    Never touches the network.
    """
    spec = f"openai:{model}"
    try:
        r = _resolve(options, settings)
        Parameters.of(model, options)
    except ConfigError as e:
        return BackendStatus(spec, False, str(e))
    if r.api_key:
        return BackendStatus(spec, True, f"{r.base_url} (key from {r.key_source})")
    if urlsplit(r.base_url).hostname == OPENAI_HOST:
        where = options.get("api_key_env") or "OPENAI_API_KEY or VIDAGENT_OPENAI_API_KEY"
        return BackendStatus(spec, False, f"{r.base_url} needs an API key: set {where}")
    return BackendStatus(spec, True, f"{r.base_url} (no API key)")


# ---------------------------------------------------------------------------------------------
# Request bodies


def _part(p: str | ImagePart, detail: str | None = None) -> dict[str, Any]:
    if isinstance(p, str):
        return {"type": "text", "text": p}
    image: dict[str, Any] = {"url": p.data_url()}
    if detail is not None:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _message(m: Message, detail: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role}
    if isinstance(m.content, str):
        # OpenAI wants null, not "", beside tool calls.
        out["content"] = m.content if (m.content or not m.tool_calls) else None
    else:
        out["content"] = [_part(p, detail) for p in m.content]
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


# ---------------------------------------------------------------------------------------------
# Responses and errors


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _retry_after(headers: httpx.Headers) -> float | None:
    ms = headers.get("retry-after-ms")  # OpenAI's finer-grained variant
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def _error_text(response: httpx.Response) -> str:
    """The server's own error message, trimmed: ``{"error": {"message"}}`` or the raw text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    text: Any = response.text
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        text = err if err is not None else text
    text = str(text).strip() or response.reason_phrase
    return str(text) if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 1] + "…"


@contextmanager
def _transport_errors(endpoint: str) -> Iterator[None]:
    """A timeout or a failed connection inside the block, as vidagent's errors."""
    try:
        yield
    except httpx.TimeoutException as e:
        raise ProviderTimeout(
            f"no answer within the timeout ({type(e).__name__})", endpoint=endpoint
        ) from None
    except httpx.ConnectError as e:
        raise EndpointUnreachable(
            f"connection failed: {type(e).__name__}: {e}", endpoint=endpoint
        ) from None
    except httpx.TransportError as e:
        raise ServerError(
            f"connection failed: {type(e).__name__}: {e}", endpoint=endpoint
        ) from None


def _raise_for_status(response: httpx.Response, endpoint: str) -> None:
    code = response.status_code
    if 200 <= code < 300:
        return
    msg = f"HTTP {code}: {_error_text(response)}"
    if code == 429:
        raise RateLimitError(msg, endpoint=endpoint, retry_after=_retry_after(response.headers))
    if code == 408:
        raise ProviderTimeout(msg, endpoint=endpoint, status=code)
    if code >= 500:
        raise ServerError(msg, endpoint=endpoint, status=code)
    if _error_code(response) == "context_length_exceeded":
        raise ContextOverflowError(msg, endpoint=endpoint, status=code)
    raise RequestRejectedError(msg, endpoint=endpoint, status=code)


def _error_code(response: httpx.Response) -> str:
    """OpenAI's machine-readable ``{"error": {"code"}}``, "" where there is none."""
    try:
        err = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return str(err.get("code") or "") if isinstance(err, dict) else ""


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise TypeError(f"content of type {type(content).__name__}")


def _tool_call(raw: dict[str, Any], index: int) -> ToolCall:
    fn = raw["function"]
    args = fn.get("arguments") or "{}"
    if not isinstance(args, str):  # a few servers send an object instead of JSON text
        args = json.dumps(args)
    return ToolCall(id=str(raw.get("id") or f"call_{index}"), name=str(fn["name"]), arguments=args)


def _usage(body: dict[str, Any]) -> Usage:
    usage = body.get("usage") or {}
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


def _chat_response(body: dict[str, Any], model: str) -> ChatResponse:
    choice = body["choices"][0]
    message = choice["message"]
    calls = tuple(_tool_call(c, i) for i, c in enumerate(message.get("tool_calls") or ()))
    return ChatResponse(
        text=_content_text(message.get("content")),
        tool_calls=calls,
        usage=_usage(body),
        finish_reason=str(choice.get("finish_reason") or "stop"),
        model=str(body.get("model") or model),
    )


def _text_guard() -> RepetitionGuard:
    """A guard over a reply's characters (tokens are not seen over HTTP): long units of up to
    256 characters, since a line of 33 tokens is 131-163 characters."""
    return RepetitionGuard(span=128, longest_unit=16, long_unit=256)


def _read_stream(lines: Iterator[str], model: str) -> dict[str, Any]:
    """Server-Sent Events of a chat completion read into one completion body, as the server
    would have answered without ``stream``; stops reading when the text turns degenerate."""
    guard = _text_guard()
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish, usage, chunks = None, None, 0
    for line in lines:
        check_call()  # a stopped run leaves the stream: the connection closes (module doc)
        if not line.startswith("data:"):
            continue  # comments, event names, blank separators
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        usage = chunk.get("usage") or usage
        model = chunk.get("model") or model
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            for call in delta.get("tool_calls") or ():
                _merge_call(calls.setdefault(int(call.get("index", 0)), {}), call)
            finish = choice.get("finish_reason") or finish
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                chunks += 1
                text.append(piece)
                if guard.add(piece):
                    finish = FINISH_REASON
        if guard.tripped:
            break  # leaving the block closes the connection: the server stops generating
    message: dict[str, Any] = {"content": "".join(text)}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {
        "choices": [{"message": message, "finish_reason": finish or "stop"}],
        "usage": usage or {"prompt_tokens": 0, "completion_tokens": chunks},
        "model": model,
    }


def _merge_call(into: dict[str, Any], delta: dict[str, Any]) -> None:
    """Add one streamed tool-call delta (id and name once, arguments in pieces) to a call."""
    if delta.get("id"):
        into["id"] = delta["id"]
    function = into.setdefault("function", {"name": "", "arguments": ""})
    part = delta.get("function") or {}
    function["name"] += part.get("name") or ""
    function["arguments"] += part.get("arguments") or ""


def _embed_response(body: dict[str, Any], n: int) -> EmbedResponse:
    rows = sorted(body["data"], key=lambda d: int(d.get("index", 0)))
    if rows and rows[0]["embedding"] and isinstance(rows[0]["embedding"][0], list):
        raise ValueError("one vector per token, not per input: the server does not pool this model")
    vectors = np.asarray([r["embedding"] for r in rows], dtype=np.float32)  # (N, D)
    if vectors.ndim != 2 or vectors.shape[0] != n:
        raise ValueError(f"expected {n} vectors of one dimension, got shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)  # (N, 1)
    unit = (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)  # (N, D)
    return EmbedResponse(vectors=unit, usage=_usage(body))


# ---------------------------------------------------------------------------------------------
# Adapter


class OpenAIAdapter(Adapter):
    """Chat, text embeddings and speech to text against one OpenAI-compatible server.

    One ``httpx.Client`` is shared by all threads (it is thread-safe and pools connections).
    """

    provider: ClassVar[str] = "openai"

    #: What an OpenAI-compatible server offers unless the spec says otherwise (tools, images
    #: and JSON schema on); a spec's options refine it per instance.
    capabilities = Capabilities(
        roles=_ROLES,
        supports_tools=True,
        supports_images=True,
        supports_json_schema=True,
        max_images=DEFAULT_MAX_IMAGES,
        batch_size=64,
        local=False,
        supports_batch=True,
    )

    def __init__(
        self,
        model: str,
        options: dict[str, str] | None = None,
        *,
        base_url: str,
        api_key: str = "",
        timeout: float = 60.0,
        capabilities: Capabilities | None = None,
        schema_style: str = "openai",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Prefer :meth:`from_settings`; this form is for tests and embedding in other code.

        Args:
            model: the model name the server expects.
            options: the spec options (kept for :attr:`spec`).
            base_url: server root including ``/v1``.
            api_key: bearer token; empty sends no Authorization header.
            timeout: seconds per request.
            capabilities: defaults to tools, images and JSON schema on.
            schema_style: ``openai`` or ``inline`` (see module docstring).
            transport: an ``httpx`` transport (e.g. ``MockTransport``) instead of the network.
        """
        super().__init__(model, options)
        self.parameters = Parameters.of(model, self.options)
        self.base_url = base_url.rstrip("/")
        self.capabilities = capabilities or type(self).capabilities
        self.schema_style = schema_style
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> OpenAIAdapter:
        """Build from a spec's model and options layered over ``settings``."""
        if not model:
            raise ConfigError("openai spec needs a model name, e.g. openai:gpt-4o-mini")
        r = _resolve(options, settings)
        return cls(
            model,
            options,
            base_url=r.base_url,
            api_key=r.api_key,
            timeout=r.timeout,
            capabilities=r.capabilities,
            schema_style=r.schema_style,
        )

    @property
    def endpoint(self) -> str:
        """The server URL: concurrency is limited per server, whatever the model."""
        return self.base_url

    # -- chat -------------------------------------------------------------------------------

    def chat(self, request: ChatRequest) -> ChatResponse:
        if self.parameters.stream:
            body = self._post_stream("/chat/completions", self.chat_body(request))
        else:
            body = self._post("/chat/completions", self.chat_body(request))
        try:
            response = _chat_response(body, self.model)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise self._malformed("chat completion", e) from None
        if response.finish_reason == "length" and _text_guard().degenerate(response.text):
            return dataclasses.replace(response, finish_reason=FINISH_REASON)
        return response

    def chat_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so tests and traces can show it)."""
        self._check(request)
        params = self.parameters
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(m, params.detail) for m in request.messages],
        }
        if not params.reasoning:
            body["temperature"] = request.temperature
        elif params.effort is not None:
            body["reasoning_effort"] = params.effort
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        response_format = self._response_format(request)
        if response_format is not None:
            body["response_format"] = response_format
        cap = params.max_output if params.reasoning else (params.max_output or request.max_tokens)
        if cap is not None:
            body["max_completion_tokens" if params.reasoning else "max_tokens"] = cap
        if request.seed is not None:
            body["seed"] = request.seed
        if request.stop:
            body["stop"] = list(request.stop)
        return body

    def _response_format(self, request: ChatRequest) -> dict[str, Any] | None:
        schema = request.response_schema
        if schema is not None and self.capabilities.supports_json_schema:
            if self.schema_style == "inline":
                return {"type": "json_object", "schema": schema}
            return {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": schema, "strict": True},
            }
        # Without schema support, JSON mode is the closest the server offers; the caller
        # validates the answer against its schema either way.
        if schema is not None or request.json_mode:
            return {"type": "json_object"}
        return None

    def _check(self, request: ChatRequest) -> None:
        caps = self.capabilities
        images = request.image_count()
        if images and not caps.supports_images:
            raise RequestRejectedError(
                f"{self.spec} takes no images (spec option images=0)", endpoint=self.endpoint
            )
        if images > caps.max_images:
            raise RequestRejectedError(
                f"{images} images exceed max_images={caps.max_images} of {self.spec}",
                endpoint=self.endpoint,
            )
        if request.tools and not caps.supports_tools:
            raise RequestRejectedError(
                f"{self.spec} has no native tool calls (spec option tools=0)",
                endpoint=self.endpoint,
            )

    # -- the Batch API ----------------------------------------------------------------------

    def batch_submit(self, requests: Sequence[tuple[str, ChatRequest]]) -> str:
        """Upload the requests as a JSONL file (``purpose=batch``) and start a batch of it
        (``/batches``, 24 h window); the batch's id."""
        lines = [
            json.dumps(
                {
                    "custom_id": custom_id,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": self.chat_body(request),
                }
            )
            for custom_id, request in requests
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        upload = ("batch.jsonl", data, "application/jsonl")
        file = self._post("/files", {"purpose": "batch"}, {"file": upload})
        batch = self._post(
            "/batches",
            {
                "input_file_id": file.get("id"),
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
        )
        if not batch.get("id"):
            raise MalformedResponseError("batch created without an id", endpoint=self.endpoint)
        return str(batch["id"])

    def batch_status(self, batch_id: str) -> BatchStatus:
        body = self._get(f"/batches/{batch_id}")
        errors = (body.get("errors") or {}).get("data") or []
        why = "; ".join(str(e.get("message", e)) for e in errors if isinstance(e, dict))
        return BatchStatus(
            batch_id,
            str(body.get("status") or ""),
            str(body.get("output_file_id") or ""),
            str(body.get("error_file_id") or ""),
            why,
        )

    def batch_results(self, status: BatchStatus) -> dict[str, ChatResponse | Exception]:
        out: dict[str, ChatResponse | Exception] = {}
        for file_id in (status.output_file, status.error_file):
            if not file_id:
                continue
            text = self._get(f"/files/{file_id}/content", text=True)
            for line in filter(str.strip, text.splitlines()):
                row = json.loads(line)
                out[str(row.get("custom_id"))] = self._batch_answer(row)
        return out

    def _batch_answer(self, row: dict[str, Any]) -> ChatResponse | Exception:
        """One line of a batch's output or error file: the answer, or the request's error."""
        response = row.get("response") or {}
        code = int(response.get("status_code") or 0)
        body = response.get("body") or {}
        if code == 200 and not row.get("error"):
            try:
                return _chat_response(body, self.model)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
                return self._malformed("batch chat completion", e)
        error = row.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
        message = error.get("message", "failed") if isinstance(error, dict) else str(error)
        kind = error.get("code") if isinstance(error, dict) else ""
        cls = ContextOverflowError if kind == "context_length_exceeded" else RequestRejectedError
        return cls(f"batch request: {message}", endpoint=self.endpoint, status=code or None)

    # -- embeddings -------------------------------------------------------------------------

    def embed(self, request: EmbedRequest) -> EmbedResponse:
        body = self._post("/embeddings", {"model": self.model, "input": list(request.texts)})
        try:
            return _embed_response(body, len(request.texts))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise self._malformed("embeddings", e) from None

    def transcribe(self, request: TranscribeRequest) -> Transcript:
        """Speech to text at ``/audio/transcriptions`` (:mod:`vidagent.models.openai_audio`)."""
        from vidagent.models import openai_audio as audio

        files = {"file": ("audio.wav", audio.wav_bytes(request.audio), "audio/wav")}
        body = self._post(
            "/audio/transcriptions", audio.transcription_form(self.model, request), files
        )
        try:
            return audio.parse_transcription(body)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise self._malformed("transcription", e) from None

    # -- transport --------------------------------------------------------------------------

    def _post(
        self, path: str, body: dict[str, Any], files: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """POST ``body`` as JSON, or as multipart form fields beside ``files``."""
        with _transport_errors(self.endpoint):
            if files is None:
                response = self._http.post(path, json=body)
            else:
                response = self._http.post(path, data=body, files=files)
        _raise_for_status(response, self.endpoint)
        return self._json_object(response)

    def _get(self, path: str, *, text: bool = False) -> Any:
        """GET ``path``: its JSON object, or with ``text`` its body as text."""
        with _transport_errors(self.endpoint):
            response = self._http.get(path)
        _raise_for_status(response, self.endpoint)
        if text:
            return response.text
        return self._json_object(response)

    def _json_object(self, response: Any) -> dict[str, Any]:
        """A response's body, which must be a JSON object."""
        try:
            data = response.json()
        except ValueError:
            snippet = response.text[:80]
            raise MalformedResponseError(
                f"HTTP {response.status_code} body is not JSON: {snippet!r}", endpoint=self.endpoint
            ) from None
        if not isinstance(data, dict):
            raise MalformedResponseError("JSON body is not an object", endpoint=self.endpoint)
        return data

    def _post_stream(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` asking for a stream; the chunks read into one completion body, cut
        where the reply turns degenerate (module docstring)."""
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        try:
            with (
                _transport_errors(self.endpoint),
                self._http.stream("POST", path, json=body) as response,
            ):
                if not 200 <= response.status_code < 300:
                    response.read()
                    _raise_for_status(response, self.endpoint)
                return _read_stream(response.iter_lines(), self.model)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise self._malformed("chat completion stream", e) from None

    def _malformed(self, what: str, e: Exception) -> MalformedResponseError:
        detail = f"missing {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        return MalformedResponseError(f"unexpected {what} body ({detail})", endpoint=self.endpoint)

    def close(self) -> None:
        self._http.close()
