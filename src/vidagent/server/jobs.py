"""Background jobs of the HTTP server: a small registry persisted as JSON files.

A job is one piece of long work (indexing a file, answering a question) run on a thread pool,
so it goes on when the client that started it disconnects. Each job is a JSON file
``$VIDAGENT_HOME/jobs/<job_id>.json``, rewritten atomically (a temporary file, then
``os.replace``) whenever its state changes, so a killed server leaves every file whole. A
registry opened over the folder lists the jobs it finds; one that was ``queued`` or ``running``
when its server died is marked ``interrupted`` (an interrupted index job can run again: indexing
skips the clips already done).

Every job keeps the events it emitted (``progress`` for indexing, the trace events of a
question) in memory, and streams them to subscribers as they happen: a subscriber gets what
already happened, then each new event, then ``end``. So that a server running for weeks does
not grow without end, only the newest :data:`KEEP_EVENTS` finished jobs keep all their events;
older ones keep what their file keeps (an index job's last events) and their ``end``, and past
:data:`KEEP_JOBS` finished jobs the oldest are forgotten, files included. Cancelling is
cooperative: an index job's work calls :meth:`Job.check` between stages and stops there with
:class:`JobCancelled`; a question's run is handed ``should_stop`` reading :attr:`Job.cancelled`,
stops at its next step or model call, and its work then ends the job with :meth:`Job.check`.

A ``watch`` job (a live or growing source, ``/api/streams``) may run for days: it runs on a
thread of its own, not one of the pool's workers (it would hold one for good), keeps only its
newest :data:`LIVE_EVENTS` events in memory, and a cancel reaches it through the callbacks its
work registers with :meth:`Job.on_cancel` (it stops the watch, which ends after the window being
read). :meth:`JobRegistry.close` waits a while for those threads, so a server that stops leaves
each stream's record whole.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from vidagent.exceptions import VidagentError, storage_error

log = logging.getLogger(__name__)

Kind = Literal["index", "ask", "watch"]
State = Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
FINISHED: frozenset[str] = frozenset({"done", "failed", "cancelled", "interrupted"})
#: The events of a job loaded from disk are not kept; only these few are (index progress).
PERSISTED_EVENTS = 200
#: Finished jobs that keep every event in memory (a late ``/events`` reader replays them).
KEEP_EVENTS = 64
#: Finished jobs listed at most; older ones are forgotten, their files deleted.
KEEP_JOBS = 1000
#: Events a running watch job keeps in memory (a late ``/events`` reader gets these).
LIVE_EVENTS = 500
#: Kinds whose last events are written to their job file (and kept when a job sheds its events).
KEEPS_EVENTS: frozenset[str] = frozenset({"index", "watch"})
#: Seconds :meth:`JobRegistry.close` waits for the watch jobs to end.
CLOSE_WAIT_S = 60.0


class JobCancelled(Exception):
    """Raised inside a job's work at the first check after a cancel was asked for."""


#: Orders jobs made, and jobs ended, within one millisecond (their timestamps tie).
_sequence = itertools.count()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Job:
    """One background job; ``params`` is what it was asked to do (kept to resume it)."""

    job_id: str
    kind: Kind
    params: dict[str, Any]
    state: State = "queued"
    progress: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: str | None = None
    created: str = field(default_factory=_now)
    finished: str | None = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _subscribers: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Any]]] = field(
        default_factory=list, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _future: Future[None] | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stoppers: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _shed_done: bool = field(default=False, repr=False)
    _made: int = field(default_factory=lambda: next(_sequence), repr=False)
    _ended: int = field(default=-1, repr=False)  # -1: loaded from its file, ended before

    def to_json(self) -> dict[str, Any]:
        """The job as the API shows it."""
        return {
            "job_id": self.job_id,
            "kind": self.kind,
            "state": self.state,
            "progress": self.progress,
            "result": self.result,
            "error": self.error,
            "created": self.created,
            "finished": self.finished,
            "params": self.params,
        }

    def _record(self) -> dict[str, Any]:
        kept = self.events if self.kind in KEEPS_EVENTS else []
        return self.to_json() | {"events": [list(e) for e in kept[-PERSISTED_EVENTS:]]}

    def _shed(self) -> None:
        """Let a finished job's events go but an index job's last progress and the end."""
        with self._lock:
            if not self._shed_done:
                kept = self.events if self.kind in KEEPS_EVENTS else []
                progress = [e for e in kept if e[0] != "end"][-PERSISTED_EVENTS:]
                self.events = [*progress, ("end", self.to_json())]
                self._shed_done = True

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Job:
        job = cls(data["job_id"], data["kind"], data.get("params") or {})
        job.state, job.progress = data["state"], data.get("progress") or {}
        job.result, job.error = data.get("result"), data.get("error")
        job.created, job.finished = data.get("created", ""), data.get("finished")
        job.events = [(str(k), dict(v)) for k, v in data.get("events") or []]
        return job

    @property
    def done(self) -> bool:
        return self.state in FINISHED

    @property
    def cancelled(self) -> bool:
        """Whether a cancel was asked for (by a client, or by the server stopping)."""
        return self._cancel.is_set()

    def check(self) -> None:
        """Stop here if a cancel was asked for.

        Raises:
            JobCancelled: it was.
        """
        if self._cancel.is_set():
            raise JobCancelled(self.job_id)

    def on_cancel(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` when a cancel is asked for (at once if one was): for work that blocks
        and cannot check, such as a watch."""
        with self._lock:
            self._stoppers.append(stop)
        if self._cancel.is_set():
            stop()

    def _ask_cancel(self) -> None:
        self._cancel.set()
        with self._lock:
            stoppers = list(self._stoppers)
        for stop in stoppers:
            stop()

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Record an event and hand it to every subscriber."""
        with self._lock:
            self.events.append((kind, data))
            if self.kind == "watch" and len(self.events) > LIVE_EVENTS:
                del self.events[: len(self.events) - LIVE_EVENTS]
            subscribers = list(self._subscribers)
        for loop, queue in subscribers:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, data))

    def subscribe(self, loop: asyncio.AbstractEventLoop) -> tuple[list[Any], asyncio.Queue[Any]]:
        """What happened so far, and a queue that receives each later event (``None`` at the
        end). A finished job's queue already holds its end."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        with self._lock:
            past = list(self.events)
            if self.done:
                queue.put_nowait(None)
            else:
                self._subscribers.append((loop, queue))
        return past, queue

    def unsubscribe(self, queue: asyncio.Queue[Any]) -> None:
        with self._lock:
            self._subscribers = [(lp, q) for lp, q in self._subscribers if q is not queue]

    def _finish(self) -> None:
        with self._lock:
            subscribers, self._subscribers = self._subscribers, []
        for loop, queue in subscribers:
            loop.call_soon_threadsafe(queue.put_nowait, None)


#: The work of a job: given the job (to emit events and check for a cancel), its result JSON.
Work = Callable[[Job], dict[str, Any]]


class JobRegistry:
    """The jobs of one server, persisted under ``folder``; work runs on ``workers`` threads.

    Args:
        folder: where the job files live (``$VIDAGENT_HOME/jobs``), created when missing.
        workers: threads running jobs at once; more jobs wait ``queued``.
        keep_events: finished jobs that keep every event in memory (:data:`KEEP_EVENTS`).
        keep_jobs: finished jobs kept at most, in memory and on disk (:data:`KEEP_JOBS`).
    """

    def __init__(
        self,
        folder: Path,
        *,
        workers: int = 4,
        keep_events: int = KEEP_EVENTS,
        keep_jobs: int = KEEP_JOBS,
    ) -> None:
        self.folder = folder
        self.keep_events, self.keep_jobs = keep_events, keep_jobs
        self.folder.mkdir(parents=True, exist_ok=True)
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vidagent-job")
        self._closing = False
        self._load()

    def _load(self) -> None:
        for path in sorted(self.folder.glob("*.json")):
            try:
                job = Job.from_record(json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError) as e:
                log.warning("skipping job file %s: %s", path, e)
                continue
            if not job.done:  # its server died while it ran
                job.state, job.finished = "interrupted", _now()
                job.error = "the server stopped while this job ran"
                self._save(job)
            self._jobs[job.job_id] = job
        self._trim()

    def _trim(self) -> None:
        """Shed the events of all but the newest finished jobs; forget the oldest past the cap."""
        with self._lock:
            finished = sorted(
                (j for j in self._jobs.values() if j.done),
                key=lambda j: (j.finished or j.created, j._ended),
                reverse=True,
            )
            forgotten = finished[self.keep_jobs :]
            for job in forgotten:
                del self._jobs[job.job_id]
        for job in finished[self.keep_events : self.keep_jobs]:
            job._shed()
        for job in forgotten:
            (self.folder / f"{job.job_id}.json").unlink(missing_ok=True)

    def _save(self, job: Job) -> None:
        path = self.folder / f"{job.job_id}.json"
        tmp = path.with_suffix(f".{uuid.uuid4().hex[:6]}.tmp")
        try:
            tmp.write_text(json.dumps(job._record(), default=str), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as e:
            # A full disk must not leave a job unfinished: it ends in memory, unrecorded.
            refused = storage_error(e)
            if refused is None:
                raise
            tmp.unlink(missing_ok=True)
            log.warning("job %s: its record was not saved: %s", job.job_id, refused)

    def list(self) -> list[Job]:
        """Every job, newest first."""
        with self._lock:
            jobs = list(self._jobs.values())
        return sorted(jobs, key=lambda j: (j.created, j._made), reverse=True)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def submit(self, kind: Kind, params: dict[str, Any], work: Work) -> Job:
        """A new job running ``work`` in the background (a ``watch`` on a thread of its own)."""
        job = Job(uuid.uuid4().hex[:12], kind, params)
        with self._lock:
            if self._closing:
                raise VidagentError("the server is stopping")
            self._jobs[job.job_id] = job
        self._start(job, work)
        return job

    def save(self, job: Job) -> None:
        """Write ``job``'s file now (a running watch's progress, so a restart shows it)."""
        self._save(job)

    def restart(self, job: Job, work: Work) -> Job:
        """Run a finished job's work again under the same id (an interrupted index job)."""
        job.state, job.error, job.result, job.finished = "queued", None, None, None
        job._cancel.clear()
        with job._lock:
            job.events = []
        self._start(job, work)
        return job

    def _start(self, job: Job, work: Work) -> None:
        self._save(job)
        if job.kind == "watch":
            name = f"vidagent-watch-{job.job_id}"
            job._thread = threading.Thread(
                target=self._run, args=(job, work), name=name, daemon=True
            )
            job._thread.start()
        else:
            job._future = self._pool.submit(self._run, job, work)

    def _run(self, job: Job, work: Work) -> None:
        if job.done:
            return  # cancelled while queued; cancel() finished it
        job.state = "running"
        self._save(job)
        try:
            job.result = work(job)
            job.state = "done"
        except JobCancelled:
            if self._closing:  # the server stops: the job was cut, not cancelled by a user
                job.state, job.error = "interrupted", "the server stopped while this job ran"
            else:
                job.state, job.error = "cancelled", "cancelled"
        except VidagentError as e:
            job.state, job.error = "failed", str(e)
        except Exception as e:  # a bug: the job fails with its type, the log has the traceback
            refused = storage_error(e)  # ...unless the system refused a write
            if refused is not None:
                job.state, job.error = "failed", str(refused)
            else:
                log.exception("job %s failed", job.job_id)
                job.state, job.error = "failed", f"internal error ({type(e).__name__})"
        self._end(job)

    def _end(self, job: Job) -> None:
        job.finished, job._ended = _now(), next(_sequence)
        job.emit("end", job.to_json())
        self._save(job)
        job._finish()
        self._trim()

    def cancel(self, job: Job) -> Job:
        """Ask a job to stop; a queued one stops at once, a running one at its next check."""
        if job.done:
            return job
        job._ask_cancel()
        if job._future is not None and job._future.cancel():
            job.state, job.error = "cancelled", "cancelled"
            self._end(job)
        return job

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Stop taking work; running jobs are asked to stop and left to be marked interrupted.
        Watches are waited for (up to ``wait_s`` in all): each ends after the window being read
        is indexed, its stream's record whole."""
        import time

        with self._lock:
            self._closing = True
        for job in self.list():
            if not job.done:
                job._ask_cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + wait_s
        for job in self.list():
            if job._thread is not None:
                job._thread.join(max(0.0, deadline - time.monotonic()))
                if job._thread.is_alive():
                    log.warning("watch job %s did not stop in time", job.job_id)
