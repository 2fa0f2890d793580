"""One limit per remote endpoint for many worker processes: concurrent slots and a token bucket.

A hub's :class:`~vidagent.models.client.Limiter` counts one process's requests. Workers of a
process pool or a Ray cluster each have their own hub, so N workers would send N times the
endpoint's limit. :class:`EndpointGate` holds the endpoint's limits once, in one place that every
worker asks (a named Ray actor, or a ``multiprocessing`` manager's server process):

- **slots**: at most ``limit`` requests in flight per endpoint (the settings'
  ``concurrency[endpoint]``, else ``default_concurrency``), across every worker;
- **rate**: with ``rate`` requests per second, a token bucket of ``burst`` tokens (default: the
  slot limit) refilled at ``rate``; each request takes one token.

The gate never blocks: :meth:`EndpointGate.acquire` grants a lease or says how long to wait,
and :class:`GatedLimiter` (the worker's side) sleeps and asks again, so one slow worker cannot
stall the gate's other callers. A lease expires after ``lease_s`` seconds (longer than any
request may take), so the slot of a worker killed mid-request comes back on its own.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vidagent.models.client import Limiter

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.models.base import Adapter

#: The Ray actor's name and namespace: one gate per cluster, shared by every driver on it.
GATE_NAME = "vidagent-endpoint-gate"
NAMESPACE = "vidagent"
#: The longest a worker waits before asking the gate again.
POLL_S = 0.25


@dataclass
class _Endpoint:
    limit: int
    rate: float | None
    burst: float
    tokens: float
    stamp: float
    leases: dict[int, float] = field(default_factory=dict)  # lease id -> expiry time


class EndpointGate:
    """Per-endpoint slots and token buckets, shared by every caller of one instance.

    Args:
        clock: seconds, monotonic (a test's fake clock).
        lease_s: a granted slot is taken back after this long if never released.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, lease_s: float = 600.0) -> None:
        self._clock = clock
        self._lease_s = lease_s
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._endpoints: dict[str, _Endpoint] = {}

    def acquire(
        self, endpoint: str, limit: int, rate: float | None = None, burst: float | None = None
    ) -> tuple[int | None, float]:
        """``(lease, 0.0)`` when a request to ``endpoint`` may start now, else ``(None, wait)``:
        ask again in ``wait`` seconds. The latest ``limit``, ``rate`` and ``burst`` given for an
        endpoint are in force."""
        now = self._clock()
        with self._lock:
            e = self._endpoint(endpoint, limit, rate, burst, now)
            for lease, expiry in list(e.leases.items()):
                if expiry <= now:
                    del e.leases[lease]  # its holder died mid-request
            if len(e.leases) >= e.limit:
                return None, POLL_S
            if e.rate is not None:
                e.tokens = min(e.burst, e.tokens + (now - e.stamp) * e.rate)
                e.stamp = now
                if e.tokens < 1.0:
                    return None, (1.0 - e.tokens) / e.rate
                e.tokens -= 1.0
            lease = next(self._ids)
            e.leases[lease] = now + self._lease_s
            return lease, 0.0

    def release(self, endpoint: str, lease: int) -> None:
        """Give a slot back (a lease already expired or released is ignored)."""
        with self._lock:
            found = self._endpoints.get(endpoint)
            if found is not None:
                found.leases.pop(lease, None)

    def in_flight(self, endpoint: str) -> int:
        """Leases held now on ``endpoint`` (expired ones included until the next acquire)."""
        with self._lock:
            found = self._endpoints.get(endpoint)
            return len(found.leases) if found else 0

    def _endpoint(
        self, name: str, limit: int, rate: float | None, burst: float | None, now: float
    ) -> _Endpoint:
        if limit < 1 or (rate is not None and rate <= 0):
            raise ValueError(f"{name}: limit must be >= 1 and rate > 0, not {limit}, {rate}")
        size = float(burst if burst is not None else limit)
        e = self._endpoints.get(name)
        if e is None:
            e = self._endpoints[name] = _Endpoint(limit, rate, size, size, now)
        e.limit, e.rate, e.burst = limit, rate, size
        return e


class GatedLimiter(Limiter):
    """A hub's limiter that asks a shared :class:`EndpointGate` for every remote request.

    Local models keep the per-process slot of :class:`~vidagent.models.client.Limiter` (each
    worker loads its own copy). ``acquire`` and ``release`` reach the gate: the methods of a
    manager proxy, or of a Ray actor wrapped by :func:`ray_gate_calls`.

    Args:
        settings: the concurrency limits per endpoint.
        acquire: ``(endpoint, limit, rate, burst) -> (lease | None, wait)``.
        release: ``(endpoint, lease) -> None``.
        rates: requests per second by endpoint; ``"*"`` for every remote endpoint.
        sleep: how the worker waits between asks.
    """

    def __init__(
        self,
        settings: Settings,
        acquire: Callable[..., tuple[int | None, float]],
        release: Callable[[str, int], None],
        rates: Mapping[str, float] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(settings)
        self._acquire, self._release = acquire, release
        self.rates = dict(rates or {})
        self._sleep = sleep

    def rate_for(self, endpoint: str) -> float | None:
        return self.rates.get(endpoint, self.rates.get("*"))

    @contextmanager
    def slot(self, adapter: Adapter) -> Iterator[None]:
        if adapter.capabilities.local:
            with super().slot(adapter):
                yield
            return
        endpoint = adapter.endpoint
        limit = self.limit_for(endpoint, False)
        with self._lock:
            self._limits[endpoint] = limit
        while True:
            lease, wait = self._acquire(endpoint, limit, self.rate_for(endpoint), None)
            if lease is not None:
                break
            self._sleep(min(max(wait, 0.01), POLL_S))
        try:
            yield
        finally:
            self._release(endpoint, lease)


def ray_gate_calls(gate: Any) -> tuple[Callable[..., Any], Callable[[str, int], None]]:
    """``(acquire, release)`` calling a Ray actor handle of :class:`EndpointGate`."""
    import ray

    def acquire(*args: Any) -> Any:
        return ray.get(gate.acquire.remote(*args))

    def release(endpoint: str, lease: int) -> None:
        gate.release.remote(endpoint, lease)  # fire and forget: nothing waits on it

    return acquire, release


def parse_rates(items: tuple[str, ...] | list[str]) -> dict[str, float]:
    """``{"*": 2.0, "https://api.x/v1": 5.0}`` from ``["2", "https://api.x/v1=5"]``.

    Raises:
        ValueError: an item is not ``N`` or ``ENDPOINT=N`` with N > 0 (the message says which).
    """
    rates: dict[str, float] = {}
    for item in items:
        endpoint, _, value = item.rpartition("=") if "=" in item else ("*", "", item)
        try:
            rate = float(value)
        except ValueError:
            rate = 0.0
        if rate <= 0 or not endpoint:
            raise ValueError(
                f"--rate-limit {item!r}: give N or ENDPOINT=N requests per second, N > 0"
            )
        rates[endpoint] = rate
    return rates
