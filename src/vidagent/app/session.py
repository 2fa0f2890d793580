"""The application layer: one :class:`Session` under every front end.

A Session owns the settings, the Library (opened lazily; reading never creates one), the model
hub's lifecycle (made on first use and closed with the session, or borrowed and left open), the
trace locations, and the one embedding-model check. It is the only place that composes ingest
and agents: it indexes what a strategy reads, builds what a strategy needs before a question
(VideoAgent2's general context), runs the strategy, and runs, scores and reports benchmarks.
Every method returns a typed result with one JSON form (:mod:`vidagent.app.results`); the CLI,
the Python API, and the HTTP and MCP servers print or return those and re-implement nothing.

A Session may serve many questions at once from several threads: the hub limits each endpoint,
the Library serialises its writes, and an :class:`~vidagent.agents.base.Agent` keeps each
question's state in its own run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidagent.app.results import (
    AskResult,
    EstimateReport,
    GraphDetail,
    GroundResult,
    IndexReport,
    InfoReport,
    ProbeReport,
    ReportResult,
    RoleStatus,
    ScoreResult,
    SearchHit,
    VideoDetail,
)
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ConfigError, LibraryError, MediaError, VideoNotFoundError
from vidagent.roles import FOLLOWS, ROLES, capability

if TYPE_CHECKING:
    from vidagent.agents.base import Agent, IndexPlan, ToolMode
    from vidagent.app.executors import Executor
    from vidagent.budget import Budget
    from vidagent.ingest import IndexResult
    from vidagent.library import Library
    from vidagent.models.client import Client, Models
    from vidagent.trace import Event, Trace


class Session:
    """Settings, Library, models and traces for a run of work.

    Args:
        settings: default :func:`~vidagent.config.load_settings()`.
        library: a Library or URI (default: the configured one), opened on first use.
        models: a hub to borrow (left open); default: one made on first use, closed by
            :meth:`close`.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        library: Library | str | Path | None = None,
        models: Models | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self._library: Library | None = None
        self._uri = self.settings.library_uri
        if isinstance(library, (str, Path)):
            self._uri = str(library)
        elif library is not None:
            self._library, self._uri = library, library.uri
        self._models, self._own_models = models, models is None
        self._bound_models: Models | None = None  # for search, when the embed role differs
        self._judge_models: Models | None = None  # for judging open-ended answers

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Session:  # noqa: PYI034 - Session is not subclassed
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the model hubs this session made."""
        if self._own_models and self._models is not None:
            self._models.close()
            self._models = None
        for hub in (self._bound_models, self._judge_models):
            if hub is not None:
                hub.close()
        self._bound_models = self._judge_models = None

    @property
    def models(self) -> Models:
        if self._models is None:
            from vidagent.models.client import Models

            self._models = Models(self.settings)
        return self._models

    @property
    def library(self) -> Library:
        """The Library, created when there is none (for commands that write)."""
        if self._library is None:
            from vidagent.library import Library

            self._library = Library(self._uri)
        return self._library

    def existing_library(self) -> Library:
        """The Library for reading: never created.

        Raises:
            LibraryError: there is none; the message says how to make one.
        """
        if self._library is None:
            from vidagent.library import Library

            try:
                self._library = Library(self._uri, create=False)
            except LibraryError:
                missing = f"no Library at {self._uri}; index a video first (vidagent index PATH)"
                raise LibraryError(missing) from None
        return self._library

    def library_exists(self) -> bool:
        from vidagent.library.manifest import MANIFEST

        if self._library is not None or "://" in self._uri:
            return True
        return (Path(self._uri).expanduser() / MANIFEST).is_file()

    def check_embedding(self) -> None:
        """The one check that this session's embed model made the Library's vectors.

        Raises:
            EmbeddingMismatchError: another model made them; the message names it.
        """
        from vidagent.library.search import bound_embedding, require_embedding

        if bound_embedding(self.library) is not None:
            require_embedding(self.library, self.models.client("embed").spec)

    def trace_path(self, strategy: str) -> Path:
        """``$VIDAGENT_HOME/traces/<time>-<strategy>-<random>.jsonl``."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        return self.settings.home / "traces" / f"{stamp}-{strategy}-{uuid.uuid4().hex[:6]}.jsonl"

    # -- information ------------------------------------------------------------------------------

    def info(self) -> InfoReport:
        """Each role's spec and whether its backend is usable, found without importing it."""
        from vidagent import __version__
        from vidagent.models.registry import backend_status

        roles: dict[str, RoleStatus] = {}
        for role in ROLES:
            spec = self.settings.spec(role)
            if role in FOLLOWS and not getattr(self.settings, role):
                follows = roles[FOLLOWS[role]]
                roles[role] = RoleStatus(spec, follows.usable, f"unset: the {FOLLOWS[role]}'s")
                continue
            status = backend_status(spec, self.settings, capability(role))
            roles[role] = RoleStatus(spec, status.usable, status.detail)
        return InfoReport(
            __version__, str(self.settings.home), self._uri, self.library_exists(), roles
        )

    def probe(self, path: str | Path) -> ProbeReport:
        from vidagent.media import probe

        return ProbeReport(probe(path))

    # -- indexing ---------------------------------------------------------------------------------

    @staticmethod
    def stage_names() -> tuple[str, ...]:
        """Every ingest stage after ``structure``, in pipeline order (plugins' included)."""
        from vidagent.ingest.pipeline import stage_names

        return stage_names()

    def default_stages(self) -> tuple[str, ...]:
        """What indexing runs when no stages are named, for these settings (the entity graph
        only with an llm that can extract one)."""
        from vidagent.ingest.pipeline import default_stages

        return default_stages(self.settings)

    def known_video(self, path: str | Path) -> Any:
        """The Library's record of the video whose content is the file at ``path``, or None
        (no Library yet, or this content was never indexed)."""
        from vidagent.library.store import content_id

        if not self.library_exists():
            return None
        library, vid = self.existing_library(), content_id(path)
        return library.get_video(vid) if library.has_video(vid) else None

    def frames(self, ref: str, times: Sequence[float], *, size: int) -> list[bytes]:
        """The frames of a video nearest ``times``, as JPEG bytes at most ``size`` pixels on
        their long side."""
        from vidagent.models.vision import frame_images

        record = self.show(ref).video
        return [part.data for part in frame_images(record.source, times, size=size)]

    @staticmethod
    def strategies() -> tuple[str, ...]:
        """Every strategy name: the built-ins and those installed packages register."""
        from vidagent.agents.strategies import STRATEGIES

        return STRATEGIES.names()

    @staticmethod
    def check_strategy(name: str) -> None:
        """Raise :class:`~vidagent.exceptions.ConfigError` (naming the strategies) for an
        unknown strategy."""
        from vidagent.agents.strategies import strategy_class

        strategy_class(name)

    def index_file(
        self,
        path: str | Path,
        *,
        stages: Sequence[str] | None = None,
        progress: bool = False,
        plan: IndexPlan | None = None,
        on_stage: Callable[[Any], None] | None = None,
    ) -> IndexResult:
        """Index one file through ``stages`` (default
        :func:`~vidagent.ingest.pipeline.default_stages`: all but the optional ``embed_frames``,
        and ``graph`` only when the llm role is not the embedded smoke-test model), or a
        strategy's ``plan`` (its stages under its index settings); a media error is in the
        result. ``on_stage`` is called with each stage's ``StageRun`` as it ends."""
        from vidagent.ingest import index_path
        from vidagent.ingest.pipeline import default_stages

        settings = self.settings
        if plan is not None:
            stages, settings = plan.stages, settings.model_copy(update=dict(plan.settings))
        return index_path(
            path, library=self.library, settings=settings, models=self.models,
            stages=default_stages(settings) if stages is None else stages, progress=progress,
            on_stage=on_stage,
        )  # fmt: skip

    def index(
        self,
        paths: Sequence[str | Path],
        *,
        stages: Sequence[str] | None = None,
        progress: bool = False,
        executor: Executor | None = None,
    ) -> Iterator[IndexReport]:
        """Index each file through ``stages`` (default as :meth:`index_file`), yielding a report
        per file as it finishes; a file that cannot be used gets a report with its error, the
        others go on. With an ``executor`` (:mod:`vidagent.app.executors`: a process pool or
        Ray) the files are indexed on its workers, in the order they finish."""
        if executor is not None:
            yield from executor.index(self, paths, stages=stages, progress=progress)
            return
        for path in paths:
            result = self.index_file(path, stages=stages, progress=progress)
            if result.error is not None:
                yield IndexReport(Path(path), error=str(result.error))
                continue
            yield self._index_report(Path(path), result)

    def _index_report(self, path: Path, result: IndexResult) -> IndexReport:
        assert result.structure is not None
        video = result.video or result.structure.video
        clips = self.library.clips(video.video_id)
        speech = " ".join(c.transcript for c in clips if c.transcript).strip()
        text = list(dict.fromkeys(x for c in clips for x in c.ocr_text.split("\n") if x))
        detected = any(c.detect_model for c in clips)
        people = sum(1 for c in clips if '"person"' in c.detections) if detected else None
        summary = self.library.artifact(video.video_id, "summary", "global")
        return IndexReport(
            path, result=result, speech=speech, on_screen=text, people_clips=people,
            clips=len(clips), summary=summary.text if summary else "", library=self.library.uri,
        )  # fmt: skip

    def estimate(
        self, paths: Sequence[str | Path], *, stages: Sequence[str] | None = None
    ) -> Iterator[EstimateReport]:
        """What indexing each file would spend; nothing is decoded, called or written."""
        from vidagent.ingest import estimate_path
        from vidagent.ingest.pipeline import default_stages
        from vidagent.models.base import Usage
        from vidagent.models.client import price_usage

        for path in paths:
            try:
                chosen = default_stages(self.settings) if stages is None else stages
                found = estimate_path(path, self.settings, chosen)
            except MediaError as e:
                yield EstimateReport(Path(path), error=str(e))
                continue
            costs: list[float | None] = []
            for r in found.stages:
                priced = r.spec in self.settings.prices or r.spec.split("?")[0] in self.settings.prices
                usage = price_usage(Usage(r.input_tokens, r.output_tokens), r.spec, self.settings)
                costs.append(usage.cost_usd if priced else None)
            yield EstimateReport(Path(path), estimate=found, costs=costs)

    # -- reading the Library ------------------------------------------------------------------------

    def videos(self) -> list[Any]:
        """The videos in the Library (none when there is no Library yet)."""
        return self.existing_library().list_videos() if self.library_exists() else []

    def show(self, ref: str) -> VideoDetail:
        lib = self.existing_library()
        video = lib.get_video(ref)
        summary = lib.artifact(video.video_id, "summary", "global")
        registry = lib.artifact(video.video_id, "registry")
        return VideoDetail(
            video, summary.text if summary else "", registry.data if registry else {},
            lib.clips(video.video_id),
        )  # fmt: skip

    def graph(self, ref: str) -> GraphDetail:
        """A video's entity graph (AVI; ``None`` inside when its graph stage never ran).

        Raises:
            VideoNotFoundError: no such video.
        """
        lib = self.existing_library()
        video = lib.get_video(ref)
        return GraphDetail(video, lib.entity_graph(video.video_id))

    def remove(self, ref: str) -> str:
        return self.existing_library().remove_video(ref)

    def compact(self, *, older_than_s: float = 3600, retrain: bool = False, **policy: Any) -> Any:
        """``vidagent library compact``: record index ``policy`` settings, then Library.compact."""
        lib = self.existing_library()
        if policy:
            lib.set_index_policy(**policy)
        return lib.compact(older_than=timedelta(seconds=older_than_s), retrain=retrain)

    def search(
        self,
        text: str,
        *,
        videos: Sequence[str] | None = None,
        t_from: float | None = None,
        t_to: float | None = None,
        top: int = 10,
    ) -> list[SearchHit]:
        """Clips most similar to ``text`` in meaning, best first, embedded with the model that
        made the Library's vectors (whatever the session's embed role says)."""
        from vidagent.library.search import bound_embedding

        if not text.strip():
            raise ConfigError("nothing to search for: the search text is empty")
        lib = self.existing_library()
        bound = bound_embedding(lib)
        if bound is None:
            raise LibraryError(f"{lib.uri} has no clip embeddings yet; run `vidagent index` first")
        client = self.models.client("embed")
        if client.spec != bound:
            client = self._embedder(bound)
        ids = [lib.resolve(v) for v in videos] if videos else None
        vector = client.embed([text]).vectors[0]  # (D,)
        hits = lib.search_clips(vector, video_ids=ids, t_from=t_from, t_to=t_to, k=top)
        return [SearchHit(h) for h in hits]

    def _embedder(self, spec: str) -> Client:
        from vidagent.models.client import Models

        if self._bound_models is None:
            self._bound_models = Models(self.settings.model_copy(update={"embed": spec}))
        return self._bound_models.client("embed")

    # -- asking -----------------------------------------------------------------------------------

    def agent(
        self,
        strategy: str = "dvd",
        *,
        budget: Budget | None = None,
        tool_mode: ToolMode = "auto",
        options: Any = None,
    ) -> Agent:
        """A strategy's agent over this session's Library and models (options validated).

        Raises:
            ConfigError: an unknown strategy, or an unknown or ill-typed option.
        """
        from vidagent.agents.strategies import strategy_class

        cls = strategy_class(strategy)
        return cls(self.library, self.models, budget=budget, tool_mode=tool_mode, options=options)

    def resolve_videos(
        self, refs: Sequence[str | Path], agent: Agent, *, progress: bool = False
    ) -> list[str]:
        """Video ids for files (indexed through the agent's stages where owed) or references,
        with whatever the agent needs built before a question.

        Raises:
            MediaError: a file cannot be used as a video.
            VideoNotFoundError: a reference is neither a file nor a video in the Library.
        """
        ids: list[str] = []
        for ref in refs:
            if Path(ref).expanduser().is_file():
                result = self.index_file(ref, plan=agent.index_plan(), progress=progress)
                if result.error is not None:
                    raise result.error
                assert result.video is not None
                ids.append(result.video.video_id)
                continue
            try:
                ids.append(self.library.resolve(str(ref)))
            except VideoNotFoundError:
                unknown = f"{ref}: not a video file and not a video in {self.library.uri}"
                raise VideoNotFoundError(unknown) from None
        ids = list(dict.fromkeys(ids))
        self.prepare(agent, ids)
        return ids

    def prepare(self, agent: Agent, video_ids: Sequence[str]) -> None:
        """Build what the strategy reads besides its stages (VideoAgent2's general context)."""
        request = agent.context_request()
        if request is None or len(video_ids) != 1:
            return  # VideoAgent2 refuses several videos itself, with its own message
        from vidagent.ingest.context import build_segment_context

        build_segment_context(self.library, self.models, video_ids[0], **request)

    def ask(
        self,
        videos: str | Path | Sequence[str | Path],
        question: str,
        *,
        options: Sequence[str] = (),
        strategy: str = "dvd",
        budget: Budget | None = None,
        trace: str | Path | bool = True,
        on_event: Callable[[Event], None] | None = None,
        tool_mode: ToolMode = "auto",
        progress: bool = False,
        strategy_options: Any = None,
        task: Literal["answer", "ground"] = "answer",
    ) -> AskResult:
        """Answer a question about one or more videos.

        Args:
            videos: video files (first indexed through the stages the strategy reads, where any
                is missing) or ids/names in the Library.
            question: the question.
            options: answer options, for a multiple-choice question.
            strategy: a registered strategy name (``dvd``, ``videoagent2``, or a plugin's).
            budget: per-question limits (default :class:`~vidagent.budget.Budget`).
            trace: a JSONL path, True for ``$VIDAGENT_HOME/traces/…``, False to keep it in memory.
            on_event: called with every trace event as it happens (live display).
            tool_mode: ``auto``, ``native`` or ``json`` tool calling.
            progress: progress bars while indexing.
            strategy_options: the strategy's options (a mapping or its ``Options``).
            task: ``"ground"`` reads ``question`` as an event to find in time (see :meth:`ground`).
        """
        from vidagent.agents.base import Question
        from vidagent.trace import Trace

        if not question.strip():
            raise ConfigError("the question is empty")
        refs = [videos] if isinstance(videos, (str, Path)) else list(videos)
        if not refs:
            raise ConfigError("name at least one video")
        agent = self.agent(strategy, budget=budget, tool_mode=tool_mode, options=strategy_options)
        ids = self.resolve_videos(refs, agent, progress=progress)
        self.check_embedding()
        path = self.trace_path(strategy) if trace is True else trace or None
        run_trace: Trace = Trace(path, listeners=[on_event] if on_event else [])
        answer = agent.run(Question(question, tuple(ids), tuple(options), task), run_trace)
        return AskResult(run_trace, answer)

    def ground(self, video: str | Path, event: str, *, strategy: str = "avi", **ask: Any) -> GroundResult:
        """Find when ``event`` happens in ``video``: ``[start, end]`` in seconds and its evidence.

        AVI grounds in its own mode (``**Answer:**[s, e]``, refined by boundary detection);
        another strategy is asked when the event happens and its answer's first two times are
        read. Keyword arguments are :meth:`ask`'s.
        """
        if not event.strip():
            raise ConfigError("the event description is empty")
        result = self.ask(video, event, strategy=strategy, task="ground", **ask)
        return GroundResult(result.trace, result.answer)

    def replay(self, path: str | Path) -> AskResult:
        """A run read back from its trace file; no model is called."""
        from vidagent.trace import Trace

        return AskResult(Trace.load(path))

    # -- benchmarks -------------------------------------------------------------------------------

    def bench_run(
        self,
        config: Any,
        *,
        out: Path | None = None,
        progress: bool = False,
        on_row: Callable[[dict[str, Any]], None] | None = None,
        executor: Executor | None = None,
    ) -> Any:
        """Answer a benchmark with a strategy into a resumable run folder
        (:func:`vidagent.app.bench.run_benchmark`; questions on ``executor``'s workers when
        given); returns its ``RunSummary``."""
        from vidagent.app.bench import run_benchmark

        return run_benchmark(
            config, self, out=out, progress=progress, on_row=on_row, executor=executor
        )

    def _judge(self, spec: str | None, template: str = "crossvid") -> Any:
        """A judge of open-ended answers over a hub for ``spec`` (default: the llm role)."""
        from vidagent.bench.judge import Judge
        from vidagent.models.client import Models

        if self._judge_models is None:
            settings = self.settings.model_copy(update={"llm": spec}) if spec else self.settings
            self._judge_models = Models(settings)
        return Judge(self._judge_models, template=template)

    def bench_score(
        self,
        benchmark: str,
        data: Path,
        predictions: Path,
        *,
        split: str | None = None,
        subset: str | None = None,
        ids: Path | None = None,
        judge: str | None = None,
        judge_prompt: str = "crossvid",
    ) -> ScoreResult:
        """Score a predictions file with a benchmark's official rules.

        Raises:
            BenchmarkDataError: the file is missing, empty, not UTF-8, holds no predictions, or
                none of them matches a question.
        """
        from vidagent.bench import evaluate, get_benchmark
        from vidagent.bench.base import BenchmarkDataError
        from vidagent.bench.predictions import check_predictions_file, read_id_list

        bench = get_benchmark(benchmark)
        if not data.is_dir():
            raise BenchmarkDataError(f"no such data folder: {data}")
        options: dict[str, Any] = {"subset": subset} if subset else {}
        loaded = bench.load(data, split=split, **options)
        if ids is not None:
            loaded = loaded.only(read_id_list(ids))
        check_predictions_file(predictions)
        found = bench.read_predictions(predictions, loaded.samples)
        if not found:
            raise BenchmarkDataError(f"{predictions}: holds no predictions")
        open_ended = any(s.task == "open" and found.get(s.id) is not None for s in loaded.samples)
        judged = self._judge(judge, judge_prompt) if open_ended else None
        scores = evaluate(bench, loaded, found, judge=judged)
        return ScoreResult(scores, bench.TITLE, len(found))

    def bench_report(
        self,
        runs: Sequence[Path],
        *,
        out: Path,
        plots: bool = True,
        resamples: int = 1000,
        seed: int = 0,
        judge: str | None = None,
    ) -> ReportResult:
        """Score run folders again and write ``report.md``, ``report.json`` and plots to ``out``."""
        from vidagent.bench.report import load_run, write_report
        from vidagent.bench.rundir import read_manifest
        from vidagent.exceptions import BackendMissingError, UserError

        if plots:
            from vidagent.bench.plots import require_matplotlib

            try:
                require_matplotlib()
            except BackendMissingError as e:
                raise UserError(f"{e}; or leave the plots out with --no-plots") from None
        judged_benchmarks = ("crossvid", "mmbench_video")  # open-ended answers
        needs = any(read_manifest(r)["benchmark"] in judged_benchmarks for r in runs)
        judged = self._judge(judge) if needs else None
        reports = [load_run(r, judge=judged, resamples=resamples, seed=seed) for r in runs]
        written = write_report(reports, out, plots=plots, resamples=resamples, seed=seed)
        return ReportResult(reports, list(written), resamples, seed)
