"""``vidagent serve``: the HTTP API and web UI under uvicorn."""

from __future__ import annotations

import click

from vidagent.cli.base import cli, settings_of
from vidagent.exceptions import BackendMissingError, UserError


@cli.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="address to listen on; anything but loopback needs a token",
)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="VIDAGENT_TOKEN",
    metavar="T",
    help="bearer token every /api request must send; 16 characters or more beyond loopback "
    "[$VIDAGENT_TOKEN]",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="another host name clients may call the server by (repeatable), e.g. a proxy's "
    "[default: the bound address only]",
)
@click.option(
    "--media-root",
    "media_roots",
    multiple=True,
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False),
    help="folder clients may name files in (repeatable) [default: the current folder]",
)
@click.option(
    "--max-upload-mb",
    default=2048,
    show_default=True,
    type=click.IntRange(1),
    help="largest upload accepted, in MiB",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="URL",
    help="origin allowed cross-origin requests (repeatable); any other Origin is refused "
    "[default: none]",
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: tuple[str, ...],
    media_roots: tuple[str, ...],
    max_upload_mb: int,
    cors_origins: tuple[str, ...],
) -> None:
    """Serve the HTTP API (and the web UI) over this home's Library."""
    from vidagent.app.core import long_running
    from vidagent.server.security import require_token_for_host

    require_token_for_host(host, token)
    check_port(host, port)  # before the app takes this home's jobs
    long_running()
    try:
        import uvicorn

        from vidagent.server.app import create_app
    except ImportError:
        raise BackendMissingError("the HTTP server (fastapi, uvicorn)", "serve") from None
    from vidagent.app.holds import hold

    settings = settings_of(ctx)
    # One server runs a home's jobs: a second would mark the first's running jobs interrupted
    # on disk as it started (and resume them beside it).
    held = hold(
        settings.home / "jobs" / ".lock",
        lambda pid: (
            f"another vidagent server (process {pid}) serves {settings.home}; stop it, or "
            "serve another --home"
        ),
    )
    with held:
        app = create_app(
            settings,
            token=token or None,
            host=host,
            allowed_hosts=allowed_hosts,
            media_roots=media_roots,
            max_upload_bytes=max_upload_mb * 1024 * 1024,
            cors_origins=cors_origins,
        )
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"vidagent serving on http://{shown}:{port}", err=True)
        uvicorn.run(app, host=host, port=port, log_level="info")


def check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on, before anything starts (uvicorn would say so
    only after the app had started, and after "serving on").

    Raises:
        UserError: the address is taken, or cannot be bound here.
    """
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except socket.gaierror as e:  # the host is no name or address here
            raise UserError(
                f"cannot serve on {host}: {e.strerror or e}; give another --host"
            ) from None
        except OSError as e:
            import errno

            other = "--port" if e.errno == errno.EADDRINUSE else "--host or --port"
            raise UserError(
                f"cannot serve on {host}:{port}: {e.strerror or e}; give another {other}"
            ) from None
