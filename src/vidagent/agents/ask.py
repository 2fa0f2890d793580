"""``ask``: index what is missing, run a strategy, return the answer with its trace."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.agents.base import Agent, Answer, Question, ToolMode
from vidagent.agents.budget import Budget
from vidagent.agents.trace import Event, Trace
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ConfigError, LibraryError, VideoNotFoundError

if TYPE_CHECKING:
    from vidagent.library import Library
    from vidagent.models.client import Models

#: Strategy name -> "module:class", imported on first use.
STRATEGIES = {
    "dvd": "vidagent.agents.dvd:DVDAgent",
    "videoagent2": "vidagent.agents.videoagent2:VideoAgent2Agent",
}


def strategy_class(name: str) -> type[Agent]:
    """The agent class of a strategy name.

    Raises:
        ConfigError: no such strategy (the message lists them).
    """
    if name not in STRATEGIES:
        raise ConfigError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}")
    module, cls = STRATEGIES[name].split(":")
    found: type[Agent] = getattr(importlib.import_module(module), cls)
    return found


def default_trace_path(settings: Settings, strategy: str) -> Path:
    """``$VIDAGENT_HOME/traces/<time>-<strategy>-<random>.jsonl``."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return settings.home / "traces" / f"{stamp}-{strategy}-{uuid.uuid4().hex[:6]}.jsonl"


def resolve_videos(
    refs: Sequence[str | Path],
    *,
    library: Library,
    settings: Settings,
    models: Models,
    stages: Sequence[str] | None = None,
    progress: bool = False,
) -> list[str]:
    """Video ids for files (indexed through ``stages``, default all, where owed) or references.

    Raises:
        MediaError: a file cannot be used as a video.
        VideoNotFoundError: a reference is neither a file nor a video in the Library.
    """
    from vidagent.ingest import STAGES, index_video

    ids: list[str] = []
    for ref in refs:
        if Path(ref).expanduser().is_file():
            result = index_video(
                ref, library=library, settings=settings, models=models,
                stages=STAGES if stages is None else stages, progress=progress,
            )  # fmt: skip
            if result.error is not None:
                raise result.error
            assert result.video is not None
            ids.append(result.video.video_id)
            continue
        try:
            ids.append(library.resolve(str(ref)))
        except VideoNotFoundError:
            raise VideoNotFoundError(
                f"{ref}: not a video file and not a video in {library.uri}"
            ) from None
    return list(dict.fromkeys(ids))


def ask(
    videos: str | Path | Sequence[str | Path],
    question: str,
    *,
    options: Sequence[str] = (),
    strategy: str = "dvd",
    settings: Settings | None = None,
    library: Library | str | None = None,
    models: Models | None = None,
    budget: Budget | None = None,
    trace: str | Path | bool = True,
    on_event: Callable[[Event], None] | None = None,
    tool_mode: ToolMode = "auto",
    progress: bool = False,
    **strategy_options: Any,
) -> Answer:
    """Answer a question about one or more videos.

    Args:
        videos: video files (first indexed through the stages the strategy reads, where any is
            missing) or ids/names in the Library.
        question: the question.
        options: answer options, for a multiple-choice question.
        strategy: a name in :data:`STRATEGIES`.
        settings: default :func:`~vidagent.config.load_settings()`.
        library: a Library or URI (default: the configured one).
        models: a model hub (default: one from ``settings``, closed afterwards).
        budget: per-question limits (default :class:`Budget`).
        trace: a JSONL path, True for ``$VIDAGENT_HOME/traces/…``, False to keep it in memory.
        on_event: called with every trace event as it happens (live display).
        tool_mode: ``auto``, ``native`` or ``json`` tool calling.
        progress: progress bars while indexing.
        strategy_options: the strategy's own settings (e.g. DVD's ``prefill_global_browse``).

    Returns:
        The :class:`Answer`; ``answer.trace`` holds the run's events.
    """
    from vidagent.library import Library
    from vidagent.models.client import Models

    if not question.strip():
        raise ConfigError("the question is empty")
    cls = strategy_class(strategy)
    settings = settings or load_settings()
    if not isinstance(library, Library):
        library = Library(library or settings.library_uri)
    refs = [videos] if isinstance(videos, (str, Path)) else list(videos)
    if not refs:
        raise ConfigError("name at least one video")
    own = models is None
    hub = models if models is not None else Models(settings)
    try:
        ids = resolve_videos(
            refs, library=library, settings=settings, models=hub, stages=cls.stages,
            progress=progress,
        )  # fmt: skip
        bound = library.manifest.embeddings.get("clip_vectors")
        if bound is not None and bound["spec"] != hub.client("embed").spec:
            raise LibraryError(
                f"the Library's clips were embedded with {bound['spec']}; "
                f"ask with --embed {bound['spec']} (or re-index with the new model)"
            )
        agent = cls(library, hub, budget=budget, tool_mode=tool_mode, **strategy_options)
        path = default_trace_path(settings, strategy) if trace is True else trace or None
        run_trace = Trace(path, listeners=[on_event] if on_event else [])
        return agent.run(Question(question, tuple(ids), tuple(options)), run_trace)
    finally:
        if own:
            hub.close()
