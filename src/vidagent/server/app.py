"""The HTTP API: a FastAPI app over one :class:`~vidagent.app.session.Session`.

:func:`create_app` builds the app; ``vidagent serve`` runs it under uvicorn. Every endpoint
asks the Session for a typed result and returns its JSON (:mod:`vidagent.app.results`); long
work (indexing, questions) runs as background jobs (:mod:`vidagent.server.jobs`) that outlive
the request that started them. The endpoints are in :mod:`vidagent.server.routes`, the state
they share in :mod:`vidagent.server.state`, the security model in
:mod:`vidagent.server.security`, the bounds on every input in :mod:`vidagent.app.limits`.
Errors come back as one-line JSON ``{"detail"}``: a vidagent error as 400 (404 for what does not
exist, 403 for a path outside the media roots, 413 for an upload over the limit, 415 for an
upload that is not a video), a bad body, path or query as 422 with FastAPI's list of field
errors (``loc``, ``msg``, ``type``; never the rejected value), a foreign ``Host`` as 421, a
foreign ``Origin`` as 403, a body over the limit as 413, a write the system refused as 507
(disk full) or 503 (permission denied, read-only filesystem) naming the folder, and anything
else as 500 without a traceback (which goes to the server's log). No error closes the keep-alive connection (a body
refused with 413 before it was read is drained and dropped by uvicorn).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from vidagent._version import __version__
from vidagent.app import Session
from vidagent.app.limits import MAX_BODY_BYTES
from vidagent.exceptions import (
    AmbiguousVideoError,
    MediaNotFoundError,
    StorageError,
    VidagentError,
    VideoNotFoundError,
    for_api,
)
from vidagent.server.jobs import JobRegistry
from vidagent.server.routes import router
from vidagent.server.security import (
    BodyLimit,
    CatchAll,
    Forbidden,
    HostOriginGuard,
    HostRule,
    RedactToken,
    TokenGuard,
    check_token,
    resolve_roots,
)
from vidagent.server.state import Server
from vidagent.server.uploads import NotAVideo, UploadTooLarge

if TYPE_CHECKING:
    from vidagent.app.core import Models
    from vidagent.config import Settings

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
DEFAULT_MAX_UPLOAD = 2 * 1024**3  # 2 GiB


def _status(error: Exception) -> int:
    if isinstance(error, Forbidden):
        return 403
    if isinstance(error, UploadTooLarge):
        return 413
    if isinstance(error, NotAVideo):
        return 415
    if isinstance(error, AmbiguousVideoError):  # there, but more than one: say which to name
        return 409
    if isinstance(error, (VideoNotFoundError, MediaNotFoundError)):
        return 404
    if isinstance(error, StorageError):  # the server's disk, not the request, is at fault
        return 507 if error.disk_full else 503
    return 400


def _msg(error: Any) -> str:
    message = str(error.get("msg", "invalid")).splitlines()[0]
    return message.removeprefix("Value error, ")


def _install_errors(app: FastAPI) -> None:
    async def known(request: Request, error: Exception) -> JSONResponse:
        detail = for_api(str(error).splitlines()[0])
        return JSONResponse({"detail": detail}, status_code=_status(error))

    async def invalid(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        # FastAPI's list of field errors, less the rejected values (``input``, ``ctx``): they
        # may be huge, NaN or not encodable, and the client has them already.
        fields = [
            {"type": str(e.get("type", "")), "loc": list(e.get("loc", ())), "msg": _msg(e)}
            for e in error.errors()
        ]
        return JSONResponse({"detail": fields}, status_code=422)

    app.add_exception_handler(VidagentError, known)
    app.add_exception_handler(RequestValidationError, invalid)
    # Anything else (a bug) is answered by CatchAll with a one-line 500.


def create_app(
    settings: Settings,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    media_roots: Sequence[str | Path] = (),
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD,
    cors_origins: Sequence[str] = (),
    models: Models | None = None,
    workers: int = 4,
) -> FastAPI:
    """The vidagent HTTP API over one Session.

    Args:
        settings: the server's settings (its home holds the jobs and traces).
        token: when set, every ``/api`` request must present it (see
            :mod:`vidagent.server.security`).
        host: the address the server binds: the ``Host`` names it answers to follow from it
            (:class:`~vidagent.server.security.HostRule`).
        allowed_hosts: more host names it answers to (``--allowed-host``).
        media_roots: the folders clients may name files in (default: the current folder);
            uploads go to ``<first root>/uploads``.
        max_upload_bytes: the largest upload accepted (413 past it).
        cors_origins: origins allowed cross-origin requests (any other ``Origin`` is refused);
            none: CORS stays off.
        models: a model hub for the Session to borrow (tests pass fakes).
        workers: jobs that run at once.

    Raises:
        UserError: the token guards nothing (blank, padded, or short for a public ``host``).
    """
    check_token(host, token)
    session = Session(settings, models=models)
    jobs = JobRegistry(settings.home / "jobs", workers=workers)
    server = Server(session, jobs, resolve_roots(media_roots), max_upload_bytes, token)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Added once uvicorn has configured its loggers (its dictConfig would drop it before).
        access, redact = logging.getLogger("uvicorn.access"), RedactToken(token)
        access.addFilter(redact)
        yield
        access.removeFilter(redact)
        jobs.close()
        session.close()

    app = FastAPI(title="vidagent", version=__version__, lifespan=lifespan)
    app.state.server = server
    _install_errors(app)
    app.include_router(router)
    # Starlette runs the last added outermost: Host/Origin, CORS, token, body limit, catch-all.
    app.add_middleware(CatchAll)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES, exempt=("/api/videos/upload",))
    if token:
        app.add_middleware(TokenGuard, token=token)
    if cors_origins:  # outside the token, so a preflight (which carries no token) is answered
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(HostOriginGuard, rule=HostRule(host, allowed_hosts, cors_origins))
    if (STATIC / "index.html").is_file():
        from fastapi.staticfiles import StaticFiles

        app.mount("/", StaticFiles(directory=STATIC, html=True), name="static")
    return app
