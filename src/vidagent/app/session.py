"""The application layer's façade: one :class:`Session` under every front end.

A Session is a :class:`~vidagent.app.core.SessionCore` (the settings, the Library opened lazily,
the model hubs, the trace locations, the one embedding-model check) whose methods name the use
cases; each body lives in its use-case module and takes the session as its core:

- :mod:`~vidagent.app.status`: ``info``;
- :mod:`~vidagent.app.indexing`: ``index``, ``index_file``, ``estimate``, ``probe``, stages,
  ``known_video``;
- :mod:`~vidagent.app.videos`: ``videos``, ``show``, ``graph``, ``remove``, ``compact``,
  ``search``, ``frames``;
- :mod:`~vidagent.app.asking`: ``agent``, ``plan_ask`` (one :class:`~vidagent.app.asking.AskPlan`
  that every front end runs), ``ask``, ``ground``, ``replay``, strategies;
- :mod:`~vidagent.app.traces`: ``traces``, ``trace_file``;
- :mod:`~vidagent.app.export`: ``export`` (an answer's evidence as a folder or zip);
  :mod:`~vidagent.app.sheets`: ``sheet``; :mod:`~vidagent.app.subtitles`: ``subtitles``;
- :mod:`~vidagent.app.benchmarks`: ``bench_run``, ``bench_score``, ``bench_report``,
  ``bench_runs``, ``bench_run_info`` (imported on first use: it loads the benchmark harness);
- training (``vidagent train``) is :mod:`~vidagent.app.training`, which needs no Library.

Every method returns a typed result with one JSON form (:mod:`vidagent.app.results`); the CLI,
the Python API, and the HTTP and MCP servers print or return those and re-implement nothing.

A Session may serve many questions at once from several threads: the hub limits each endpoint,
the Library serialises its writes, and an :class:`~vidagent.agents.base.Agent` keeps each
question's state in its own run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidagent.app import asking, indexing, status
from vidagent.app import speakers as _speakers
from vidagent.app import traces as _traces
from vidagent.app import videos as _videos
from vidagent.app.core import SessionCore
from vidagent.app.results import (
    AskResult,
    CompareResult,
    EstimateReport,
    GraphDetail,
    GroundResult,
    IndexReport,
    InfoReport,
    ProbeReport,
    ReportResult,
    ScoreResult,
    SearchHit,
    VideoDetail,
)
from vidagent.app.speakers import SpeakerList

if TYPE_CHECKING:
    from vidagent.agents.base import Agent, IndexPlan, ToolMode
    from vidagent.app.asking import AskPlan
    from vidagent.app.benchmarks import RunInfo
    from vidagent.app.executors import Executor
    from vidagent.app.export import ExportResult
    from vidagent.app.sheets import SheetResult
    from vidagent.app.traces import TraceSummary
    from vidagent.app.watching import Watch
    from vidagent.app.window import TimeWindow
    from vidagent.budget import Budget
    from vidagent.ingest.pipeline import IndexResult, StageRun
    from vidagent.trace import Event


class Session(SessionCore):
    """Settings, Library, models and traces for a run of work.

    Args:
        settings: default :func:`~vidagent.config.load_settings()`.
        library: a Library or URI (default: the configured one), opened on first use.
        models: a hub to borrow (left open); default: one made on first use, closed by
            :meth:`close`.
    """

    def __enter__(self) -> Session:  # noqa: PYI034 - Session is not subclassed
        return self

    # -- information ------------------------------------------------------------------------------

    def info(self) -> InfoReport:
        """Each role's spec and whether its backend is usable, found without importing it."""
        return status.info(self)

    def probe(self, path: str | Path) -> ProbeReport:
        """What a file holds as a video, without indexing it."""
        return indexing.probe(path)

    # -- indexing ---------------------------------------------------------------------------------

    @staticmethod
    def stage_names() -> tuple[str, ...]:
        """Every ingest stage after ``structure``, in pipeline order (plugins' included)."""
        return indexing.stage_names()

    @staticmethod
    def chosen_stages(names: Sequence[str]) -> tuple[str, ...]:
        """The stages ``names`` asks for, in pipeline order (``structure`` allowed, and
        dropped: it always runs); an unknown name is a ``ConfigError``."""
        return indexing.chosen_stages(names)

    def default_stages(self) -> tuple[str, ...]:
        """What indexing runs when no stages are named, for these settings (the entity graph
        only with an llm that can extract one)."""
        return indexing.default_stages(self)

    def known_video(self, path: str | Path) -> Any:
        """The Library's record of the video whose content is the file at ``path``, or None
        (no Library yet, or this content was never indexed)."""
        return indexing.known_video(self, path)

    def frames(self, ref: str, times: Sequence[float], *, size: int) -> list[bytes]:
        """The frames of a video nearest ``times``, as JPEG bytes at most ``size`` pixels on
        their long side."""
        return _videos.frames(self, ref, times, size=size)

    @staticmethod
    def strategies() -> tuple[str, ...]:
        """Every strategy name: the built-ins and those installed packages register."""
        return asking.strategies()

    @staticmethod
    def check_strategy(name: str) -> None:
        """Raise :class:`~vidagent.exceptions.ConfigError` (naming the strategies) for an
        unknown strategy."""
        asking.check_strategy(name)

    def index_file(
        self,
        path: str | Path,
        *,
        stages: Sequence[str] | None = None,
        progress: bool = False,
        plan: IndexPlan | None = None,
        on_stage: Callable[[StageRun], None] | None = None,
        before_stage: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> IndexResult:
        """Index one file through ``stages`` (default
        :func:`~vidagent.ingest.pipeline.default_stages`: all but the optional ``embed_frames``,
        and ``graph`` only when the llm role is not the embedded smoke-test model), or a
        strategy's ``plan`` (its stages under its index settings), in one pipeline call; a
        media error is in the result. ``on_stage`` is called with each stage's ``StageRun`` as
        it ends; ``before_stage`` with each stage's name before it starts, and what it raises
        stops the run there (a later call resumes; see :func:`vidagent.app.indexing.index_file`);
        ``should_stop`` is asked between clips too, and stops the run with ``IndexStopped``.
        """
        return indexing.index_file(
            self,
            path,
            stages=stages,
            progress=progress,
            plan=plan,
            on_stage=on_stage,
            before_stage=before_stage,
            should_stop=should_stop,
        )

    def index(
        self,
        paths: str | Path | Sequence[str | Path],
        *,
        stages: Sequence[str] | None = None,
        progress: bool = False,
        executor: Executor | None = None,
    ) -> Iterator[IndexReport]:
        """Index each file through ``stages`` (default as :meth:`index_file`), yielding a report
        per file as it finishes; a file that cannot be used gets a report with its error, the
        others go on. With an ``executor`` (:mod:`vidagent.app.executors`: a process pool or
        Ray) the files are indexed on its workers, in the order they finish."""
        if isinstance(paths, (str, Path)):  # one file, not its name's letters
            paths = [paths]
        if executor is not None:
            return executor.index(self, paths, stages=stages, progress=progress)
        return indexing.index_files(self, paths, stages=stages, progress=progress)

    def watch(self, source: str, **options: Any) -> Watch:
        """A :class:`~vidagent.app.watching.Watch` of a live or growing ``source`` into this
        Library (``options``: its keyword arguments); :meth:`Watch.run` indexes it window by
        window until it ends or :meth:`Watch.stop`."""
        from vidagent.app.watching import Watch

        return Watch(self, source, **options)

    def estimate(
        self, paths: str | Path | Sequence[str | Path], *, stages: Sequence[str] | None = None
    ) -> Iterator[EstimateReport]:
        """What indexing each file would spend; nothing is decoded, called or written."""
        return indexing.estimate(
            self, [paths] if isinstance(paths, (str, Path)) else paths, stages=stages
        )

    # -- reading the Library ----------------------------------------------------------------------

    def videos(self) -> list[Any]:
        """The videos in the Library (none when there is no Library yet)."""
        return _videos.videos(self)

    def show(self, ref: str) -> VideoDetail:
        """A video with its summary, subject registry and clips."""
        return _videos.show(self, ref)

    def graph(self, ref: str) -> GraphDetail:
        """A video's entity graph (AVI; ``None`` inside when its graph stage never ran).

        Raises:
            VideoNotFoundError: no such video.
        """
        return _videos.graph(self, ref)

    def set_recorded_at(self, ref: str, when: str) -> Any:
        """Record when a video's recording started (ISO-8601; ``""`` forgets it), so every time
        shown of it also reads as a wall-clock time; the updated record.

        Raises:
            ConfigError: ``when`` is not an ISO-8601 date and time.
        """
        return _videos.set_recorded_at(self, ref, when)

    def remove(self, ref: str) -> str:
        """Remove a video and everything indexed of it; its id."""
        return _videos.remove(self, ref)

    def compact(self, *, older_than_s: float = 3600, retrain: bool = False, **policy: Any) -> Any:
        """``vidagent library compact``: record index ``policy`` settings, then Library.compact."""
        return _videos.compact(self, older_than_s=older_than_s, retrain=retrain, **policy)

    def search(
        self,
        text: str,
        *,
        videos: str | Sequence[str] | None = None,
        t_from: float | None = None,
        t_to: float | None = None,
        top: int = 10,
        speaker: str | None = None,
        window: TimeWindow | None = None,
    ) -> list[SearchHit]:
        """Clips most similar to ``text`` in meaning, best first, embedded with the model that
        made the Library's vectors (whatever the session's embed role says); with ``speaker``
        (``S1`` or a given name) only clips where that speaker talks; with ``window``
        (:class:`~vidagent.app.window.TimeWindow`: ``--last 10m`` …) only clips in each
        video's window, resolved on its live edge now."""
        return _videos.search(
            self,
            text,
            videos=videos,
            t_from=t_from,
            t_to=t_to,
            top=top,
            speaker=speaker,
            window=window,
        )

    def speakers(self, ref: str) -> SpeakerList:
        """A video's speakers (``S1``, ``S2``, … with any names given) and their talk time.

        Raises:
            VideoNotFoundError: no such video.
        """
        return _speakers.speakers(self, ref)

    def rename_speaker(self, ref: str, label: str, name: str) -> SpeakerList:
        """Give a video's speaker ``label`` a ``name`` (``""`` removes it).

        Raises:
            VideoNotFoundError: no such video.
            ConfigError: the video has no such label.
        """
        return _speakers.rename(self, ref, label, name)

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
        return asking.agent(self, strategy, budget=budget, tool_mode=tool_mode, options=options)

    def resolve_videos(
        self, refs: Sequence[str | Path], agent: Agent, *, progress: bool = False
    ) -> list[str]:
        """Video ids for files (indexed through the agent's stages where owed) or references,
        with whatever the agent needs built before a question.

        Raises:
            MediaError: a file cannot be used as a video.
            VideoNotFoundError: a reference is neither a file nor a video in the Library.
        """
        return asking.resolve_videos(self, refs, agent, progress=progress)

    def prepare(self, agent: Agent, video_ids: Sequence[str]) -> None:
        """Build what the strategy reads besides its stages (VideoAgent2's general context)."""
        asking.prepare(self, agent, video_ids)

    def plan_ask(
        self,
        videos: str | Path | Sequence[str | Path],
        question: str,
        *,
        options: Sequence[str] = (),
        strategy: str | None = None,
        budget: Budget | None = None,
        trace: str | Path | bool = True,
        tool_mode: ToolMode = "auto",
        progress: bool = False,
        strategy_options: Any = None,
        task: Literal["answer", "ground"] = "answer",
        window: TimeWindow | None = None,
    ) -> AskPlan:
        """A question resolved once, ready to run: the strategy (the default picked), its
        one-line notice, the trace path and the agent, its options checked. Nothing is indexed
        or asked until :meth:`AskPlan.run <vidagent.app.asking.AskPlan.run>`, which returns
        the result (a :class:`~vidagent.app.results.GroundResult` to ground).

        Args:
            videos: video files (first indexed through the stages the strategy reads, where any
                is missing) or ids/names in the Library.
            question: the question.
            options: answer options, for a multiple-choice question.
            strategy: a registered strategy name (``dvd``, ``videoagent2``, or a plugin's);
                None: :meth:`pick_strategy`'s default (``retrieval`` without a model
                endpoint, else ``dvd``).
            budget: per-question limits (default :class:`~vidagent.budget.Budget`).
            trace: a JSONL path, True for ``$VIDAGENT_HOME/traces/…``, False to keep it in memory.
            tool_mode: ``auto``, ``native`` or ``json`` tool calling.
            progress: progress bars while indexing.
            strategy_options: the strategy's options (a mapping or its ``Options``).
            task: ``"ground"`` reads ``question`` as an event to find in time (see :meth:`ground`).
            window: only part of each video (:class:`~vidagent.app.window.TimeWindow`, made
                by ``TimeWindow.parse(last="10m")``): every strategy, tool and citation check
                then reads only that part, resolved on the videos' live edges when the plan
                runs (:mod:`vidagent.app.window`).

        Raises:
            ConfigError: an empty question, no video, too many options, an unknown strategy,
                or an unknown or ill-typed strategy option: before anything runs.
        """
        return asking.plan_ask(
            self,
            videos,
            question,
            options=options,
            strategy=strategy,
            budget=budget,
            trace=trace,
            tool_mode=tool_mode,
            progress=progress,
            strategy_options=strategy_options,
            task=task,
            window=window,
        )

    def ask(
        self,
        videos: str | Path | Sequence[str | Path],
        question: str,
        *,
        options: Sequence[str] = (),
        strategy: str | None = None,
        budget: Budget | None = None,
        trace: str | Path | bool = True,
        on_event: Callable[[Event], None] | None = None,
        tool_mode: ToolMode = "auto",
        progress: bool = False,
        strategy_options: Any = None,
        task: Literal["answer", "ground"] = "answer",
        window: TimeWindow | None = None,
    ) -> AskResult:
        """Answer a question about one or more videos: :meth:`plan_ask`, then run the plan,
        calling ``on_event`` with every trace event as it happens (live display). The other
        arguments are :meth:`plan_ask`'s."""
        plan = self.plan_ask(
            videos,
            question,
            options=options,
            strategy=strategy,
            budget=budget,
            trace=trace,
            tool_mode=tool_mode,
            progress=progress,
            strategy_options=strategy_options,
            task=task,
            window=window,
        )
        return plan.run(on_event)

    def pick_strategy(
        self, strategy: str | None = None, task: Literal["answer", "ground"] = "answer"
    ) -> tuple[str, str]:
        """The strategy a question runs with and a one-line notice (``""``: none).

        ``None`` picks the default: ``retrieval`` when no model endpoint is configured (the
        ``llm`` is the embedded SmolLM2-135M), else ``dvd`` (``avi`` to ground). An agent
        strategy named with the embedded model gets a line with its measured offline accuracy.
        """
        return asking.pick_strategy(self.settings, strategy, task)

    def ground(
        self, video: str | Path, event: str, *, strategy: str | None = None, **ask: Any
    ) -> GroundResult:
        """Find when ``event`` happens in ``video``: ``[start, end]`` in seconds and its evidence.

        ``strategy`` None: AVI with a model endpoint, else the retrieval baseline (the
        best-matching clip tightened to the event's spoken words' times). AVI grounds in its own mode (``**Answer:**[s, e]``, refined by boundary detection);
        another strategy is asked when the event happens and its answer's first two times are
        read. Keyword arguments are :meth:`ask`'s.
        """
        return asking.ground(self, video, event, strategy=strategy, **ask)

    def replay(self, path: str | Path) -> AskResult:
        """A run read back from its trace file; no model is called."""
        return asking.replay(path)

    # -- traces -----------------------------------------------------------------------------------

    def traces(self, *, details: bool = True) -> list[TraceSummary]:
        """The saved traces, newest first (by when each run last wrote its trace); with
        ``details`` each summary holds the run's strategy, question, start and answer."""
        return _traces.list_traces(self, details=details)

    def trace_file(self, trace_id: str) -> Path | None:
        """The file of the saved trace ``trace_id``, or None when there is no such trace."""
        return _traces.trace_file(self, trace_id)

    # -- evidence to take away --------------------------------------------------------------------

    def export(
        self,
        trace: str | Path | None = None,
        *,
        out: str | Path | None = None,
        as_zip: bool = False,
    ) -> ExportResult:
        """Write an answer's evidence (clips cut exactly, frames, a contact sheet per video,
        the cited speech as text/SRT/WebVTT, ``timeline.md``, ``index.json``) to a folder, or
        a zip with ``as_zip`` or an ``out`` ending in ``.zip``
        (:mod:`vidagent.app.export`). ``trace``: a trace file (default: the last answer's).

        Raises:
            UserError: no such trace, no answer in it, or ``out`` is a folder with files in it.
        """
        from vidagent.app.export import export

        return export(self, trace, out=out, as_zip=as_zip)

    def last_answer_trace(self) -> Path:
        """The trace file of the newest run that answered.

        Raises:
            UserError: no saved trace holds an answer.
        """
        from vidagent.app.export import last_answer_trace

        return last_answer_trace(self)

    def sheet(
        self,
        ref: str,
        *,
        t_from: float | None = None,
        t_to: float | None = None,
        count: int = 12,
        out: str | Path | None = None,
        columns: int | None = None,
    ) -> SheetResult:
        """A contact sheet (a grid of ``count`` frames with their times) of a video or of
        ``[t_from, t_to]``, from the index's thumbnails where they cover it, written to
        ``out`` (PNG or JPEG; default ``<name>-sheet.png``) (:mod:`vidagent.app.sheets`)."""
        from vidagent.app.sheets import sheet

        return sheet(self, ref, t_from=t_from, t_to=t_to, count=count, out=out, columns=columns)

    def subtitles(self, ref: str, fmt: Literal["srt", "vtt", "txt"] = "srt") -> str:
        """A video's whole transcript as SubRip, WebVTT or text, with speakers where known.

        Raises:
            UserError: the video has no transcript.
        """
        from vidagent.app.subtitles import video_subtitles

        return video_subtitles(self, ref, fmt)

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
        (:func:`vidagent.app.benchmarks.run_benchmark`; questions on ``executor``'s workers when
        given); returns its ``RunSummary``."""
        from vidagent.app import benchmarks

        return benchmarks.run_benchmark(
            config, self, out=out, progress=progress, on_row=on_row, executor=executor
        )

    def bench_ladder(
        self,
        config: Any,
        frames: Sequence[int],
        *,
        out: Path | None = None,
        progress: bool = False,
        on_row: Callable[[dict[str, Any]], None] | None = None,
        executor: Executor | None = None,
    ) -> list[Any]:
        """A frame-budget ladder: the run once per budget in ``frames``, one run folder per
        rung inside one folder (:func:`vidagent.app.benchmarks.run_ladder`); returns each
        rung's ``RunSummary``."""
        from vidagent.app import benchmarks

        return benchmarks.run_ladder(
            config, frames, self, out=out, progress=progress, on_row=on_row, executor=executor
        )

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
        from vidagent.app import benchmarks

        return benchmarks.score(
            self,
            benchmark,
            data,
            predictions,
            split=split,
            subset=subset,
            ids=ids,
            judge_spec=judge,
            judge_prompt=judge_prompt,
        )

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
        from vidagent.app import benchmarks

        return benchmarks.report(
            self, runs, out=out, plots=plots, resamples=resamples, seed=seed, judge_spec=judge
        )

    def bench_compare(
        self,
        run_a: Path,
        run_b: Path,
        *more: Path,
        against_first: bool = False,
        out: Path | None = None,
        plots: bool = True,
        right_at: float = 0.5,
        resamples: int = 1000,
        seed: int = 0,
        judge: str | None = None,
    ) -> CompareResult:
        """Run folder B against run folder A on the questions both ran without an error: the joint
        correctness table, an exact McNemar test and paired intervals; with ``more`` run
        folders, all of them as one family on the questions every run ran without an error:
        Cochran's Q, and every pair (``against_first``: each against the first) with Holm's
        adjustment over the pairs (:mod:`vidagent.bench.compare`). With ``out``,
        ``compare.json`` and a plot there."""
        from vidagent.app import benchmarks

        return benchmarks.compare(
            self,
            run_a,
            run_b,
            *more,
            against_first=against_first,
            out=out,
            plots=plots,
            right_at=right_at,
            resamples=resamples,
            seed=seed,
            judge_spec=judge,
        )

    def bench_runs(self) -> list[RunInfo]:
        """The benchmark run folders under ``$VIDAGENT_HOME/runs``, by name."""
        from vidagent.app import benchmarks

        return benchmarks.list_runs(self)

    def bench_run_info(self, name: str) -> RunInfo | None:
        """The run folder ``name`` under ``$VIDAGENT_HOME/runs``, or None when there is none.

        Raises:
            RunFolderError: its manifest does not parse.
        """
        from vidagent.app import benchmarks

        return benchmarks.run_info(self, name)
