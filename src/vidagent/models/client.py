"""The one client layer every model call goes through, remote or local.

A :class:`Client` wraps one adapter. Each typed method (``chat``, ``embed``, ``transcribe``,
``read_text``, ``detect``, ``embed_images``) goes through :meth:`Client._invoke`, which

1. looks the request up in the :class:`~vidagent.models.cache.ResponseCache` (chat and text
   embeddings only: they are the paid, remote calls; ASR, OCR and detection outputs are stored
   in the Library already, and their inputs are large arrays);
2. takes a slot from the :class:`Limiter` for the adapter's endpoint (one per remote server,
   one per loaded local model); the slot is held per attempt, never while backing off;
3. retries :class:`~vidagent.exceptions.RetryableError` with exponential backoff and full
   jitter, honouring ``Retry-After``; other errors propagate at once;
4. records the call in the :class:`UsageLedger` with tokens, cost, latency and retries.

:class:`Models` holds the shared limiter, ledger and cache, and one lazily created client per
role. State comes in through it, never through module globals.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from vidagent.exceptions import (
    ConfigError,
    ContextOverflowError,
    ProviderError,
    RequestRejectedError,
    RetryableError,
    describe,
)
from vidagent.models.base import (
    Adapter,
    BatchStatus,
    Capabilities,
    ChatRequest,
    ChatResponse,
    Detection,
    EmbedRequest,
    EmbedResponse,
    Message,
    TextLine,
    TranscribeRequest,
    Transcript,
    Usage,
)
from vidagent.models.cache import CacheableRequest, ResponseCache
from vidagent.models.context import fit_request
from vidagent.models.cpu import quiet_openmp
from vidagent.models.interrupt import CallInterrupted, check_call
from vidagent.roles import capability

if TYPE_CHECKING:
    from typing_extensions import Self

    from vidagent.config import Settings

T = TypeVar("T")
_log = logging.getLogger(__name__)
SleepFn = Callable[[float], None]

#: Texts per embedding request; longer lists are split (each chunk cached and counted alone).
EMBED_CHUNK = 256
#: What a batch's tokens cost against the same calls made one by one (OpenAI's Batch API).
BATCH_DISCOUNT = 0.5
#: Requests, and bytes of them, per batch: under OpenAI's limits of 50,000 and 200 MB a file.
BATCH_MAX_REQUESTS = 50_000
BATCH_MAX_BYTES = 150 * 2**20
#: Seconds between looks at a batch that is not done (OpenAI's finish within 24 h).
BATCH_POLL_SECONDS = 30.0
#: Batch states whose files hold answers, and those that end a batch without them.
_ANSWERED = frozenset({"completed", "expired"})
_FAILED = frozenset({"failed", "cancelling", "cancelled"})


# ---------------------------------------------------------------------------------------------
# Concurrency


class Limiter:
    """Bounded concurrency per endpoint: a registry of endpoint → ``BoundedSemaphore``.

    A remote endpoint gets ``settings.concurrency[endpoint]`` slots, else
    ``settings.default_concurrency``. A local adapter (``capabilities.local``) gets one slot per
    loaded model, whatever the settings say: local backends are not safe to call from two
    threads at once, and one call already uses every core; an adapter that shares its own
    workers out between calls says how many it serves at once (``capabilities.concurrency``).
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._limits: dict[str, int] = {}

    def limit_for(self, endpoint: str, local: bool, local_limit: int = 1) -> int:
        if local:
            return local_limit
        return self._settings.concurrency.get(endpoint) or self._settings.default_concurrency

    def limit(self, endpoint: str) -> int | None:
        """The limit in force for ``endpoint``, or ``None`` before its first call."""
        with self._lock:
            return self._limits.get(endpoint)

    @contextmanager
    def slot(self, adapter: Adapter) -> Iterator[None]:
        """Hold one slot of ``adapter``'s endpoint for the duration of the block."""
        caps = adapter.capabilities
        with self._semaphore(adapter.endpoint, caps.local, caps.concurrency):
            yield

    def _semaphore(
        self, endpoint: str, local: bool, local_limit: int
    ) -> threading.BoundedSemaphore:
        with self._lock:
            semaphore = self._slots.get(endpoint)
            if semaphore is None:
                limit = self.limit_for(endpoint, local, local_limit)
                semaphore = self._slots[endpoint] = threading.BoundedSemaphore(limit)
                self._limits[endpoint] = limit
            return semaphore


# ---------------------------------------------------------------------------------------------
# Accounting


@dataclass(frozen=True)
class CallRecord:
    """One client call: what it cost and how it went.

    ``latency_s`` covers the whole call including retries and backoff. ``error`` names the
    exception type when the call failed for good. Cached calls keep the recorded token counts
    (so budgets replay identically) but cost nothing. ``priced`` is False for a live call of a
    model whose price is unknown (its ``cost_usd`` 0 means unknown, not free).
    """

    spec: str
    role: str
    operation: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    cached: bool = False
    retries: int = 0
    error: str | None = None
    fitted: str = ""  # what was elided to fit the context window (see models/context.py)
    priced: bool = True


@dataclass(frozen=True)
class SpecTotals:
    """Sums over the calls of one spec. Tokens and cost count live calls only."""

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    unpriced_calls: int = 0  # live calls without a known price (their cost is not in cost_usd)

    def add(self, r: CallRecord) -> SpecTotals:
        live = not r.cached
        return SpecTotals(
            calls=self.calls + 1,
            cached_calls=self.cached_calls + r.cached,
            failed_calls=self.failed_calls + (r.error is not None),
            retries=self.retries + r.retries,
            input_tokens=self.input_tokens + (r.input_tokens if live else 0),
            output_tokens=self.output_tokens + (r.output_tokens if live else 0),
            cost_usd=self.cost_usd + r.cost_usd,
            latency_s=self.latency_s + r.latency_s,
            unpriced_calls=self.unpriced_calls + (not r.priced),
        )


# Ledgers capturing the calls made in the current context (one agent run), besides the hub's.
_CAPTURING: ContextVar[tuple[UsageLedger, ...]] = ContextVar("vidagent_capturing", default=())


#: Calls a hub's ledger keeps as records (its totals count every call): a server's hub lives
#: for weeks, and kept about 300 bytes for each of its calls (a few per question, many per
#: indexed video) until it was stopped.
HUB_RECORDS = 1000


class UsageLedger:
    """Thread-safe record of every call, with totals per spec.

    Args:
        on_record: called with each record as it is made (an agent's trace listens here).
        keep: the newest calls kept as records (default: every one); :meth:`totals` and
            :meth:`total` count every call either way.
    """

    def __init__(
        self, on_record: Callable[[CallRecord], None] | None = None, *, keep: int | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._records: deque[CallRecord] = deque(maxlen=keep)
        self._totals: dict[str, SpecTotals] = {}
        self._on_record = on_record

    def record(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)
            self._totals[record.spec] = self._totals.get(record.spec, SpecTotals()).add(record)
        if self._on_record is not None:
            self._on_record(record)

    @staticmethod
    @contextmanager
    def capture(on_record: Callable[[CallRecord], None] | None = None) -> Iterator[UsageLedger]:
        """A ledger that also receives every call made in this context, by any client.

        Per-question accounting must not read the hub's shared ledger: a benchmark runs many
        questions at once over one hub. Context variables keep each run's calls apart; work
        handed to other threads inside a run must be started with ``contextvars.copy_context``.
        """
        ledger = UsageLedger(on_record)
        token = _CAPTURING.set((*_CAPTURING.get(), ledger))
        try:
            yield ledger
        finally:
            _CAPTURING.reset(token)

    def records(self) -> list[CallRecord]:
        """The calls kept (every one, or the newest ``keep``), oldest first."""
        with self._lock:
            return list(self._records)

    def totals(self) -> dict[str, SpecTotals]:
        """Per spec, in order of first call, over every call recorded."""
        with self._lock:
            return dict(self._totals)

    def total(self) -> Usage:
        """Live tokens and cost over every spec."""
        usage = Usage()
        for t in self.totals().values():
            usage = usage + Usage(t.input_tokens, t.output_tokens, t.cost_usd, not t.unpriced_calls)
        return usage


def price_usage(usage: Usage, spec: str, settings: Settings, *, local: bool = False) -> Usage:
    """``usage`` with its cost: a configured price (``settings.prices``, USD per 1M tokens,
    under the full spec, then ``provider:model`` without options), else free for a model run in
    this process (``local``), else genai-prices' bundled table (see
    :mod:`vidagent.models.prices`). No price known: cost 0 and ``priced`` False."""
    from vidagent.models.prices import call_cost

    cost = call_cost(spec, usage.input_tokens, usage.output_tokens, settings, local=local)
    return dataclasses.replace(usage, cost_usd=cost or 0.0, priced=cost is not None)


# ---------------------------------------------------------------------------------------------
# Client


class Client:
    """Typed model calls with caching, concurrency limits, retries and accounting.

    Args:
        adapter: the provider adapter to call.
        settings: retries, backoff, prices.
        limiter: shared per-endpoint slots (default: a private one).
        ledger: shared accounting (default: a private one).
        cache: shared response cache (default: off).
        role: the role this client serves, for the ledger.
        sleep: how to wait between retries (tests inject a recorder).
        rng: jitter source (tests inject a seeded one).
    """

    def __init__(
        self,
        adapter: Adapter,
        *,
        settings: Settings,
        limiter: Limiter | None = None,
        ledger: UsageLedger | None = None,
        cache: ResponseCache | None = None,
        role: str = "",
        sleep: SleepFn = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.adapter = adapter
        self.settings = settings
        self.limiter = limiter if limiter is not None else Limiter(settings)
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.cache = cache if cache is not None else ResponseCache(None, "off")
        self.role = role
        self._sleep = sleep
        self._rng = rng or random.Random()

    @property
    def spec(self) -> str:
        return self.adapter.spec

    @property
    def capabilities(self) -> Capabilities:
        return self.adapter.capabilities

    def require_images(self) -> None:
        """Check that this model takes images.

        Raises:
            ConfigError: it does not; the message says how to set a vision model.
        """
        if not self.capabilities.supports_images:
            raise ConfigError(
                f"the {self.role or 'vlm'} role {self.spec} takes no images; set it to a vision "
                "model (openai:<model>) or to perception:describer"
            )

    # -- typed calls ------------------------------------------------------------------------

    def chat(self, request: ChatRequest) -> ChatResponse:
        """One chat completion (cached), fitted to the model's context window first.

        A model that still refuses the fitted request as too long is asked once more with a
        request fitted to 70% of its window (the token estimate was too optimistic); the call's
        record says what was elided (:mod:`vidagent.models.context`).
        """
        context = self.capabilities.context_tokens
        if not context:
            return self._invoke("chat", lambda: self.adapter.chat(request), request)
        fitted, note = fit_request(request, context)
        try:
            return self._invoke("chat", lambda: self.adapter.chat(fitted), fitted, note)
        except ContextOverflowError:
            tighter, note = fit_request(request, context, shrink=0.7)
            return self._invoke("chat", lambda: self.adapter.chat(tighter), tighter, note)

    def structured(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | None,
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ChatResponse:
        """A chat turn whose reply follows the JSON ``schema`` (None: free text).

        The one place that picks how: structured output where the model has it (llama.cpp
        compiles the schema into a grammar; OpenAI-compatible servers take ``json_schema``),
        else JSON mode with the schema left to the prompt.
        """
        return self.chat(self.structured_request(messages, schema, max_tokens, temperature))

    def structured_request(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ChatRequest:
        """The request :meth:`structured` sends (for :meth:`chat_batch`)."""
        native = schema is not None and self.capabilities.supports_json_schema
        return ChatRequest(
            tuple(messages),
            response_schema=schema if native else None,
            json_mode=schema is not None and not native,
            max_tokens=max_tokens,
            temperature=temperature,
        )

    def embed(self, texts: Sequence[str] | EmbedRequest) -> EmbedResponse:
        """L2-normalised text embeddings, (N, D) float32 (cached per chunk of EMBED_CHUNK)."""
        request = texts if isinstance(texts, EmbedRequest) else EmbedRequest(tuple(texts))
        if not request.texts:
            return EmbedResponse(vectors=np.zeros((0, 0), dtype=np.float32))
        parts = [
            self._embed_chunk(EmbedRequest(request.texts[i : i + EMBED_CHUNK]))
            for i in range(0, len(request.texts), EMBED_CHUNK)
        ]
        if len(parts) == 1:
            return parts[0]
        return EmbedResponse(
            vectors=np.concatenate([p.vectors for p in parts]),  # (N, D)
            usage=sum((p.usage for p in parts), Usage()),
            cached=all(p.cached for p in parts),
        )

    def _embed_chunk(self, request: EmbedRequest) -> EmbedResponse:
        return self._invoke("embed", lambda: self.adapter.embed(request), request)

    def transcribe(self, request: TranscribeRequest) -> Transcript:
        """Speech to text with word times (not cached)."""
        return self._invoke("transcribe", lambda: self.adapter.transcribe(request))

    def read_text(self, images: list[np.ndarray]) -> list[list[TextLine]]:
        """OCR on RGB images, each (H, W, 3) uint8 (not cached)."""
        return self._invoke("read_text", lambda: self.adapter.read_text(images))

    def detect(
        self, images: list[np.ndarray], labels: Sequence[str] | None = None
    ) -> list[list[Detection]]:
        """Detections on RGB images, each (H, W, 3) uint8 (not cached); ``labels`` name what
        an open-vocabulary detector looks for (None: its default set)."""
        if labels is None:  # adapters written before labels existed take the images alone
            return self._invoke("detect", lambda: self.adapter.detect(images))
        return self._invoke("detect", lambda: self.adapter.detect(images, list(labels)))

    def embed_images(self, images: list[np.ndarray]) -> np.ndarray:
        """Image embeddings, (N, D) float32 (not cached)."""
        return self._invoke("embed_images", lambda: self.adapter.embed_images(images))

    # -- the one path -----------------------------------------------------------------------

    def _invoke(
        self,
        operation: str,
        call: Callable[[], T],
        request: CacheableRequest | None = None,
        fitted: str = "",
    ) -> T:
        """Cache, slot, retries and accounting around ``call``."""
        started = time.monotonic()
        if request is not None:
            hit = self.cache.lookup(self.spec, operation, request)
            if hit is not None:
                self._record(operation, hit.usage, started, cached=True, fitted=fitted)
                return hit  # type: ignore[return-value]
        result, retries = self._with_retries(operation, call, started, fitted)
        usage = getattr(result, "usage", None)
        if isinstance(usage, Usage):
            local = self.adapter.capabilities.local
            usage = price_usage(usage, self.spec, self.settings, local=local)
            result = dataclasses.replace(result, usage=usage)  # type: ignore[type-var]
        if request is not None:
            self.cache.store(self.spec, operation, request, result)  # type: ignore[arg-type]
        self._record(operation, usage or Usage(), started, retries=retries, fitted=fitted)
        return result

    def _with_retries(
        self, operation: str, call: Callable[[], T], started: float, fitted: str = ""
    ) -> tuple[T, int]:
        """``(result, retries)``; records and re-raises the error that ends the call."""
        attempt = 0
        while True:
            try:
                if attempt:  # after a retry's wait, which a stop or a spent time budget ends
                    check_call()
                with self.limiter.slot(self.adapter):
                    return call(), attempt
            except RetryableError as e:
                if attempt < self.settings.max_retries:
                    self._sleep(self.backoff(attempt, e.retry_after))
                    attempt += 1
                    continue
                self._record(
                    operation, Usage(), started, retries=attempt, error=describe(e), fitted=fitted
                )
                raise
            except ProviderError as e:
                self._record(
                    operation, Usage(), started, retries=attempt, error=describe(e), fitted=fitted
                )
                raise
            except CallInterrupted as e:  # its run was stopped, or its time spent, mid-call
                error = f"interrupted: {e}"
                self._record(
                    operation, Usage(), started, retries=attempt, error=error, fitted=fitted
                )
                raise e.cause from None

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``attempt + 1``: full jitter, at least ``retry_after``.

        ``backoff_max`` caps every wait, the server's ``Retry-After`` included, so one bad
        header cannot stall a run for hours.
        """
        s = self.settings
        ceiling = min(s.backoff_max, s.backoff_base * (2.0**attempt))
        delay = self._rng.uniform(0.0, ceiling)
        if retry_after is not None:
            delay = max(delay, min(retry_after, s.backoff_max))
        return delay

    def _record(
        self,
        operation: str,
        usage: Usage,
        started: float,
        *,
        cached: bool = False,
        retries: int = 0,
        error: str | None = None,
        fitted: str = "",
    ) -> None:
        record = CallRecord(
            spec=self.spec,
            role=self.role,
            operation=operation,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=0.0 if cached else usage.cost_usd,
            latency_s=time.monotonic() - started,
            cached=cached,
            retries=retries,
            error=error,
            fitted=fitted,
            priced=cached or usage.priced,
        )
        self.ledger.record(record)
        for ledger in _CAPTURING.get():
            ledger.record(record)

    # -- the batch API ----------------------------------------------------------------------

    def chat_batch(
        self,
        requests: Mapping[str, ChatRequest],
        job: Mapping[str, Any] | None,
        save: Callable[[dict[str, Any]], None],
        *,
        poll_seconds: float = BATCH_POLL_SECONDS,
    ) -> dict[str, ChatResponse | Exception]:
        """Chat requests through the model's batch API, answered by custom id.

        Requests the response cache holds are answered from it. The others are submitted in
        batches (at most :data:`BATCH_MAX_REQUESTS` and about :data:`BATCH_MAX_BYTES` each)
        unless ``job``, the state ``save`` last stored, already holds them for the same
        requests: then those batches are polled again, not submitted again. ``save`` gets the
        state after every submission. Each batch is polled every ``poll_seconds`` until it is
        done; its answers are cached and counted at :data:`BATCH_DISCOUNT` of the price. A
        request that failed, or that an expired batch never reached, maps to its error.

        Raises:
            ConfigError: the model has no batch API.
            RequestRejectedError: a batch failed or was cancelled (one line, with the
                provider's reason); it is dropped from the state, so a rerun submits it again.
        """
        if not self.capabilities.supports_batch:
            raise ConfigError(f"{self.spec} has no batch API; turn batch off for it")
        results: dict[str, ChatResponse | Exception] = {}
        for custom_id, request in requests.items():
            hit = self.cache.lookup(self.spec, "chat", request)
            if isinstance(hit, ChatResponse):
                self._record("chat", hit.usage, time.monotonic(), cached=True)
                results[custom_id] = hit
        context = self.capabilities.context_tokens
        asked = {
            k: fit_request(r, context)[0] if context else r
            for k, r in requests.items()
            if k not in results
        }
        inputs = _requests_hash(asked)
        state: dict[str, Any] = {"inputs": inputs, "batches": []}
        if job is not None and job.get("inputs") == inputs:
            state["batches"] = [dict(b) for b in job.get("batches", [])]
        sent = {k for b in state["batches"] for k in b["ids"]}
        for chunk in _batch_chunks([(k, r) for k, r in asked.items() if k not in sent]):
            submit = functools.partial(self.adapter.batch_submit, chunk)
            batch_id, _ = self._with_retries("batch_submit", submit, time.monotonic())
            state["batches"].append({"id": batch_id, "ids": [k for k, _ in chunk]})
            save(state)
        for batch in list(state["batches"]):
            status = self._await_batch(batch, state, save, poll_seconds)
            started = time.monotonic()
            fetch = functools.partial(self.adapter.batch_results, status)
            answers, _ = self._with_retries("batch_results", fetch, started)
            for custom_id in batch["ids"]:
                answer = answers.get(custom_id) or RequestRejectedError(
                    f"batch {batch['id']} {status.state} before answering {custom_id}",
                    endpoint=self.adapter.endpoint,
                )
                if isinstance(answer, ChatResponse):
                    answer = self._batch_priced(answer)
                    self.cache.store(self.spec, "chat", asked[custom_id], answer)
                    self._record("chat_batch", answer.usage, started)
                results[custom_id] = answer
        return {k: results[k] for k in requests if k in results}

    def _await_batch(
        self,
        batch: dict[str, Any],
        state: dict[str, Any],
        save: Callable[[dict[str, Any]], None],
        poll_seconds: float,
    ) -> BatchStatus:
        """Poll ``batch`` until its answers are ready; a failed one leaves the state."""
        waited = False
        while True:
            look = functools.partial(self.adapter.batch_status, batch["id"])
            status, _ = self._with_retries("batch_status", look, time.monotonic())
            if status.state in _ANSWERED:
                return status
            if status.state in _FAILED:
                state["batches"].remove(batch)
                save(state)
                why = f": {status.errors}" if status.errors else ""
                raise RequestRejectedError(
                    f"batch {batch['id']} {status.state}{why}; running again submits it anew",
                    endpoint=self.adapter.endpoint,
                )
            # said once where it shows (the wait may last a day), then quietly at each look
            say = _log.info if waited else _log.warning
            say(
                "batch %s is %s: waiting for it (up to 24 h; stop and run again to resume)",
                batch["id"],
                status.state,
            )
            waited = True
            self._sleep(poll_seconds)

    def _batch_priced(self, response: ChatResponse) -> ChatResponse:
        usage = price_usage(response.usage, self.spec, self.settings)
        usage = dataclasses.replace(usage, cost_usd=usage.cost_usd * BATCH_DISCOUNT)
        return dataclasses.replace(response, usage=usage)

    def close(self) -> None:
        self.adapter.close()


def _requests_hash(requests: Mapping[str, ChatRequest]) -> str:
    """What identifies a set of batch requests: their ids and canonical bodies."""
    import hashlib
    import json

    body = json.dumps([[k, r.canonical()] for k, r in requests.items()], sort_keys=True)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def _batch_chunks(
    requests: Sequence[tuple[str, ChatRequest]],
) -> Iterator[list[tuple[str, ChatRequest]]]:
    """``requests`` cut into batches under :data:`BATCH_MAX_REQUESTS` and, by the size of
    their images in base64 plus their text, about :data:`BATCH_MAX_BYTES`."""
    chunk: list[tuple[str, ChatRequest]] = []
    size = 0
    for item in requests:
        request = item[1]
        images = sum(
            len(p.data) * 4 // 3
            for m in request.messages
            if not isinstance(m.content, str)
            for p in m.content
            if not isinstance(p, str)
        )
        text = sum(len(m.text) for m in request.messages)
        if chunk and (len(chunk) >= BATCH_MAX_REQUESTS or size + images + text > BATCH_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += images + text
    if chunk:
        yield chunk


# ---------------------------------------------------------------------------------------------
# Hub


class Models:
    """One client per role over shared limiter, ledger and cache; adapters created lazily.

    Args:
        settings: specs per role, retries, prices, cache mode and directory.
        adapters: ready adapters per role (tests and fakes); ``captioner`` and ``tool_vlm``
            fall back to the ``vlm``'s; other roles missing raise ConfigError.
        sleep: how clients wait between retries.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        adapters: Mapping[str, Adapter] | None = None,
        sleep: SleepFn = time.sleep,
    ) -> None:
        self.settings = settings
        self.limiter = Limiter(settings)
        self.ledger = UsageLedger(keep=HUB_RECORDS)
        self.cache = ResponseCache.from_settings(settings)
        self._adapters = dict(adapters) if adapters is not None else None
        self._sleep = sleep
        self._lock = threading.Lock()
        self._clients: dict[str, Client] = {}
        self._by_spec: dict[str, Adapter] = {}
        # The OpenMP settings go into the environment here, in the thread that builds the hub,
        # before a model loads in a thread of its own (ingest warms them beside its stages):
        # setenv while other threads read the environment (decoders', LanceDB's, Ray's gRPC)
        # is undefined behaviour in C. Each model's load asks again, and finds them set.
        quiet_openmp()

    @classmethod
    def from_adapters(
        cls, adapters: Mapping[str, Adapter], settings: Settings | None = None, **kwargs: Any
    ) -> Models:
        """A hub over given adapters; without settings, defaults with the cache off."""
        if settings is None:
            from vidagent.config import Settings

            settings = Settings.model_validate({"cache": "off"})
        return cls(settings, adapters=adapters, **kwargs)

    def client(self, role: str) -> Client:
        """The client for ``role``, creating its adapter on first use (weights load later)."""
        with self._lock:
            client = self._clients.get(role)
            if client is None:
                client = Client(
                    self._adapter(role),
                    settings=self.settings,
                    limiter=self.limiter,
                    ledger=self.ledger,
                    cache=self.cache,
                    role=role,
                    sleep=self._sleep,
                )
                self._clients[role] = client
            return client

    def warm(self, roles: Sequence[str]) -> None:
        """Load the weights of ``roles`` now, in order (see :meth:`Adapter.warm`).

        Best effort: a role that cannot be served, or weights that fail to load, are skipped
        here; the call that needs them raises the same error where it is handled.
        """
        for role in dict.fromkeys(roles):
            try:
                self.client(role).adapter.warm()
            except Exception as e:  # noqa: BLE001 - surfaces, typed, at the first real call
                _log.debug("warming %s failed: %s", role, e)

    def serving(self, role: str) -> str:
        """The spec serving ``role``: the adapter's for the roles agents call (a hub given
        adapters may differ from the settings), else the configured one."""
        if capability(role) in ("llm", "vlm", "embed"):
            try:
                return self.client(role).spec
            except ConfigError:
                pass
        return self.settings.spec(role)

    def _adapter(self, role: str) -> Adapter:
        """The given adapter, or one from the registry shared by roles with the same spec."""
        serves = capability(role)  # captioner and tool_vlm are served by vlm adapters
        if self._adapters is not None:
            found = self._adapters.get(role) or self._adapters.get(serves)
            if found is None:
                given = ", ".join(sorted(self._adapters)) or "none"
                raise ConfigError(f"no adapter given for role {role!r} (given: {given})")
            return found
        from vidagent.models import registry

        spec = self.settings.spec(role)
        adapter = self._by_spec.get(spec)
        if adapter is None or serves not in adapter.capabilities.roles:
            adapter = registry.create_adapter(spec, self.settings, serves)  # validates the role
            self._by_spec.setdefault(spec, adapter)
        return adapter

    def close(self) -> None:
        """Close every adapter created so far and the cache file."""
        with self._lock:
            adapters = {id(c.adapter): c.adapter for c in self._clients.values()}
            self._clients, self._by_spec = {}, {}
        for adapter in adapters.values():
            adapter.close()
        self.cache.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
