"""The server's security model, in one place.

- **Loopback by default.** ``vidagent serve`` binds 127.0.0.1; any other host needs a token
  (:func:`require_token_for_host`), so nothing reachable from another machine is open.
- **A bearer token** (when set) guards every ``/api`` request: ``Authorization: Bearer <t>``,
  compared in constant time (:func:`hmac.compare_digest`). A ``GET`` may give it as the query
  parameter ``token`` instead, because a browser's ``EventSource`` and ``<video>`` cannot set
  headers. Anything else is 401.
- **Media roots.** A path a client names is resolved with its symlinks (:meth:`Path.resolve`)
  and used only when it lies inside a configured root (:func:`inside_roots`); a ``..`` walk or a
  symlink that leads out is refused with 403.
- **Uploads** stream to disk in chunks under a size limit (:mod:`vidagent.server.uploads`).
- **CORS** is off unless origins are named.
- **Logs** never show the token: a query-string ``token=`` in uvicorn's access log is replaced
  by ``token=***`` (:class:`RedactToken`).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from vidagent.exceptions import UserError

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})
TOKEN_IN_QUERY = re.compile(r"([?&])token=[^&\s\"]*")


class Forbidden(UserError):
    """A path outside the media roots (answered with 403)."""


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only accepts connections from this machine."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere


def require_token_for_host(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token.

    Raises:
        UserError: ``host`` is not loopback and there is no token; the message says how to give one.
    """
    if not is_loopback(host) and not token:
        raise UserError(
            f"refusing to listen on {host} without a token: pass --token or set VIDAGENT_TOKEN "
            "(or bind 127.0.0.1)"
        )


def token_ok(given: str | None, token: str) -> bool:
    """Constant-time comparison of a presented token with the server's."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def presented_token(method: str, headers: dict[str, str], query: dict[str, str]) -> str | None:
    """The token a request presents: its bearer header, or ``?token=`` on a GET."""
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    if method == "GET":
        return query.get("token")
    return None


def resolve_roots(roots: Sequence[str | Path]) -> tuple[Path, ...]:
    """The media roots as absolute paths with symlinks resolved (default: the current folder)."""
    return tuple(Path(r).expanduser().resolve() for r in roots) or (Path.cwd().resolve(),)


def inside_roots(path: str | Path, roots: Sequence[Path]) -> Path:
    """``path`` resolved (a relative one against the first root), when it lies in a root.

    Raises:
        Forbidden: it resolves outside every root (``..``, or a symlink that leads out).
    """
    given = Path(path).expanduser()
    resolved = (given if given.is_absolute() else roots[0] / given).resolve()
    for root in roots:
        if resolved == root or resolved.is_relative_to(root):
            return resolved
    raise Forbidden(f"{path}: outside the media roots the server was started with")


ASGIApp = Callable[..., Awaitable[None]]


class TokenGuard:
    """ASGI middleware: every HTTP request under ``/api`` must present ``token``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:  # type: ignore[type-arg]
        if scope["type"] != "http" or not scope["path"].startswith("/api"):
            await self.app(scope, receive, send)
            return
        from urllib.parse import parse_qsl

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if token_ok(presented_token(scope["method"], headers, query), self.token):
            await self.app(scope, receive, send)
            return
        body = b'{"detail":"missing or wrong token: send Authorization: Bearer <token>"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class RedactToken(logging.Filter):
    """Hide a query-string token in log records (uvicorn's access log formats the request line
    from its arguments, so they are rewritten before it does)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                TOKEN_IN_QUERY.sub(r"\1token=***", a) if isinstance(a, str) else a
                for a in record.args
            )
        elif isinstance(record.msg, str):
            record.msg = TOKEN_IN_QUERY.sub(r"\1token=***", record.msg)
        return True
