"""Evidence a person can take away: an answer's cited moments written as a folder or a zip.

``vidagent export [TRACE]`` (default: the last answer's trace) writes::

    index.json               what is here, machine-readable (schema: vidagent/schemas/
                             export.schema.json, ``schema_version`` EXPORT_SCHEMA_VERSION)
    timeline.md              question, answer, each citation: label, quote, time, its clip
    transcript.txt|.srt|.vtt what was said in the cited spans, in the video's own time (the
                             subtitles: each moment once, however many spans hold it)
    clips/NN-<video>-<start>-<end>.mp4      each cited span, cut exactly, with its audio
    clips/NN-….srt|.vtt      that span's speech, timed from the clip's start
    frames/NN-<i>-<time>.jpg two to four frames inside each cited span
    sheets/<video>.jpg       a contact sheet per video of its cited moments

A citation's span is what the strategy cited joined with where its quote is, so the quote is
always inside the clip; a span shorter than :data:`MIN_CLIP_S` is widened to it around its
middle (a clip of one frame plays as nothing). Citations of the same span share one clip. A
video whose source file is gone still gets its timeline entry and transcript; its clips and
frames are left out and ``index.json`` says why (``error``), never silently.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent._version import __version__
from vidagent.agents.answer import option_letter
from vidagent.app.core import SessionCore
from vidagent.app.sheets import draw_sheet, span_frames, write_image
from vidagent.app.speakers import with_names
from vidagent.app.subtitles import Piece, cut, piece, speaker_of, subtitles
from vidagent.app.traces import list_traces
from vidagent.exceptions import StorageError, UserError, VideoNotFoundError, output_error
from vidagent.library.rows import source_problem
from vidagent.timecode import clock, wall_clock

if TYPE_CHECKING:
    from vidagent.library import Library, VideoRecord
    from vidagent.trace import Citation, Trace

#: The version of ``index.json``'s schema; bump it with any change to the schema file.
EXPORT_SCHEMA_VERSION = 1
#: Spans shorter than this (seconds) are widened to it around their middle.
MIN_CLIP_S = 1.0


def export_schema() -> dict[str, Any]:
    """The JSON Schema of an export's ``index.json`` (package data)."""
    text = resources.files("vidagent.schemas").joinpath("export.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@dataclass(frozen=True)
class ExportResult:
    """``export``: where the bundle is (a folder or a ``.zip``) and its ``index.json``."""

    path: Path
    index: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "warnings": self.warnings, "index": self.index}


def last_answer_trace(core: SessionCore) -> Path:
    """The trace of the newest run that answered.

    Raises:
        UserError: no saved trace holds an answer.
    """
    for summary in list_traces(core):
        if summary.answer:  # a run stopped before answering ends with an empty one
            return summary.path
    raise UserError(
        f"no answer to export: no trace in {core.traces_folder} holds one; "
        "ask a question first (vidagent ask VIDEO QUESTION) or name a trace file"
    )


def export(
    core: SessionCore,
    trace: str | Path | None = None,
    *,
    out: str | Path | None = None,
    as_zip: bool = False,
) -> ExportResult:
    """Write the evidence of ``trace``'s answer (default: the last answer's) to ``out``
    (default ``export-<trace name>`` in the working folder, ``.zip`` added with ``as_zip``).

    Raises:
        UserError: no such trace, a trace without an answer, ``out`` exists and is not an
            empty folder (a file, a zip among them, is never replaced), or it cannot be made
            (the reason given).
        StorageError: the disk is full, or writing there is not permitted.
        LibraryError: there is no Library to read the cited videos from.
    """
    from vidagent.trace import Trace

    path = Path(trace) if trace is not None else last_answer_trace(core)
    loaded = Trace.load(path)
    said = loaded.answer
    if said is None or not (said.text or said.evidence or said.citations):
        # a run stopped before answering, or whose model never answered, ends with an empty
        # answer: its bundle was empty, exit 0
        stopped = " (it was stopped)" if said is not None and said.reason == "stopped" else ""
        raise UserError(f"{path}: the run gave no answer{stopped}, so there is nothing to export")
    zipped = as_zip or (out is not None and str(out).lower().endswith(".zip"))
    target = Path(out) if out is not None else Path(f"export-{path.stem}")
    if zipped and target.suffix.lower() != ".zip":
        target = target.with_name(target.name + ".zip")
    try:
        _check_target(target)
    except OSError as e:  # a name too long to look at
        raise output_error(e, target) from None
    # Written beside the target and moved into place whole: a bundle cut short (Ctrl-C, a full
    # disk) leaves no truncated clip or zip, and the same command runs again.
    part = target.with_name(f".{target.name}.part")
    try:
        if not zipped:
            shutil.rmtree(part, ignore_errors=True)
            try:
                result = _write(core, loaded, path, part)
                if target.is_dir():
                    target.rmdir()  # empty (_check_target)
                os.replace(part, target)
            finally:
                shutil.rmtree(part, ignore_errors=True)
            return ExportResult(target, result.index, result.warnings)
        with tempfile.TemporaryDirectory(prefix="vidagent-export-") as tmp:
            folder = Path(tmp) / target.stem
            result = _write(core, loaded, path, folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
                    for file in sorted(folder.rglob("*")):
                        if file.is_file():
                            z.write(file, Path(target.stem) / file.relative_to(folder))
                os.replace(part, target)
            finally:
                part.unlink(missing_ok=True)
    except (OSError, StorageError) as e:
        # a full disk, a denied permission (named by the target); a folder that cannot be made
        # (a file in the way, a path too long)
        raise output_error(e, target) from None
    return ExportResult(target, result.index, result.warnings)


def _check_target(target: Path) -> None:
    if target.is_dir() and any(target.iterdir()):
        raise UserError(f"{target} exists and is not empty; name another folder with -o")
    if target.exists() and not target.is_dir():  # a zip too: an export replaces no file
        raise UserError(f"{target} exists; name another with -o, or remove it first")


@dataclass
class _Span:
    """One clip of the bundle: a distinct span of a video and the citations it serves."""

    n: int
    video_id: str
    t0: float
    t1: float
    clip: str | None = None
    subtitles: dict[str, str] = field(default_factory=dict)
    frames: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: it lies outside its video (a trace edited, or of another file): no clip, frame or tile
    outside: bool = False
    #: the transcript segments overlapping the span, as read (for the bundle's subtitles)
    segments: list[Any] = field(default_factory=list, repr=False)


def span_of_citation(c: Citation) -> tuple[float, float]:
    """The span a citation's clip shows: its cited span joined with its quote's, at least
    :data:`MIN_CLIP_S` long."""
    ends = [float(c.t0), float(c.t1), *(float(x) for x in c.cited[:2])]
    t0, t1 = min(ends), max(ends)
    if t1 - t0 < MIN_CLIP_S:
        mid = (t0 + t1) / 2
        t0, t1 = max(0.0, mid - MIN_CLIP_S / 2), mid + MIN_CLIP_S / 2
    return t0, t1


def _write(core: SessionCore, trace: Trace, trace_path: Path, folder: Path) -> ExportResult:
    from vidagent.trace import RunStarted

    answered = trace.answer
    assert answered is not None
    started = next(iter(trace.of(RunStarted)), None)
    lib = core.existing_library()
    folder.mkdir(parents=True, exist_ok=True)
    warnings: list[str] = []
    videos: dict[str, VideoRecord | None] = {}
    for c in answered.citations:
        if c.video_id not in videos:
            try:
                videos[c.video_id] = lib.get_video(c.video_id)
            except VideoNotFoundError:
                videos[c.video_id] = None
                name = _traced_name(started, c.video_id)
                warnings.append(f"video {c.video_id}{f' ({name})' if name else ''} is {NOT_HERE}")
    spans: dict[tuple[str, float, float], _Span] = {}
    cites = []
    for c in answered.citations:
        t0, t1 = span_of_citation(c)
        video = videos[c.video_id]
        outside = video is not None and (t0 >= video.duration or t1 <= 0)
        if video is not None and not outside:
            t0, t1 = max(t0, 0.0), min(t1, video.duration)
        key = (c.video_id, round(t0, 3), round(t1, 3))
        if key not in spans:
            span = spans[key] = _Span(len(spans) + 1, c.video_id, t0, t1, outside=outside)
            if outside and video is not None:
                span.error = (
                    f"{t0:.1f}-{t1:.1f} s lies outside {video.name} (0-{video.duration:.1f} s)"
                )
                warnings.append(f"clip {span.n}: {span.error}; it is left out")
        cites.append((c, spans[key]))
    for span in spans.values():
        _fill_span(lib, videos[span.video_id], span, folder, warnings)
    sheets = _sheets(lib, videos, list(spans.values()), folder, warnings)
    index = _index(trace_path, started, answered, videos, cites, sheets)
    _write_transcripts(folder, videos, list(spans.values()))
    (folder / "timeline.md").write_text(_timeline(index), encoding="utf-8")
    (folder / "index.json").write_text(
        json.dumps(index, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return ExportResult(folder, index, warnings)


#: why a cited video has no record here (a trace of another home's, or a video removed since)
NOT_HERE = "not in this Library (removed, or the trace was written with another --home)"


def _traced_name(started: Any, video_id: str) -> str:
    """The file name the trace's run gave ``video_id`` (``""`` where it gave none)."""
    for v in getattr(started, "videos", None) or []:
        if isinstance(v, dict) and v.get("video_id") == video_id:
            return str(v.get("name") or "")
    return ""


def _stamp(t: float) -> str:
    return clock(t).replace(":", "").replace(".", "_")


def _fill_span(
    lib: Library, video: VideoRecord | None, span: _Span, folder: Path, warnings: list[str]
) -> None:
    """Cut the span's clip, take its frames, and read its transcript."""
    from vidagent.exceptions import MediaError
    from vidagent.media.cut import cut_span
    from vidagent.media.decode import encode_jpeg

    if video is None:
        span.error = f"the video is {NOT_HERE}"
        return
    if span.outside:
        return
    said = lib.transcript(video.video_id, span.t0, span.t1)
    span.segments = with_names(lib, video.video_id, said)
    for seg, labelled in zip(span.segments, said, strict=True):
        part = cut(seg, (span.t0, span.t1))  # the words said inside the span, at their times
        if part is not None:
            t0, t1, text = part
            line = {"t0": round(t0, 3), "t1": round(t1, 3), "text": text}
            line["speaker"] = speaker_of(seg)
            if speaker_of(labelled) != line["speaker"]:  # a named speaker keeps its label too
                line["label"] = speaker_of(labelled)
            span.transcript.append(line)
    name = f"{span.n:02d}-{video.video_id[:8]}-{_stamp(span.t0)}-{_stamp(span.t1)}"
    count = 2 if span.t1 - span.t0 < 2 else 3 if span.t1 - span.t0 < 10 else 4
    step = (span.t1 - span.t0) / count
    times = [span.t0 + (i + 0.5) * step for i in range(count)]
    try:
        problem = source_problem(video)
        if problem is not None:
            raise MediaError(video.source, problem)
        (folder / "clips").mkdir(exist_ok=True)
        cut_span(video.source, span.t0, span.t1, folder / "clips" / f"{name}.mp4")
        span.clip = f"clips/{name}.mp4"
        for fmt in ("srt", "vtt"):
            text = subtitles(span.segments, fmt, offset=span.t0, window=(span.t0, span.t1))
            (folder / "clips" / f"{name}.{fmt}").write_text(text, encoding="utf-8")
            span.subtitles[fmt] = f"clips/{name}.{fmt}"
        from vidagent.media import frames_at

        (folder / "frames").mkdir(exist_ok=True)
        for i, (t, rgb) in enumerate(
            zip(times, frames_at(video.source, times, size=720), strict=True)
        ):
            file = f"frames/{span.n:02d}-{i + 1}-{_stamp(t)}.jpg"
            (folder / file).write_bytes(encode_jpeg(rgb, quality=88))
            span.frames.append({"t": round(t, 3), "file": file})
    except MediaError as e:
        span.error = f"{video.name}: {e}"
        # the file gone after its clip was cut (moved mid-export): the clip is there, and said
        left = "its frames are" if span.clip else "its clip and frames are"
        warnings.append(f"clip {span.n}: {span.error}; {left} left out")


def _sheets(
    lib: Library,
    videos: dict[str, VideoRecord | None],
    spans: list[_Span],
    folder: Path,
    warnings: list[str],
) -> dict[str, str | None]:
    """A contact sheet per video of the moments its citations show (stored thumbnails where
    they cover a moment, else decoded)."""
    from vidagent.exceptions import MediaError

    out: dict[str, str | None] = {}
    for vid, video in videos.items():
        out[vid] = None
        own = [s for s in spans if s.video_id == vid and not s.outside]
        if video is None or not own:
            continue
        times = sorted({round(s.t0 + (s.t1 - s.t0) * k / 3, 3) for s in own for k in (0, 1, 2)})
        try:
            frames, _ = span_frames(lib, video, times, size=360)
        except MediaError as e:
            warnings.append(f"no contact sheet for {video.name}: {e}")
            continue
        t0, t1 = min(s.t0 for s in own), max(s.t1 for s in own)
        file = f"sheets/{vid[:8]}.jpg"
        write_image(
            draw_sheet(video, frames, t0, t1, columns=min(6, max(3, len(own)))), folder / file
        )
        out[vid] = file
    return out


def _index(
    trace_path: Path,
    started: Any,
    answered: Any,
    videos: dict[str, VideoRecord | None],
    cites: list[tuple[Citation, _Span]],
    sheets: dict[str, str | None],
) -> dict[str, Any]:
    def recorded(vid: str) -> str:
        video = videos.get(vid)
        return getattr(video, "recorded_at", "") if video is not None else ""

    return {
        "schema_version": EXPORT_SCHEMA_VERSION,
        "vidagent_version": __version__,
        "created_at": datetime.now(timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z"),
        "trace": str(trace_path),
        "strategy": getattr(started, "strategy", "") or "",
        "question": getattr(started, "question", "") or "",
        "options": list(getattr(started, "options", []) or []),
        "answer": answered.text,
        "abstained": bool(answered.abstained),
        # what the answer line alone does not say: withheld (and why), or forced at a limit
        "abstain_policy": answered.abstain_policy,
        "abstain_reason": answered.abstain_reason,
        "withheld": answered.withheld,
        "unverified": bool(answered.unverified),
        "forced": bool(answered.forced),
        "reason": answered.reason,
        "note": answered.note,
        "videos": [
            {
                "video_id": vid,
                "name": v.name if v else _traced_name(started, vid),
                "source": v.source if v else "",
                "duration": v.duration if v else None,
                "recorded_at": recorded(vid) or None,
                "sheet": sheets.get(vid),
                "error": None if v else f"the video is {NOT_HERE}",
            }
            for vid, v in videos.items()
        ],
        "citations": [
            {
                "n": i,
                "clip_n": s.n,
                "video_id": c.video_id,
                "label": c.label,
                "support": float(c.support),
                "source": c.source,
                "quote": c.text,
                "claim": c.claim,
                "reader": c.reader,
                "quote_t0": float(c.t0),
                "quote_t1": float(c.t1),
                "cited": [float(x) for x in c.cited[:2]],
                "t0": round(s.t0, 3),
                "t1": round(s.t1, 3),
                "start": clock(s.t0),
                "end": clock(s.t1),
                "wall_t0": wall_clock(recorded(c.video_id), s.t0) or None,
                "wall_t1": wall_clock(recorded(c.video_id), s.t1) or None,
                "clip": s.clip,
                "subtitles": dict(s.subtitles),
                "frames": list(s.frames),
                "transcript": list(s.transcript),
                "error": s.error,
            }
            for i, (c, s) in enumerate(cites, 1)
        ],
        "files": {
            "timeline": "timeline.md",
            "transcript_txt": "transcript.txt",
            "transcript_srt": "transcript.srt",
            "transcript_vtt": "transcript.vtt",
        },
    }


def _write_transcripts(
    folder: Path, videos: dict[str, VideoRecord | None], spans: list[_Span]
) -> None:
    """The cited spans' speech in the video's own time: text grouped by span, and subtitles
    of every moment the spans hold, each once: spans that overlap or meet are joined before
    the segments are cut to them, so a sentence two cited clips share is one cue (the video's
    name before each line when the answer cites several videos)."""
    several = len({s.video_id for s in spans}) > 1
    lines: list[str] = []
    for s in sorted(spans, key=lambda s: (s.video_id, s.t0)):
        video = videos.get(s.video_id)
        name = video.name if video else s.video_id
        lines.append(f"## {name}  {clock(s.t0)}-{clock(s.t1)}")
        said = subtitles(
            [Piece(d["t0"], d["t1"], d["text"], d["speaker"]) for d in s.transcript], "txt"
        ).rstrip()
        lines.append(said or ("(no speech)" if video else f"(unknown: the video is {NOT_HERE})"))
        lines.append("")
    cues: list[Piece] = []
    for video_id in sorted({s.video_id for s in spans}):
        own = sorted((s for s in spans if s.video_id == video_id), key=lambda s: s.t0)
        joined: list[list[float]] = []
        for s in own:
            if joined and s.t0 <= joined[-1][1]:
                joined[-1][1] = max(joined[-1][1], s.t1)
            else:
                joined.append([s.t0, s.t1])
        segments = {seg.segment_index: seg for s in own for seg in s.segments}
        video = videos.get(video_id)
        name = video.name if video else video_id
        for lo, hi in joined:
            for seg in sorted(segments.values(), key=lambda seg: seg.t0):
                who = f"{name} {speaker_of(seg)}".strip() if several else speaker_of(seg)
                part = piece(seg, (lo, hi), who)  # with its words: a long one is split
                if part is not None:
                    cues.append(part)
    (folder / "transcript.txt").write_text("\n".join(lines), encoding="utf-8")
    (folder / "transcript.srt").write_text(subtitles(cues, "srt"), encoding="utf-8")
    (folder / "transcript.vtt").write_text(subtitles(cues, "vtt"), encoding="utf-8")


def _timeline(index: dict[str, Any]) -> str:
    """``timeline.md``: what a person reads first."""
    names = {v["video_id"]: v["name"] or v["video_id"][:8] for v in index["videos"]}
    out = ["# Evidence", "", f"**Question:** {index['question']}", ""]
    if index["options"]:
        out += [f"- {option_letter(i)}. {o}" for i, o in enumerate(index["options"])] + [""]
    out += [f"**Answer:** {index['answer'] or '(none)'}", ""]
    if index["forced"]:
        note = f"; {index['note']}" if index["note"] else ""
        out += [f"*Forced:* the run ended ({index['reason']}{note}) and was made to answer.", ""]
    if index["abstained"]:
        withheld = f' It withheld: "{index["withheld"]}".' if index["withheld"] else ""
        policy = f" ({index['abstain_policy']})" if index["abstain_policy"] else ""
        out += [f"*Abstained{policy}:* {index['abstain_reason']}.{withheld}", ""]
    if index["unverified"]:
        out += ["*Unverified:* a claim about what is seen, with no vision model to check it.", ""]
    out += [
        f"Strategy `{index['strategy']}`, exported {index['created_at']} from `{index['trace']}`.",
        "",
    ]
    if not index["citations"]:
        out += ["The answer cites no moment.", ""]
    for c in index["citations"]:
        when = f"{c['start']}-{c['end']}"
        if c["wall_t0"]:
            when += f" ({c['wall_t0']} to {c['wall_t1']})"
        out.append(f"## {c['n']}. {names.get(c['video_id'], c['video_id'])} {when} - {c['label']}")
        out.append("")
        if c["quote"]:
            out.append(f"> {' '.join(c['quote'].split())}")
            out.append("")
            out.append(f"Quoted from {clock(c['quote_t0'])}-{clock(c['quote_t1'])}.")
        out.append(f"Found in: {c['source'] or 'nothing matched'}; support {c['support']:.2f}.")
        if c["clip"]:
            out.append(f"Clip: [{c['clip']}]({c['clip']})")
        if c["frames"]:
            out.append(
                "Frames: " + ", ".join(f"[{clock(f['t'])}]({f['file']})" for f in c["frames"])
            )
        if c["error"]:
            out.append(f"{'Frames not' if c['clip'] else 'Not'} exported: {c['error']}")
        said = [
            f"{(t['speaker'] + ': ') if t['speaker'] else ''}{t['text']}" for t in c["transcript"]
        ]
        if said:
            out += ["", "Said: " + " ".join(said)]
        out.append("")
    return "\n".join(out)


def remove_bundle(path: Path) -> None:
    """Delete an export (folder or zip): the HTTP API's temporary bundles."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
