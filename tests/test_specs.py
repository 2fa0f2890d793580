"""Spec strings are parsed below both config and models (vidagent/specs.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vidagent.config import Settings
from vidagent.exceptions import ConfigError
from vidagent.models import registry
from vidagent.specs import PROVIDERS, parse_spec


def test_settings_check_specs_without_importing_the_models_package() -> None:
    code = (
        "import sys; from vidagent.config import Settings\n"
        "Settings(llm='gguf:smollm2-135m', vlm='none:')\n"
        "print(sorted(m for m in sys.modules if m.startswith('vidagent.models')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_provider_is_refused_when_settings_are_made() -> None:
    with pytest.raises(ConfigError, match="unknown model provider 'nosuch'"):
        Settings(llm="nosuch:model")


def test_the_registry_resolves_the_same_providers_the_settings_check() -> None:
    assert registry.PROVIDERS is PROVIDERS and registry.parse_spec is parse_spec
    assert parse_spec("GGUF:m?n_ctx=8").provider == "llamacpp"
