"""Reading a Server-Sent Events stream in tests (the HTTP API's job and stream events)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx


def events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event, data)`` of a Server-Sent Events stream, as they arrive."""
    kind, data = "message", ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data += line[6:]
        elif line == "" and data:
            yield kind, json.loads(data)
            kind, data = "message", ""
