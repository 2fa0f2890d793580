"""Asking questions: a strategy's agent over the session's Library and models, the videos it
reads indexed (and prepared) first, the run traced; grounding an event in time; replaying a
saved run.

The default strategy depends on whether a model endpoint is configured (:func:`pick_strategy`).
"Configured" means the ``llm`` role is anything but the embedded smoke-test model
(a weak reasoner by its capabilities: SmolLM2-135M): an OpenAI-compatible endpoint, a
GGUF of the user's own, a plugin's model. Without one, ``ask`` and ``ground`` answer with the
no-LLM ``retrieval`` baseline unless a strategy is named, because SmolLM2-135M does not reason:
on the project's offline accuracy set (``benchmarks/offline_accuracy.py``; "Offline accuracy" in
docs/benchmarks/figures.md) retrieval gets 11 of 13 right and DVD with SmolLM2 5 of 13, about the 1 in 3 of
chance. With one, ``ask`` defaults to DVD and ``ground`` to AVI, as they always have. Either
way the result carries a one-line ``notice`` saying so, which every front end shows.

A question is resolved once, into an :class:`AskPlan` (:func:`plan_ask`): the question and its
options checked, the strategy picked with its notice, the strategy's options checked by building
its agent, the trace path chosen. Every front end makes the plan, shows what it needs of it (the
HTTP API answers with the trace id at once, the CLI prints the notice) and runs it; the plan
picks the result type, and a caller that may cancel (the HTTP API's jobs) passes ``should_stop``
to :meth:`AskPlan.run`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidagent.app.core import SessionCore
from vidagent.app.indexing import index_file
from vidagent.app.limits import check_options
from vidagent.app.results import AskResult, GroundResult
from vidagent.app.window import TimeWindow, resolve_window, windowed
from vidagent.exceptions import (
    AmbiguousVideoError,
    ConfigError,
    UserError,
    VideoNotFoundError,
    storage_error,
)

if TYPE_CHECKING:
    from vidagent.agents.base import Agent, ToolMode
    from vidagent.budget import Budget
    from vidagent.config import Settings
    from vidagent.trace import Event

Task = Literal["answer", "ground"]

#: How to point the agents at a real model, in one line's worth of words.
HOW_TO_POINT = (
    "--llm openai:MODEL or VIDAGENT_LLM=openai:MODEL (a local server: VIDAGENT_OPENAI_BASE_URL; "
    "docs/configuration.md)"
)
#: What each agent strategy measured with the embedded SmolLM2-135M on the offline accuracy set,
#: per runtime (13 three-option questions about the three real test clips;
#: docs/benchmarks/figures.md "Offline accuracy": evidence first on, a 1-step budget, 2 CPU
#: cores). Strategies missing here were not measured there. Each llama.cpp figure was measured
#: with flash attention on and evidence first reading a describer caption's values; VideoAgent2's
#: after it stopped building its general context again for every question (its time before
#: counted a rebuild: a median 105 s).
MEASURED_OFFLINE = {
    "llamacpp": {
        "dvd": "5 of 13 right (38%, chance 33%; (A) in 10 of 13), median 32 s a question",
        "videoagent2": "3 of 13 right (23%, chance 33%; (A) in 9 of 10 answered), "
        "median 73 s a question",
    },
    "transformers": {
        "dvd": "7 of 13 right (54%, chance 33%; (A) in 8 of 12), median 74 s a question",
    },
}
RUNTIMES = {"llamacpp": "llama.cpp", "transformers": "transformers"}


def has_endpoint(settings: Settings) -> bool:
    """Whether a real reasoning model is configured: the ``llm`` role is not the embedded
    smoke-test model (SmolLM2-135M)."""
    from vidagent.models.registry import declared_capabilities

    return not declared_capabilities(settings.spec("llm"), "llm").weak_reasoner


def pick_strategy(
    settings: Settings, strategy: str | None, task: Task = "answer"
) -> tuple[str, str]:
    """The strategy a question runs with and the one line that says why, or ``""``.

    ``strategy`` None is the default: ``retrieval`` without a model endpoint, else ``dvd`` to
    answer and ``avi`` to ground. An agent strategy named while the ``llm`` is the embedded
    model runs, with a line giving its measured accuracy and time per question (answering: the
    offline accuracy set has no grounding questions).

    Raises:
        ConfigError: an unknown strategy (the message names the strategies).
    """
    if strategy is not None:
        check_strategy(strategy)
    endpoint = has_endpoint(settings)
    if strategy is None:
        if endpoint:
            return ("avi" if task == "ground" else "dvd"), ""
        return "retrieval", (
            "no model endpoint is configured: questions are answered from the index by the "
            "retrieval baseline (no LLM); the agent strategies need a real model: " + HOW_TO_POINT
        )
    if endpoint or strategy == "retrieval":
        return strategy, ""
    measured = (
        "grounding is not measured with it offline"
        if task == "ground"
        else measured_offline(settings, strategy)
    )
    return strategy, (
        f"{strategy} with the embedded SmolLM2-135M, which does not reason: {measured}; "
        f"for a real answer: {HOW_TO_POINT}"
    )


def measured_offline(settings: Settings, strategy: str) -> str:
    """What ``strategy`` measured on the offline accuracy set with the embedded llm on the
    runtime ``settings`` name (:data:`MEASURED_OFFLINE`), beside the retrieval baseline."""
    runtime = settings.spec("llm").split(":", 1)[0]
    measured = MEASURED_OFFLINE.get(runtime, {}).get(strategy, "not measured")
    return (
        f"{measured} on the offline accuracy set with SmolLM2 on {RUNTIMES.get(runtime, runtime)} "
        "(benchmarks/offline_accuracy.py; retrieval: 11 of 13, 0.2 s)"
    )


def strategies() -> tuple[str, ...]:
    """Every strategy name: the built-ins and those installed packages register."""
    from vidagent.agents.strategies import STRATEGIES

    return STRATEGIES.names()


def check_strategy(name: str) -> None:
    """Raise :class:`~vidagent.exceptions.ConfigError` (naming the strategies) for an
    unknown strategy."""
    from vidagent.agents.strategies import strategy_class

    strategy_class(name)


def agent(
    core: SessionCore,
    strategy: str = "dvd",
    *,
    budget: Budget | None = None,
    tool_mode: ToolMode = "auto",
    options: Any = None,
    published: bool = False,
) -> Agent:
    """A strategy's agent over the session's Library and models (options validated);
    ``published``: as a paper's configuration (the benchmark harness: abstention recorded, not
    applied; no critic).

    Raises:
        ConfigError: an unknown strategy, or an unknown or ill-typed option.
    """
    from vidagent.agents.strategies import strategy_class

    cls = strategy_class(strategy)
    return cls(
        core.library,
        core.models,
        budget=budget,
        tool_mode=tool_mode,
        options=options,
        published=published,
    )


def resolve_videos(
    core: SessionCore,
    refs: Sequence[str | Path],
    agent: Agent,
    *,
    progress: bool = False,
    prepared: bool = True,
) -> list[str]:
    """Video ids for files (indexed through the agent's stages where owed) or references,
    with whatever the agent needs built before a question (unless not ``prepared``: a run then
    builds it, :func:`prepare`).

    A video of the Library named by reference whose index stopped before a stage the strategy
    reads (``vidagent index`` stopped part way, or run with fewer ``--stages``) is indexed on
    from its file, as the file named by its path would be: asked as it stood, its question was
    answered from nothing, in silence.

    A file a watch reads (``vidagent watch FILE``) is its stream's video, not indexed again.

    Raises:
        MediaError: a file cannot be used as a video.
        VideoNotFoundError: a reference is neither a file nor a video in the Library.
        AmbiguousVideoError: a reference names several videos of the Library.
        UserError: a video's index lacks a stage the strategy reads and its file is gone.
    """
    from vidagent.app.watching import watched_video

    ids: list[str] = []
    for ref in refs:
        if Path(ref).expanduser().is_file():
            # the file a watch reads is its stream (indexed it as a video of its own: a stale
            # copy answered, and the file's name then named two videos)
            live = watched_video(core, Path(ref).expanduser())
            ids.append(live if live is not None else _indexed(core, ref, agent, progress))
            continue
        try:
            video_id = core.library.resolve(str(ref))
        except AmbiguousVideoError:
            raise
        except VideoNotFoundError:
            unknown = f"{ref}: not a video file and not a video in {core.library.uri}"
            raise VideoNotFoundError(unknown) from None
        ids.append(_index_owed(core, video_id, agent, progress))
    ids = list(dict.fromkeys(ids))
    if prepared:
        prepare(core, agent, ids)
    return ids


def _indexed(core: SessionCore, path: str | Path, agent: Agent, progress: bool) -> str:
    """The id of the video file at ``path``, indexed through the agent's stages where owed."""
    result = index_file(core, path, plan=agent.index_plan(), progress=progress)
    if result.error is not None:
        raise result.error
    assert result.video is not None
    return result.video.video_id


def _index_owed(core: SessionCore, video_id: str, agent: Agent, progress: bool) -> str:
    """``video_id``, indexed on from its file where a stage the agent reads never ended on it
    (:func:`resolve_videos`); a stream (``vidagent watch``) is its watcher's to index."""
    from vidagent.library.rows import source_problem

    video = core.library.get_video(video_id)
    owed = [s for s in agent.index_plan().stages_run(core.settings) if s not in video.stages]
    if not owed or "watch" in video.stages:
        return video_id
    problem = source_problem(video)
    if problem is not None:
        raise UserError(
            f"{video.name}: its index has no {', '.join(owed)} (indexing stopped before, or "
            f"ran without them), which {agent.name} reads, and its file {video.source} "
            f"{problem}: index the video again from its file"
        )
    return _indexed(core, video.source, agent, progress)


def prepare(core: SessionCore, agent: Agent, video_ids: Sequence[str]) -> None:
    """Build what the strategy reads besides its stages (VideoAgent2's general context), for
    every video in scope."""
    request = agent.context_request()
    if request is None:
        return
    from vidagent.ingest.context import build_segment_context

    for video_id in video_ids:
        build_segment_context(core.library, core.models, video_id, **request)


@dataclass(frozen=True)
class AskPlan:
    """A question resolved once and ready to run: what every front end shows before the run
    (the strategy, its notice, the trace path) and the agent that answers.

    Made by :func:`plan_ask` (:meth:`Session.plan_ask <vidagent.app.session.Session.plan_ask>`);
    nothing is indexed or asked until :meth:`run`. Run a plan once: a second run would write
    over its trace file.

    Attributes:
        core: the session the plan was made in (its Library, models and settings).
        strategy: the strategy that answers (the default resolved).
        notice: one line on why that strategy answers and what it measured offline (``""``:
            nothing to say); every front end shows it.
        trace_path: where the run's trace is written (None: kept in memory).
        agent: the strategy's agent, its options checked.
        question: the question (or, to ground, the event), checked non-empty.
        videos: the video files or references, resolved (and indexed where owed) by :meth:`run`.
        options: the answer options of a multiple-choice question.
        task: ``answer``, or ``ground`` (the result is then a
            :class:`~vidagent.app.results.GroundResult`).
        progress: progress bars while indexing.
        window: the part of each video the question may see (``--last``, ``--since``,
            ``--until``; :mod:`vidagent.app.window`), resolved on each video's live edge when
            :meth:`run` starts; None: all of it.
    """

    core: SessionCore = field(repr=False, compare=False)
    strategy: str
    notice: str
    trace_path: Path | None
    agent: Agent
    question: str
    videos: tuple[str | Path, ...]
    options: tuple[str, ...] = ()
    task: Task = "answer"
    progress: bool = False
    window: TimeWindow | None = None

    def run(
        self,
        on_event: Callable[[Event], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> AskResult:
        """Index what the strategy reads where owed, build what it prepares, and answer.

        Args:
            on_event: called with every trace event as it happens (live display).
            should_stop: asked before every step and model call; once it says True the run ends
                there, its answer's reason ``stopped``, recorded in the trace (how the HTTP
                API cancels a question).

        Returns:
            An :class:`~vidagent.app.results.AskResult`, or a
            :class:`~vidagent.app.results.GroundResult` when the task is ``ground``.

        Raises:
            MediaError: a file cannot be used as a video.
            VideoNotFoundError: a reference is neither a file nor a video in the Library.
            ConfigError: the window holds nothing of a video, or needs a recording start
                time it has not.
        """
        from vidagent.ingest.speed import RUNS

        with RUNS.run():  # an index run beside it does not teach this CPU's speed
            return self._run(on_event, should_stop)

    def _run(
        self, on_event: Callable[[Event], None] | None, should_stop: Callable[[], bool] | None
    ) -> AskResult:
        from vidagent.agents.base import Question
        from vidagent.trace import Trace

        # What the strategy reads besides the index is built inside the run (Agent.run's
        # prepare): its model calls are the run's, in its trace, totals and budget.
        ids = resolve_videos(
            self.core, self.videos, self.agent, progress=self.progress, prepared=False
        )
        self.core.check_embedding()
        # The live edges are read here, once: the run sees one window however the videos grow.
        answering = self.agent
        if self.window is not None:
            answering = answering.within(windowed(self.core.library, ids, self.window))
        try:
            run_trace: Trace = Trace(self.trace_path, listeners=[on_event] if on_event else [])
        except OSError as e:  # a refused write names --trace, not the Library's options
            assert self.trace_path is not None  # a trace in memory writes nothing
            refused = storage_error(e, self.trace_path.parent, "--trace")
            if refused is None:
                raise
            raise refused from None
        asked = Question(self.question, tuple(ids), self.options, self.task)
        answer = answering.run(
            asked,
            run_trace,
            should_stop=should_stop,
            prepare=lambda: prepare(self.core, self.agent, ids),
        )
        result = GroundResult if self.task == "ground" else AskResult
        return result(run_trace, answer, self.notice)


def plan_ask(
    core: SessionCore,
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
    task: Task = "answer",
    window: TimeWindow | None = None,
) -> AskPlan:
    """Resolve a question once (the arguments are
    :meth:`Session.plan_ask <vidagent.app.session.Session.plan_ask>`'s).

    Raises:
        ConfigError: an empty question or event, no video, options that give no choice (too
            many, one, a blank one, one given twice: :func:`check_options`), an unknown
            strategy, an unknown or ill-typed strategy option, or a window that cannot fit a
            video already in the Library (:func:`check_window`).
    """
    if not question.strip():
        raise ConfigError(
            "the event description is empty" if task == "ground" else "the question is empty"
        )
    if isinstance(options, str):  # "abc" is not three options a, b and c
        raise ConfigError("options is one string: give a list of the options' texts")
    if task not in ("answer", "ground"):
        raise ConfigError(f"task {task!r} is not 'answer' or 'ground'")
    check_options(options)
    refs = (videos,) if isinstance(videos, (str, Path)) else tuple(videos)
    if not refs:
        raise ConfigError("name at least one video")
    if window is not None:
        check_window(core, refs, window)
    strategy, notice = pick_strategy(core.settings, strategy, task)
    chosen = agent(core, strategy, budget=budget, tool_mode=tool_mode, options=strategy_options)
    path = core.trace_path(strategy) if trace is True else Path(trace) if trace else None
    if trace is not True and path is not None:
        from vidagent.trace import check_target

        check_target(path)  # before any work: --trace talk.mp4 would replace the video
    return AskPlan(
        core,
        strategy,
        notice,
        path,
        chosen,
        question,
        refs,
        tuple(options),
        task,
        progress,
        window,
    )


def check_window(core: SessionCore, refs: Sequence[str | Path], window: TimeWindow) -> None:
    """Stop a question whose window cannot fit a video already in the Library (no recording
    start for ``since``/``until``, nothing of it in the window) before anything runs; files
    are checked once indexed, when the plan runs, as a video that grows meanwhile is.

    Raises:
        ConfigError: as :func:`~vidagent.app.window.resolve_window`, naming the video.
    """
    from vidagent.app.watching import watched_video

    if not core.library_exists():
        return
    for ref in refs:
        if Path(ref).expanduser().is_file():
            live = watched_video(core, Path(ref).expanduser())
            if live is None:
                continue
            ref = live  # a watched file: its stream
        try:
            record = core.library.get_video(str(ref))
        except VideoNotFoundError:
            continue  # the run says so, as it does without a window
        resolve_window(window, record)


def ground(
    core: SessionCore,
    video: str | Path,
    event: str,
    *,
    strategy: str | None = None,
    on_event: Callable[[Event], None] | None = None,
    **planned: Any,
) -> GroundResult:
    """Find when ``event`` happens in ``video``: ``[start, end]`` in seconds and its evidence.

    ``strategy`` None: AVI with a model endpoint, else the retrieval baseline (the best-matching
    clip, tightened to the times of the event's spoken words). AVI grounds in its own mode
    (``**Answer:**[s, e]``, refined by boundary detection); another strategy is asked when the
    event happens and its answer's first two times are read. Keyword arguments are
    :func:`plan_ask`'s.
    """
    plan = plan_ask(core, video, event, strategy=strategy, task="ground", **planned)
    result = plan.run(on_event)
    assert isinstance(result, GroundResult)
    return result


def replay(path: str | Path) -> AskResult:
    """A run read back from its trace file; no model is called."""
    from vidagent.trace import Trace

    return AskResult(Trace.load(path))
