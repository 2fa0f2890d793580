"""Ending a model call while it runs: the running question's check, asked by adapters between
the units of work a call can stop between.

A run's budget meter is checked before each step and each model call, so a call already under
way ran to its end: a cancel (the HTTP API's or the MCP server's) or a spent time budget waited
for it, tens of seconds with the embedded model on 2 cores (a prompt of 2,800 tokens is about
20 s of evaluation there, a reply of 1,024 tokens 50 s more). A run sets its check for the calls
made in its own thread (:func:`checked_calls`), and an adapter calls :func:`check_call` between
units: llama.cpp before each 256 prompt tokens it evaluates and before each token it
generates; transformers before each token it generates (its prompt is one forward pass); an
OpenAI-compatible endpoint read with ``stream=1`` at each streamed line, where leaving the stream
closes the connection and the server stops generating. The check raises to end the call; the
call then raises :class:`CallInterrupted` with what the check raised, which the client records
on the call and raises again as itself (the run's ``Stopped`` or ``BudgetExceeded``), so the
run ends or answers as it would have at its next check. A call made in a thread that does not
carry the run's context (a thread pool of its own; the detectors' workers copy it), and an HTTP
call read whole (no ``stream``), still run to their end; so does the wait for a concurrency
slot, while a retry's wait is followed by the check. An interrupted call's tokens are not known
(a stream's usage comes at its end): it is recorded with none, its error ``interrupted: …``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: The check of the calls made in this context (None: none).
_CHECK: ContextVar[Callable[[], None] | None] = ContextVar("vidagent_call_check", default=None)


class CallInterrupted(Exception):
    """A model call ended by its run's check; ``cause`` is what the check raised."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def check_call() -> None:
    """Ask the running question's check, if any, whether the call may go on.

    Raises:
        CallInterrupted: the check raised (the run was stopped, or its time is spent).
    """
    check = _CHECK.get()
    if check is None:
        return
    try:
        check()
    except Exception as e:
        raise CallInterrupted(e) from e


@contextmanager
def checked_calls(check: Callable[[], None]) -> Iterator[None]:
    """Model calls made in this thread inside the block ask ``check`` between their units of
    work; ``check`` raises to end them."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)
