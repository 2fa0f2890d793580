"""scripts/pip_install.py hands pip's own settings to uv: the environment over pip.conf, and a
local index or folder that does not exist left out (pip ignores it; uv fails on it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "pip_install", ROOT / "scripts" / "pip_install.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_environment_wins_over_pip_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /from/conf\nindex-url = https://conf.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_FIND_LINKS", "/from/env")
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    settings = _module().pip_settings()
    assert settings["find-links"] == "/from/env"
    assert settings["index-url"] == "https://conf.example/simple"


def test_a_missing_local_location_is_left_out(tmp_path: Path) -> None:
    present = _module().present
    assert present("https://pypi.org/simple") and present(str(tmp_path))
    assert present(tmp_path.as_uri())
    assert not present(str(tmp_path / "nowhere")) and not present((tmp_path / "nowhere").as_uri())
