"""Every strategy validates its options the same way: an unknown or ill-typed ``--set`` is one
line naming the allowed options and exit code 1, on ``ask`` and on ``bench run`` alike."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from clirun import vidagent

from vidagent.agents.base import Agent
from vidagent.agents.strategies import STRATEGIES, strategy_class
from vidagent.exceptions import ConfigError

NAMES = list(STRATEGIES.names())


def typed_field(cls: type[Agent]) -> str:
    """An option of a number or flag type, to give a value of the wrong type."""
    for f in dataclasses.fields(cls.Options):
        if isinstance(f.default, (bool, int, float)):
            return f.name
    raise AssertionError(f"{cls.name} has no number or flag option")


def last_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr  # one line, no traceback
    return lines[0]


@pytest.mark.parametrize("strategy", NAMES)
def test_an_unknown_option_names_the_allowed_ones(strategy: str, _isolated_home: Path) -> None:
    out = vidagent(
        "ask", "clip.mp4", "What?", "-s", strategy, "--set", "bogus=1", home=_isolated_home
    )
    allowed = ", ".join(
        sorted(f.name for f in dataclasses.fields(strategy_class(strategy).Options))
    )
    assert out.returncode == 1
    assert last_line(out.stderr) == f"error: {strategy} has no option bogus; its options: {allowed}"


@pytest.mark.parametrize("strategy", NAMES)
def test_an_ill_typed_option_is_one_line(strategy: str, _isolated_home: Path) -> None:
    name = typed_field(strategy_class(strategy))
    out = vidagent(
        "ask", "clip.mp4", "What?", "-s", strategy, "--set", f"{name}=lots", home=_isolated_home
    )
    assert out.returncode == 1
    assert last_line(out.stderr).startswith(f"error: {strategy} option {name}: ")
    assert "(got 'lots')" in out.stderr


def test_a_list_option_with_unknown_members(_isolated_home: Path) -> None:
    args = ("ask", "clip.mp4", "What?", "-s", "dvd", "--set", 'tools=["x"]')
    out = vidagent(*args, home=_isolated_home)
    assert out.returncode == 1
    assert last_line(out.stderr).startswith("error: dvd option tools: unknown ['x']")


def test_a_nested_option_is_checked_too(_isolated_home: Path) -> None:
    out = vidagent(
        "ask",
        "clip.mp4",
        "What?",
        "-s",
        "videoagent2",
        "--set",
        'tool_options={"detect_alpha": "wide"}',
        home=_isolated_home,
    )
    assert out.returncode == 1
    assert last_line(out.stderr).startswith("error: videoagent2 option tool_options.detect_alpha: ")


@pytest.mark.parametrize("strategy", NAMES)
def test_options_parse_the_same_way_in_python(strategy: str) -> None:
    cls = strategy_class(strategy)
    with pytest.raises(ConfigError, match=f"^{strategy} has no option nope; its options: "):
        cls.parse_options({"nope": 1})
    defaults = cls.parse_options(None)
    assert cls.parse_options(dataclasses.asdict(defaults)) == defaults
    # nan passes every comparison a check makes (nan < 0 is false): no float option takes it
    for field in dataclasses.fields(defaults):
        if isinstance(getattr(defaults, field.name), float):
            for bad in (math.nan, math.inf):
                with pytest.raises(ConfigError, match=field.name):
                    cls.parse_options({field.name: bad})


def test_an_unknown_strategy_lists_the_strategies(_isolated_home: Path) -> None:
    out = vidagent("ask", "clip.mp4", "What?", "-s", "telepathy", home=_isolated_home)
    assert out.returncode == 1
    assert last_line(out.stderr) == (
        f"error: unknown strategy 'telepathy'; choose one of: {', '.join(NAMES)}"
    )
