from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from vidagent.config import DEFAULT_SPECS, load_settings
from vidagent.exceptions import ConfigError


def test_defaults_are_the_offline_models(_isolated_home: Path) -> None:
    s = load_settings()
    assert {r: s.spec(r) for r in DEFAULT_SPECS} == DEFAULT_SPECS
    assert s.home == _isolated_home
    assert s.library_uri == str(_isolated_home / "library")


def test_a_relative_home_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # what is stored under it must mean the same from elsewhere
    assert load_settings({"home": "home"}).home == tmp_path / "home"
    assert load_settings({"home": "~/h"}).home == Path.home() / "h"


def test_layers_file_then_env_then_flags(
    _isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _isolated_home.mkdir()
    (_isolated_home / "config.toml").write_text(
        'llm = "openai:from-file"\nvlm = "openai:vlm-file"\nclip_seconds = 4\n'
        '[prices."openai:from-file"]\ninput = 1.5\noutput = 6\n'
    )
    monkeypatch.setenv("VIDAGENT_VLM", "openai:vlm-env")
    monkeypatch.setenv("VIDAGENT_LLM", "openai:llm-env")
    s = load_settings({"llm": "openai:llm-flag", "embed": None})
    assert s.llm == "openai:llm-flag"  # flag beats env and file
    assert s.vlm == "openai:vlm-env"  # env beats file
    assert s.clip_seconds == 4.0  # file beats default
    assert s.embed == DEFAULT_SPECS["embed"]  # None flags are ignored
    assert s.prices["openai:from-file"].output == 6.0


def test_dict_settings_from_env_are_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIDAGENT_CONCURRENCY", '{"http://127.0.0.1:8000/v1": 2}')
    assert load_settings().concurrency == {"http://127.0.0.1:8000/v1": 2}
    monkeypatch.setenv("VIDAGENT_CONCURRENCY", "two")
    with pytest.raises(ConfigError, match="must be JSON"):
        load_settings()


def test_openai_key_falls_back_to_the_conventional_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-conventional")
    assert load_settings().openai_api_key == "sk-conventional"
    monkeypatch.setenv("VIDAGENT_OPENAI_API_KEY", "sk-own")
    assert load_settings().openai_api_key == "sk-own"
    assert "sk-own" not in repr(load_settings())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("llm = ", "not valid TOML"),
        ("colour = 'blue'", "unknown setting"),
        ("clip_seconds = -1", "clip_seconds"),
        ("cache = 'sometimes'", "cache"),
        ("clip_seconds = inf", "clip_seconds: Input should be a finite number"),
        ("[prices.'openai:x']\ninput = nan", "finite number"),
    ],
)
def test_bad_config_file_says_what_is_wrong(
    _isolated_home: Path, content: str, message: str
) -> None:
    _isolated_home.mkdir()
    (_isolated_home / "config.toml").write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_settings()


def test_explicit_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(config_file=tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        # a semaphore of -1 crashed the first model call ("a bug"); 0 was read as the default
        ({"concurrency": {"http://127.0.0.1:9/v1": -1}}, "concurrency.http://127.0.0.1:9/v1"),
        ({"concurrency": {"http://127.0.0.1:9/v1": 0}}, "concurrency.http://127.0.0.1:9/v1"),
        ({"prices": {"openai:x": {"input": -1}}}, "prices.openai:x.input"),
    ],
)
def test_an_endpoint_limit_or_a_price_below_its_floor_is_refused(
    given: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError, match=f"^setting {re.escape(named)}: .*greater than or equal"):
        load_settings(given)
