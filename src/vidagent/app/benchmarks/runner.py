"""Run a strategy over a benchmark: concurrent, rate-limited, resumable (application layer:
it composes ingest and agents through a :class:`~vidagent.app.core.SessionCore`).

:func:`run_benchmark` loads the benchmark's questions (the first ``limit`` of the split, in load
order), indexes every video they need into the Library once, then answers the questions on a
pool of threads that share one Session (one model hub, one Library, one Agent: each question
keeps its state in its own run; Library writes from tools, such as a memoised global-browse
summary, go through the Library's locked write path), and appends one row
per finished question to the run folder (:mod:`vidagent.bench.rundir`).

Concurrency. The hub's :class:`~vidagent.models.client.Limiter` is the global limit: each
endpoint takes at most ``settings.concurrency[endpoint]`` (else ``default_concurrency``)
requests at once whatever the number of threads, and a local model one. More threads than the
largest limit among the endpoints the agent reasons with (the ``llm`` and ``tool_vlm`` roles) could
only wait for a slot, so the pool is capped there; raise the endpoint's limit in the settings to
go faster, e.g. ``concurrency = {"https://api.openai.com/v1" = 16}``.

Resuming. The run folder's manifest records everything that decides the answers; a run started
again with the same settings and ``out`` (the default folder is named by a hash of them, the
prompts aside) skips the questions that have a row. A question cut off by a crash has no row and
is asked again; so is a question whose row records an error (its old row is dropped first). A
different setting or an edited prompt is refused with the name of what changed, so one folder
never mixes two configurations.

Errors. A question whose video is missing gets no row: it is listed in the manifest and counted
as unanswered by reports. A question that fails (a provider error after the client's retries, a
video that cannot be decoded, an unexpected exception) gets a row with ``error`` and its
traceback goes to ``errors.log``. A :class:`~vidagent.exceptions.UserError` (a bad spec, a
missing backend) stops the run at once, since every question would fail the same way; so do
:data:`UNREACHABLE_STOP` questions in a row whose reasoning endpoint could not be reached at all
(:class:`~vidagent.exceptions.EndpointUnreachable`: a wrong base URL, a server that is down),
rather than spend each remaining question's retries on it; a run started again resumes there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vidagent.app.asking import agent as make_agent
from vidagent.app.asking import prepare
from vidagent.app.benchmarks.questions import QuestionRun, VideoIndex, utc_now
from vidagent.app.core import SessionCore
from vidagent.app.holds import hold
from vidagent.bench.base import BenchmarkDataError, Sample, load
from vidagent.bench.rundir import (
    ERRORS,
    FORMAT,
    IDENTITY,
    INDEX_SETTINGS,
    LADDER,
    LOCK,
    MANIFEST,
    ROWS,
    TRACES,
    RowLog,
    check_resume,
    digest,
    prompt_hashes,
    read_manifest,
    read_rows,
    rewrite_rows,
    rung_name,
    write_json_atomic,
)
from vidagent.budget import Budget
from vidagent.exceptions import (
    ConfigError,
    EndpointUnreachable,
    MediaError,
    ProviderError,
    UserError,
)
from vidagent.roles import ROLES

if TYPE_CHECKING:
    from vidagent.agents.base import Agent, ToolMode
    from vidagent.app.results import IndexReport
    from vidagent.bench.base import Benchmark, LoadResult, Scores
    from vidagent.config import Settings
    from vidagent.library import Library
    from vidagent.models.client import Models

log = logging.getLogger(__name__)

#: Roles an agent loop calls on every step (:attr:`~vidagent.agents.base.Agent.calls`, which
#: the thread pool is capped by; the retrieval baseline calls only ``embed``).
AGENT_ROLES = ("llm", "tool_vlm")
#: Questions in a row that could not reach their reasoning endpoint at all stop a run.
UNREACHABLE_STOP = 5
#: How such a row's ``error`` begins (:class:`~vidagent.app.benchmarks.questions.QuestionRun`
#: writes a forced answer's note, which names the error's type first).
UNREACHABLE = f"model error: {EndpointUnreachable.__name__}"


class Unreachable:
    """Counts questions in a row, in the order they finish, whose rows say their endpoint could
    not be reached; at :data:`UNREACHABLE_STOP` of them the run stops (module docstring):
    :attr:`error` is set, a question not yet begun is not asked (a resume asks it), and
    :meth:`check` raises it. :meth:`count` is safe from the threads that answer, so that the
    decision does not wait for the thread that records rows to be scheduled."""

    def __init__(self) -> None:
        self.streak = 0
        self.error: EndpointUnreachable | None = None
        self._lock = threading.Lock()

    def count(self, row: dict[str, Any]) -> None:
        error = row["error"] or ""
        with self._lock:
            self.streak = self.streak + 1 if error.startswith(UNREACHABLE) else 0
            if self.streak >= UNREACHABLE_STOP and self.error is None:
                why = error.removeprefix(f"{UNREACHABLE}: ")
                self.error = EndpointUnreachable(
                    f"{why}; {self.streak} questions in a row could not reach it, so the run "
                    "stopped (run again to resume once it answers)"
                )

    def check(self, row: dict[str, Any]) -> None:
        self.count(row)
        if self.error is not None:
            raise self.error


class Workers(Protocol):
    """Where a run's videos are indexed and its questions answered besides this process's
    threads: an :class:`~vidagent.app.executors.Executor` (a process pool, Ray). Named here as
    what a run needs of one, so that benchmarks do not import the executors that run them."""

    def start(self, wanted: int | None = None) -> int: ...

    def index(
        self,
        session: SessionCore,
        paths: Sequence[str | Path],
        *,
        stages: Sequence[str] | None = None,
        progress: bool = False,
        overrides: Mapping[str, Any] | None = None,
    ) -> Iterator[IndexReport]: ...

    def answer(
        self,
        config: RunConfig,
        session: SessionCore,
        out: Path,
        samples: Sequence[Sample],
        progress: bool = False,
    ) -> Iterator[dict[str, Any]]: ...


@dataclass(frozen=True)
class RunConfig:
    """What to run.

    Attributes:
        benchmark: a benchmark name (:data:`vidagent.bench.BENCHMARKS`).
        data: the folder of its official annotation files.
        split: the split (default: the benchmark's usual one).
        subset: a named subset (LongVideoBench ``long``).
        videos: the video root (default: the benchmark's folder under ``data``).
        ids: a file of question ids to keep (NExT-QA's ATP-hard list).
        strategy: an agent strategy name (:data:`vidagent.agents.strategies.STRATEGIES`).
        strategy_options: the strategy's own settings.
        tool_mode: ``auto``, ``native`` or ``json`` tool calling.
        budget: per-question limits.
        limit: answer only the first ``limit`` questions of the split.
        concurrency: questions in flight at once (capped; see the module docstring).
    """

    benchmark: str
    data: Path
    split: str | None = None
    subset: str | None = None
    videos: Path | None = None
    ids: Path | None = None
    strategy: str = "dvd"
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    tool_mode: ToolMode = "auto"
    budget: Budget = field(default_factory=Budget)
    limit: int | None = None
    concurrency: int = 4


@dataclass(frozen=True)
class RunSummary:
    """What a run (or resume) did.

    Attributes:
        out: the run folder.
        questions: questions the run answers (after ``ids`` and ``limit``).
        done_before: of those, rows found from earlier sessions and kept.
        ran: questions answered in this session, failed ones included.
        errors: rows with an error in this session.
        missing: questions lacking a video (no row; unanswered in reports).
        concurrency: threads used; ``requested_concurrency`` the number asked for.
        seconds: wall time of this session; ``answer_seconds`` the part spent answering
            (after the manifest and the indexing).
        scores: the run's scores over every row so far (``None`` where they need a judge).
        notes: what the user should know (a capped pool, a missing video, a judge needed).
    """

    out: Path
    benchmark: str
    split: str
    questions: int
    done_before: int
    ran: int
    errors: int
    missing: int
    concurrency: int
    requested_concurrency: int
    seconds: float
    answer_seconds: float = 0.0
    scores: Scores | None = None
    notes: tuple[str, ...] = ()

    @property
    def errors_log(self) -> Path:
        """The file holding the failed questions' tracebacks."""
        return self.out / ERRORS

    def to_json(self) -> dict[str, Any]:
        body = {k: v for k, v in self.__dict__.items() if k not in ("scores", "out", "notes")}
        return body | {
            "out": str(self.out),
            "scores": self.scores.to_dict() if self.scores else None,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class RunManifest:
    """What a run folder's ``manifest.json`` records (:mod:`vidagent.bench.rundir`): every
    setting that decides the answers (:data:`~vidagent.bench.rundir.IDENTITY`, which a resume
    must match), what the run covers, and one entry per session (start or resume)."""

    format: int
    vidagent: str
    created_at: str
    benchmark: str
    title: str
    split: str
    data: str
    videos: str | None
    subset: str | None
    ids: dict[str, str] | None
    strategy: str
    strategy_options: dict[str, Any]
    strategy_settings: dict[str, Any]
    tool_mode: str
    budget: dict[str, Any]
    models: dict[str, Any]
    calls: list[str]
    index_settings: dict[str, Any]
    prompts: dict[str, str]
    settings: dict[str, Any]
    library: str
    limit: int | None
    concurrency: dict[str, Any]
    samples: list[str]
    missing_videos: list[dict[str, str]]
    sessions: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def identity(self) -> dict[str, Any]:
        """The fields that name the default run folder: the identity less the prompts (a new
        prompt file must not start a fresh folder; an edited prompt is caught on resume)."""
        body = self.to_json()
        return {k: body[k] for k in IDENTITY if k != "prompts"}


# ---------------------------------------------------------------------------------------------
# The run


def endpoint_limits(models: Models, roles: Sequence[str] = AGENT_ROLES) -> dict[str, int]:
    """``{endpoint: concurrent requests the hub's Limiter allows}`` for the roles' adapters."""
    limits: dict[str, int] = {}
    for role in roles:
        try:
            adapter = models.client(role).adapter
        except ConfigError:
            continue  # a role the hub cannot serve is not one the agent will wait on
        caps = adapter.capabilities
        limits[adapter.endpoint] = models.limiter.limit_for(
            adapter.endpoint, caps.local, caps.concurrency
        )
    return limits


def run_benchmark(
    config: RunConfig,
    session: SessionCore | None = None,
    *,
    out: Path | None = None,
    progress: bool = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    settings: Settings | None = None,
    models: Models | None = None,
    library: Library | None = None,
    executor: Workers | None = None,
) -> RunSummary:
    """Answer a benchmark's questions with a strategy, resuming the run folder ``out``.

    Args:
        config: the benchmark, strategy, budget and limits.
        session: the settings, Library (indexed into and searched) and model hub; default a
            Session of ``settings``, ``models`` and ``library``, closed at the end.
        out: the run folder (default ``$VIDAGENT_HOME/runs/<bench>-<split>-<strategy>-<hash>``,
            the hash of every setting that decides the answers, so the same command resumes).
        progress: progress bars on stderr.
        on_row: called with each row as it is written.
        executor: where questions are answered (default: threads of this process); a
            :class:`~vidagent.app.executors.RayExecutor` asks them as Ray tasks whose rows this
            process writes.

    Raises:
        UserError: a bad benchmark, split, data folder, strategy, option or model spec, or an
            ``out`` that holds a run with other settings.
    """
    from vidagent.bench import get_benchmark

    if session is None:
        with SessionCore(settings, library=library, models=models) as own:
            return run_benchmark(
                config, own, out=out, progress=progress, on_row=on_row, executor=executor
            )
    if config.concurrency < 1:
        raise UserError(f"concurrency must be at least 1, not {config.concurrency}")
    if config.limit is not None and config.limit < 1:
        raise UserError(f"limit must be at least 1, not {config.limit}")
    bench = get_benchmark(config.benchmark)
    data = Path(config.data).expanduser()
    if not data.is_dir():
        raise BenchmarkDataError(f"no such data folder: {data}")
    options: dict[str, Any] = {"subset": config.subset} if config.subset else {}
    loaded = load(bench, data, split=config.split, videos=config.videos, **options)
    if config.videos is not None:  # the loader's own folder, named: the same run as without it
        default = load(bench, data, split=config.split, **options)
        if [s.videos for s in default.samples] == [s.videos for s in loaded.samples]:
            config = replace(config, videos=None)
    if config.ids is not None:
        from vidagent.bench.predictions import read_id_list

        loaded = loaded.only(read_id_list(config.ids))
    samples = loaded.samples[: config.limit]
    check_askable(bench, loaded, samples)
    # Built once before any work, so a bad option or embedding fails at once.
    agent = published_agent(config, session)
    session.check_embedding()
    run = _Run(bench, config, session, agent, samples, loaded.missing, executor, loaded.notes)
    return run.go(out, data, loaded.split, progress, on_row)


def check_askable(bench: Benchmark, loaded: LoadResult, samples: Sequence[Sample]) -> None:
    """Refuse a run that could ask nothing: no question, or questions without their text
    (EgoSchema's answers without its ``questions.json``: enough to score, not to ask). A run
    none of whose questions has its video is refused once its folder is known
    (:meth:`_Run.check_videos`): a finished one whose videos went since is reported again.

    Raises:
        BenchmarkDataError: saying which.
    """
    what = f"{bench.NAME} {loaded.split}"
    if not samples:
        raise BenchmarkDataError(f"{what}: the annotation files hold no question")
    unaskable = [s.id for s in samples if not s.question.strip()]
    if unaskable:
        why = "; ".join(loaded.notes) or f"e.g. question {unaskable[0]}"
        raise BenchmarkDataError(
            f"{len(unaskable)} of the {len(samples)} {what} questions have no question text to "
            f"ask ({why})"
        )


def published_agent(config: RunConfig, session: SessionCore) -> Agent:
    """The agent a run asks with, in this process or in an executor's worker: the strategy's
    paper configuration (abstention recorded, answers unchanged) with the run's options."""
    return make_agent(
        session,
        config.strategy,
        budget=config.budget,
        tool_mode=config.tool_mode,
        options=dict(config.strategy_options),
        published=True,
    )


def run_ladder(
    config: RunConfig,
    frames: Sequence[int],
    session: SessionCore,
    *,
    out: Path | None = None,
    progress: bool = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    executor: Workers | None = None,
) -> list[RunSummary]:
    """A frame-budget ladder: the run once per frame budget in ``frames`` (the rest of
    ``config.budget`` kept), each rung a resumable run folder ``frames-<N>`` inside ``out``
    (default ``$VIDAGENT_HOME/runs/<bench>-<strategy>-frames-<N1>-<N2>…``), which also holds
    ``ladder.json``; ``bench report`` reads the folder as its rungs. The videos are indexed by
    the first rung; the others find them done.

    Raises:
        UserError: an empty ladder, or a budget that is not a positive whole number.
    """
    rungs = sorted(dict.fromkeys(frames))
    if not rungs or any(f < 1 for f in rungs):
        raise UserError(f"--frames takes positive frame budgets, e.g. 32,128,512; not {frames}")
    root = out or session.settings.home / "runs" / (
        f"{config.benchmark}-{config.strategy}-frames-{'-'.join(map(str, rungs))}"
    )
    root.mkdir(parents=True, exist_ok=True)
    body = {"benchmark": config.benchmark, "strategy": config.strategy, "frames": rungs}
    write_json_atomic(root / LADDER, body)
    return [
        run_benchmark(
            replace(config, budget=replace(config.budget, frames=f)),
            session,
            out=root / rung_name(f),
            progress=progress,
            on_row=on_row,
            executor=executor,
        )
        for f in rungs
    ]


def question_run(config: RunConfig, session: SessionCore, out: Path) -> QuestionRun:
    """What answers single questions into ``out`` (a worker of an executor): the agent,
    benchmark and Library of ``session``; rows are returned, not written."""
    from vidagent.bench import get_benchmark

    agent = published_agent(config, session)
    index = VideoIndex(session, agent.index_plan())
    return QuestionRun(get_benchmark(config.benchmark), session, agent, index, out)


class _Run:
    """One session of a run: manifest, indexing, the thread pool, rows."""

    def __init__(
        self,
        bench: Benchmark,
        config: RunConfig,
        session: SessionCore,
        agent: Agent,
        samples: Sequence[Sample],
        missing: Sequence[Any],
        executor: Workers | None = None,
        load_notes: Sequence[str] = (),
    ) -> None:
        self.bench, self.config, self.session, self.agent = bench, config, session, agent
        self.settings, self.models, self.library = session.settings, session.models, session.library
        self.samples = tuple(samples)
        targeted = {s.id for s in self.samples}
        self.missing = [m for m in missing if m.sample_id in targeted]
        self.lacking = {m.sample_id for m in self.missing}
        self.index = VideoIndex(session, agent.index_plan())
        self.executor = executor
        self.load_notes = tuple(load_notes)  # the loader's (ids of the --ids list not found)

    def go(
        self,
        out: Path | None,
        data: Path,
        split: str,
        progress: bool,
        on_row: Callable[[dict[str, Any]], None] | None,
    ) -> RunSummary:
        started = time.monotonic()
        limits = endpoint_limits(self.models, self.agent.calls)
        requested = self.config.concurrency
        workers = min(requested, max(limits.values(), default=requested))
        if self.executor is not None:  # one hub per worker: the gate limits the endpoints
            workers = self.executor.start(requested)
        manifest = self._manifest(data, split, limits, workers)
        self.out = out or self.settings.home / "runs" / (
            f"{self.bench.NAME}-{split}-{self.config.strategy}-{digest(manifest.identity())}"
        )
        self.check_videos()
        self.asker = QuestionRun(self.bench, self.session, self.agent, self.index, self.out)
        held = hold(
            self.out / LOCK,
            lambda pid: (
                f"{self.out}: a bench run (process {pid}) is writing to it; let it end, or give "
                "another --out"
            ),
        )
        with contextlib.closing(held):  # two runs into one folder would write every row twice
            done = self._open(manifest)
            todo = [s for s in self.samples if s.id not in done and s.id not in self.lacking]
            notes = self._notes(requested, workers if self.executor is None else requested, limits)
            self._index_videos(todo, progress)
            errors, answering = 0, time.monotonic()
            with RowLog(self.out / ROWS) as rows:

                def record(row: dict[str, Any]) -> None:
                    """The one row writer: each finished question's row, as soon as it is known."""
                    nonlocal errors
                    rows.append(row)
                    errors += row["error"] is not None
                    if on_row is not None:
                        on_row(row)

                if self.executor is None:
                    self._answer_all(todo, workers, progress, record)
                else:  # its workers return rows; only this process writes them
                    reach = Unreachable()
                    for row in self.executor.answer(
                        self.config, self.session, self.out, todo, progress
                    ):
                        record(row)
                        reach.check(row)
            answer_seconds = time.monotonic() - answering
            scores, more = self._scores(split)
            return RunSummary(
                out=self.out,
                benchmark=self.bench.NAME,
                split=split,
                questions=len(self.samples),
                done_before=len(done),
                ran=len(todo),
                errors=errors,
                missing=len(self.lacking),
                concurrency=workers,
                requested_concurrency=requested,
                seconds=time.monotonic() - started,
                answer_seconds=answer_seconds,
                scores=scores,
                notes=notes + more,
            )

    def check_videos(self) -> None:
        """Refuse, before any folder is made, a run none of whose questions has its video and
        none of which the run folder answered already (a run that could answer nothing).

        Raises:
            BenchmarkDataError: naming a video it looked for.
        """
        if self.lacking != {s.id for s in self.samples}:
            return
        answered = read_rows(self.out / ROWS)
        if not any(s.id in answered for s in self.samples):
            raise BenchmarkDataError(
                f"none of the {len(self.samples)} questions has its video (e.g. "
                f"{self.missing[0].path}); give the folder that holds them with --videos"
            )

    # -- manifest and resume ------------------------------------------------------------------

    def _manifest(
        self, data: Path, split: str, limits: dict[str, int], workers: int
    ) -> RunManifest:
        from vidagent._version import __version__

        c, s = self.config, self.settings
        dumped = s.model_dump(mode="json")
        dumped["openai_api_key"] = "(set)" if s.openai_api_key else ""
        ids = None
        if c.ids is not None:
            ids = {"path": str(Path(c.ids).resolve()), "sha256": digest(Path(c.ids).read_text())}
        return RunManifest(
            format=FORMAT,
            vidagent=__version__,
            created_at=utc_now(),
            benchmark=self.bench.NAME,
            title=self.bench.TITLE,
            split=split,
            data=str(data.resolve()),
            videos=str(Path(c.videos).resolve()) if c.videos else None,
            subset=c.subset,
            ids=ids,
            strategy=c.strategy,
            strategy_options=json.loads(json.dumps(dict(c.strategy_options), default=str)),
            strategy_settings=json.loads(json.dumps(self.agent.describe(), default=str)),
            tool_mode=c.tool_mode,
            budget=self.agent.budget.to_dict(),
            models={role: self.models.serving(role) for role in ROLES},
            calls=list(self.agent.calls),
            # the stages the questions' videos are indexed through: what the answers read
            index_settings={
                **{k: dumped[k] for k in INDEX_SETTINGS},
                "stages": list(self.index.plan.stages_run(s)),
            },
            prompts=prompt_hashes(),
            settings=dumped,
            library=self.library.uri,
            limit=c.limit,
            concurrency={"requested": c.concurrency, "threads": workers, "endpoints": limits},
            samples=[x.id for x in self.samples],
            missing_videos=[{"id": m.sample_id, "path": str(m.path)} for m in self.missing],
        )

    def _open(self, manifest: RunManifest) -> set[str]:
        """Write the manifest (checking an earlier one) and return the ids already answered."""
        path = self.out / MANIFEST
        session: dict[str, Any] = {
            "started_at": utc_now(),
            "vidagent": manifest.vidagent,
            "concurrency": manifest.concurrency,
        }
        if path.is_file():
            old = read_manifest(self.out)
            check_resume(old, manifest.to_json(), self.out)
            # The folder's questions are those of every session: a smaller --limit asks fewer,
            # and drops none the run holds (its report would then leave their rows out).
            before = [str(x) for x in old.get("samples", [])]
            held, now = set(before), set(manifest.samples)
            was = old.get("limit")
            manifest = replace(
                manifest,
                created_at=old.get("created_at", manifest.created_at),
                sessions=list(old.get("sessions", [])),
                samples=before + [x for x in manifest.samples if x not in held],
                # what this session did not look for stays as an earlier one found it
                missing_videos=manifest.missing_videos
                + [m for m in old.get("missing_videos", []) if m.get("id") not in now],
                limit=None
                if was is None or manifest.limit is None
                else max(int(was), manifest.limit),
            )
            # A failed question is asked again: its row goes, the rest stay as they are.
            rewrite_rows(self.out / ROWS, lambda row: row.get("error") is None)
        rows = read_rows(self.out / ROWS)
        session["rows_kept"] = len(rows)
        # A question answered before its video went keeps its answer: it lacks nothing.
        self.missing = [m for m in self.missing if m.sample_id not in rows]
        self.lacking = {m.sample_id for m in self.missing}
        manifest = replace(
            manifest, missing_videos=[m for m in manifest.missing_videos if m["id"] not in rows]
        )
        manifest.sessions.append(session)
        (self.out / TRACES).mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, manifest.to_json())
        return {s.id for s in self.samples if s.id in rows}

    def _notes(self, requested: int, workers: int, limits: dict[str, int]) -> tuple[str, ...]:
        notes = list(self.load_notes)
        if workers < requested:
            shown = ", ".join(f"{e}: {n}" for e, n in limits.items())
            notes.append(
                f"concurrency capped at {workers}, the most requests the agent's endpoints take "
                f"at once ({shown}); a local model takes one, a remote endpoint the settings' "
                "concurrency[endpoint] or default_concurrency"
            )
        if self.missing:
            notes.append(
                f"{len(self.lacking)} question{'s lack' if len(self.lacking) != 1 else ' lacks'} "
                f"a video (e.g. {self.missing[0].path}); "
                "counted as unanswered"
            )
        return tuple(notes)

    # -- indexing and answering ---------------------------------------------------------------

    def _index_videos(self, todo: Sequence[Sample], progress: bool) -> None:
        """Index every video the questions need, and build what the strategy reads per video
        (VideoAgent2's general context), before any question is asked: threads that found it
        missing at once would each build it."""
        from tqdm import tqdm

        paths = list(dict.fromkeys(p for s in todo for p in s.videos))
        single = {p for s in todo if len(s.videos) == 1 for p in s.videos}
        if self.executor is not None and paths:  # in parallel; what follows finds them done
            plan = self.index.plan
            stages = plan.stages_run(self.session.settings)
            for _ in self.executor.index(
                self.session, paths, stages=stages, progress=progress, overrides=plan.settings
            ):
                pass  # a failure is found again below
        for path in tqdm(paths, desc="indexing", unit="video", disable=not progress):
            # A failure is kept: the questions on that video ask again and record it.
            with contextlib.suppress(MediaError, ProviderError):
                video_id = self.index.ensure(path)
                if path in single:
                    prepare(self.session, self.agent, [video_id])

    def _answer_all(
        self,
        todo: Sequence[Sample],
        workers: int,
        progress: bool,
        record: Callable[[dict[str, Any]], None],
    ) -> None:
        """Ask ``todo`` on a pool of threads and ``record`` each row as its question finishes;
        on an interrupt, questions in flight finish first and their rows are recorded too."""
        from tqdm import tqdm

        reach = Unreachable()

        def ask(sample: Sample) -> dict[str, Any] | None:
            if reach.error is not None:
                return None  # the run is stopping: not asked, and asked again on resume
            row = self.asker.row(sample)
            reach.count(row)
            return row

        bar = tqdm(total=len(todo), desc="questions", unit="q", disable=not progress)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vidagent-bench")
        futures = [pool.submit(ask, s) for s in todo]
        pending: set[Future[dict[str, Any] | None]] = set(futures)
        recorded: set[Future[dict[str, Any] | None]] = set()
        failed = 0
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    row = future.result()  # a UserError stops the run here
                    recorded.add(future)
                    if row is None:
                        continue
                    record(row)
                    failed += row["error"] is not None
                    bar.update()
                    bar.set_postfix(errors=failed, refresh=False)
                if reach.error is not None:  # an endpoint that cannot be reached stops it here
                    raise reach.error
        except KeyboardInterrupt:
            flight = sum(f.running() for f in pending)
            if flight:  # the wait below is otherwise silent, and a question can take minutes
                log.warning(
                    f"interrupted: finishing the {flight} question{'s' * (flight != 1)} in flight, "
                    "whose rows are kept; the questions not begun are asked when the same "
                    "command runs again"
                )
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for future in futures:  # rows of questions that finished while the run stopped
                if future in recorded or future.cancelled() or future.exception() is not None:
                    continue
                if (row := future.result()) is not None:
                    record(row)
            bar.close()

    def _scores(self, split: str) -> tuple[Scores | None, tuple[str, ...]]:
        from vidagent.bench.report import score_rows

        rows = read_rows(self.out / ROWS)
        try:
            _, _, scores = score_rows(self.bench, self.samples, rows, split=split)
        except UserError as e:
            return None, (f"not scored: {e}",)
        return scores, ()
