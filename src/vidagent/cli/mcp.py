"""``vidagent mcp``: the Library as an MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import click

from vidagent.cli.base import cli, session_of


@cli.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio (a client starts the server) or streamable HTTP",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="address to bind (http); any but loopback needs --token",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8001, show_default=True, help="port (http)"
)
@click.option(
    "--token",
    envvar="VIDAGENT_TOKEN",
    metavar="TOKEN",
    help="bearer token clients must send (http) [$VIDAGENT_TOKEN]",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="another host name clients may call the server by (http; repeatable), e.g. a proxy's",
)
@click.option(
    "--media-root",
    "media_roots",
    multiple=True,
    metavar="FOLDER",
    type=click.Path(file_okay=False, exists=True),
    help="a folder whose videos clients may index (repeatable; default: the current directory)",
)
@click.pass_context
def mcp(
    ctx: click.Context,
    transport: str,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    media_roots: tuple[str, ...],
) -> None:
    """Serve the Library to MCP clients: tools list_videos, list_streams, index_video,
    search, ask, get_frames and export_evidence; resources vidagent://videos and
    vidagent://traces."""
    from vidagent.app.core import long_running
    from vidagent.cli.serve import check_port
    from vidagent.server.mcp import MediaRoots, build_server, run

    if transport == "http":
        check_port(host, port)  # in one line, before anything starts (uvicorn's came after)
    long_running()
    session = session_of(ctx)
    server = build_server(session, MediaRoots(media_roots))
    if session.library_exists():
        # Open the Library (LanceDB, its tables) before listening, so the first call is answered
        # as fast as the next: opened by that call, it took 1 s on an idle machine and over 5 s
        # on a loaded one, past an HTTP client's default timeout.
        session.videos()
    run(
        server,
        "http" if transport == "http" else "stdio",
        host=host,
        port=port,
        token=token or None,
        allowed_hosts=allowed_hosts,
    )
