"""Indexing files into the Library: one pipeline call per file, whichever front end asks.

``vidagent index``, the HTTP API's index jobs, the MCP ``index_video`` tool, a strategy that
indexes what it reads before a question, and executor workers all run :func:`index_file`: the
ingest pipeline (:func:`vidagent.ingest.pipeline.index_path`) with its overlapped stages and
shared frame decode. Progress and cancellation come from the pipeline's own callbacks
(``before_stage``, ``on_stage``), so a front end never runs stages one at a time itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.app.core import SessionCore
from vidagent.app.results import EstimateReport, IndexReport, ProbeReport
from vidagent.exceptions import ConfigError, MediaError
from vidagent.library.readable import is_readable

if TYPE_CHECKING:
    from vidagent.agents.base import IndexPlan
    from vidagent.ingest.pipeline import IndexResult, StageRun


def stage_names() -> tuple[str, ...]:
    """Every ingest stage after ``structure``, in pipeline order (plugins' included)."""
    from vidagent.ingest.pipeline import stage_names

    return stage_names()


def chosen_stages(names: Sequence[str]) -> tuple[str, ...]:
    """The stages ``names`` asks for, in pipeline order. ``structure`` may be named (it runs
    first whatever is asked, so naming it alone asks for the cut alone); no name at all (an
    unset variable, an empty list: they ran the defaults, or the cut alone) or an unknown one
    is a :class:`~vidagent.exceptions.ConfigError`."""
    known = stage_names()
    named = {name.strip() for name in names if name.strip()}
    if not named:
        raise ConfigError("no stage named: name at least one, or leave them out for the default")
    chosen = named - {"structure"}
    unknown = sorted(chosen.difference(known))
    if unknown:
        raise ConfigError(
            f"unknown stage(s) {', '.join(unknown)}; stages: structure, {', '.join(known)}"
        )
    return tuple(s for s in known if s in chosen)


def default_stages(core: SessionCore) -> tuple[str, ...]:
    """What indexing runs when no stages are named, for these settings (the entity graph
    only with an llm that can extract one)."""
    from vidagent.ingest.pipeline import default_stages

    return default_stages(core.settings)


def probe(path: str | Path) -> ProbeReport:
    """What a file holds as a video (duration, streams), without indexing it."""
    from vidagent.media import probe

    return ProbeReport(probe(path))


def known_video(core: SessionCore, path: str | Path) -> Any:
    """The Library's record of the video whose content is the file at ``path``, or None
    (no Library yet, or this content was never indexed)."""
    from vidagent.library.store import content_id

    if not core.library_exists():
        return None
    library, vid = core.existing_library(), content_id(path)
    return library.get_video(vid) if library.has_video(vid) else None


def index_file(
    core: SessionCore,
    path: str | Path,
    *,
    stages: Sequence[str] | None = None,
    progress: bool = False,
    plan: IndexPlan | None = None,
    on_stage: Callable[[StageRun], None] | None = None,
    before_stage: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> IndexResult:
    """Index one file through ``stages`` (default :func:`default_stages`) or a strategy's
    ``plan`` (its stages under its index settings) in one pipeline call; a media error is in
    the result.

    Args:
        on_stage: called with each stage's ``StageRun`` as it ends.
        before_stage: called with each stage's name before it starts (``structure`` first);
            what it raises stops the run there and propagates, and indexing the file again
            resumes with the stages left (see :func:`vidagent.ingest.pipeline.index_path`).
        should_stop: asked before each stage and after each clip a stage finishes; once it is
            true the stages write what they finished and stop, and ``IndexStopped`` is raised.
    """
    from vidagent.ingest import index_path
    from vidagent.ingest.pipeline import default_stages

    settings = core.settings
    if plan is not None:
        stages = plan.stages_run(settings)
        settings = settings.model_copy(update=dict(plan.settings))
    before = _file_state(path)
    result = index_path(
        path,
        library=core.library,
        settings=settings,
        models=core.models,
        stages=default_stages(settings) if stages is None else stages,
        progress=progress,
        on_stage=on_stage,
        before_stage=before_stage,
        should_stop=should_stop,
    )
    after = _file_state(path)
    if result.error is None and result.video is not None:
        result.warnings += _earlier_indexes(core, path, result.video.video_id)
    if result.error is None and before is not None and after != before:
        grew = f"{before[0]:,} -> {after[0]:,} bytes" if after else "it is gone"
        result.warnings.append(
            f"{path} changed while it was indexed ({grew}): a recording still being written? "
            "The index holds it as it stood when indexing began; index it again once it is "
            "complete, or follow it as it grows with `vidagent watch`"
        )
    return result


def _earlier_indexes(core: SessionCore, path: str | Path, video_id: str) -> list[str]:
    """A warning naming the other videos of the Library indexed from this path: the file was
    rewritten since (a recording indexed while it was still being written), and that index
    stays, so the path's name now names two videos."""
    from vidagent.timecode import hms

    source = str(Path(path).expanduser().resolve())
    others = [
        v for v in core.library.list_videos() if v.source == source and v.video_id != video_id
    ]
    if not others:
        return []
    named = ", ".join(f"{v.video_id} ({hms(v.duration)})" for v in others)
    first = others[0].video_id
    said = (
        f"{path} was indexed before with other content ({named}), and that index stays: "
        f"`vidagent remove {first}` if it was of this file before it was rewritten"
    )
    return [said]


def _file_state(path: str | Path) -> tuple[int, int] | None:
    """A local file's size and modification time (ns), ``None`` where it cannot be read."""
    try:
        st = Path(path).expanduser().stat()
    except (OSError, ValueError):
        return None
    return st.st_size, st.st_mtime_ns


def index_files(
    core: SessionCore,
    paths: Sequence[str | Path],
    *,
    stages: Sequence[str] | None = None,
    progress: bool = False,
) -> Iterator[IndexReport]:
    """Index each file in this process, one after another, yielding a report per file as it
    finishes; a file that cannot be used gets a report with its error, the others go on."""
    for path in paths:
        result = index_file(core, path, stages=stages, progress=progress)
        if result.error is not None:
            yield IndexReport(Path(path), error=str(result.error))
            continue
        yield index_report(core, Path(path), result)


def index_report(core: SessionCore, path: Path, result: IndexResult) -> IndexReport:
    """What indexing ``path`` built, read back from the Library: clips, speech, on-screen
    text, people, the summary."""
    assert result.structure is not None
    library = core.library
    video = result.video or result.structure.video
    clips = library.clips(video.video_id)
    speech = " ".join(c.transcript for c in clips if c.transcript).strip()
    read = dict.fromkeys(x.strip() for c in clips for x in c.ocr_text.split("\n") if x.strip())
    text = [x for x in read if is_readable(x)]  # the rest stays in the index, unshown
    detected = any(c.detect_model for c in clips)
    people = sum(1 for c in clips if '"person"' in c.detections) if detected else None
    summary = library.artifact(video.video_id, "summary", "global")
    return IndexReport(
        path,
        result=result,
        speech=speech,
        on_screen=text,
        on_screen_hidden=len(read) - len(text),
        people_clips=people,
        clips=len(clips),
        summary=summary.text if summary else "",
        library=library.uri,
    )


def estimate(
    core: SessionCore, paths: Sequence[str | Path], *, stages: Sequence[str] | None = None
) -> Iterator[EstimateReport]:
    """What indexing each file would spend; nothing is decoded, called or written."""
    from vidagent.ingest import estimate_path
    from vidagent.ingest.pipeline import default_stages
    from vidagent.models.client import BATCH_DISCOUNT
    from vidagent.models.prices import call_cost
    from vidagent.models.registry import provider_capabilities

    settings = core.settings
    # a video indexed before lets a stage refine its figures (repeated pictures); never created
    library = core.existing_library() if core.library_exists() else None
    for path in paths:
        try:
            chosen = default_stages(settings) if stages is None else stages
            found = estimate_path(path, settings, chosen, library)
        except MediaError as e:
            yield EstimateReport(Path(path), error=str(e))
            continue
        costs: list[float | None] = []  # None: no price known (configured or genai-prices')
        for r in found.stages:
            # a stage without a model ("decoder") names no spec: it runs here, free
            local = ":" not in r.spec or provider_capabilities(r.spec).local
            cost = call_cost(r.spec, r.input_tokens, r.output_tokens, settings, local=local)
            costs.append(cost * BATCH_DISCOUNT if r.batch and cost is not None else cost)
        yield EstimateReport(Path(path), estimate=found, costs=costs)
