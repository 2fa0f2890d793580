"""Servers over the application layer: the HTTP API with its web UI, and the MCP server.

- :mod:`.app`: :func:`create_app`, the FastAPI app over one Session (``vidagent serve``);
- :mod:`.routes`: its endpoints; :mod:`.jobs`: background jobs persisted under
  ``$VIDAGENT_HOME/jobs``; :mod:`.streams`: watches of live sources (``/api/streams``) run as
  jobs; :mod:`.security`: loopback, token, media roots; :mod:`.uploads`:
  uploads streamed to disk under a limit;
- ``static/``: the web UI, served at ``/`` when present.

Nothing here is imported by ``import vidagent``: fastapi loads only when a server starts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from vidagent.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
