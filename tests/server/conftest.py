"""Shared fixtures of the server tests: a real indexed clip, fake models, a live server.

The small generated clip is indexed once per session with the fake models of
``tests/liveserver.py`` into a template Library; each test gets its own copy (so removing a
video in one test touches no other) under its own ``VIDAGENT_HOME``. :func:`live_server` starts
the real app under uvicorn on a free loopback port in a thread and stops it with
``should_exit``. Tests import helpers from ``liveserver``, never from this module (see there).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import INDEX_SPECS
from liveserver import Live, fake_models, serve

from vidagent.config import Settings, load_settings


@pytest.fixture(scope="session")
def template_library(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Library holding the small clip, indexed through the default stages with fake models."""
    from vidagent.app import Session

    root = tmp_path_factory.mktemp("server-library") / "library"
    settings = load_settings({**INDEX_SPECS, "library": str(root)})
    with Session(settings, models=fake_models(settings)) as session:
        (report,) = session.index([small_video])
    assert report.ok, report.error
    return root


@pytest.fixture
def media(tmp_path: Path, small_video: Path) -> Path:
    """A media root holding a copy of the small clip as ``clip.mp4``."""
    root = tmp_path / "media"
    root.mkdir()
    shutil.copy(small_video, root / "clip.mp4")
    return root


@pytest.fixture
def api_settings(template_library: Path, tmp_path: Path, _isolated_home: Path) -> Settings:
    """Fake specs over this test's own copy of the indexed Library."""
    library = tmp_path / "library"
    shutil.copytree(template_library, library)
    return load_settings({**INDEX_SPECS, "library": str(library)})


@pytest.fixture
def live_server(api_settings: Settings, media: Path) -> Iterator[Callable[..., Live]]:
    """A factory: ``live_server(**create_app options)`` starts a server (fake models, the
    ``media`` root unless given); every one started is stopped after the test."""
    from vidagent.server.app import create_app

    started: list[Live] = []

    def start(settings: Settings | None = None, delay: float = 0.0, **options: Any) -> Live:
        settings = settings or api_settings
        options.setdefault("media_roots", [media])
        app = create_app(settings, models=fake_models(settings, delay), **options)
        started.append(serve(app))
        return started[-1]

    yield start
    for live in started:
        live.stop()
