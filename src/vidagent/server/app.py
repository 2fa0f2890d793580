"""The HTTP API: a FastAPI app over one :class:`~vidagent.app.session.Session`.

:func:`create_app` builds the app; ``vidagent serve`` runs it under uvicorn. Every endpoint
asks the Session for a typed result and returns its JSON (:mod:`vidagent.app.results`); long
work (indexing, questions) runs as background jobs (:mod:`vidagent.server.jobs`) that outlive
the request that started them. The endpoints are in :mod:`vidagent.server.routes`; the security
model is in :mod:`vidagent.server.security`. Errors come back as one-line JSON ``{"detail"}``:
a vidagent error as 400 (404 for what does not exist, 403 for a path outside the media roots,
413 for an upload over the limit), a bad body as FastAPI's 422 naming the field, and anything
else as 500 without a traceback (which goes to the server's log).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from vidagent import __version__
from vidagent.app import Session
from vidagent.app.results import IndexReport, video_json
from vidagent.exceptions import MediaNotFoundError, VidagentError, VideoNotFoundError
from vidagent.server.jobs import Job, JobRegistry
from vidagent.server.security import (
    Forbidden,
    RedactToken,
    TokenGuard,
    inside_roots,
    resolve_roots,
)
from vidagent.server.uploads import UploadTooLarge

if TYPE_CHECKING:
    from vidagent.app.core import Models
    from vidagent.config import Settings

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
DEFAULT_MAX_UPLOAD = 2 * 1024**3  # 2 GiB


@dataclass
class Server:
    """What the endpoints share: the Session, the jobs, the media roots and the limits."""

    session: Session
    jobs: JobRegistry
    roots: tuple[Path, ...]
    max_upload_bytes: int
    token: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.session.settings.home

    def media_path(self, path: str) -> Path:
        """A client's path, resolved inside the media roots, that is a file.

        Raises:
            Forbidden: outside the roots.
            MediaNotFoundError: no such file.
        """
        found = inside_roots(path, self.roots)
        if not found.is_file():
            raise MediaNotFoundError(path, "no such file")
        return found

    def start_index(self, path: Path, stages: Sequence[str] | None) -> Job:
        params = {"path": str(path), "stages": list(stages) if stages is not None else None}
        return self.jobs.submit("index", params, self.index_work)

    def index_work(self, job: Job) -> dict[str, Any]:
        """Index ``job.params["path"]`` in one pipeline call, as ``vidagent index`` does: a
        ``progress`` event ``{stage, done, total}`` when the structure pass starts and ends and
        after each stage (``done`` counts the structure pass and the stages finished), a cancel
        honoured before each stage starts (the pipeline's ``before_stage``). What the stages
        finished stays done, so a resumed job only does what is left."""
        path, session = Path(job.params["path"]), self.session
        chosen = job.params.get("stages")
        names = list(session.default_stages() if chosen is None else chosen)
        total, done = len(names) + 1, 0

        def progress(stage: str) -> None:
            job.progress = {"stage": stage, "done": done, "total": total}
            job.emit("progress", job.progress)

        def structure_done() -> None:
            nonlocal done
            if done == 0:
                done = 1
                progress("structure")

        def before_stage(stage: str) -> None:
            job.check()
            if stage == "structure":
                progress("structure")
            else:  # the structure pass ended before any other stage starts
                structure_done()

        def on_stage(run: Any) -> None:
            nonlocal done
            done += 1
            progress(run.stage)

        result = session.index_file(
            path, stages=names, before_stage=before_stage, on_stage=on_stage
        )
        if result.error is not None:
            raise result.error
        structure_done()  # no stage was asked for
        assert result.video is not None
        report = IndexReport(path, result=result).to_json()
        return report | {"video": video_json(result.video)}

    def ask_work(self, job: Job) -> dict[str, Any]:
        """Answer ``job.params``'s question, each trace event emitted as it happens; a cancel
        stops the run at its next event."""
        from vidagent.app.results import GroundResult
        from vidagent.budget import Budget

        p = job.params

        def on_event(event: Any) -> None:
            job.emit(event.kind, event.to_dict())
            job.check()

        budget = Budget(steps=p["max_steps"]) if p.get("max_steps") else None
        result = self.session.ask(
            p["videos"],
            p["question"],
            options=p["options"],
            strategy=p["strategy"],
            budget=budget,
            trace=self.session.traces_folder / f"{p['trace']}.jsonl",
            on_event=on_event,
            task=p["task"],
        )
        if p["task"] == "ground":
            return GroundResult(result.trace, result.answer).to_json()
        return result.to_json()

    def ask_refs(self, refs: Sequence[str]) -> list[str]:
        """The videos of a question: a file must lie inside the media roots; anything else is a
        reference to a video in the Library, resolved by the Session."""
        out = []
        for ref in refs:
            if Path(ref).expanduser().is_file() or Path(ref).is_absolute() or "/" in ref:
                out.append(str(self.media_path(ref)))
            else:
                out.append(ref)
        return out


def _status(error: Exception) -> int:
    if isinstance(error, Forbidden):
        return 403
    if isinstance(error, UploadTooLarge):
        return 413
    if isinstance(error, (VideoNotFoundError, MediaNotFoundError)):
        return 404
    return 400


def _install_errors(app: FastAPI) -> None:
    async def known(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(error).splitlines()[0]}, status_code=_status(error))

    async def unknown(request: Request, error: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=error)
        detail = f"internal error ({type(error).__name__}); see the server's log"
        return JSONResponse({"detail": detail}, status_code=500)

    app.add_exception_handler(VidagentError, known)
    app.add_exception_handler(Exception, unknown)


def create_app(
    settings: Settings,
    *,
    token: str | None = None,
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
        media_roots: the folders clients may name files in (default: the current folder);
            uploads go to ``<first root>/uploads``.
        max_upload_bytes: the largest upload accepted (413 past it).
        cors_origins: origins allowed cross-origin requests; none: CORS stays off.
        models: a model hub for the Session to borrow (tests pass fakes).
        workers: jobs that run at once.
    """
    from vidagent.server.routes import router

    session = Session(settings, models=models)
    jobs = JobRegistry(settings.home / "jobs", workers=workers)
    server = Server(session, jobs, resolve_roots(media_roots), max_upload_bytes, token)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Added once uvicorn has configured its loggers (its dictConfig would drop it before).
        access, redact = logging.getLogger("uvicorn.access"), RedactToken()
        access.addFilter(redact)
        yield
        access.removeFilter(redact)
        jobs.close()
        session.close()

    app = FastAPI(title="vidagent", version=__version__, lifespan=lifespan)
    app.state.server = server
    _install_errors(app)
    app.include_router(router)
    if token:
        app.add_middleware(TokenGuard, token=token)  # type: ignore[arg-type]
    if cors_origins:  # outermost, so a preflight (which carries no token) is answered
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type"],
        )
    if (STATIC / "index.html").is_file():
        from fastapi.staticfiles import StaticFiles

        app.mount("/", StaticFiles(directory=STATIC, html=True), name="static")
    return app
