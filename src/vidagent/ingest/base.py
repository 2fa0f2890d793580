"""What every ingest stage shares: its context, its fingerprint, its checkpoints, its estimate.

A stage turns clips into columns of the ``clips`` table (or rows of its own table). Each clip's
output sits next to the stage's *fingerprint* (model spec, plus prompt hash for prompted stages)
in a ``*_model`` column. A clip is pending when its fingerprint differs from the current one, so

- rerunning after a crash redoes only clips whose checkpoint never landed (no duplicates: rows
  are keyed by ``(video_id, clip_index)`` and updated in place);
- changing one role's model makes exactly that stage's clips pending again.

Stages checkpoint with :meth:`Stage.flush`, which writes finished clips in one atomic commit.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from vidagent.prompts import prompt_hash

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.ingest.sampling import FrameTicket
    from vidagent.library import ClipRow, Library, VideoRecord
    from vidagent.media import VideoInfo
    from vidagent.models.client import Models


@dataclass
class IngestContext:
    """Everything a stage may touch for one video."""

    library: Library
    models: Models
    settings: Settings
    video: VideoRecord
    path: Path
    #: The stage's ticket to share frame decodes with stages running at the same time (set by
    #: the pipeline's overlap for stages that sample frames).
    frames: FrameTicket | None = None


@dataclass
class StageEstimate:
    """What a stage will spend on one video, before spending anything."""

    stage: str
    role: str | None
    spec: str
    calls: int = 0
    frames: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: Its share of the run's wall time: for a local model its CPU seconds over the cores this
    #: process may use (the stages that run side by side share them), for an endpoint the
    #: calls' time. The dry run adds the shares up.
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: the calls go through a batch API, billed at ``BATCH_DISCOUNT`` of the price
    batch: bool = False
    #: The CPU seconds of this work by the figures measured on :data:`MEASURED_ON` (0: none,
    #: not offline work with measured figures): the dry run scales ``seconds`` by this CPU's
    #: speed where it is set, and a run teaches that speed against their sum
    #: (:mod:`vidagent.ingest.speed`). Set by :meth:`measured`.
    cpu_seconds: float = 0.0

    def measured(self, cpu: float = 0.0, wall: float = 0.0) -> StageEstimate:
        """Time offline work from :data:`MEASURED_ON`'s figures: ``cpu`` CPU seconds, spread
        over the cores this process may use, and ``wall`` seconds measured as wall time there
        (counted as CPU seconds of one core, whatever the cores here); returns ``self``."""
        self.seconds = cpu_wall(cpu) + wall
        self.cpu_seconds = cpu + wall
        return self


#: Where the offline stages' CPU seconds per unit were measured (``vidagent index`` of a
#: 20-minute video of the real clips, idle): a CPU without AVX-512 takes about twice as long.
MEASURED_ON = "AMD EPYC, 2 cores, AVX-512"


def cpu_wall(cpu_seconds: float) -> float:
    """CPU seconds as a share of wall time: spread over the cores this process may use."""
    from vidagent.models.cpu import cpu_share

    return cpu_seconds / cpu_share()


def batch_job(
    ctx: IngestContext, stage: str
) -> tuple[dict[str, Any] | None, Callable[[dict[str, Any]], None]]:
    """The batch state ``stage`` stored for the video (None: none) and how to store it anew:
    the ``"batch"`` artefact keyed by the stage, for
    :meth:`~vidagent.models.client.Client.chat_batch`."""
    from vidagent.library.schema import Artifact

    vid = ctx.video.video_id
    stored = ctx.library.artifact(vid, "batch", stage)

    def save(state: dict[str, Any]) -> None:
        kept = Artifact(vid, "batch", stage, data=state, inputs_hash=str(state.get("inputs", "")))
        ctx.library.put_artifact(kept)

    return (stored.data if stored is not None else None), save


def text_hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


class Stage:
    """Base of the per-clip stages. Subclasses set the class attributes and :meth:`run`."""

    name: ClassVar[str]
    role: ClassVar[str | None] = None  # the model role the stage calls
    column: ClassVar[str | None] = None  # the clips column holding the fingerprint
    prompts: ClassVar[tuple[str, ...]] = ()  # prompt files whose text shapes the output
    #: seconds between checkpoints for cheap local work (expensive calls flush every clip)
    flush_every: ClassVar[float] = 2.0

    def frame_grid(self) -> tuple[float, int] | None:
        """``(fps, size)`` of the frames the stage samples through ``ctx.frames`` (read_text,
        detect), or None: what the pipeline keeps from the structure pass and shares."""
        return None

    def warm(self, ctx: IngestContext) -> None:
        """Load what :meth:`run` needs for ``ctx``'s video that is not a role's model (the
        pipeline calls it in a thread while earlier stages run); by default nothing."""

    def fingerprint(self, settings: Settings) -> str:
        spec = settings.spec(self.role) if self.role else self.name
        hashes = [prompt_hash(p) for p in self.prompts]
        return "|".join([spec, *hashes])

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        fp = self.fingerprint(ctx.settings)
        return [
            c for c in ctx.library.clips(ctx.video.video_id) if getattr(c, str(self.column)) != fp
        ]

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        raise NotImplementedError

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        raise NotImplementedError

    def refine(
        self, estimate: StageEstimate, library: Library, video_id: str, settings: Settings
    ) -> StageEstimate:
        """``estimate`` corrected by what the Library already holds of the video (indexed
        before, under ``video_id``); by default as it is."""
        return estimate

    # -- checkpoints ------------------------------------------------------------------------------

    def start(self) -> None:
        self._buffer: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()

    def finished(
        self, ctx: IngestContext, update: dict[str, Any], bar: tqdm, *, now: bool = False
    ) -> None:
        """Record one clip's output; write the buffer when due (or at once with ``now``)."""
        self._buffer.append(update)
        bar.update(1)
        if now or time.monotonic() - self._last_flush >= self.flush_every:
            self.flush(ctx)

    def flush(self, ctx: IngestContext) -> None:
        if self._buffer:
            ctx.library.update_clips(ctx.video.video_id, self._buffer)
            self._buffer = []
        self._last_flush = time.monotonic()
