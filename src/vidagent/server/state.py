"""The HTTP API's state: one :class:`Server` per app, over one Session, the job registry and the
media roots, with the work its background jobs do (indexing, questions). The endpoints
(:mod:`vidagent.server.routes`) read it from ``request.app.state.server``; :mod:`.app` builds it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.app import AskPlan, Session
from vidagent.app.results import IndexReport, video_json
from vidagent.exceptions import IndexStopped, MediaNotFoundError, UserError
from vidagent.server.jobs import Job, JobRegistry
from vidagent.server.security import inside_roots

if TYPE_CHECKING:
    from vidagent.app.watching import Watch


def _is_file(ref: str) -> bool:
    try:
        return Path(ref).is_file()
    except (OSError, ValueError):  # a name too long for this system
        return False


@dataclass
class Streams:
    """The watches of one server (:mod:`vidagent.server.streams`): video id -> its running job
    and watch."""

    running: dict[str, tuple[Job, Watch]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Server:
    """What the endpoints share: the Session, the jobs, the media roots and the limits."""

    session: Session
    jobs: JobRegistry
    roots: tuple[Path, ...]
    max_upload_bytes: int
    token: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    streams: Streams = field(default_factory=Streams)

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
        if found.is_dir():  # a 404 "no such file" said it was not there
            raise UserError(f"{path} is a folder; name each video file in it")
        if not found.is_file():
            raise MediaNotFoundError(path, "no such file")
        return found

    def start_index(self, path: Path, stages: Sequence[str] | None) -> Job:
        params = {"path": str(path), "stages": list(stages) if stages is not None else None}
        return self.jobs.submit("index", params, self.index_work)

    def index_work(self, job: Job) -> dict[str, Any]:
        """Index ``job.params["path"]`` in one pipeline call, as ``vidagent index`` does: a
        ``progress`` event ``{stage, done, total, running}`` when the structure pass starts and
        ends, as each stage starts and after each stage (``stage`` the last one to end, ``done``
        the structure pass and the stages finished, ``running`` the stages under way), a cancel
        honoured before each stage starts (the pipeline's ``before_stage``) and after each clip a
        stage finishes (``should_stop``). What the stages finished stays done, so a resumed job
        only does what is left."""
        path, session = Path(job.params["path"]), self.session
        chosen = job.params.get("stages")
        names = list(session.default_stages() if chosen is None else chosen)
        total, done = len(names) + 1, 0
        running: list[str] = []  # the stages started and not ended (three run at once)

        def progress(stage: str) -> None:
            job.progress = {"stage": stage, "done": done, "total": total, "running": [*running]}
            job.emit("progress", job.progress)

        def ended() -> None:  # stopped or failed: no stage runs on (they said "running")
            if running:
                running.clear()
                progress(job.progress["stage"])

        def structure_done() -> None:
            nonlocal done
            if done == 0:
                done = 1
                running.remove("structure")
                progress("structure")

        def before_stage(stage: str) -> None:
            job.check()
            if stage != "structure":  # the structure pass ended before any other stage starts
                structure_done()
            running.append(stage)
            progress("structure" if stage == "structure" else job.progress["stage"])

        def on_stage(run: Any) -> None:
            nonlocal done
            done += 1
            if run.stage in running:
                running.remove(run.stage)
            progress(run.stage)

        try:
            result = session.index_file(
                path,
                stages=names,
                before_stage=before_stage,
                on_stage=on_stage,
                should_stop=lambda: job.cancelled,
            )
        except IndexStopped:
            ended()
            job.check()  # cancelled: the job ends so
            raise
        if result.error is not None:
            ended()
            raise result.error
        structure_done()  # no stage was asked for
        assert result.video is not None
        report = IndexReport(path, result=result).to_json()
        return report | {"video": video_json(result.video)}

    def start_ask(self, plan: AskPlan, params: dict[str, Any]) -> Job:
        """A job running ``plan`` (resolved by the request, so nothing resolves it again);
        ``params`` is what the job shows it was asked."""
        return self.jobs.submit("ask", params, lambda job: self.ask_work(job, plan))

    def ask_work(self, job: Job, plan: AskPlan) -> dict[str, Any]:
        """Run ``plan``, each trace event emitted as it happens. A cancel stops the run at its
        next check (``should_stop``: before a step or a model call, or inside a model call under
        way where it can stop: :mod:`vidagent.models.interrupt`), and the job ends cancelled;
        the stream ends at the cancel, and what the run did after it (its answer, reason
        ``stopped``) is in the trace file only."""

        def on_event(event: Any) -> None:
            if not job.cancelled:
                job.emit(event.kind, event.to_dict())

        result = plan.run(on_event=on_event, should_stop=lambda: job.cancelled)
        job.check()  # cancelled: the job ends so (raising here, outside the run)
        return result.to_json()

    def ask_refs(self, refs: Sequence[str]) -> list[str]:
        """The videos of a question: a file must lie inside the media roots; anything else is a
        reference to a video in the Library, checked here (a 404 before any job starts) and
        resolved by the Session. A reference that looks like a path (``/``, ``~``, absolute) is
        a path, as the MCP server reads it.

        Raises:
            VideoNotFoundError: a reference names no video in the Library.
        """
        out = []
        for ref in refs:
            if ref.startswith("~") or Path(ref).is_absolute() or "/" in ref or _is_file(ref):
                out.append(str(self.media_path(ref)))
            else:
                self.session.library.resolve(ref)
                out.append(ref)
        return out
