"""The endpoints of the HTTP API (the table is in docs/frontends/server.md).

Endpoints that call the Session are plain functions, which FastAPI runs on its thread pool so
a slow search never blocks the event loop; the event stream and the upload are coroutines.
Request bodies are pydantic models that refuse unknown fields, so a typo is a 422 naming it;
every field and path parameter is bounded by :mod:`vidagent.app.limits` (a 422 past a bound).
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Request
from fastapi import Path as PathParam
from fastapi import Query as QueryParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response, StreamingResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from vidagent._version import __version__
from vidagent.app.limits import (
    MAX_REF_CHARS,
    MAX_STAGES,
    MAX_STEPS,
    MAX_TOP,
    MAX_VIDEOS,
    FilePath,
    Options,
    Query,
    Question,
    Ref,
    VideoOrPath,
    check_text,
)
from vidagent.app.results import video_json
from vidagent.app.sheets import DEFAULT_COUNT as DEFAULT_SHEET_FRAMES
from vidagent.app.sheets import MAX_COUNT as MAX_SHEET_FRAMES
from vidagent.app.window import TimeWindow
from vidagent.exceptions import ConfigError, MediaError, MediaNotFoundError
from vidagent.server import streams
from vidagent.server.jobs import Job
from vidagent.server.state import Server
from vidagent.server.uploads import NotAVideo, receive_upload
from vidagent.timecode import parse_duration, parse_time

router = APIRouter(prefix="/api")
KEEPALIVE_S = 15.0


def server_of(request: Request) -> Server:
    server: Server = request.app.state.server
    return server


#: a path parameter naming a video, job, trace or run (bounded like a body's references)
RefParam = Annotated[Ref, PathParam()]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class WindowFields(BaseModel):
    """``last``, ``since``, ``until``: only part of each video (as the CLI's ``--last`` …)."""

    last: str | None = Field(
        None,
        max_length=32,
        description="only the last LENGTH before the live edge: 10m, 90s, 1h30m",
    )
    since: str | None = Field(
        None,
        max_length=64,
        description="only from this wall-clock time, HH:MM[:SS] or ISO-8601 (needs the "
        "video's recording start)",
    )
    until: str | None = Field(None, max_length=64, description="only up to this wall-clock time")

    def window(self) -> TimeWindow | None:
        """The window asked for (None: none); a bad one is a ConfigError (400)."""
        return TimeWindow.parse(self.last, self.since, self.until)


class RegisterBody(Body):
    path: FilePath = Field(description="a video file inside a media root")
    stages: list[Ref] | None = Field(
        None, max_length=MAX_STAGES, description="stages to run (default: the default set)"
    )


class SearchBody(Body, WindowFields):
    query: Query
    videos: list[Ref] | None = Field(None, min_length=1, max_length=MAX_VIDEOS)  # None: all
    top: int = Field(10, ge=1, le=MAX_TOP)
    speaker: Ref | None = Field(
        None, description="only clips where this speaker talks: a label (S1) or a given name"
    )


class AskBody(Body, WindowFields):
    videos: list[VideoOrPath] = Field(
        min_length=1, max_length=MAX_VIDEOS, description="video ids or names (or files in a root)"
    )
    question: Question
    options: Options = Field(default_factory=list)
    strategy: Ref | None = Field(
        None, description="default: dvd with a model endpoint, else retrieval (avi to ground)"
    )
    max_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    task: Literal["answer", "ground"] = "answer"
    # None: the server's abstain setting; auto, off for a published configuration
    abstain: Literal["auto", "never", "always-report"] | None = None
    critic: Literal["auto", "on", "off"] | None = None


# -- health and videos --------------------------------------------------------------------------


@router.get("/health")
def health() -> dict[str, Any]:
    return {"status": "ok", "version": __version__}


@router.get("/strategies")
def strategies(
    request: Request,
    strategy: Annotated[str | None, QueryParam(max_length=64)] = None,
    task: Literal["answer", "ground"] = "answer",
) -> dict[str, Any]:
    """The strategies, the default one for ``task``, and the notice of ``strategy``: the line a
    question asked with it carries (the default's, which says why it is the default, where
    ``strategy`` is the default or not given; an unknown name is a 400)."""
    session = server_of(request).session
    default, notice = session.pick_strategy(None, task)
    if strategy not in (None, "", default):  # "?strategy=" names none
        notice = session.pick_strategy(strategy, task)[1]
    return {"strategies": list(session.strategies()), "default": default, "notice": notice}


@router.get("/videos")
def list_videos(request: Request) -> dict[str, Any]:
    return {"videos": [video_json(v) for v in server_of(request).session.videos()]}


def _known_video(server: Server, path: Path) -> dict[str, Any] | None:
    known = server.session.known_video(path)
    return video_json(known) if known is not None else None


def _check_stages(server: Server, stages: list[str] | None) -> list[str] | None:
    """The stages asked for, in pipeline order (None: the default), as the command line takes
    them: ``structure`` may be named, and named alone asks for the cut alone."""
    return None if stages is None else list(server.session.chosen_stages(stages))


@router.post("/videos", status_code=202)
def register_video(body: RegisterBody, request: Request) -> dict[str, Any]:
    server = server_of(request)
    path = server.media_path(body.path)
    stages = _check_stages(server, body.stages)
    try:  # refused here, as an upload is, not by a job that fails
        server.session.probe(path)
    except MediaError as e:
        why = str(e).replace(str(path), path.name).splitlines()[0]
        raise NotAVideo(f"{body.path}: not a video this server can read ({why})") from None
    video = _known_video(server, path)
    job = server.start_index(path, stages)
    return {"job_id": job.job_id, "video": video}


@router.post("/videos/upload", status_code=202)
async def upload_video(
    request: Request, stages: Annotated[str | None, QueryParam()] = None
) -> dict[str, Any]:
    """``stages`` is comma-separated in the query (the body is the file alone), checked before
    the upload is read."""
    server = server_of(request)
    named = None if stages is None else [s.strip() for s in stages.split(",") if s.strip()]
    named = _check_stages(server, named)
    folder = server.roots[0] / "uploads"
    path = await receive_upload(request, folder, server.max_upload_bytes)
    try:  # refused here, not by a failed job: nothing but videos stays in the media root
        await run_in_threadpool(server.session.probe, path)
    except MediaError as e:
        path.unlink(missing_ok=True)
        why = str(e).replace(str(path), path.name).splitlines()[0]
        raise NotAVideo(f"{path.name}: not a video this server can read ({why})") from None
    known = server.session.known_video(path)
    if known is not None and Path(known.source).is_file() and Path(known.source) != path:
        path.unlink()  # its content is in the Library already, from that file: no second copy
        path = Path(known.source)
    job = server.start_index(path, named)
    return {"job_id": job.job_id, "path": str(path)}


@router.get("/videos/{ref}")
def show_video(ref: RefParam, request: Request) -> dict[str, Any]:
    return server_of(request).session.show(ref).to_json()


@router.get("/videos/{ref}/graph")
def video_graph(ref: RefParam, request: Request) -> dict[str, Any]:
    return server_of(request).session.graph(ref).to_json()


@router.get("/videos/{ref}/media")
def video_media(ref: RefParam, request: Request) -> Response:
    """The video's own file, with Range requests (206) so a player can seek. The file is the
    one the Library recorded for the video, whichever root it lies in.

    A watched stream's file is the HLS playlist of its windows: it is served with each window
    named as ``media/<window>`` below this route (and the request's ``token``, which a player
    does not carry over to the URLs a playlist names), so a player that plays HLS (Safari,
    Chromium) plays the stream as it was kept."""
    video = server_of(request).session.show(ref).video
    path = Path(video.source)
    if not path.is_file():
        raise MediaNotFoundError(video.source, "the video's file is no longer there")
    if path.suffix == ".m3u8":
        token = request.query_params.get("token")
        query = f"?token={quote(token, safe='')}" if token else ""
        lines = path.read_text(encoding="utf-8").splitlines()
        served = [f"media/{ln}{query}" if ln and not ln.startswith("#") else ln for ln in lines]
        return Response(
            "\n".join(served) + "\n",
            media_type="application/vnd.apple.mpegurl",
            headers={"Cache-Control": "no-store"},  # a watch adds windows as it goes
        )
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return FileResponse(path, media_type=kind)


# HEAD too (a player's probe of the size), outside the schema: one operation per path and id
router.add_api_route("/videos/{ref}/media", video_media, methods=["HEAD"], include_in_schema=False)


@router.get("/videos/{ref}/media/{window}")
def stream_window(
    ref: RefParam,
    window: Annotated[str, PathParam(pattern=r"^w[0-9]{6}\.ts$")],
    request: Request,
) -> FileResponse:
    """One window file of a watched stream, as its playlist names it (see ``video_media``)."""
    video = server_of(request).session.show(ref).video
    folder = Path(video.source).parent
    if Path(video.source).suffix != ".m3u8":
        raise MediaNotFoundError(window, "the video is not a watched stream: it has no windows")
    path = folder / window
    if not path.is_file():  # rolled out by retention, or not written yet
        raise MediaNotFoundError(window, "this window of the stream is not kept")
    return FileResponse(path, media_type="video/mp2t")


#: each subtitle format's media type
SUBTITLE_TYPES = {"srt": "application/x-subrip", "vtt": "text/vtt", "txt": "text/plain"}


@router.get("/videos/{ref}/subtitles")
def video_subtitles(
    ref: RefParam, request: Request, format: Literal["srt", "vtt", "txt"] = "srt"
) -> Response:
    """The video's whole transcript as SubRip, WebVTT or text, with speakers where known (as
    ``vidagent show --srt``); 400 when it has none, saying why."""
    session = server_of(request).session
    text = session.subtitles(ref, format)
    name = f"{Path(session.existing_library().get_video(ref).name).stem or 'transcript'}.{format}"
    return Response(
        text,
        media_type=f"{SUBTITLE_TYPES[format]}; charset=utf-8",
        headers={"Content-Disposition": _disposition(name)},
    )


def _disposition(name: str) -> str:
    """``inline`` with the file name: an ASCII fallback (no quotes or controls) and the name
    itself percent-encoded as UTF-8 (RFC 6266), so "café.srt" saves as café.srt."""
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    return f"inline; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


@router.get("/videos/{ref}/speakers")
def video_speakers(ref: RefParam, request: Request) -> dict[str, Any]:
    """The video's speakers, most talk first, with the names given (``vidagent speakers``);
    ``labelled`` false when its index lacks the speakers stage."""
    return server_of(request).session.speakers(ref).to_json()


class SpeakerNameBody(Body):
    name: Annotated[
        str,
        Field(max_length=MAX_REF_CHARS, description="the speaker's name; empty removes it"),
        AfterValidator(check_text),
    ]


@router.put("/videos/{ref}/speakers/{label}")
def name_speaker(
    ref: RefParam, label: RefParam, body: SpeakerNameBody, request: Request
) -> dict[str, Any]:
    """Name the speaker ``label`` (``S1``) of the video; an empty name removes it. 400 for a
    label the video does not have (the message lists them)."""
    return server_of(request).session.rename_speaker(ref, label, body.name).to_json()


def _time(text: str | None, name: str) -> float | None:
    try:
        return None if text is None else parse_time(text)
    except ValueError as e:
        raise ConfigError(f"{name}: {e}") from None


@router.get("/videos/{ref}/sheet")
def video_sheet(
    ref: RefParam,
    request: Request,
    t_from: Annotated[
        str | None, QueryParam(alias="from", max_length=32, description="seconds or HH:MM:SS")
    ] = None,
    t_to: Annotated[str | None, QueryParam(alias="to", max_length=32)] = None,
    count: Annotated[int, QueryParam(ge=1, le=MAX_SHEET_FRAMES)] = DEFAULT_SHEET_FRAMES,
    columns: Annotated[int | None, QueryParam(ge=1, le=MAX_SHEET_FRAMES)] = None,
) -> Response:
    """A contact sheet of the video, or of ``from``-``to``, as a JPEG: ``count`` frames with
    their times, from the index's thumbnails where they cover the span (``vidagent sheet``)."""
    session = server_of(request).session
    with tempfile.TemporaryDirectory(prefix="vidagent-sheet-") as tmp:
        drawn = session.sheet(
            ref,
            t_from=_time(t_from, "from"),
            t_to=_time(t_to, "to"),
            count=count,
            columns=columns,
            out=Path(tmp) / "sheet.jpg",
        )
        return Response(drawn.path.read_bytes(), media_type="image/jpeg")


@router.delete("/videos/{ref}")
def remove_video(ref: RefParam, request: Request) -> dict[str, Any]:
    return {"removed": server_of(request).session.remove(ref)}


@router.post("/search")
def search(body: SearchBody, request: Request) -> dict[str, Any]:
    hits = server_of(request).session.search(
        body.query,
        videos=body.videos,
        top=body.top,
        speaker=body.speaker,
        window=body.window(),
    )
    return {"hits": [h.to_json() | {"clip_index": h.hit.clip.clip_index} for h in hits]}


# -- asking and jobs ----------------------------------------------------------------------------


@router.post("/ask", status_code=202)
def ask(body: AskBody, request: Request) -> dict[str, Any]:
    from vidagent.budget import Budget

    server = server_of(request)
    videos = server.ask_refs(body.videos)
    # the question is resolved once, here: an unknown strategy or option is the request's
    # fault (400 now); None runs the default (the job's result carries the notice that says
    # which and why); the job runs this plan
    plan = server.session.plan_ask(
        videos,
        body.question,
        options=body.options,
        strategy=body.strategy,
        budget=Budget(steps=body.max_steps) if body.max_steps else None,
        task=body.task,
        strategy_options={"abstain": body.abstain, "critic": body.critic},
        window=body.window(),
    )
    assert plan.trace_path is not None  # trace=True: under the session's traces folder
    trace = plan.trace_path.stem
    job = server.start_ask(plan, body.model_dump() | {"videos": videos, "trace": trace})
    return {"job_id": job.job_id, "trace": trace}


def _job(request: Request, job_id: str) -> Job:
    job = server_of(request).jobs.get(job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return job


@router.get("/jobs")
def list_jobs(request: Request) -> dict[str, Any]:
    return {"jobs": [j.to_json() for j in server_of(request).jobs.list()]}


@router.get("/jobs/{job_id}")
def get_job(job_id: RefParam, request: Request) -> dict[str, Any]:
    return _job(request, job_id).to_json()


@router.delete("/jobs/{job_id}")
def cancel_job(job_id: RefParam, request: Request) -> dict[str, Any]:
    return server_of(request).jobs.cancel(_job(request, job_id)).to_json()


@router.post("/jobs/{job_id}/resume", status_code=202)
def resume_job(job_id: RefParam, request: Request) -> dict[str, Any]:
    """Run an interrupted (or cancelled, or failed) index job again; done work is skipped."""
    server, job = server_of(request), _job(request, job_id)
    if job.kind != "index" or job.state not in ("interrupted", "cancelled", "failed"):
        raise HTTPException(
            409,
            f"job {job_id} is a {job.state} {job.kind} job; only an "
            "interrupted, cancelled or failed index job can be resumed",
        )
    server.media_path(job.params["path"])  # still inside the roots of this server
    return server.jobs.restart(job, server.index_work).to_json()


def _sse(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


@router.get("/jobs/{job_id}/events")
async def job_events(job_id: RefParam, request: Request) -> StreamingResponse:
    """Server-Sent Events: what the job already emitted, then each event live, then ``end``."""
    return _event_stream(server_of(request), _job(request, job_id))


def _event_stream(server: Server, job: Job) -> StreamingResponse:
    past, queue = job.subscribe(asyncio.get_running_loop())
    if not past and job.done and job.kind == "ask":  # loaded from disk: its trace file has them
        past = [(e["kind"], e) for e in _trace_events(server, job.params.get("trace", ""))]

    async def stream() -> AsyncIterator[str]:
        ended = False
        try:
            for kind, data in past:
                ended = ended or kind == "end"
                yield _sse(kind, data)
            while not ended:
                try:
                    item = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except asyncio.TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if item is None:
                    break
                ended = item[0] == "end"
                yield _sse(*item)
            if not ended:
                yield _sse("end", job.to_json())
        finally:
            job.unsubscribe(queue)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


# -- streams (live and growing sources, watched as they arrive) ------------------------------


class StreamBody(Body):
    source: str = Field(
        min_length=1,
        max_length=4096,
        description="a growing file or HLS playlist inside a media root, or a stream URL "
        "(http, https, rtsp, rtmp, srt, udp, rtp)",
    )
    window: str | None = Field(
        None, max_length=32, description="stream seconds indexed at a time: 30, 30s, 1m"
    )
    alerts: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list, max_length=32, description="texts that raise an alert"
    )
    alert_url: str | None = Field(
        None, max_length=2048, description="also POST each alert, as JSON, here"
    )
    keep: str | None = Field(
        None, max_length=32, description="roll out windows older than this: 24h, 90m"
    )
    stall: str | None = Field(
        None, max_length=32, description="no data for this long is an outage (default 10s)"
    )
    give_up: str | None = Field(
        None, max_length=32, description="an outage this long ends the watch (default 5m)"
    )
    stages: list[Ref] | None = Field(
        None, max_length=MAX_STAGES, description="stages each window runs (default: as index)"
    )

    def options(self) -> dict[str, Any]:
        """The Watch's keyword arguments; a bad length is a ConfigError (400)."""
        out: dict[str, Any] = {"alerts": list(self.alerts)}
        for name, key in (
            ("window", "window_seconds"),
            ("keep", "keep_seconds"),
            ("stall", "stall_seconds"),
            ("give_up", "give_up_seconds"),
        ):
            given = getattr(self, name)
            if given is not None:
                try:
                    out[key] = parse_duration(given)
                except ValueError as e:
                    raise ConfigError(f"{name}: {e}") from None
        if self.stages is not None:
            out["stages"] = list(self.stages)
        return out


@router.post("/streams", status_code=202)
def start_stream(body: StreamBody, request: Request) -> dict[str, Any]:
    """Start watching a source (a job of kind ``watch``); 409 when it is watched already."""
    server = server_of(request)
    source = streams.check_source(server, body.source)
    options = body.options() | {"alert_url": streams.check_hook(body.alert_url)}
    stages = _check_stages(server, body.stages)
    if stages is not None:
        options["stages"] = stages
    try:
        job = streams.start(server, source, options)
    except streams.StreamConflict as e:
        raise HTTPException(409, str(e)) from None
    return {"job_id": job.job_id, "video_id": job.params["video_id"], "source": source}


@router.get("/streams")
def list_streams(request: Request) -> dict[str, Any]:
    return {"streams": streams.listing(server_of(request))}


@router.get("/streams/{video_id}")
def show_stream(video_id: RefParam, request: Request) -> dict[str, Any]:
    return streams.details(server_of(request), video_id)


@router.post("/streams/{video_id}/stop", status_code=202)
def stop_stream(video_id: RefParam, request: Request) -> dict[str, Any]:
    """Stop a running watch: it ends after the window being read; what was indexed stays."""
    return streams.stop(server_of(request), video_id).to_json()


@router.delete("/streams/{video_id}", status_code=202)
def delete_stream(video_id: RefParam, request: Request) -> dict[str, Any]:
    """The same as ``POST /streams/{video_id}/stop`` (the video stays in the Library)."""
    return streams.stop(server_of(request), video_id).to_json()


@router.get("/streams/{video_id}/events")
async def stream_events(video_id: RefParam, request: Request) -> StreamingResponse:
    """Server-Sent Events of the stream's running (or newest) watch: what it emitted so far
    (its newest events), then each ``window``, ``alert``, ``outage``... live, then ``end``."""
    server = server_of(request)
    job = await run_in_threadpool(streams.job_of, server, video_id)
    return _event_stream(server, job)


# -- traces and benchmark runs ------------------------------------------------------------------


def _trace_file(server: Server, trace_id: str) -> Path:
    path = server.session.trace_file(trace_id)
    if path is None:
        raise HTTPException(404, f"no trace {trace_id}")
    return path


def _trace_events(server: Server, trace_id: str) -> list[dict[str, Any]]:
    from vidagent.trace import Trace

    try:
        return [e.to_dict() for e in Trace.load(_trace_file(server, trace_id))]
    except HTTPException:
        return []


@router.get("/traces")
def list_traces(request: Request) -> dict[str, Any]:
    """The saved traces, newest first (the Session's order)."""
    fields = ("strategy", "question", "started_at", "answer")
    found = server_of(request).session.traces()
    return {"traces": [{"id": t.id} | {k: getattr(t, k) for k in fields} for t in found]}


@router.get("/traces/{trace_id}")
def get_trace(trace_id: RefParam, request: Request) -> dict[str, Any]:
    from vidagent.trace import Trace

    return {"events": [e.to_dict() for e in Trace.load(_trace_file(server_of(request), trace_id))]}


@router.get("/traces/{trace_id}/replay")
def replay_trace(trace_id: RefParam, request: Request) -> dict[str, Any]:
    server = server_of(request)
    return server.session.replay(_trace_file(server, trace_id)).to_json()


@router.get("/traces/{trace_id}/export")
def export_trace(trace_id: RefParam, request: Request) -> FileResponse:
    """The answer's evidence (:meth:`Session.export <vidagent.app.Session.export>`) as a zip
    download, ``<trace id>-evidence.zip``; written to a temporary folder that is removed once
    the response is sent."""
    from starlette.background import BackgroundTask

    server = server_of(request)
    path = _trace_file(server, trace_id)
    folder = Path(tempfile.mkdtemp(prefix="vidagent-export-"))
    name = f"{trace_id}-evidence.zip"
    try:
        result = server.session.export(path, out=folder / name, as_zip=True)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return FileResponse(
        result.path,
        media_type="application/zip",
        filename=name,
        background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
    )


@router.get("/bench/runs")
def list_runs(request: Request) -> dict[str, Any]:
    return {"runs": [r.to_json() for r in server_of(request).session.bench_runs()]}


@router.get("/bench/runs/{name}")
def get_run(name: RefParam, request: Request) -> dict[str, Any]:
    session = server_of(request).session
    run = session.bench_run_info(name)
    if run is None:
        raise HTTPException(404, f"no benchmark run {name}")
    with tempfile.TemporaryDirectory() as out:  # the report's files are not kept: read-only
        report = session.bench_report([run.path], out=Path(out), plots=False)
    return {"name": name, "manifest": run.manifest, "report": report.to_json()}


__all__ = ["router"]
