"""What every command shares: the ``vidagent`` group with its global options, the settings and the
Session of the running command, and the parsers of common arguments. The commands (one module
per family, registered by :mod:`vidagent.cli`) import it, and it imports none of them."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from vidagent import timecode
from vidagent._version import __version__
from vidagent.config import Settings, load_settings
from vidagent.roles import ROLES
from vidagent.timecode import hms

if TYPE_CHECKING:
    from vidagent.app import Session, TimeWindow

__all__ = [
    "POSITIVE",
    "abort_note",
    "cli",
    "echo_json",
    "hms",
    "on_abort",
    "parse_sets",
    "parse_time",
    "session_of",
    "settings_of",
    "strategy_sets_option",
    "tool_mode_option",
    "window_of",
    "window_options",
]

F = TypeVar("F", bound=Callable[..., Any])


class _Positive(click.FloatRange):
    """A number above 0 (a budget: seconds, dollars): click's range lets nan through, since
    nan fails every comparison."""

    def __init__(self) -> None:
        super().__init__(min=0.0, min_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


#: A click type for a finite number above 0.
POSITIVE = _Positive()

#: What the running command keeps when it is interrupted (:func:`on_abort`; main() says it).
_ABORT_NOTE: list[str] = []


def on_abort(note: str) -> None:
    """Say ``note`` after "aborted" should this command be interrupted (Ctrl-C): what it kept,
    and how to go on."""
    _ABORT_NOTE[:] = [note]


def abort_note() -> str:
    """The running command's :func:`on_abort` note ("" when none), cleared."""
    note = "".join(_ABORT_NOTE)
    _ABORT_NOTE.clear()
    return note


def parse_time(text: str) -> float:
    """Seconds from a command-line time (seconds or ``HH:MM:SS``)."""
    try:
        return timecode.parse_time(text)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def settings_of(ctx: click.Context) -> Settings:
    return ctx.find_object(Settings) or ctx.ensure_object(Settings)


def session_of(ctx: click.Context, settings: Settings | None = None) -> Session:
    """A Session for this command, closed when the command ends."""
    from vidagent.app import Session

    session = Session(settings or settings_of(ctx))
    ctx.call_on_close(session.close)
    return session


def echo_json(body: Any) -> None:
    click.echo(json.dumps(body, indent=2, default=str))


def parse_sets(sets: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs of ``--set`` with JSON values where they parse (``true``, ``3``,
    ``["a"]``); the strategy validates them."""
    out: dict[str, Any] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--set")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


#: ``--tool-mode``, for the commands that run a strategy (ask, ground, bench run).
tool_mode_option = click.option(
    "--tool-mode",
    type=click.Choice(["auto", "native", "json"]),
    default="auto",
    show_default=True,
    help="native tool calls or JSON actions",
)
#: ``--set KEY=VALUE``: a strategy option, parsed by :func:`parse_sets`.
strategy_sets_option = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="a strategy option, a JSON value where it parses (e.g. top_k=8)",
)


def window_options(fn: F) -> F:
    """``--last``, ``--since`` and ``--until``: ask or search only part of each video
    (:mod:`vidagent.app.window`); the command takes them as ``last``, ``since``, ``until``."""
    for option in reversed(
        (
            click.option(
                "--last",
                metavar="LENGTH",
                help="only the last LENGTH before the live edge (a growing video's indexed "
                "end, a file's end): 10m, 90s, 1h30m",
            ),
            click.option(
                "--since",
                metavar="TIME",
                help="only from this wall-clock time: HH:MM[:SS] or ISO-8601 (needs the "
                "video's recording start, `index --started-at`)",
            ),
            click.option("--until", metavar="TIME", help="only up to this wall-clock time"),
        )
    ):
        fn = option(fn)
    return fn


def window_of(last: str | None, since: str | None, until: str | None) -> TimeWindow | None:
    """The :class:`~vidagent.app.window.TimeWindow` of :func:`window_options`' values (None:
    none given); a bad one is a one-line ConfigError before anything runs."""
    from vidagent.app import TimeWindow

    return TimeWindow.parse(last, since, until)


def _role_options(fn: F) -> F:
    for role in reversed(ROLES):
        fn = click.option(
            f"--{role.replace('_', '-')}",
            role,
            metavar="SPEC",
            help=f"model spec for the {role} role",
        )(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vidagent")
@click.option("--home", type=click.Path(file_okay=False), help="home directory [$VIDAGENT_HOME]")
@click.option("--library", metavar="URI", help="Library directory or URI [$VIDAGENT_LIBRARY]")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="config file")
@_role_options
@click.pass_context
def cli(ctx: click.Context, /, config_file: str | None, **flags: Any) -> None:
    """Answer questions about long videos with agents over a multi-granular index."""
    ctx.obj = load_settings(flags, config_file=config_file)
