"""The endpoint gate workers share: slots, a token bucket, leases that expire, per endpoint;
and the limiter a worker's hub uses to ask it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from vidagent.app.executors.gate import EndpointGate, GatedLimiter, parse_rates
from vidagent.config import load_settings
from vidagent.models.base import Capabilities
from vidagent.models.fake import ALL_ROLES, FakeAdapter

API = "https://api.example/v1"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_at_most_limit_requests_are_in_flight_and_a_release_frees_a_slot() -> None:
    gate = EndpointGate(Clock())
    first, second = gate.acquire(API, 2), gate.acquire(API, 2)
    assert first[0] is not None and second[0] is not None
    lease, wait = gate.acquire(API, 2)
    assert lease is None and wait > 0
    gate.release(API, first[0])
    assert gate.acquire(API, 2)[0] is not None
    assert gate.in_flight(API) == 2


def test_endpoints_are_limited_separately() -> None:
    gate = EndpointGate(Clock())
    assert gate.acquire(API, 1)[0] is not None
    assert gate.acquire(API, 1)[0] is None
    assert gate.acquire("https://other.example/v1", 1)[0] is not None


def test_the_token_bucket_spaces_requests_at_the_rate_after_a_burst() -> None:
    clock = Clock()
    gate = EndpointGate(clock)

    def start() -> tuple[int | None, float]:
        lease, wait = gate.acquire(API, 10, 2.0, 2)  # 2 per second, bursts of 2
        if lease is not None:
            gate.release(API, lease)
        return lease, wait

    assert start()[0] is not None and start()[0] is not None  # the burst
    lease, wait = start()
    assert lease is None and wait == pytest.approx(0.5)  # one token per 1/2 s
    clock.now += 0.25
    assert start() == (None, pytest.approx(0.25))
    clock.now += 0.25
    assert start()[0] is not None
    clock.now += 100  # idle: the bucket refills to its burst, no further
    assert [start()[0] is not None for _ in range(3)] == [True, True, False]


def test_a_slot_held_by_a_dead_worker_comes_back_when_its_lease_expires() -> None:
    clock = Clock()
    gate = EndpointGate(clock, lease_s=30)
    assert gate.acquire(API, 1)[0] is not None  # never released: its holder was killed
    clock.now += 29
    assert gate.acquire(API, 1)[0] is None
    clock.now += 2
    assert gate.acquire(API, 1)[0] is not None


def test_bad_limits_are_refused() -> None:
    gate = EndpointGate(Clock())
    with pytest.raises(ValueError, match="limit must be"):
        gate.acquire(API, 0)
    with pytest.raises(ValueError, match="rate > 0"):
        gate.acquire(API, 1, 0.0)


class Remote(FakeAdapter):
    capabilities = Capabilities(roles=ALL_ROLES, local=False)
    endpoint = API


def test_hubs_of_many_workers_share_one_limit_through_the_gate() -> None:
    """Six "workers" (hubs with their own limiter), each allowed 2 requests by its settings:
    never more than 2 in flight in all, where their own semaphores would allow 12."""
    gate = EndpointGate()
    settings = load_settings({"default_concurrency": 2})
    limiters = [GatedLimiter(settings, gate.acquire, gate.release) for _ in range(6)]
    adapter, lock, now, most = Remote(), threading.Lock(), [0], [0]

    def call(limiter: GatedLimiter) -> None:
        for _ in range(3):
            with limiter.slot(adapter):
                with lock:
                    now[0] += 1
                    most[0] = max(most[0], now[0])
                time.sleep(0.01)
                with lock:
                    now[0] -= 1

    threads = [threading.Thread(target=call, args=(lim,)) for lim in limiters for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 2 and gate.in_flight(API) == 0


def test_local_models_keep_the_per_process_slot_and_never_ask_the_gate() -> None:
    asked: list[Any] = []
    limiter = GatedLimiter(load_settings({}), lambda *a: asked.append(a), lambda *a: None)
    with limiter.slot(FakeAdapter()):  # a local fake
        pass
    assert asked == []


def test_a_rate_limited_hub_waits_as_long_as_the_gate_says() -> None:
    clock, slept = Clock(), []
    gate = EndpointGate(clock)

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    limiter = GatedLimiter(load_settings({}), gate.acquire, gate.release, {"*": 4.0}, sleep)
    for _ in range(5):  # a burst of 4 (the default concurrency), then one every 1/4 s
        with limiter.slot(Remote()):
            pass
    assert slept == [pytest.approx(0.25)]
    assert limiter.rate_for(API) == 4.0 and limiter.limit(API) == 4


def test_rate_options_are_read_or_refused_in_one_line() -> None:
    assert parse_rates(["2", f"{API}=5"]) == {"*": 2.0, API: 5.0}
    for bad in ("0", "fast", f"{API}=", "=3"):
        with pytest.raises(ValueError, match="give N or ENDPOINT=N"):
            parse_rates([bad])


def test_a_workers_hub_sends_every_remote_request_through_the_gate(tmp_path: Any) -> None:
    from vidagent.app.executors.workers import worker_session

    gate, asked = EndpointGate(), []

    def acquire(*args: Any) -> tuple[int | None, float]:
        asked.append(args)
        return gate.acquire(*args)

    settings = load_settings({"default_concurrency": 3})
    session = worker_session(settings, str(tmp_path / "lib"), (acquire, gate.release), {"*": 9.0})
    client = session.models.client("llm")
    assert client.limiter is session.models.limiter
    with client.limiter.slot(Remote()):
        assert gate.in_flight(API) == 1
    assert asked == [(API, 3, 9.0, None)] and gate.in_flight(API) == 0
