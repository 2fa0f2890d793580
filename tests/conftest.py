"""Suite-wide isolation: no test reads the user's home, config or a model hub."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from factories import FAKE_SPECS

if TYPE_CHECKING:
    from vidagent.ingest.pipeline import IndexResult

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Under pytest-xdist each worker is one process among several on the same cores: its share is
# the cores divided among the workers, as a process pool's worker gets (models size their
# thread pools from OMP_NUM_THREADS, and so do the interpreters the tests start). Without it two
# workers each running llama.cpp on every core spin against each other, several times slower.
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


#: The files whose tests took longest, in seconds of one worker's time (``pytest -n 3
#: --durations=0`` on 2 idle cores, AMD EPYC, 2026-11-29), longest first: 1,246 s of the run's
#: worker time in all, these 26 files 994 s of it. A file missing here only starts later.
SLOWEST = (
    "tests/app/test_watching.py",  # 104 s: streams paced in real time
    "tests/app/test_executor_ray.py",  # 103 s
    "tests/agents/test_ask_real.py",  # 90 s
    "tests/agents/test_videoagent2.py",  # 63 s
    "tests/agents/test_eea.py",  # 57 s
    "tests/ingest/test_pipeline.py",  # 50 s
    "tests/train/test_smollm2.py",  # 49 s
    "tests/ingest/test_ingest_speed_levers.py",  # 47 s
    "tests/app/test_executor_pool.py",  # 44 s
    "tests/library/test_concurrency.py",  # 41 s
    "tests/test_docs.py",  # 37 s
    "tests/models/test_bert.py",  # 37 s
    "tests/models/test_transformers_llm.py",  # 36 s
    "tests/server/test_browser.py",  # 32 s
    "tests/server/test_streams.py",  # 28 s
    "tests/agents/test_offline_accuracy.py",  # 23 s
    "tests/ingest/test_perception_stages.py",  # 23 s
    "tests/ingest/test_end_to_end.py",  # 21 s
    "tests/server/test_mcp.py",  # 18 s
    "tests/server/test_api.py",  # 16 s
    "tests/agents/test_cvr_real.py",  # 13 s
    "tests/train/test_grpo.py",  # 12 s
    "tests/server/test_index_parity.py",  # 11 s
    "tests/ingest/test_awkward_videos.py",  # 11 s
    "tests/models/test_openai_llamacpp_server.py",  # 10 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect the slowest files first, longest first (``SLOWEST``), then the other files that
    load a bundled model or a real clip, each file's tests in their order. The test command
    hands whole files to its workers in collection order (``--dist loadfile
    --no-loadscope-reorder``: by default pytest-xdist 3.8 reorders files by their number of
    tests, which sent the slow files of one or two tests last, to run alone at the end): the
    quick files then fill in at the end, when the workers run out at nearly the same time."""
    rank = {name: i for i, name in enumerate(SLOWEST)}
    first: dict[Path, int] = {}
    for item in items:
        first.setdefault(item.path, len(first))
    heavy = {
        i.path for i in items if i.get_closest_marker("models") or i.get_closest_marker("realmedia")
    }

    def order(item: pytest.Item) -> tuple[int, bool, int]:
        name = item.path.relative_to(config.rootpath).as_posix()
        return rank.get(name, len(rank)), item.path not in heavy, first[item.path]

    items.sort(key=order)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the two ``/dev/null`` files llama-cpp-python opens when it is imported and never
    closes: at the interpreter's exit they were reported ("Exception ignored … ResourceWarning:
    unclosed file") by each worker that had imported llama.cpp and torch, whose output the test
    command printed."""
    import sys

    utils = sys.modules.get("llama_cpp._utils")
    for name in ("outnull_file", "errnull_file"):
        opened = getattr(utils, name, None)
        if opened is not None:
            opened.close()


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


@pytest.fixture(scope="session")
def slide_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 s at 320x180: a still picture for 20 s (a caption on it from 15 s), then a panning
    shot. Clips of 5 s: 0 captioned, 1 and 2 repeat it, 3 has the caption, 4-7 move."""
    from vidagent.media.synth import make_video

    path = tmp_path_factory.mktemp("slides") / "slides.mp4"
    make_video(
        path,
        duration=40,
        size=(320, 180),
        shots=2,
        still_shots=(0,),
        text_overlays=[(15.0, 20.0, "SLIDE TWO")],
    )
    return path


@pytest.fixture(scope="session")
def counter_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 s, 25 fps, 320x180, each frame's index drawn along the bottom."""
    from vidagent.media.synth import make_video

    path = tmp_path_factory.mktemp("media") / "counter.mp4"
    make_video(path, duration=12, fps=25, size=(320, 180), counter=True)
    return path


#: The real clips :func:`real_index` indexes (tests/realmedia.py).
REAL_CLIPS = ("wannaworktogether.mp4", "vtest.avi", "Megamind.avi")


@pytest.fixture(scope="session")
def real_index(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A Library of :data:`REAL_CLIPS` indexed with the embedded offline defaults through every
    default stage, built once per test run and shared by its workers: the tests that ask about
    the real clips, or check what ingest stored of them, copy it (:func:`real_library`) rather
    than index the same clips again, each about a minute and a half of CPU on 2 cores. The
    first worker that asks builds it in the folder the run's workers share, under a lock; the
    others wait for it. A clip that cannot be had skips the test, as
    :func:`realmedia.get_clip` does."""
    import fcntl

    from realmedia import get_clip

    from vidagent.config import load_settings
    from vidagent.ingest import index_video

    clips = [get_clip(name) for name in REAL_CLIPS]
    base = tmp_path_factory.getbasetemp()
    root = base if worker_id == "master" else base.parent  # the run's, not an older run's
    home = root / "real-index"
    with (root / "real-index.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / "built").is_file():
            settings = load_settings({"home": home, "cache": "off"}, env={})
            results = {clip.name: index_video(clip, settings=settings) for clip in clips}
            (home / "results.pickle").write_bytes(pickle.dumps(results))
            (home / "built").touch()
    return home / "library"


@pytest.fixture(scope="session")
def real_results(real_index: Path) -> dict[str, IndexResult]:
    """What indexing each of :data:`REAL_CLIPS` into :func:`real_index` did, by file name: the
    stages run, in order, with their notes."""
    loaded: dict[str, IndexResult] = pickle.loads(
        (real_index.parent / "results.pickle").read_bytes()
    )
    return loaded


@pytest.fixture
def real_library(real_index: Path, tmp_path: Path) -> Path:
    """This test's own copy of :func:`real_index`: a Library folder."""
    import shutil

    return Path(shutil.copytree(real_index, tmp_path / "real-library"))


class Still:
    """A tracker that leaves the box where it was found, with confidence 0.9."""

    name = "still"
    step_fps: float | None = None

    def track(self, frames: Any, start: int, box: Any) -> list[Any]:
        from vidagent.tools.detectors import TrackPoint

        return [TrackPoint(box, 0.9)] * len(frames)


@pytest.fixture
def still_tracker() -> Iterator[None]:
    """:class:`Still` registered as the tracker ``"still"`` for one test."""
    from vidagent.tools.detectors import TRACKERS, register_tracker

    register_tracker("still", Still)
    yield
    TRACKERS.unregister("still")


@pytest.fixture
def fake_env() -> dict[str, str]:
    """``VIDAGENT_*`` variables selecting :data:`FAKE_SPECS`, for CLI subprocesses."""
    return {f"VIDAGENT_{role.upper()}": spec for role, spec in FAKE_SPECS.items()}
