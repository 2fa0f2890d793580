"""Asking questions: a strategy's agent over the session's Library and models, the videos it
reads indexed (and prepared) first, the run traced; grounding an event in time; replaying a
saved run.

The default strategy depends on whether a model endpoint is configured (:func:`pick_strategy`).
"Configured" means the ``llm`` role is anything but the embedded smoke-test model
(:func:`~vidagent.config.is_smoke_test_llm`, SmolLM2-135M): an OpenAI-compatible endpoint, a
GGUF of the user's own, a plugin's model. Without one, ``ask`` and ``ground`` answer with the
no-LLM ``retrieval`` baseline unless a strategy is named, because SmolLM2-135M does not reason:
on the project's offline accuracy set (``benchmarks/offline_accuracy.py``; "Offline accuracy" in
docs/benchmarks/figures.md) retrieval gets 11 of 13 right and DVD with SmolLM2 4 of 13, below the 1 in 3 of
chance. With one, ``ask`` defaults to DVD and ``ground`` to AVI, as they always have. Either
way the result carries a one-line ``notice`` saying so, which every front end shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidagent.app.core import SessionCore
from vidagent.app.indexing import index_file
from vidagent.app.limits import check_options
from vidagent.app.results import AskResult, GroundResult
from vidagent.config import is_smoke_test_llm
from vidagent.exceptions import ConfigError, VideoNotFoundError

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
#: cores). Strategies missing here were not measured there.
MEASURED_OFFLINE = {
    "llamacpp": {
        "dvd": "4 of 13 right (31%, chance 33%), median 25 s a question",
        "videoagent2": "4 of 13 right (31%, chance 33%), median 105 s a question",
    },
    "transformers": {
        "dvd": "6 of 13 right (46%, chance 33%; (A) in 9 of 12), median 27 s a question",
    },
}
RUNTIMES = {"llamacpp": "llama.cpp", "transformers": "transformers"}


def has_endpoint(settings: Settings) -> bool:
    """Whether a real reasoning model is configured: the ``llm`` role is not the embedded
    smoke-test model (SmolLM2-135M)."""
    return not is_smoke_test_llm(settings.spec("llm"))


def pick_strategy(
    settings: Settings, strategy: str | None, task: Task = "answer"
) -> tuple[str, str]:
    """The strategy a question runs with and the one line that says why, or ``""``.

    ``strategy`` None is the default: ``retrieval`` without a model endpoint, else ``dvd`` to
    answer and ``avi`` to ground. An agent strategy named while the ``llm`` is the embedded
    model runs, with a line giving its measured accuracy and time per question.

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
    return strategy, (
        f"{strategy} with the embedded SmolLM2-135M, which does not reason: "
        f"{measured_offline(settings, strategy)}; for a real answer: {HOW_TO_POINT}"
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
    core: SessionCore, refs: Sequence[str | Path], agent: Agent, *, progress: bool = False
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
            result = index_file(core, ref, plan=agent.index_plan(), progress=progress)
            if result.error is not None:
                raise result.error
            assert result.video is not None
            ids.append(result.video.video_id)
            continue
        try:
            ids.append(core.library.resolve(str(ref)))
        except VideoNotFoundError:
            unknown = f"{ref}: not a video file and not a video in {core.library.uri}"
            raise VideoNotFoundError(unknown) from None
    ids = list(dict.fromkeys(ids))
    prepare(core, agent, ids)
    return ids


def prepare(core: SessionCore, agent: Agent, video_ids: Sequence[str]) -> None:
    """Build what the strategy reads besides its stages (VideoAgent2's general context), for
    every video in scope."""
    request = agent.context_request()
    if request is None:
        return
    from vidagent.ingest.context import build_segment_context

    for video_id in video_ids:
        build_segment_context(core.library, core.models, video_id, **request)


def ask(
    core: SessionCore,
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
    task: Task = "answer",
) -> AskResult:
    """Answer a question about one or more videos (the arguments are
    :meth:`Session.ask <vidagent.app.session.Session.ask>`'s)."""
    from vidagent.agents.base import Question
    from vidagent.trace import Trace

    if not question.strip():
        raise ConfigError("the question is empty")
    check_options(options)
    refs = [videos] if isinstance(videos, (str, Path)) else list(videos)
    if not refs:
        raise ConfigError("name at least one video")
    strategy, notice = pick_strategy(core.settings, strategy, task)
    chosen = agent(core, strategy, budget=budget, tool_mode=tool_mode, options=strategy_options)
    ids = resolve_videos(core, refs, chosen, progress=progress)
    core.check_embedding()
    path = core.trace_path(strategy) if trace is True else trace or None
    run_trace: Trace = Trace(path, listeners=[on_event] if on_event else [])
    answer = chosen.run(Question(question, tuple(ids), tuple(options), task), run_trace)
    return AskResult(run_trace, answer, notice)


def ground(
    core: SessionCore,
    video: str | Path,
    event: str,
    *,
    strategy: str | None = None,
    **asked: Any,
) -> GroundResult:
    """Find when ``event`` happens in ``video``: ``[start, end]`` in seconds and its evidence.

    ``strategy`` None: AVI with a model endpoint, else the retrieval baseline (the best-matching
    clip, tightened to the times of the event's spoken words). AVI grounds in its own mode
    (``**Answer:**[s, e]``, refined by boundary detection); another strategy is asked when the
    event happens and its answer's first two times are read. Keyword arguments are
    :func:`ask`'s.
    """
    if not event.strip():
        raise ConfigError("the event description is empty")
    result = ask(core, video, event, strategy=strategy, task="ground", **asked)
    return GroundResult(result.trace, result.answer, result.notice)


def replay(path: str | Path) -> AskResult:
    """A run read back from its trace file; no model is called."""
    from vidagent.trace import Trace

    return AskResult(Trace.load(path))
