"""The MCP server (``vidagent mcp``): one :class:`~vidagent.app.session.Session` as tools and
resources for MCP clients, over stdio or streamable HTTP, with the official ``mcp`` SDK (2.x).

Tools: ``list_videos``, ``list_streams`` (the live sources watched into the Library),
``index_video``, ``search``, ``ask``, ``get_frames`` (JPEG images),
``export_evidence`` (an answer's evidence bundle, written under ``$VIDAGENT_HOME/exports``).
Resources: ``vidagent://videos``, ``vidagent://videos/{video_id}``, ``vidagent://traces`` and
``vidagent://traces/{trace_id}``. Each calls one Session method and returns its result's
``to_json()``; nothing is re-implemented here.

Errors: a :class:`~vidagent.exceptions.VidagentError` (the caller's to fix, or a file, Library or
model failure) becomes a tool error carrying its one-line message; anything else is our bug, and
the SDK shows the client only the tool's name while the traceback goes to the server's log.

Arguments are bounded as the HTTP API's are (:mod:`vidagent.app.limits`); an argument the tool
does not take is refused, and a refused call's error is one line, ``tool: field: reason``.
Counts, sizes, times and switches take their JSON type only (pydantic's strict mode): ``true``
as ``top`` was one clip, ``"yes"`` as ``zip`` a zip, and ``"NaN"`` as a time was refused as
"less than 0".

Security is the HTTP API's (:mod:`vidagent.server.security`): a client names files only inside
the media roots (default: the current directory), checked after symlinks are resolved so that
neither ``..`` nor a link escapes; streamable HTTP binds loopback unless told otherwise, any
other address needs a bearer token, compared in constant time, and the ``Host`` and ``Origin``
headers are checked by the same :class:`~vidagent.server.security.HostOriginGuard` as the HTTP
API's (421, 403).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from contextvars import ContextVar
from functools import partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError

from vidagent._version import __version__
from vidagent.app.indexing import index_report
from vidagent.app.limits import (
    MAX_OPTIONS,
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
    describe_errors,
)
from vidagent.app.results import video_json
from vidagent.app.window import TimeWindow
from vidagent.exceptions import (
    BackendMissingError,
    ToolInputError,
    UserError,
    VidagentError,
    VideoNotFoundError,
    for_api,
)
from vidagent.server.security import (
    Forbidden,
    HostOriginGuard,
    HostRule,
    inside_roots,
    presented_token,
    require_token_for_host,
    resolve_roots,
    token_ok,
)
from vidagent.timecode import clock

try:
    from mcp.server.mcpserver import Context, Image, MCPServer
    from mcp.server.mcpserver.exceptions import (
        ResourceError,
        ResourceNotFoundError,
        ToolError,
        UnexpectedToolError,
    )
    from mcp.server.transport_security import TransportSecuritySettings
except ImportError as e:  # pragma: no cover - depends on the install
    raise BackendMissingError("the MCP server (the mcp package)", "mcp") from e

if TYPE_CHECKING:
    from vidagent.app import Session

#: the most frames one ``get_frames`` call returns
MAX_FRAMES = 16
#: what clients are told about the server when they connect
INSTRUCTIONS = (
    "vidagent answers questions about long videos. list_videos shows what is indexed; "
    "list_streams the live sources being watched (search and ask take their video ids); "
    "index_video adds a file; search finds clips by meaning; ask answers a question with "
    "evidence spans; get_frames shows the frames at given seconds."
)

Scope = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]
]
F = TypeVar("F", bound=Callable[..., Any])

Videos = Annotated[
    list[VideoOrPath],
    Field(
        description="video ids, unique id prefixes or names in the Library, or video files "
        "inside the media roots (indexed first where needed)",
        min_length=1,
        max_length=MAX_VIDEOS,
    ),
]
VideoRef = Annotated[Ref, Field(description="a video id, unique id prefix or name in the Library")]
Last = Annotated[
    str | None,
    Field(
        description="only the last LENGTH of each video before its live edge (the end "
        "indexed so far): 10m, 90s, 1h30m",
        max_length=32,
    ),
]
Since = Annotated[
    str | None,
    Field(
        description="only from this wall-clock time, HH:MM[:SS] or ISO-8601 (needs the "
        "video's recording start)",
        max_length=64,
    ),
]
Until = Annotated[str | None, Field(description="only up to this wall-clock time", max_length=64)]
Times = Annotated[
    list[Annotated[float, Field(ge=0, strict=True)]],
    Field(
        description=f"seconds from the start, 1 to {MAX_FRAMES} of them",
        min_length=1,
        max_length=MAX_FRAMES,
    ),
]


class MediaRoots:
    """The folders whose files a client may name.

    Args:
        roots: folders (default: the current directory); each must exist.

    Raises:
        UserError: a root is not a folder.
    """

    def __init__(self, roots: Sequence[str | Path] = ()) -> None:
        self.roots = resolve_roots(roots)
        for root in self.roots:
            if not root.is_dir():
                raise UserError(f"media root {root} is not a folder")

    def file(self, path: str) -> Path:
        """The real path of ``path`` (relative paths are read from the first root), by the HTTP
        API's rule (:func:`~vidagent.server.security.inside_roots`).

        Raises:
            UserError: it lies outside every root once ``..`` and symlinks are resolved.
        """
        try:
            return inside_roots(path, self.roots)
        except Forbidden as e:
            shown = ", ".join(str(r) for r in self.roots)
            raise UserError(
                f"{e} ({shown}); start `vidagent mcp` with --media-root FOLDER to allow another"
            ) from None

    def video(self, ref: str, session: Session) -> str:
        """An absolute path for a file inside the roots, else the Library's id for ``ref``.

        A reference that looks like a path (a separator, ``~``) must be a file inside the roots;
        a bare name is a file in the first root if one is there, else a Library reference. Library
        references are resolved here so that the Session never reads a bare name as a file
        relative to the server's own working directory.
        """
        if "/" in ref or "\\" in ref or ref.startswith("~"):
            return str(self.file(ref))
        if (self.roots[0] / ref).is_file():
            return str(self.file(ref))
        return session.existing_library().resolve(ref)


#: The running tool call's stop flag, set when its client cancels the call.
_STOP: ContextVar[threading.Event | None] = ContextVar("vidagent_mcp_stop", default=None)


def _stopping() -> Callable[[], bool]:
    """``should_stop`` for the work of the running tool call: true once it is cancelled."""
    flag = _STOP.get()
    return flag.is_set if flag is not None else (lambda: False)


def _tool_errors(fn: F) -> F:
    """``fn`` run on a worker thread, vidagent's errors turned into tool errors that carry
    their message, and a client's ``notifications/cancelled`` passed on to the work: the SDK
    cancels the call's scope, which a plain worker thread does not hear (an index or a question
    ran on to its end), so the wait is abandoned and the work's ``should_stop``
    (:func:`_stopping`) says stop; it ends at its next check (between clips, before a step or a
    model call, inside a model call under way where it can stop)."""

    @wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        import anyio

        flag = threading.Event()
        token = _STOP.set(flag)  # the worker thread runs in a copy of this context
        try:
            return await anyio.to_thread.run_sync(
                partial(fn, *args, **kwargs), abandon_on_cancel=True
            )
        except VidagentError as e:
            raise ToolError(for_api(str(e))) from None
        except anyio.get_cancelled_exc_class():
            flag.set()
            raise
        finally:
            _STOP.reset(token)

    return wrapper  # type: ignore[return-value]


def _resource_errors(fn: F) -> F:
    """``fn`` with vidagent's errors turned into resource errors (not found, or the message)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except VideoNotFoundError as e:
            raise ResourceNotFoundError(str(e)) from None
        except VidagentError as e:
            raise ResourceError(for_api(str(e))) from None

    return wrapper  # type: ignore[return-value]


def _dump(body: Any) -> str:
    return json.dumps(body, indent=2, default=str)


class Tools:
    """The tools and resources over one Session; each method is registered by
    :func:`build_server` under its own name."""

    def __init__(self, session: Session, roots: MediaRoots) -> None:
        self.session, self.roots = session, roots

    # -- tools ------------------------------------------------------------------------------------

    def list_videos(self) -> dict[str, Any]:
        """The videos in the Library (``videos``): id, name, duration, source file and indexed
        stages of each."""
        # An object, not a bare list: the SDK would make each list item a text block of its own.
        return {"videos": [video_json(v) for v in self.session.videos()]}

    def list_streams(self) -> dict[str, Any]:
        """The live or growing sources watched into the Library (``streams``): video id, source,
        state (``watching``, ``stopped``, ``ended``, ``failed``; ``interrupted``: its watcher
        was killed, and the same watch resumes it), live edge (seconds indexed so
        far), recording start, windows and outages. ``search`` and ``ask`` take a stream's
        video id, with ``last`` to read only the minutes before its live edge."""
        from vidagent.server.streams import library_streams

        return {"streams": library_streams(self.session)}

    def index_video(
        self,
        path: Annotated[
            FilePath,
            Field(
                description="a video file inside the media roots (a relative path is read from "
                "the first root)"
            ),
        ],
        stages: Annotated[
            list[Ref] | None,
            Field(
                description="ingest stages to run (default: the configured pipeline)",
                min_length=1,  # [] ran nothing and answered as if it had indexed
                max_length=MAX_STAGES,
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Index a video file so that it can be searched and asked about; returns what was
        built (clips, shots, each stage's time). Already indexed stages are reused."""
        real = self.roots.file(path)
        result = self.session.index_file(real, stages=stages, should_stop=_stopping())
        if result.error is not None:
            raise ToolError(str(result.error))
        return index_report(self.session, real, result).to_json()

    def search(
        self,
        query: Annotated[Query, Field(description="what to look for, in words")],
        videos: Annotated[
            list[Ref] | None,
            Field(
                description="only these videos (ids or names); leave it out to search all",
                min_length=1,  # [] read as "all" where ask refuses it
                max_length=MAX_VIDEOS,
            ),
        ] = None,
        top: Annotated[
            int, Field(description="how many clips", ge=1, le=MAX_TOP, strict=True)
        ] = 10,
        speaker: Annotated[
            Ref | None,
            Field(description="only clips where this speaker talks: a label (S1) or a name"),
        ] = None,
        last: Last = None,
        since: Since = None,
        until: Until = None,
    ) -> dict[str, Any]:
        """Clips most similar to ``query`` in meaning, best first (``hits``), with their spans
        (seconds and HH:MM:SS, and wall-clock times where the recording start is known),
        captions, transcripts, on-screen text and who speaks; ``last``/``since``/``until``
        search only that window of each video (a stream still being indexed: up to its live
        edge now)."""
        window = TimeWindow.parse(last, since, until)
        refs = [self.roots.video(v, self.session) for v in videos] if videos else None
        hits = self.session.search(query, videos=refs, top=top, speaker=speaker, window=window)
        return {"hits": [h.to_json() for h in hits]}

    def ask(
        self,
        question: Annotated[Question, Field(description="the question")],
        videos: Videos,
        options: Annotated[
            Options | None,
            Field(
                description="answer options of a multiple-choice question, in order (A, B, …; "
                f"at most {MAX_OPTIONS})"
            ),
        ] = None,
        strategy: Annotated[
            Ref | None,
            Field(
                description="the agent strategy: dvd, videoagent2, eea, avi, cvr, retrieval or a "
                "plugin's (default: dvd with a model endpoint, else retrieval, which needs no LLM)"
            ),
        ] = None,
        max_steps: Annotated[
            int | None,
            Field(
                description="reasoning steps at most (default: the strategy's)",
                ge=1,
                le=MAX_STEPS,
                strict=True,
            ),
        ] = None,
        abstain: Annotated[
            Literal["auto", "never", "always-report"] | None,
            Field(
                description="auto: a free-form answer whose checked claims are found nowhere it "
                "cites becomes 'insufficient evidence' (default: the server's abstain setting)"
            ),
        ] = None,
        critic: Annotated[
            Literal["auto", "on", "off"] | None,
            Field(
                description="a reader says of each cited moment whether it answers the "
                "question (auto, the default: with a vision model)"
            ),
        ] = None,
        last: Last = None,
        since: Since = None,
        until: Until = None,
    ) -> dict[str, Any]:
        """Answer a question about one or more videos with an agent. Returns the answer, its
        letter for a multiple-choice question, the evidence spans ``[video_id, start, end]`` in
        seconds, each citation checked (``answer.citations``: label found/partial/not-found/
        unchecked, the quote's ``t0``/``t1``, the quote), whether it abstained or is unverified,
        the run's totals,
        ``notice`` (a line on the strategy that answered: without a model endpoint, that the
        agents need one), and ``trace_id`` (read ``vidagent://traces/{trace_id}``).
        ``last``/``since``/``until`` limit all the agent sees to that window of each video."""
        from vidagent.budget import Budget

        refs = [self.roots.video(v, self.session) for v in videos]
        budget = Budget(steps=max_steps)
        plan = self.session.plan_ask(
            refs,
            question,
            options=options or (),
            strategy=strategy,
            budget=budget,
            strategy_options={"abstain": abstain, "critic": critic},
            window=TimeWindow.parse(last, since, until),
        )
        result = plan.run(should_stop=_stopping())
        trace = result.trace.path
        return result.to_json() | {"trace_id": trace.stem if trace else None}

    def get_frames(
        self,
        video: VideoRef,
        times: Times,
        size: Annotated[
            int, Field(description="long side in pixels", ge=64, le=2048, strict=True)
        ] = 512,
    ) -> list[Image | str]:
        """The video's frames nearest the given times, as JPEG images, after a line naming them."""
        record = self.session.show(self.roots.video(video, self.session)).video
        parts = self.session.frames(record.video_id, times, size=size)  # in the video's span
        line = f"{len(parts)} frames of {record.name} ({record.video_id}) at " + ", ".join(
            f"{t:g} s ({clock(t)})"
            for t in times  # 5.5 s read 00:00:06
        )
        return [line, *(Image(data=p, format="jpeg") for p in parts)]

    def export_evidence(
        self,
        trace_id: Annotated[
            Ref | None,
            Field(description="a saved trace (see vidagent://traces); default: the last answer"),
        ] = None,
        zip: Annotated[
            bool, Field(description="write one .zip instead of a folder", strict=True)
        ] = False,
    ) -> dict[str, Any]:
        """Write an answer's evidence (each cited span as an MP4 clip, frames, a contact sheet
        per video, the cited speech as text/SRT/WebVTT, timeline.md, index.json) under the
        server's ``$VIDAGENT_HOME/exports``; returns the bundle's ``path`` and its index."""
        path = None
        if trace_id is not None:
            path = self.session.trace_file(trace_id)
            if path is None:
                raise ToolInputError(f"no trace {trace_id!r}; see vidagent://traces")
        trace = path or self.session.last_answer_trace()
        folder = self.session.settings.home / "exports"
        out, n = folder / trace.stem, 1
        while out.exists() or out.with_name(out.name + ".zip").exists():
            n += 1
            out = folder / f"{trace.stem}-{n}"
        return self.session.export(trace, out=out, as_zip=zip).to_json()

    # -- resources --------------------------------------------------------------------------------

    def videos_resource(self) -> str:
        """The videos in the Library (JSON)."""
        return _dump(self.list_videos()["videos"])

    def video_resource(self, video_id: str) -> str:
        """A video with its summary, subject registry and clips (JSON)."""
        return _dump(self.session.show(video_id).to_json())

    def traces_resource(self) -> str:
        """The saved traces, newest first: ``trace_id`` and the file's path (JSON)."""
        found = self.session.traces(details=False)
        return _dump([{"trace_id": t.id, "path": str(t.path)} for t in found])

    def trace_resource(self, trace_id: str) -> str:
        """A saved run: its answer, totals and every trace event (JSON)."""
        path = self.session.trace_file(trace_id)
        if path is None:
            raise ResourceNotFoundError(f"no trace {trace_id!r}; see vidagent://traces")
        result = self.session.replay(path)
        events = [e.to_dict() for e in result.trace.events]
        return _dump(
            {"trace_id": trace_id, **result.to_json(), "trace": str(path), "events": events}
        )


class VidagentMCP(MCPServer):
    """The SDK's server, stricter at the edge: a call naming an argument its tool does not take
    is refused (the SDK would drop it silently), and arguments that do not validate come back as
    one line, ``tool: field: reason; …``, without the values (the SDK's message runs to several
    lines and echoes them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments: dict[str, frozenset[str]] = {}

    def take(self, fn: Callable[..., Any], *, structured_output: bool | None = None) -> None:
        """Register ``fn`` as a tool (vidagent's errors turned into tool errors), noting the
        arguments it takes."""
        self.arguments[fn.__name__] = frozenset(inspect.signature(fn).parameters)
        self.add_tool(_tool_errors(fn), structured_output=structured_output)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        known = self.arguments.get(name)
        unknown = sorted(set(arguments) - known) if known is not None else []
        if unknown:
            takes = ", ".join(sorted(known or ())) or "no arguments"
            raise ToolError(f"{name}: unknown argument(s) {', '.join(unknown)}; it takes {takes}")
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                line = describe_errors(e.__cause__.errors())
                raise ToolError(f"{name}: {line}") from e.__cause__
            raise


def build_server(session: Session, roots: MediaRoots | None = None) -> MCPServer:
    """An MCP server over ``session``: its tools and resources (see the module docstring)."""
    tools = Tools(session, roots or MediaRoots())
    server = VidagentMCP(
        "vidagent", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    for fn in (
        tools.list_videos,
        tools.list_streams,
        tools.index_video,
        tools.search,
        tools.ask,
        tools.export_evidence,
    ):
        server.take(fn)
    # Images and a line of text: unstructured content, no output schema.
    server.take(tools.get_frames, structured_output=False)
    resources: list[tuple[str, str, Callable[..., str]]] = [
        ("videos", "vidagent://videos", tools.videos_resource),
        ("video", "vidagent://videos/{video_id}", tools.video_resource),
        ("traces", "vidagent://traces", tools.traces_resource),
        ("trace", "vidagent://traces/{trace_id}", tools.trace_resource),
    ]
    for name, uri, read in resources:
        server.resource(uri, name=name, mime_type="application/json")(_resource_errors(read))
    return server


# -- transports -----------------------------------------------------------------------------------


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (the
    HTTP API's :class:`~vidagent.server.security.TokenGuard` guards ``/api`` only); others get
    401. Lifespan events pass through."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            # Header only: an MCP client can always set one, so no ?token= in logged URLs.
            if not token_ok(presented_token("POST", headers, {}), self.token):
                body = b'{"error": "missing or wrong bearer token"}'
                sent = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": sent})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> ASGIApp:
    """The streamable-HTTP ASGI app (at ``/mcp``), behind a bearer token when one is given, and
    behind the HTTP API's Host and Origin rule (:class:`~vidagent.server.security.HostRule`;
    ``allowed_hosts`` as ``--allowed-host``) in place of the SDK's own, so that one rule guards
    both servers whatever the bind.

    Raises:
        UserError: ``host`` is not loopback and there is no token, or the token is too weak.
    """
    require_token_for_host(host, token)
    # The SDK's check is off (it would stay on only for loopback binds); its POST Content-Type
    # check still runs.
    off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app: ASGIApp = server.streamable_http_app(host=host, transport_security=off)
    if token:
        app = BearerAuth(app, token)
    return HostOriginGuard(app, HostRule(host, allowed_hosts))


def run(
    server: MCPServer,
    transport: Literal["stdio", "http"] = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8001,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve until interrupted: stdio, or streamable HTTP at ``http://HOST:PORT/mcp``."""
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = http_app(server, host=host, token=token, allowed_hosts=allowed_hosts)
    uvicorn.run(app, host=host, port=port, log_level="warning")
