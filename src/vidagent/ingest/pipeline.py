"""Runs the ingest stages over videos: idempotent, resumable, with progress and a dry run.

Order: structure (probe, thumbnails, shots, clips) → transcribe → read_text → detect →
speakers (who speaks each transcript segment; after the three that run at once, since it reads
the transcript) → caption → embed → summarize. The optional built-ins, between embed and summarize, run only when
named, by a strategy's index plan or ``vidagent index --stages``: ``embed_frames`` (thumbnails
embedded by the ``image_embed`` model) always, and ``graph`` (AVI's entity graph, an ``llm``
call per window of captions) unless the ``llm`` role can do the work: a plain
``vidagent index`` runs it whenever that role is neither the embedded smoke-test model nor a
scripted test model (:func:`default_stages`). Every stage skips clips whose output its current
fingerprint already made (see :mod:`vidagent.ingest.base`), so the same command finishes an
interrupted run, and changing one role's model redoes only that role's work (plus the embeddings
and summary of text that actually changed).

An installed package adds a stage with an entry point in the ``vidagent.stages`` group (see
:mod:`vidagent.plugins`); it runs when named (``vidagent index --stages NAME``), after the
built-ins.

Videos are independent: a file that cannot be read gets a :class:`~vidagent.exceptions.MediaError`
in its result and the others are indexed; nothing of another video is touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from vidagent.exceptions import ConfigError, IndexStopped, MediaError
from vidagent.ingest.base import IngestContext, Stage, StageEstimate
from vidagent.ingest.sampling import FrameShare, KeptFrames
from vidagent.ingest.speed import RUNS, Speed, learn, machine_speed, measured_work
from vidagent.ingest.structure import StructureReport, index_structure, sampling_of
from vidagent.plugins import Registry

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.library import Library, VideoRecord
    from vidagent.models.client import Models

_BUILT_IN = {
    "transcribe": "vidagent.ingest.transcribe:Transcribe",
    "read_text": "vidagent.ingest.read_text:ReadText",
    "detect": "vidagent.ingest.detect:Detect",
    "speakers": "vidagent.ingest.speakers:Speakers",
    "caption": "vidagent.ingest.caption:Caption",
    "embed": "vidagent.ingest.embed:Embed",
    "embed_frames": "vidagent.ingest.embed_frames:EmbedFrames",
    "graph": "vidagent.ingest.graph:Graph",
    "summarize": "vidagent.ingest.summarize:Summarize",
}
#: Built-in stages that run only when named: what they make only some strategies read, and
#: their role is unset by default (``image_embed``) or too weak by default (``graph``: the
#: embedded SmolLM2 cannot follow AVI's extraction prompt; see :func:`default_stages`).
OPTIONAL: frozenset[str] = frozenset({"embed_frames", "graph"})
#: What indexing runs by default: the built-in stages but the optional ones, in order. A plugin
#: stage runs only when named, so installing a package never changes (or adds cost to) a plain
#: ``vidagent index``.
STAGES: tuple[str, ...] = tuple(name for name in _BUILT_IN if name not in OPTIONAL)
#: Stage name -> a zero-argument factory of the stage (its class), imported on first use: each
#: pulls its own model code. Built-ins in pipeline order, then plugins (``vidagent.stages``),
#: which run after the built-ins; a plugin stage's ``name`` should be its entry point's name.
STAGE_REGISTRY: Registry[Callable[[], Stage]] = Registry("vidagent.stages", "stage", _BUILT_IN)


def default_stages(settings: Settings) -> tuple[str, ...]:
    """What ``vidagent index`` runs when no stages are named: :data:`STAGES`, plus ``graph``
    when the ``llm`` role is a model that can follow AVI's extraction prompt (neither a weak
    reasoner, the embedded SmolLM2, nor a test's scripted model, whose replies are written for
    the stages a test names), so a configured endpoint builds the entity graph once at index
    time and AVI's questions never wait for it."""
    from vidagent.models.registry import declared_capabilities

    caps = declared_capabilities(settings.spec("llm"), "llm")
    if caps.weak_reasoner or caps.scripted:
        return STAGES
    return tuple(n for n in _BUILT_IN if n not in OPTIONAL or n == "graph")


def stage_names() -> tuple[str, ...]:
    """Every stage ``stages=`` accepts, in the order they run: the built-ins (:data:`STAGES`
    and the :data:`OPTIONAL` ones), then plugins."""
    return STAGE_REGISTRY.names()


#: Stages that read neither the transcript nor each other's output. With ``overlap=True`` a run
#: of two or more of them in a row runs at once, each in its own thread, while a further thread
#: loads the weights of the stages after them (the embedder builds its OpenVINO graph, ~0.4 s).
#: Whisper (CTranslate2), PP-OCR (OpenVINO or onnxruntime) and OpenCV leave the GIL while they
#: compute, so the threads share the cores: on the narrated 3-minute clip and 2 cores the three
#: stages take 13-14 s at once.
INDEPENDENT: frozenset[str] = frozenset({"transcribe", "read_text", "detect"})
#: Stages whose output no later stage reads: with ``overlap=True`` each runs in a thread beside
#: the stages after it (speaker labels go on the transcript rows, which caption, embed and
#: summarize read only for their text), and the run waits for it before it ends. On 2 cores
#: that took the voice encoder's 1.9 s for 20 minutes of video off the run's wall time.
BESIDE: frozenset[str] = frozenset({"speakers"})


def make_stage(name: str, **options: Any) -> Stage:
    """A fresh stage object by name, its constructor given ``options``.

    Raises:
        ConfigError: no such stage (the message lists them), a plugin stage that fails to
            import, or a factory that makes no :class:`~vidagent.ingest.base.Stage`.
    """
    stage = STAGE_REGISTRY.load(name)(**options)
    if not isinstance(stage, Stage):
        raise ConfigError(f"stage {name!r} made a {type(stage).__name__}, not an ingest Stage")
    return stage


@dataclass
class StageRun:
    stage: str
    clips: int
    #: wall seconds from its start to its end
    seconds: float
    note: str = ""
    #: it ran at the same time as another stage (:data:`INDEPENDENT`, :data:`BESIDE`): its
    #: seconds overlap theirs, and the run's wall time is less than their sum
    at_once: bool = False


@dataclass
class IndexResult:
    """What indexing one path did, or why it could not."""

    path: Path
    video: VideoRecord | None = None
    structure: StructureReport | None = None
    stages: list[StageRun] = field(default_factory=list)
    error: MediaError | None = None
    #: Wall seconds of the whole run, where :func:`index_path` measured it.
    wall: float | None = None
    #: What the user should know of the run (a file that changed while it was indexed).
    warnings: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """Wall seconds where :func:`index_path` measured them (overlapping stages count once);
        otherwise, for a result assembled from stage-by-stage runs, their sum."""
        if self.wall is not None:
            return self.wall
        base = self.structure.seconds if self.structure else 0.0
        return base + sum(s.seconds for s in self.stages)


def _bar(desc: str, total: int, enabled: bool) -> tqdm:
    return tqdm(
        total=total,
        desc=desc,
        unit="clip",
        leave=False,
        disable=not enabled,
        file=sys.stderr,
        dynamic_ncols=True,
    )


#: Asked between clips whether indexing should stop (:func:`index_path`).
Stop = Callable[[], bool]


class _Stoppable:
    """A stage's progress bar that stops the stage between clips: each stage counts its
    finished clips on it, so after a count, when ``should_stop`` says so, the stage writes what
    it finished (:meth:`~vidagent.ingest.base.Stage.flush`) and :class:`IndexStopped` ends it."""

    def __init__(self, bar: tqdm, stage: Stage, ctx: IngestContext, should_stop: Stop) -> None:
        self.bar, self.stage, self.ctx, self.should_stop = bar, stage, ctx, should_stop

    def update(self, n: float = 1) -> None:
        self.bar.update(n)
        if self.should_stop():
            self.stage.flush(self.ctx)
            raise IndexStopped()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bar, name)


def run_stage(
    stage: Stage, ctx: IngestContext, *, progress: bool = False, should_stop: Stop | None = None
) -> StageRun:
    """Run one stage on the clips it still owes; record it in the video's stage map. With
    ``should_stop``, the stage stops after the clip at which it says so, having written what it
    finished, with :class:`~vidagent.exceptions.IndexStopped`."""
    started = time.perf_counter()
    pending = stage.pending(ctx)
    if pending:
        with _bar(f"{ctx.video.name[:24]} {stage.name}", len(pending), progress) as bar:
            counted: Any = bar if should_stop is None else _Stoppable(bar, stage, ctx, should_stop)
            stage.start()
            stage.run(ctx, pending, counted)
            stage.flush(ctx)
    note = getattr(stage, "note", "")
    info: dict[str, Any] = {"model": stage.fingerprint(ctx.settings)}
    if note:
        info["note"] = note
    stored = ctx.video.stages.get(stage.name, {})
    # A stage that had nothing to do keeps its record: the note of the run that did the work
    # and its time (a rewrite was a commit per stage for every question about a file, and
    # changed what the record's readers key on), unless its model or what it says now differ.
    unchanged = stored.get("model") == info["model"] and note in ("", stored.get("note"))
    if pending or not unchanged:
        info["at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        ctx.video = ctx.library.set_stage(ctx.video.video_id, stage.name, info)
    return StageRun(stage.name, len(pending), time.perf_counter() - started, note)


def index_path(
    path: str | Path,
    *,
    library: Library,
    settings: Settings,
    models: Models,
    stages: Sequence[str] = STAGES,
    progress: bool = False,
    on_stage: Callable[[StageRun], None] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    overlap: bool = True,
    before_stage: Callable[[str], None] | None = None,
    should_stop: Stop | None = None,
) -> IndexResult:
    """Index one file through ``stages``; media errors are returned, not raised.

    Args:
        on_stage: called with each stage's :class:`StageRun` as it ends, in stage order.
        before_stage: called with a stage's name just before it starts: ``"structure"`` first,
            then each of ``stages`` (those that run at once, one after another before they
            start). What it raises stops the run there and propagates: the stages that ended
            have recorded their work, so the same call later resumes with what is left and
            writes nothing twice. A server cancels a job this way.
        should_stop: asked before each stage and after each clip a stage finishes; once it says
            so, every running stage writes the clips it finished and stops, and the run raises
            :class:`~vidagent.exceptions.IndexStopped` (resumed as above). An exception in the
            calling thread (Ctrl-C's ``KeyboardInterrupt``) stops the stages running in threads
            the same way, rather than wait for them to end.
        options: constructor arguments by stage name (``{"read_text": {"gate": False}}``).
        overlap: run consecutive :data:`INDEPENDENT` stages at once, each in a thread; the
            stage after them waits for all. Their :class:`StageRun` come in stage order, and
            their seconds overlap. The structure pass then also keeps the frames that OCR and
            detection sample (:class:`~vidagent.ingest.sampling.KeptFrames`), so they decode
            nothing; where it could not, stages running at once share one decode
            (:class:`~vidagent.ingest.sampling.FrameShare`). A stage of :data:`BESIDE` runs
            in a thread beside the stages after it; its :class:`StageRun` still comes at its
            place in stage order, and ``on_stage`` hears of it and of the stages after it, in
            that order, once it has ended.
    """
    from vidagent.library.rows import content_id

    path = Path(path).expanduser()
    try:
        video_id = content_id(path)
    except OSError:  # the structure pass says what is wrong with it
        video_id = ""
    with library.indexing(video_id) if video_id else contextlib.nullcontext(), RUNS.run() as run:
        cpu = time.process_time()
        result = _index_path(
            path, library, settings, models, stages, progress, on_stage, options, overlap,
            before_stage, should_stop,
        )  # fmt: skip
        if RUNS.alone(run) and not options:
            try:
                _learn_speed(result, settings, stages, time.process_time() - cpu)
            except Exception:  # a plugin stage without an estimate, a file gone: the run stands
                log.debug("this run taught nothing of the CPU's speed", exc_info=True)
    return result


def _learn_speed(
    result: IndexResult, settings: Settings, stages: Sequence[str], used_cpu: float
) -> None:
    """Teach this CPU's speed by a complete run (:mod:`vidagent.ingest.speed`): the structure
    pass decoded the video, every stage ran over every clip (or over none, where its estimate
    foresaw no work), and all of it is measured offline work."""
    done = result.structure
    if result.error is not None or done is None or done.reused or not done.clips:
        return
    if len(result.stages) != len(stages) or any(
        r.clips not in (0, done.clips) for r in result.stages
    ):
        return
    estimate = estimate_path(result.path, settings, stages, scaled=False)
    rows = {r.stage: r for r in estimate.stages}
    if any(not r.clips and rows[r.stage].seconds for r in result.stages):
        return  # a stage the estimate counts did nothing: not the work it counts
    worked = {"structure"} | {r.stage for r in result.stages if r.clips}
    estimated = measured_work(estimate.stages, worked)
    if estimated is not None:
        learn(settings, estimated, used_cpu)


def _index_path(
    path: Path,
    library: Library,
    settings: Settings,
    models: Models,
    stages: Sequence[str],
    progress: bool,
    on_stage: Callable[[StageRun], None] | None,
    options: Mapping[str, Mapping[str, Any]] | None,
    overlap: bool,
    before_stage: Callable[[str], None] | None,
    should_stop: Stop | None,
) -> IndexResult:
    from vidagent.models.cpu import limit_malloc_arenas

    limit_malloc_arenas()  # ingest's many threads otherwise keep 0.4 GB an hour of frees
    started = time.perf_counter()
    result = IndexResult(path)
    options = options or {}
    staged = [make_stage(name, **options.get(name, {})) for name in stages]
    grids = [grid for stage in staged if (grid := stage.frame_grid())]
    # The structure pass keeps the frames OCR and detection will sample, where they overlap.
    keep = KeptFrames(*grids[0]) if overlap and grids else None
    halt = threading.Event()  # set when the calling thread raises: the stages' threads stop

    def stop() -> bool:
        return halt.is_set() or (should_stop is not None and should_stop())

    def starting(name: str) -> None:
        if before_stage is not None:
            before_stage(name)
        if stop():
            raise IndexStopped()

    starting("structure")
    try:
        result.structure = index_structure(library, path, settings, keep)
    except MediaError as e:
        result.error = e
        result.wall = time.perf_counter() - started
        return result
    ctx = IngestContext(library, models, settings, result.structure.video, path)

    beside = ThreadPoolExecutor(1, thread_name_prefix="ingest-beside") if overlap else None
    aside: list[tuple[int, Future[StageRun]]] = []  # (position among the runs, its run)

    def record(run: StageRun) -> None:
        result.stages.append(run)
        if on_stage and not aside:  # after a stage running beside, told in order at the end
            on_stage(run)

    def run(stage: Stage, own: IngestContext) -> StageRun:
        try:
            return run_stage(stage, own, progress=progress, should_stop=stop)
        finally:
            if own.frames is not None:
                own.frames.close()

    try:
        last_sampling = max((k for k, stage in enumerate(staged) if stage.frame_grid()), default=-1)
        i = 0
        while i < len(stages):
            if keep is not None and i > last_sampling:
                keep.clear()  # no stage left samples frames: not held through caption to summarize
            j = i
            while overlap and j < len(stages) and stages[j] in INDEPENDENT:
                j += 1
            # Stages that sample frames take them through a share: from the structure pass where
            # it kept them, else from one decode for all the stages running at once.
            share = FrameShare(kept=keep)
            if j - i < 2:
                alone = ctx
                starting(stages[i])
                if staged[i].frame_grid():
                    alone = dataclasses.replace(ctx, frames=share.ticket())
                if beside is not None and stages[i] in BESIDE and i + 1 < len(stages):
                    own_ctx = dataclasses.replace(alone)  # run_stage rebinds its video
                    aside.append((len(result.stages), beside.submit(run, staged[i], own_ctx)))
                elif any(not f.done() for _, f in aside):  # beside a stage still running
                    record(dataclasses.replace(run(staged[i], alone), at_once=True))
                else:
                    record(run(staged[i], alone))
                    ctx.video = alone.video
                i += 1
                continue
            later = [r for stage in staged[j:] if (r := stage.role)]
            for name in stages[i:j]:
                starting(name)
            with ThreadPoolExecutor(j - i + 2, thread_name_prefix="ingest") as pool:
                # Each stage has its own context: run_stage rebinds ctx.video after each stage.
                own = [
                    dataclasses.replace(ctx, frames=share.ticket() if stage.frame_grid() else None)
                    for stage in staged[i:j]
                ]
                runs = [pool.submit(run, st, c) for st, c in zip(staged[i:j], own, strict=True)]
                warm = pool.submit(models.warm, later)
                # Weights that are no role's (the voice encoder) load in the same spare time.
                warm_stages = [pool.submit(stage.warm, ctx) for stage in staged[j:]]
                try:
                    for future in runs:
                        record(dataclasses.replace(_heard(future), at_once=True))
                except (KeyboardInterrupt, SystemExit):
                    halt.set()  # before leaving the pool waits for its stages
                    raise
                warm.result()
                for loading in warm_stages:
                    loading.result()
            ctx.video = library.get_video(ctx.video.video_id)  # with their stage entries
            i = j
        for k, (at, future) in enumerate(aside):  # in stage order, at their places
            ran = _heard(future)
            after = result.stages[at + k :]  # those that started while it ran are at once
            result.stages.insert(
                at + k, dataclasses.replace(ran, at_once=any(r.at_once for r in after))
            )
        if aside and on_stage is not None:
            for told in result.stages[aside[0][0] :]:
                on_stage(told)
    except (KeyboardInterrupt, SystemExit):
        halt.set()  # the stage running beside stops too
        raise
    finally:
        if beside is not None:
            beside.shutdown(wait=True)
        if keep is not None:
            keep.clear()  # its file of frames goes now, also when a stage failed
    result.video = library.get_video(ctx.video.video_id)
    result.wall = time.perf_counter() - started
    return result


def _heard(future: Future[StageRun]) -> StageRun:
    """``future``'s run, waited for a quarter second at a time: a thread blocked in one long
    wait does not run Python's signal handlers (the signal may reach another thread), so Ctrl-C
    would be heard only when the stage ended."""
    while True:
        try:
            return future.result(timeout=0.25)
        except TimeoutError:
            continue


#: Wall seconds every indexed video costs beside its per-unit work (:func:`estimate_path`).
PER_VIDEO_SECONDS = 3.0


@dataclass
class IndexEstimate:
    """What indexing one file would spend, stage by stage."""

    path: Path
    duration: float
    clips: int
    stages: list[StageEstimate]
    #: how the offline stages' seconds were scaled to this CPU (:mod:`vidagent.ingest.speed`)
    speed: Speed = field(default_factory=Speed)


def estimate_path(
    path: str | Path,
    settings: Settings,
    stages: Sequence[str] = STAGES,
    library: Library | None = None,
    *,
    scaled: bool = True,
) -> IndexEstimate:
    """What indexing ``path`` would spend, from a probe alone: nothing is decoded or called.
    With a ``library`` that holds the video already, each stage may refine its figures from
    what is stored (:meth:`~vidagent.ingest.base.Stage.refine`), and what is already done is
    not counted: a video cut with the same sampling is not decoded again, and a stage with no
    clip pending (as the run would find them) costs nothing, one with some pending its share,
    up to the first stage with work (a stage after it may find its inputs changed); a video
    with nothing pending costs nothing at all (its per-video seconds are commits and loads that
    a run finding it up to date does not make). The
    offline stages' seconds are scaled to this CPU's speed as its runs measured it
    (:func:`~vidagent.ingest.speed.machine_speed`; ``scaled=False``: the reference figures)."""
    from vidagent.library.store import content_id
    from vidagent.media import probe, uniform_clips

    info = probe(path)
    clips = len(uniform_clips(info.duration, settings.clip_seconds))
    frames = int(info.duration * settings.sample_fps)
    # Every frame is decoded (shots): 0.0025 CPU seconds per megapixel (MEASURED_ON), plus
    # what every video pays whatever its length (the stages' commits, the embedder's load):
    # a 1-minute clip took 9.2 s where the per-unit figures alone said 5 s.
    pixels = info.duration * info.fps * info.width * info.height / 1e6
    rows = [
        StageEstimate("structure", None, "decoder", frames=frames).measured(
            pixels * 0.0025, PER_VIDEO_SECONDS
        )
    ]
    known = content_id(path) if library is not None else ""
    done: IngestContext | None = None  # what the Library holds of the video, if anything
    if library is not None and library.has_video(known):
        video = library.get_video(known)
        if video.stages.get("structure", {}).get("sampling") == sampling_of(settings):
            rows[0] = StageEstimate("structure", None, "decoder").measured(wall=PER_VIDEO_SECONDS)
            rows[0].notes.append("already cut: not decoded again")
            # a stage's pending() reads the Library and the settings, never a model
            done = IngestContext(library, None, settings, video, Path(path))  # type: ignore[arg-type]
    for name in stages:
        stage = make_stage(name)
        row = stage.estimate(info, clips, settings)
        if library is not None and library.has_video(known):
            row = stage.refine(row, library, known, settings)
        if done is not None:
            owed = len(stage.pending(done))
            if owed < clips:
                row = _share(row, owed / clips if clips else 0.0)
            if owed:
                done = None  # the stages after this one may find their inputs changed
        rows.append(row)
    if done is not None:  # nothing pending at all: the run finds it up to date at once
        rows[0] = StageEstimate("structure", None, "decoder").measured(wall=0.0)
        rows[0].notes.append("up to date: nothing to do")
    speed = machine_speed(settings) if scaled else Speed()
    if speed.factor != 1.0:
        rows = [
            dataclasses.replace(r, seconds=r.seconds * speed.factor) if r.cpu_seconds else r
            for r in rows
        ]
    return IndexEstimate(Path(path), info.duration, clips, rows, speed)


def _share(row: StageEstimate, part: float) -> StageEstimate:
    """``row`` for ``part`` of its clips (0: nothing left to do)."""
    if part == 0:
        return StageEstimate(row.stage, row.role, row.spec, notes=["up to date"])
    return dataclasses.replace(
        row,
        calls=math.ceil(row.calls * part),
        frames=round(row.frames * part),
        input_tokens=round(row.input_tokens * part),
        output_tokens=round(row.output_tokens * part),
        seconds=row.seconds * part,
        notes=[*row.notes, f"{part:.0%} of the clips left to do"],
    )
