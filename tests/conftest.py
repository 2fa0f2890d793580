"""Suite-wide isolation: no test reads the user's home, config or a model hub."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from factories import FAKE_SPECS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own VIDAGENT_HOME and no VIDAGENT_* settings from the outside."""
    for name in list(os.environ):
        if name.startswith("VIDAGENT_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("VIDAGENT_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def small_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 s, 640x360, 3 hard cuts' worth of shots, burned-in text from 5 s to 8 s, a tone."""
    from vidagent.media.synth import make_video

    path = tmp_path_factory.mktemp("media") / "small.mp4"
    make_video(
        path, duration=12, shots=3, text_overlays=[(5.0, 8.0, "HELLO VIDAGENT")], audio="tone"
    )
    return path


@pytest.fixture
def fake_env() -> dict[str, str]:
    """``VIDAGENT_*`` variables selecting :data:`FAKE_SPECS`, for CLI subprocesses."""
    return {f"VIDAGENT_{role.upper()}": spec for role, spec in FAKE_SPECS.items()}
