"""Plugins: a distribution installed next to vidagent adds a provider, benchmark, stage,
detector, tracker and strategy through entry points, and each works where vidagent looks it up."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vidagent import plugins
from vidagent.bench import BENCHMARKS, get_benchmark
from vidagent.config import load_settings
from vidagent.exceptions import ConfigError, UserError
from vidagent.ingest import index_video
from vidagent.ingest.pipeline import STAGES, make_stage, stage_names
from vidagent.library import Library
from vidagent.models import load_model
from vidagent.models.base import ChatRequest, Message
from vidagent.models.client import Models
from vidagent.models.registry import PROVIDERS, backend_status, parse_spec
from vidagent.tools.base import ToolContext
from vidagent.tools.detectors import DETECTORS, TRACKERS, RoleDetector
from vidagent.tools.options import PerceptionOptions, ToolOptions

PACKAGE = "vidagent_testplug"

PLUGIN_CODE = '''
from vidagent.ingest.base import Stage, StageEstimate
from vidagent.models.base import Adapter, Capabilities, ChatResponse, Detection


class EchoAdapter(Adapter):
    """An llm that echoes the last message, and a detector that sees a cat everywhere."""

    provider = "echoplug"
    capabilities = Capabilities(
        roles=frozenset({"llm", "detector"}),
        vocabulary=frozenset({"cat"}),
        margin_labels=frozenset({"cat"}),
    )

    def chat(self, request):
        return ChatResponse(text=f"{self.model} heard: {request.messages[-1].text}")

    def detect(self, images):
        return [[Detection("cat", (0.0, 0.0, 8.0, 8.0), 0.0)] for _ in images]


class TagStage(Stage):
    """Visits every clip and says how many it saw."""

    name = "tagplug"

    def pending(self, ctx):
        return ctx.library.clips(ctx.video.video_id)

    def run(self, ctx, clips, bar):
        bar.update(len(clips))
        self.note = f"tagged {len(clips)} clips"

    def estimate(self, info, clips, settings):
        return StageEstimate(self.name, None, "tagplug", calls=clips)


class NullDetector:
    name = "nulldet"
    vocabulary = None

    def __init__(self, ctx):
        self.ctx = ctx

    def detect(self, frames, targets):
        return [[] for _ in frames]


class StayTracker:
    name = "stay"
    step_fps = None

    def track(self, frames, start, box):
        return []


class PlugStrategy:
    """Just a class: the strategies registry is someone else's; discovery is what is tested."""
'''

BENCH_CODE = """
NAME = "plugbench"
TITLE = "A plugin benchmark"
SPLITS = ("all",)
DEFAULT_SPLIT = "all"


def prompt(sample):
    return "Q: " + sample.question
"""

ENTRY_POINTS = {
    "vidagent.providers": {
        "echoplug": f"{PACKAGE}:EchoAdapter",
        "brokenplug": f"{PACKAGE}.missing:Nothing",
    },
    "vidagent.benchmarks": {"plug-bench": f"{PACKAGE}.bench"},
    "vidagent.stages": {"tagplug": f"{PACKAGE}:TagStage"},
    "vidagent.detectors": {"nulldet": f"{PACKAGE}:NullDetector"},
    "vidagent.trackers": {"stay": f"{PACKAGE}:StayTracker"},
    "vidagent.strategies": {"plugstrat": f"{PACKAGE}:PlugStrategy"},
}


def write_distribution(
    root: Path, name: str, entry_points: dict[str, dict[str, str]], files: dict[str, str]
) -> None:
    """An installed distribution as pip leaves it: modules plus ``<name>-0.1.dist-info/``."""
    for rel, code in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code))
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    sections = [
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
        for group, eps in entry_points.items()
    ]
    info.joinpath("entry_points.txt").write_text("\n".join(sections))


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The test distribution on ``sys.path``, and every registry made to read it afresh."""
    root = tmp_path / "site"
    files = {f"{PACKAGE}/__init__.py": PLUGIN_CODE, f"{PACKAGE}/bench.py": BENCH_CODE}
    write_distribution(root, "vidagent-testplug", ENTRY_POINTS, files)
    monkeypatch.syspath_prepend(str(root))
    plugins.forget_discovered()
    yield root
    plugins.forget_discovered()  # the next lookup, with root off sys.path, forgets the plugin
    for module in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
        del sys.modules[module]


# ---------------------------------------------------------------------------------------------
# Each registry finds the plugin and the plugin works


@pytest.mark.usefixtures("installed")
def test_a_plugin_provider_chats_through_the_client_layer(tmp_path: Path) -> None:
    assert "echoplug" in PROVIDERS.names()
    assert parse_spec("EchoPlug:parrot").provider == "echoplug"
    settings = load_settings({"cache": "off"})
    client = load_model("echoplug:parrot", settings)
    assert client.role == "llm"  # the first role its capabilities name
    reply = client.chat(ChatRequest(messages=(Message("user", "hello"),)))
    assert reply.text == "parrot heard: hello"
    records = client.ledger.records()  # accounted by the client layer, like any provider
    assert [(r.spec, r.role) for r in records] == [("echoplug:parrot", "llm")]
    status = backend_status("echoplug:parrot", settings, "detector")
    assert status.usable and status.detail == PACKAGE
    assert "cannot fill role 'asr'" in backend_status("echoplug:parrot", settings, "asr").detail


@pytest.mark.usefixtures("installed")
def test_a_plugin_detector_model_brings_its_vocabulary_and_score_calibration(
    tmp_path: Path,
) -> None:
    settings = load_settings({"detector": "echoplug:eyes", "cache": "off"})
    ctx = ToolContext(Library(tmp_path / "lib"), Models(settings), [])
    detector = RoleDetector(ctx)
    assert detector.vocabulary == {"cat"}  # from capabilities, not from the provider's name
    [[cat]] = detector.detect([np.zeros((8, 8, 3), np.uint8)], ["cat"])
    assert cat.score == pytest.approx(0.5)  # a margin of 0 through the sigmoid


@pytest.mark.usefixtures("installed")
def test_a_plugin_benchmark_is_listed_and_loaded() -> None:
    assert list(BENCHMARKS)[-1] == "plug-bench"  # after the built-ins
    bench = get_benchmark("Plug-Bench")
    assert bench.NAME == "plugbench"
    assert bench.TITLE == "A plugin benchmark"
    assert get_benchmark("next-qa").NAME == "nextqa"  # aliases still resolve
    with pytest.raises(UserError, match=r"unknown benchmark 'nope'; choose one of: egoschema.*"):
        get_benchmark("nope")


@pytest.mark.usefixtures("installed")
def test_a_plugin_stage_runs_when_named(small_video: Path, tmp_path: Path) -> None:
    assert stage_names() == (*STAGES[:6], "embed_frames", "graph", "summarize", "tagplug")
    assert STAGES[-1] == "summarize"  # the default run is unchanged by installing a plugin
    assert make_stage("tagplug").name == "tagplug"
    settings = load_settings({"cache": "off"})
    lib = Library(tmp_path / "lib")
    result = index_video(small_video, library=lib, settings=settings, stages=("tagplug",))
    assert [(run.stage, run.clips, run.note) for run in result.stages] == [
        ("tagplug", 3, "tagged 3 clips")
    ]
    assert lib.list_videos()[0].stages["tagplug"]["note"] == "tagged 3 clips"


@pytest.mark.usefixtures("installed")
def test_a_plugin_detector_and_tracker_are_found_by_name(tmp_path: Path) -> None:
    from vidagent.tools.detectors import backends

    assert DETECTORS.names() == ("role", "vlm", "nulldet")
    assert "stay" in TRACKERS and TRACKERS.names()[0] == "template"
    options = ToolOptions(
        perception=PerceptionOptions(object_detector="nulldet", object_tracker="stay")
    )
    ctx = ToolContext(Library(tmp_path / "lib"), None, [], options=options)
    detector, tracker = backends(ctx)
    assert (detector.name, tracker.name) == ("nulldet", "stay")
    assert detector.detect([np.zeros((4, 4, 3), np.uint8)], []) == [[]]


@pytest.mark.usefixtures("installed")
def test_a_plugin_strategy_is_discovered() -> None:
    strategies: plugins.Registry[type] = plugins.Registry("vidagent.strategies", "strategy")
    assert strategies.names() == ("plugstrat",)
    assert strategies.load("plugstrat").__name__ == "PlugStrategy"


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.usefixtures("installed")
def test_an_unknown_name_lists_every_known_one() -> None:
    with pytest.raises(ConfigError) as err:
        make_stage("nope")
    assert str(err.value) == (
        "unknown stage 'nope'; choose one of: "
        "transcribe, read_text, detect, speakers, caption, embed, embed_frames, graph, summarize, "
        "tagplug"
    )
    with pytest.raises(ConfigError, match=r"unknown object tracker 'x'; choose one of: .*stay"):
        TRACKERS.load("x")
    with pytest.raises(ConfigError, match=r"unknown model provider 'nope' .*echoplug, fake"):
        load_model("nope:model")


@pytest.mark.usefixtures("installed")
def test_a_broken_entry_point_is_a_config_error_naming_its_package() -> None:
    assert "brokenplug" in PROVIDERS  # listed: nothing is imported to list it
    with pytest.raises(ConfigError) as err:
        load_model("brokenplug:x", load_settings({"cache": "off"}))
    message = str(err.value)
    assert "'brokenplug' from package vidagent-testplug 0.1" in message
    assert f"({PACKAGE}.missing:Nothing): ModuleNotFoundError" in message
    assert "\n" not in message
    assert not backend_status("brokenplug:x", load_settings(), "llm").usable


def test_a_plugin_cannot_take_a_built_in_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "site"
    write_distribution(
        root, "vidagent-squatter", {"vidagent.trackers": {"template": "squat:Tracker"}}, {}
    )
    monkeypatch.syspath_prepend(str(root))
    plugins.forget_discovered()
    try:
        with pytest.warns(RuntimeWarning, match="vidagent-squatter .* 'template'.* ignored"):
            names = TRACKERS.names()
        assert names.count("template") == 1
        assert TRACKERS.load("template").__module__ == "vidagent.tools.detectors"
    finally:
        plugins.forget_discovered()


# ---------------------------------------------------------------------------------------------
# The registry itself


def test_register_refuses_a_taken_name_unless_told_to_replace() -> None:
    reg: plugins.Registry[object] = plugins.Registry(
        "vidagent.test-none", "widget", {"a": "math:pi"}
    )
    with pytest.raises(ValueError, match="a widget named 'a' is registered already"):
        reg.register("a", 1)
    reg.register("b", "math:tau")  # a target string is imported on first load
    reg.register("a", 3, replace=True)
    assert (reg.names(), reg.load("a"), reg.load("b")) == (("a", "b"), 3, pytest.approx(6.283185))
    reg.unregister("a")
    assert reg.load("a") == pytest.approx(3.14159265)


def test_an_in_process_target_that_does_not_import_is_a_config_error() -> None:
    TRACKERS.register("ghost", "vidagent_no_such_module:Tracker")
    try:
        with pytest.raises(ConfigError, match=r"'ghost' from register\(\) failed to import"):
            TRACKERS.load("ghost")
    finally:
        TRACKERS.unregister("ghost")


def test_listing_and_resolving_import_no_built_in() -> None:
    code = (
        "import sys\n"
        "from vidagent.models.registry import PROVIDERS, parse_spec\n"
        "from vidagent.bench import BENCHMARKS\n"
        "parse_spec('llamacpp:smollm2-135m'); print(PROVIDERS.names(), list(BENCHMARKS))\n"
        "loaded = [m for m in ('vidagent.models.llamacpp', 'vidagent.bench.tasks.nextqa', 'torch',\n"
        "          'llama_cpp', 'lancedb') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
