"""Typed results of the application layer, each with one JSON form (``to_json()``).

The CLI prints these (as text, or their JSON with ``--json``); the HTTP API and the MCP server
return the same JSON unchanged. Values stay dataclasses inside; ``to_json`` is the only place a
result becomes a dict, so every front end shows the same fields.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.agents.answer import option_letter
from vidagent.library.readable import readable_lines
from vidagent.timecode import hms, wall_clock

if TYPE_CHECKING:
    from vidagent.agents.base import Answer
    from vidagent.bench.base import Scores
    from vidagent.ingest import IndexEstimate, IndexResult
    from vidagent.library import ClipHit, ClipRow, VideoRecord
    from vidagent.library.graph import EntityGraph
    from vidagent.library.schema import TranscriptSegment
    from vidagent.media import VideoInfo
    from vidagent.trace import Trace


def video_json(v: VideoRecord) -> dict[str, Any]:
    """A video row as JSON (its stage map as an object)."""
    return v.to_row() | {"stages": v.stages}


@dataclass(frozen=True)
class RoleStatus:
    spec: str
    usable: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class InfoReport:
    """``info``: the version, the home, the Library, each role's backend, and the strategy
    ``ask`` uses when none is named, with the line that says why (``""``: none)."""

    version: str
    home: str
    library: str
    library_exists: bool
    roles: dict[str, RoleStatus]
    default_strategy: str = "dvd"
    notice: str = ""

    def to_json(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["roles"] = {r: s.to_json() for r, s in self.roles.items()}
        return body


@dataclass(frozen=True)
class ProbeReport:
    """``probe``: a file's media facts."""

    info: VideoInfo

    def to_json(self) -> dict[str, Any]:
        body = dataclasses.asdict(self.info)
        return {k: str(v) if isinstance(v, Path) else v for k, v in body.items()}


@dataclass(frozen=True)
class IndexReport:
    """``index``: what indexing one file did, or its one-line error.

    Attributes:
        path: the file.
        error: why it could not be indexed (the others still are).
        result: the pipeline's result when it was indexed.
        speech, on_screen, people_clips, clips, summary: what the index now holds, for display.
            ``on_screen`` holds the distinct lines a person can read
            (:func:`~vidagent.library.readable.readable_lines`); ``on_screen_hidden`` counts
            the other distinct lines, kept in the index (searchable) but not shown.
    """

    path: Path
    error: str | None = None
    result: IndexResult | None = None
    speech: str = ""
    on_screen: list[str] = field(default_factory=list)
    on_screen_hidden: int = 0
    people_clips: int | None = None
    clips: int = 0
    summary: str = ""
    library: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        if self.result is None or self.result.structure is None:
            return {"path": str(self.path), "error": self.error}
        s = self.result.structure
        return {
            "video_id": s.video.video_id,
            "name": s.video.name,
            "duration": s.video.duration,
            "clips": s.clips,
            "shots": s.shots,
            "frames": s.frames,
            "thumbnail_bytes": s.thumbnail_bytes,
            "reused": s.reused,
            "stages": {
                r.stage: {
                    "clips": r.clips,
                    "seconds": round(r.seconds, 3),
                    "note": r.note,
                    "at_once": r.at_once,
                }
                for r in self.result.stages
            },
            "seconds": round(self.result.seconds, 3),
            "warnings": list(self.result.warnings),
        }


@dataclass(frozen=True)
class EstimateReport:
    """``index --dry-run``: what indexing one file would spend, with costs where priced (a
    stage's ``cost_usd`` is None in JSON when its model has no known price)."""

    path: Path
    error: str | None = None
    estimate: IndexEstimate | None = None
    costs: list[float | None] = field(default_factory=list)  # None: no price known

    def to_json(self) -> dict[str, Any]:
        if self.estimate is None:
            return {"path": str(self.path), "error": self.error}
        rows = self.estimate.stages
        return {
            "path": str(self.path),
            "duration": self.estimate.duration,
            "clips": self.estimate.clips,
            "stages": [
                r.__dict__ | {"cost_usd": c} for r, c in zip(rows, self.costs, strict=False)
            ],
            "speed": self.estimate.speed.to_json() | {"basis": self.estimate.speed.basis()},
        }


@dataclass(frozen=True)
class VideoDetail:
    """``show``: a video, its summary, subject registry and clips. Each clip's JSON holds its
    whole ``ocr_text`` (what the index searches) and ``on_screen_text``, the lines of it a person
    can read (:func:`~vidagent.library.readable.readable_lines`), which is what is shown."""

    video: VideoRecord
    summary: str
    registry: dict[str, Any]
    clips: list[ClipRow]
    #: the speech segments, each with its speaker label (``""``: not labelled)
    transcript: list[TranscriptSegment] = field(default_factory=list)
    #: the names given to speaker labels (``vidagent speakers VIDEO rename``)
    speaker_names: dict[str, str] = field(default_factory=dict)

    def speaker(self, segment: TranscriptSegment) -> str:
        """Who speaks ``segment``, as shown: ``S1 (Dr Lee)``, ``S1``, or ``""``."""
        if not segment.speaker:
            return ""
        name = self.speaker_names.get(segment.speaker, "")
        return f"{segment.speaker} ({name})" if name else segment.speaker

    def said_in(self, clip: ClipRow) -> list[TranscriptSegment]:
        """The segments whose middle falls in the clip."""
        return [s for s in self.transcript if clip.t0 <= (s.t0 + s.t1) / 2 < clip.t1]

    @functools.cached_property
    def caption_label(self) -> str:
        """The perception describer's label when it wrote every clip's caption (shown once,
        above them), ``""`` otherwise (a model's captions, or both kinds)."""
        from vidagent.models.perception import LABEL

        captioned = [c.caption for c in self.clips if c.caption]
        return LABEL[1:-1] if captioned and all(c.startswith(LABEL) for c in captioned) else ""

    def caption(self, clip: ClipRow) -> str:
        """The clip's caption on one line, less the describer's label where
        :attr:`caption_label` gives it once (it took 75 of the 110 characters a line shows)."""
        text = clip.caption
        if self.caption_label:
            text = text.removeprefix(f"[{self.caption_label}]")
        return " ".join(text.split())

    @staticmethod
    def on_screen(clip: ClipRow) -> list[str]:
        """The clip's on-screen lines a person can read."""
        return readable_lines(clip.ocr_text)

    def to_json(self) -> dict[str, Any]:
        return {
            "video": video_json(self.video),
            "summary": self.summary,
            "registry": self.registry,
            "caption_label": self.caption_label,
            "clips": [
                c.__dict__ | {"t0": _ms(c.t0), "t1": _ms(c.t1), "on_screen_text": self.on_screen(c)}
                for c in self.clips
            ],
            "transcript": [
                {
                    "t0": _ms(s.t0),
                    "t1": _ms(s.t1),
                    "text": s.text.strip(),
                    "speaker": s.speaker,
                    "speaker_name": self.speaker_names.get(s.speaker, ""),
                }
                for s in self.transcript
            ],
        }


@dataclass(frozen=True)
class GraphDetail:
    """``show --graph``: a video's entity graph; ``graph`` is None when its graph stage never
    ran (an empty graph is one the extractor found nobody in)."""

    video: VideoRecord
    graph: EntityGraph | None

    def to_json(self) -> dict[str, Any]:
        """``{"video_id", "built", "entities": [...], "relations": [...]}``."""
        body = self.graph.to_json() if self.graph else {"entities": [], "relations": []}
        return {"video_id": self.video.video_id, "built": self.graph is not None, **body}


@dataclass(frozen=True)
class SearchHit:
    """``search``: one clip that matches, with its span and score; ``recorded_at`` is when its
    video's recording started (ISO-8601, ``""`` unknown), so its times also read as wall-clock
    times (``wall_t0``, ``wall_t1``: None when unknown); ``speakers`` is who speaks in it
    (``S1 (Dr Lee)``, in order of speech; empty where nobody is labelled); ``name`` its
    video's file name."""

    hit: ClipHit
    recorded_at: str = ""
    speakers: tuple[str, ...] = ()
    name: str = ""

    def to_json(self) -> dict[str, Any]:
        c = self.hit.clip
        return {
            "video_id": c.video_id,
            "name": self.name,
            "t0": _ms(c.t0),
            "t1": _ms(c.t1),
            "start": hms(c.t0),
            "end": hms(c.t1),
            "wall_t0": wall_clock(self.recorded_at, c.t0) or None,
            "wall_t1": wall_clock(self.recorded_at, c.t1) or None,
            "score": round(self.hit.score, 4),
            "caption": c.caption,
            "transcript": c.transcript,
            "ocr_text": c.ocr_text,
            "on_screen_text": readable_lines(c.ocr_text),
            "speakers": list(self.speakers),
        }


@dataclass(frozen=True)
class AskResult:
    """``ask`` and ``replay``: the answer, the run's totals, where the trace is, and a line
    about the strategy that answered (why it was chosen, what it measured offline; ``""``:
    nothing to say)."""

    trace: Trace
    answer: Answer | None = None
    notice: str = ""

    def to_json(self) -> dict[str, Any]:
        answered, totals = self.trace.answer, self.trace.totals

        def fields(event: Any) -> dict[str, Any] | None:
            if event is None:
                return None
            return {k: v for k, v in dataclasses.asdict(event).items() if k not in ("t", "span")}

        letter = (
            option_letter(answered.choice) if answered and answered.choice is not None else None
        )
        body = {
            "answer": fields(answered),
            "letter": letter,
            "videos": self.videos(),
            "totals": fields(totals),
            "trace": str(self.trace.path) if self.trace.path else None,
            "notice": self.notice,
        }
        windows = self.windows()
        return body | {"windows": windows} if windows else body

    def videos(self) -> list[dict[str, Any]]:
        """Each video the question was asked of, ``video_id``, ``name`` and ``duration``, so
        that the ids of the evidence and citations can be read as the files they name (from
        the trace's ``run_started``; empty in a trace without one)."""
        from vidagent.trace import RunStarted

        started = next(iter(self.trace.of(RunStarted)), None)
        keys = ("video_id", "name", "duration")
        return [{k: v.get(k) for k in keys} for v in started.videos] if started else []

    def windows(self) -> list[dict[str, Any]]:
        """The part of each video the run saw, where it saw only a window (``--last`` …):
        ``video_id``, ``t0``, ``t1`` in seconds and ``wall_t0``, ``wall_t1`` (ISO-8601, None
        when the recording start is unknown), from the trace's ``run_started``."""
        from vidagent.trace import RunStarted

        started = next(iter(self.trace.of(RunStarted)), None)
        out = []
        for v in started.videos if started is not None else []:
            if v.get("window"):
                t0, t1 = v["window"]
                walls = [wall_clock(v.get("recorded_at") or "", t) or None for t in (t0, t1)]
                out.append(
                    {"video_id": v["video_id"], "t0": t0, "t1": t1}
                    | {"wall_t0": walls[0], "wall_t1": walls[1]}
                )
        return out


#: How far past the video's end a grounded interval may reach (a duration rounded down) and
#: still be read as an interval of it.
SPAN_SLACK = 0.5


@dataclass(frozen=True)
class GroundResult(AskResult):
    """``ground``: when the event happens, ``[start, end]`` in seconds (None when the answer
    names no interval), with the run's answer, evidence and trace."""

    @property
    def named(self) -> tuple[float, float] | None:
        """The first two times the answer names, wherever they lie."""
        from vidagent.bench.answers import read_interval

        answered = self.trace.answer
        return read_interval(answered.text) if answered is not None else None

    @property
    def span(self) -> tuple[float, float] | None:
        """The video's own time, ``(0, duration)``; ``None`` for a run in a window (its
        ``duration`` is the window's, and a clip found may reach past the window's edge)."""
        from vidagent.trace import RunStarted

        started = next(iter(self.trace.of(RunStarted)), None)
        video = started.videos[0] if started and started.videos else {}
        duration = video.get("duration")
        return (0.0, float(duration)) if duration and not video.get("window") else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The interval the answer names, if it lies in the video (within :data:`SPAN_SLACK`
        seconds): "10, 9, 8, …, lift off" names 9–10 s, past the end of an 8-second countdown,
        and is no interval of it. (One in a window's clips may reach past the window's edge.)"""
        found, span = self.named, self.span
        if found is None or span is None:
            return found
        inside = span[0] - SPAN_SLACK <= found[0] and found[1] <= span[1] + SPAN_SLACK
        return found if inside else None

    def to_json(self) -> dict[str, Any]:
        found = self.interval
        return {"interval": list(found) if found else None, **super().to_json()}


@dataclass(frozen=True)
class ScoreResult:
    """``bench score``: the official and strict numbers with their breakdowns."""

    scores: Scores
    title: str
    predictions: int

    def to_json(self) -> dict[str, Any]:
        return self.scores.to_dict() | {"title": self.title, "predictions": self.predictions}


@dataclass(frozen=True)
class CompareResult:
    """``bench compare``: run B against run A on the questions both ran without an error
    (:class:`vidagent.bench.compare.Comparison`), or several runs as one family
    (:class:`vidagent.bench.compare.Comparisons`), and the files written."""

    comparison: Any
    written: list[Path]

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = self.comparison.to_dict()
        return body | {"written": [str(p) for p in self.written]}

    def to_text(self) -> str:
        from vidagent.bench.compare import Comparison, render_comparison, render_comparisons

        if isinstance(self.comparison, Comparison):
            return render_comparison(self.comparison)
        return render_comparisons(self.comparison)


@dataclass(frozen=True)
class ReportResult:
    """``bench report``: the reports of the run folders and the files written."""

    reports: list[Any]
    written: list[Path]
    resamples: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        from vidagent.bench.report import report_json

        return report_json(self.reports, resamples=self.resamples, seed=self.seed)

    def to_text(self) -> str:
        """The tables as aligned text, as ``vidagent bench report`` prints them."""
        from vidagent.bench.report import render_text

        return render_text(self.reports, resamples=self.resamples, seed=self.seed)


def _ms(seconds: float) -> float:
    """A time as JSON gives it: to the millisecond (a window's clip ended at
    6.133711111111111)."""
    return round(seconds, 3)
