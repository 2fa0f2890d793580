"""The client layer against a loopback server that fails on cue: retries, limits, cost, cache."""

from __future__ import annotations

import dataclasses
import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faultserver import (
    Behaviour,
    FaultServer,
    completion,
    missing_choices,
    not_json,
    rate_limited,
    rejected,
    server_error,
    slow,
)

from vidagent.config import Price, Settings
from vidagent.exceptions import (
    CacheMissError,
    ConfigError,
    ContextOverflowError,
    MalformedResponseError,
    ProviderTimeout,
    RateLimitError,
    RequestRejectedError,
    ServerError,
)
from vidagent.models import openai as openai_provider
from vidagent.models.base import (
    Adapter,
    Capabilities,
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    ToolSpec,
)
from vidagent.models.cache import ResponseCache
from vidagent.models.client import Client, Limiter, Models, UsageLedger
from vidagent.models.openai import OpenAIAdapter, parse_retry_after

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
WEATHER = ToolSpec(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def server() -> Iterator[FaultServer]:
    s = FaultServer().start()
    yield s
    s.stop()


class Harness:
    """A client against the fault server, with a sleep recorder instead of real waits."""

    def __init__(self, server: FaultServer, tmp_path: Path, options: dict[str, str], **kw: Any):
        defaults: dict[str, Any] = {
            "home": tmp_path,
            "cache": "off",
            "max_retries": 3,
            "backoff_base": 0.0,
            "backoff_max": 30.0,
        }
        self.settings = Settings(**{**defaults, **kw})
        self.sleeps: list[float] = []
        opts = {"base_url": server.base_url, **options}
        self.adapter = OpenAIAdapter.from_settings("fault-model", opts, self.settings)
        self.cache = ResponseCache.from_settings(self.settings)
        self.client = Client(
            self.adapter,
            settings=self.settings,
            cache=self.cache,
            role="llm",
            sleep=self.sleeps.append,
            rng=random.Random(0),
        )

    def close(self) -> None:
        self.client.close()
        self.cache.close()


@pytest.fixture
def make(server: FaultServer, tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def factory(options: dict[str, str] | None = None, **kw: Any) -> Harness:
        made.append(Harness(server, tmp_path, options or {}, **kw))
        return made[-1]

    yield factory
    for h in made:
        h.close()


def ask(text: str = "hi", **kw: Any) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), **kw)


# ---------------------------------------------------------------------------------------------
# Retries


def test_429_then_success_is_retried_once(server: FaultServer, make: Any) -> None:
    h = make()
    server.script(rate_limited("0"))
    response = h.client.chat(ask())
    assert response.text == "hello"
    assert len(server.requests) == 2
    (record,) = h.client.ledger.records()
    assert (record.retries, record.error, record.cached) == (1, None, False)


def test_retry_after_seconds_is_honoured(server: FaultServer, make: Any) -> None:
    h = make()  # backoff_base 0: jitter alone would not wait at all
    server.script(rate_limited("7"))
    h.client.chat(ask())
    assert h.sleeps == [7.0]


def test_retry_after_is_capped_by_backoff_max(server: FaultServer, make: Any) -> None:
    h = make(backoff_max=2.5)
    server.script(rate_limited("3600"))
    h.client.chat(ask())
    assert h.sleeps == [2.5]


def test_rate_limit_error_carries_retry_after(server: FaultServer, make: Any) -> None:
    h = make(max_retries=0)
    server.script(rate_limited("12"))
    with pytest.raises(RateLimitError) as info:
        h.client.chat(ask())
    assert info.value.retry_after == 12.0
    assert info.value.status == 429


def test_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    header = "Tue, 14 Nov 2023 22:13:50 GMT"  # now + 30 s
    assert parse_retry_after(header, now=now) == pytest.approx(30.0)
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("1.5") == 1.5


def test_backoff_doubles_with_full_jitter_and_cap(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, cache="off", backoff_base=1.0, backoff_max=5.0)
    client = Client(_LocalCounter(), settings=settings, rng=random.Random(3))
    for attempt, ceiling in enumerate([1.0, 2.0, 4.0, 5.0, 5.0]):
        waits = [client.backoff(attempt) for _ in range(200)]
        assert min(waits) >= 0.0 and max(waits) <= ceiling
        assert max(waits) > ceiling * 0.8  # jitter spans the whole range, not a fixed delay


def test_5xx_beyond_max_retries_raises_server_error(server: FaultServer, make: Any) -> None:
    h = make(max_retries=3)
    server.script(server_error(500), server_error(503), server_error(500), server_error(502))
    with pytest.raises(ServerError) as info:
        h.client.chat(ask())
    assert info.value.status == 502
    assert len(server.requests) == 4
    assert len(h.sleeps) == 3
    (record,) = h.client.ledger.records()
    assert record.retries == 3 and (record.error or "").startswith("ServerError")


def test_timeout_raises_provider_timeout(server: FaultServer, make: Any) -> None:
    h = make({"timeout": "0.2"}, max_retries=0)
    server.script(slow(5.0))
    with pytest.raises(ProviderTimeout):
        h.client.chat(ask())
    assert len(server.requests) == 1


def test_timeout_then_success_is_retried(server: FaultServer, make: Any) -> None:
    h = make({"timeout": "0.2"}, max_retries=1)
    server.script(slow(5.0))
    assert h.client.chat(ask()).text == "hello"
    assert len(server.requests) == 2


@pytest.mark.parametrize("bad", [not_json, missing_choices], ids=["not-json", "no-choices"])
def test_malformed_body_raises_after_retries(server: FaultServer, make: Any, bad: Any) -> None:
    h = make(max_retries=2)
    server.script(bad(), bad(), bad())
    with pytest.raises(MalformedResponseError):
        h.client.chat(ask())
    assert len(server.requests) == 3


def test_malformed_then_success_recovers(server: FaultServer, make: Any) -> None:
    h = make()
    server.script(not_json())
    assert h.client.chat(ask()).text == "hello"


def test_400_is_rejected_without_retry(server: FaultServer, make: Any) -> None:
    h = make()
    server.script(rejected("messages[0].content must not be empty"))
    with pytest.raises(RequestRejectedError, match="content must not be empty") as info:
        h.client.chat(ask())
    assert info.value.status == 400
    assert len(server.requests) == 1
    assert h.sleeps == []


def test_openais_context_length_code_is_an_overflow_not_a_plain_rejection(
    server: FaultServer, make: Any
) -> None:
    """OpenAI answers an over-long prompt with 400 and ``"code": "context_length_exceeded"``;
    read by that code, it is the error callers shrink the request for (the summary halves)."""
    h = make()
    too_long = {
        "message": "This model's maximum context length is 128000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
    server.script(Behaviour(400, {"error": too_long}))
    with pytest.raises(ContextOverflowError, match="maximum context length"):
        h.client.chat(ask())
    assert len(server.requests) == 1


def test_connection_refused_is_a_retried_server_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(home=tmp_path, cache="off", max_retries=1, backoff_base=0.0)
    adapter = OpenAIAdapter.from_settings(
        "m", {"base_url": f"http://127.0.0.1:{port}/v1"}, settings
    )
    sleeps: list[float] = []
    with pytest.raises(ServerError, match="connection failed"):
        Client(adapter, settings=settings, sleep=sleeps.append).chat(ask())
    assert len(sleeps) == 1


# ---------------------------------------------------------------------------------------------
# Concurrency


def _parallel_chats(client: Client, n: int) -> list[ChatResponse]:
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(lambda i: client.chat(ask(f"q{i}")), range(n)))


def test_endpoint_limit_bounds_requests_in_flight(server: FaultServer, make: Any) -> None:
    h = make(concurrency={server.base_url: 2})
    server.script(*[slow(0.3) for _ in range(6)])
    assert len(_parallel_chats(h.client, 6)) == 6
    assert server.max_in_flight == 2
    assert h.client.limiter.limit(server.base_url) == 2


def test_without_a_tight_limit_requests_overlap(server: FaultServer, make: Any) -> None:
    """Control for the test above: the server does see overlap when the limit allows it."""
    h = make(default_concurrency=6)
    server.script(*[slow(0.3) for _ in range(6)])
    _parallel_chats(h.client, 6)
    assert server.max_in_flight > 2


class _LocalCounter(Adapter):
    """A local adapter that records how many calls run at once."""

    provider = "counter"
    capabilities = Capabilities(roles=frozenset({"llm"}), local=True)

    def __init__(self) -> None:
        super().__init__("m")
        self.lock = threading.Lock()
        self.now = self.most = 0

    def chat(self, request: ChatRequest) -> ChatResponse:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        return ChatResponse(text=request.messages[0].text)


def test_local_adapter_gets_one_slot(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, cache="off", default_concurrency=8)
    adapter = _LocalCounter()
    client = Client(adapter, settings=settings)
    answers = _parallel_chats(client, 4)
    assert [a.text for a in answers] == ["q0", "q1", "q2", "q3"]
    assert adapter.most == 1
    assert client.limiter.limit(adapter.endpoint) == 1


def test_a_local_adapter_serving_two_calls_at_once_gets_two_slots(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, cache="off", default_concurrency=8)
    adapter = _LocalCounter()
    adapter.capabilities = dataclasses.replace(adapter.capabilities, concurrency=2)
    client = Client(adapter, settings=settings)
    answers = _parallel_chats(client, 4)
    assert [a.text for a in answers] == ["q0", "q1", "q2", "q3"]
    assert adapter.most == 2
    assert client.limiter.limit(adapter.endpoint) == 2


# ---------------------------------------------------------------------------------------------
# Accounting


def test_tokens_and_cost_follow_usage_and_prices(server: FaultServer, make: Any) -> None:
    h = make(prices={"openai:fault-model": Price(input=2.0, output=10.0)})
    body = completion("priced", prompt_tokens=1000, completion_tokens=500)
    server.script(Behaviour(body=body), Behaviour(body=body))
    first = h.client.chat(ask("a"))
    h.client.chat(ask("b"))
    assert (first.usage.input_tokens, first.usage.output_tokens) == (1000, 500)
    assert first.usage.cost_usd == pytest.approx(0.007)  # (1000 * 2 + 500 * 10) / 1e6
    (totals,) = h.client.ledger.totals().values()
    assert (totals.calls, totals.input_tokens, totals.output_tokens) == (2, 2000, 1000)
    assert totals.cost_usd == pytest.approx(0.014)
    assert h.client.ledger.total().cost_usd == pytest.approx(0.014)


def test_a_model_on_a_server_no_price_list_knows_has_no_price(
    server: FaultServer, make: Any
) -> None:
    h = make()  # openai:fault-model on a local server: neither configured nor in genai-prices
    usage = h.client.chat(ask()).usage
    assert (usage.cost_usd, usage.priced) == (0.0, False)  # 0 here means unknown, not free
    (record,) = h.client.ledger.records()
    assert record.input_tokens == 12 and not record.priced
    (totals,) = h.client.ledger.totals().values()
    assert totals.unpriced_calls == 1 and not h.client.ledger.total().priced


# ---------------------------------------------------------------------------------------------
# Cache


def test_identical_call_is_served_from_cache(server: FaultServer, make: Any) -> None:
    h = make(cache="on", prices={"openai:fault-model": Price(input=1.0, output=1.0)})
    first = h.client.chat(ask())
    second = h.client.chat(ask())
    assert len(server.requests) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text
    live, hit = h.client.ledger.records()
    assert live.cost_usd > 0
    assert (hit.cached, hit.cost_usd) == (True, 0.0)
    (totals,) = h.client.ledger.totals().values()
    assert (totals.cached_calls, totals.cost_usd) == (1, live.cost_usd)


def test_replay_with_empty_cache_raises_without_a_request(server: FaultServer, make: Any) -> None:
    h = make(cache="replay")
    with pytest.raises(CacheMissError, match="replay"):
        h.client.chat(ask())
    assert server.requests == []


def test_recorded_run_replays_in_a_new_cache_without_requests(
    server: FaultServer, make: Any
) -> None:
    make(cache="on").client.chat(ask(tools=(WEATHER,)))
    replay = make(cache="replay")
    assert replay.client.chat(ask(tools=(WEATHER,))).cached
    assert len(server.requests) == 1


def _variants() -> dict[str, ChatRequest]:
    base = ChatRequest(messages=(Message("user", ("look", ImagePart(PNG, "image/png"))),))
    other_image = ImagePart(PNG[:-1] + b"\x00", "image/png")
    return {
        "temperature": dataclasses.replace(base, temperature=0.7),
        "seed": dataclasses.replace(base, seed=1),
        "image-byte": dataclasses.replace(base, messages=(Message("user", ("look", other_image)),)),
        "tools": dataclasses.replace(base, tools=(WEATHER,)),
        "schema": dataclasses.replace(base, response_schema=SCHEMA),
        "max-tokens": dataclasses.replace(base, max_tokens=5),
    }


@pytest.mark.parametrize("field", list(_variants()))
def test_any_changed_field_misses_the_cache(server: FaultServer, make: Any, field: str) -> None:
    h = make(cache="on")
    base = ChatRequest(messages=(Message("user", ("look", ImagePart(PNG, "image/png"))),))
    h.client.chat(base)
    assert not h.client.chat(_variants()[field]).cached
    assert len(server.requests) == 2


def test_embeddings_are_normalised_ordered_and_cached(server: FaultServer, make: Any) -> None:
    h = make(cache="on")
    first = h.client.embed(["a", "b", "c"])
    assert first.vectors.shape == (3, 4) and first.vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first.vectors, axis=1), 1.0, rtol=1e-6)
    expected = np.array([[1, 1, 0, 0], [2, 1, 0, 0], [3, 1, 0, 0]], np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(first.vectors, expected, rtol=1e-6)  # ordered by "index"
    second = h.client.embed(["a", "b", "c"])
    assert second.cached and len(server.requests) == 1
    np.testing.assert_array_equal(second.vectors, first.vectors)


def test_cache_is_safe_under_threads(server: FaultServer, make: Any) -> None:
    h = make(cache="on", default_concurrency=8)
    _parallel_chats(h.client, 8)
    again = _parallel_chats(h.client, 8)
    assert all(r.cached for r in again)
    assert len(server.requests) == 8 and len(h.cache) == 8


# ---------------------------------------------------------------------------------------------
# What goes over the wire


def test_request_body_uses_openai_formats(server: FaultServer, make: Any) -> None:
    h = make()
    request = ChatRequest(
        messages=(
            Message("system", "be brief"),
            Message("user", ("what is shown?", ImagePart(PNG, "image/png"))),
        ),
        tools=(WEATHER,),
        tool_choice="auto",
        response_schema=SCHEMA,
        max_tokens=50,
        seed=7,
    )
    h.client.chat(request)
    (body,) = server.bodies("/chat/completions")
    assert body["model"] == "fault-model"
    text_part, image_part = body["messages"][1]["content"]
    assert text_part == {"type": "text", "text": "what is shown?"}
    assert image_part["type"] == "image_url"
    assert image_part["image_url"]["url"] == ImagePart(PNG, "image/png").data_url()
    assert image_part["image_url"]["url"].startswith("data:image/png;base64,")
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": WEATHER.description,
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": SCHEMA, "strict": True},
    }
    assert (body["max_tokens"], body["seed"], body["temperature"]) == (50, 7, 0.0)


@pytest.mark.parametrize(
    ("options", "request_kw", "expected"),
    [
        ({}, {"json_mode": True}, {"type": "json_object"}),
        (
            {"schema_style": "inline"},
            {"response_schema": SCHEMA},
            {"type": "json_object", "schema": SCHEMA},
        ),
        ({"json_schema": "0"}, {"response_schema": SCHEMA}, {"type": "json_object"}),
    ],
    ids=["json-mode", "inline-schema", "no-schema-support"],
)
def test_response_format_variants(
    server: FaultServer, make: Any, options: dict[str, str], request_kw: Any, expected: Any
) -> None:
    make(options).client.chat(ask(**request_kw))
    assert server.bodies()[0]["response_format"] == expected


def test_tool_calls_round_trip(server: FaultServer, make: Any) -> None:
    h = make()
    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    server.script(Behaviour(body=completion(None, tool_calls=[call])))  # type: ignore[arg-type]
    response = h.client.chat(ask("weather?", tools=(WEATHER,)))
    (tc,) = response.tool_calls
    assert (tc.id, tc.name, tc.parsed_arguments()) == ("call_9", "get_weather", {"city": "Oslo"})
    assert response.text == "" and response.finish_reason == "tool_calls"
    # The assistant turn and the tool result go back in OpenAI's shape.
    follow = ChatRequest(
        messages=(
            Message("user", "weather?"),
            Message("assistant", "", tool_calls=response.tool_calls),
            Message("tool", "12 °C", tool_call_id="call_9", name="get_weather"),
        )
    )
    h.client.chat(follow)
    sent = server.bodies()[1]["messages"]
    assert sent[1] == {"role": "assistant", "content": None, "tool_calls": [call]}
    assert sent[2] == {
        "role": "tool",
        "content": "12 °C",
        "tool_call_id": "call_9",
        "name": "get_weather",
    }


def test_capability_flags_refuse_before_sending(server: FaultServer, make: Any) -> None:
    h = make({"images": "0", "tools": "0"})
    assert not h.adapter.capabilities.supports_images
    with pytest.raises(RequestRejectedError, match="images=0"):
        h.client.chat(ChatRequest(messages=(Message("user", ("x", ImagePart(PNG))),)))
    with pytest.raises(RequestRejectedError, match="tools=0"):
        h.client.chat(ask(tools=(WEATHER,)))
    too_many = make({"max_images": "1"})
    two = Message("user", (ImagePart(PNG), ImagePart(PNG)))
    with pytest.raises(RequestRejectedError, match="max_images=1"):
        too_many.client.chat(ChatRequest(messages=(two,)))
    assert server.requests == []


# ---------------------------------------------------------------------------------------------
# Keys, status, hub


def test_settings_key_goes_only_to_the_settings_server(
    server: FaultServer, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(openai_api_key="sk-secret").client.chat(ask())
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    make({"api_key_env": "LOCAL_KEY"}, openai_api_key="sk-secret").client.chat(ask())
    make(openai_api_key="sk-secret", openai_base_url=server.base_url).client.chat(ask())
    assert server.auth == [None, "Bearer local-secret", "Bearer sk-secret"]


def test_status_never_needs_the_network(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, openai_api_key="")
    assert not openai_provider.status("gpt-4o", {}, s).usable
    assert "API key" in openai_provider.status("gpt-4o", {}, s).detail
    local = {"base_url": "http://127.0.0.1:9/v1"}
    assert openai_provider.status("qwen", local, s).usable
    assert openai_provider.status("gpt-4o", {}, Settings(home=tmp_path, openai_api_key="k")).usable
    bad = openai_provider.status("qwen", {"tool": "1"}, s)
    assert not bad.usable and "unknown openai spec option" in bad.detail


def test_bad_options_fail_at_construction(tmp_path: Path) -> None:
    s = Settings(home=tmp_path)
    with pytest.raises(ConfigError, match="must be 0 or 1"):
        OpenAIAdapter.from_settings("m", {"images": "maybe"}, s)
    with pytest.raises(ConfigError, match="http://host:port/v1"):
        OpenAIAdapter.from_settings("m", {"base_url": "localhost:8000"}, s)


def test_models_hub_shares_state_and_creates_clients_once(
    server: FaultServer, tmp_path: Path
) -> None:
    spec = f"openai:fault-model?base_url={server.base_url}"
    settings = Settings(home=tmp_path, cache="on", llm=spec, vlm=spec, ocr=spec)
    with Models(settings) as models:
        llm = models.client("llm")
        assert models.client("llm") is llm
        assert isinstance(llm.adapter, OpenAIAdapter)
        assert models.client("vlm").adapter is llm.adapter  # one adapter per spec
        llm.chat(ask())
        models.client("vlm").chat(ask())  # same request, same spec: a cache hit
        assert [r.role for r in models.ledger.records()] == ["llm", "vlm"]
        assert [r.cached for r in models.ledger.records()] == [False, True]
        with pytest.raises(ConfigError, match="cannot fill role 'ocr'"):
            models.client("ocr")
    assert (tmp_path / "cache" / "responses.sqlite").is_file()


def test_models_from_adapters(tmp_path: Path) -> None:
    fake = _LocalCounter()
    with Models.from_adapters({"llm": fake}) as models:
        assert models.client("llm").chat(ask("x")).text == "x"
        assert models.cache.mode == "off"
        with pytest.raises(ConfigError, match="no adapter given for role 'vlm'"):
            models.client("vlm")


class _Echo(Adapter):
    """A local adapter that answers at once with its prompt."""

    provider = "echo"
    capabilities = Capabilities(roles=frozenset({"llm"}), local=True)

    def __init__(self) -> None:
        super().__init__("m")

    def chat(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(text=request.messages[0].text)


def test_a_hubs_ledger_keeps_its_newest_records_and_counts_every_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server's hub lives for weeks: a record of each call grew it without end. The hub keeps
    the newest :data:`HUB_RECORDS`; its totals, and a run's own ledger, count every call."""
    import vidagent.models.client as client_module

    monkeypatch.setattr(client_module, "HUB_RECORDS", 5)
    with Models.from_adapters({"llm": _Echo()}) as models:
        with UsageLedger.capture() as run:
            for i in range(8):
                models.client("llm").chat(ask(f"q{i}"))
        assert len(models.ledger.records()) == 5
        assert models.ledger.records() == run.records()[-5:]
        assert models.ledger.totals()["echo:m"].calls == 8
        assert len(run.records()) == 8 and run.totals() == models.ledger.totals()


def test_limiter_reads_per_endpoint_overrides(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, default_concurrency=4, concurrency={"http://a/v1": 9})
    limiter = Limiter(settings)
    assert limiter.limit_for("http://a/v1", local=False) == 9
    assert limiter.limit_for("http://b/v1", local=False) == 4
    assert limiter.limit_for("http://a/v1", local=True) == 1


def test_server_recorded_json_bodies(server: FaultServer, make: Any) -> None:
    """The fault server itself: bodies are recorded as parsed JSON."""
    make().client.embed(["x"])
    assert server.requests == [("/v1/embeddings", {"model": "fault-model", "input": ["x"]})]
    assert json.dumps(server.requests)  # plain data
