"""This CPU's speed for the dry run: learned from complete offline runs, kept per CPU in the
home, and applied to the offline stages' estimates only (:mod:`vidagent.ingest.speed`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vidagent.config import Settings, load_settings
from vidagent.ingest import estimate_path, index_path, speed
from vidagent.ingest.base import MEASURED_ON
from vidagent.library import Library
from vidagent.models.client import Models

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 fma avx512f avx512_vnni avx512_bf16

processor\t: 1
model name\t: something else
"""


def settings_at(home: Path, **more: object) -> Settings:
    return load_settings({"home": home, "cache": "off", **more}, env={})


def test_cpu_key_names_the_model_its_number_and_the_kernels_flags(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    assert speed.cpu_key(info) == (
        "Intel(R) Xeon(R) Processor (family 6 model 207; avx2 avx512f avx512_vnni avx512_bf16)"
    )
    assert speed.cpu_key(tmp_path / "missing")  # no /proc: the platform's name


def test_no_run_means_the_reference_figures(tmp_path: Path) -> None:
    found = speed.machine_speed(settings_at(tmp_path))
    assert (found.factor, found.runs) == (1.0, 0)
    assert MEASURED_ON in found.basis() and "no run measured on this CPU yet" in found.basis()


def test_runs_are_averaged_by_their_work_the_older_counting_half(tmp_path: Path) -> None:
    config = settings_at(tmp_path)
    assert speed.learn(config, speed.MIN_CPU_SECONDS - 1, 100.0) is None  # too small to say
    assert speed.learn(config, 100.0, 10_000.0) is None  # 100x: not a CPU's speed
    assert not (tmp_path / speed.FILE).exists()
    first = speed.learn(config, 100.0, 150.0)
    assert first is not None and (first.factor, first.runs) == (1.5, 1)
    second = speed.learn(config, 200.0, 200.0)
    assert second is not None and second.runs == 2
    assert second.factor == pytest.approx((1.5 * 50 + 1.0 * 200) / 250, abs=1e-4)
    found = speed.machine_speed(config)
    assert (found.factor, found.runs) == (second.factor, 2)
    assert "1.10x the CPU seconds" in found.basis() and "by 2 runs here" in found.basis()


@pytest.mark.parametrize(
    ("stored", "unread"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({speed.cpu_key(): {"factor": "fast", "runs": 1}}), ""),
        (json.dumps({speed.cpu_key(): {"factor": 0.0, "runs": 3}}), ""),
    ],
)
def test_a_file_that_says_nothing_usable_is_no_run_and_is_rewritten(
    tmp_path: Path, stored: str, unread: str
) -> None:
    (tmp_path / speed.FILE).write_text(stored)
    config = settings_at(tmp_path)
    found = speed.machine_speed(config)
    assert (found.runs, found.unread) == (0, unread)
    if unread:  # the dry run says why it used the reference figures
        assert f"{speed.FILE} in the home could not be read: {unread}" in found.basis()
        assert found.to_json()["unread"] == unread
    else:  # an entry for this CPU that is no ratio: as if none were kept
        assert "no run measured on this CPU yet" in found.basis()
    learned = speed.learn(config, 100.0, 120.0)
    assert learned is not None and (learned.factor, learned.runs) == (1.2, 1)
    assert speed.machine_speed(config).factor == 1.2


def test_a_folder_in_the_file_s_place_is_said_and_nothing_is_learned(tmp_path: Path) -> None:
    (tmp_path / speed.FILE).mkdir()
    config = settings_at(tmp_path)
    found = speed.machine_speed(config)
    assert found.unread == "Is a directory" and "until it is fixed or removed" in found.basis()
    assert speed.learn(config, 100.0, 120.0) is None  # nothing could be stored
    assert (tmp_path / speed.FILE).is_dir()


def test_only_measured_offline_work_is_learned_from() -> None:
    from vidagent.ingest.base import StageEstimate

    offline = [StageEstimate("detect", "detector", "opencv:hog+haar").measured(20.0, 1.0)]
    assert speed.measured_work(offline, {"detect"}) == 21.0
    called = StageEstimate("caption", "captioner", "openai:gpt-4o", seconds=30.0)
    assert speed.measured_work([*offline, called], {"detect"}) is None  # an endpoint's wait
    # a stage with no measured figures (a Whisper model none were measured for) that worked
    unmeasured = StageEstimate("transcribe", "asr", "faster-whisper:base.en")
    assert speed.measured_work([*offline, unmeasured], {"detect", "transcribe"}) is None
    assert speed.measured_work([*offline, unmeasured], {"detect"}) == 21.0  # it did nothing


def test_the_reference_work_does_not_depend_on_the_cores_here(
    small_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It did: wall figures were multiplied by the cores, so 16 cores learned half the speed.
    from vidagent.models import cpu

    config = settings_at(tmp_path)
    work = {}
    for cores in (1, 2, 16):
        monkeypatch.setattr(cpu, "cpu_share", lambda cores=cores: cores)
        rows = estimate_path(small_video, config, scaled=False).stages
        work[cores] = speed.measured_work(rows, {r.stage for r in rows})
    assert work[1] is not None and work[1] == pytest.approx(work[2]) == pytest.approx(work[16])


def test_runs_beside_each_other_in_one_process_are_not_alone() -> None:
    runs = speed.Overlap()
    with runs.run() as first:
        assert runs.alone(first)
    with runs.run() as a, runs.run() as b:
        assert not runs.alone(a) and not runs.alone(b)
    with runs.run() as again:
        assert runs.alone(again)
    runs.beside_others()  # a worker of --jobs or Ray: other processes contend for the cores
    with runs.run() as worker:
        assert not runs.alone(worker)


def test_an_index_worker_teaches_no_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vidagent.app.executors.workers import IndexWorker

    fresh = speed.Overlap()
    monkeypatch.setattr(speed, "RUNS", fresh)
    IndexWorker(settings_at(tmp_path), str(tmp_path / "library")).close()
    with fresh.run() as run:
        assert not fresh.alone(run)


def test_the_dry_run_scales_the_offline_stages_only(tmp_path: Path, small_video: Path) -> None:
    config = settings_at(tmp_path, embed="openai:text-embedding-3-small")
    plain = estimate_path(small_video, config)
    (tmp_path / speed.FILE).write_text(
        json.dumps({speed.cpu_key(): {"factor": 2.0, "runs": 1, "weight": 50.0}})
    )
    scaled = estimate_path(small_video, config)
    assert scaled.speed.factor == 2.0 and plain.speed.runs == 0
    assert {r.stage for r in scaled.stages if not r.cpu_seconds} >= {"embed"}  # an endpoint's
    for before, after in zip(plain.stages, scaled.stages, strict=True):
        assert after.seconds == pytest.approx(before.seconds * (2.0 if before.cpu_seconds else 1))
    assert estimate_path(small_video, config, scaled=False).stages == plain.stages


STAGES = ("detect", "speakers")


def _index(video: Path, config: Settings, **kwargs: object) -> float:
    """Index ``video`` through :data:`STAGES`; the CPU seconds the call took."""
    import time

    used = time.process_time()
    with Models(config) as models:
        result = index_path(
            video,
            library=Library(config.library_uri),
            settings=config,
            models=models,
            stages=STAGES,
            **kwargs,  # type: ignore[arg-type]
        )
    assert result.error is None
    return time.process_time() - used


def test_a_complete_offline_run_teaches_the_speed_and_a_partial_one_does_not(
    tmp_path: Path, small_video: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(speed, "MIN_CPU_SECONDS", 0.0)  # a 12 s video is far below it
    config = settings_at(tmp_path / "home", speakers="off")
    _index(small_video, config, options={"detect": {"fps": 1.0}})
    assert not (config.home / speed.FILE).exists()  # stage options: not the work estimated

    # speakers off: a stage that did nothing where nothing was foreseen (it kept every run of
    # a default install without the voice encoder from teaching anything)
    config = settings_at(tmp_path / "other", speakers="off")
    used = _index(small_video, config)
    (entry,) = json.loads((config.home / speed.FILE).read_text()).values()
    rows = estimate_path(small_video, config, STAGES, scaled=False).stages
    work = speed.measured_work(rows, {"structure", "detect"})
    assert work is not None and entry["runs"] == 1 and entry["factor"] == entry["last_ratio"]
    assert 0.5 * used <= entry["factor"] * work <= used  # the run's CPU seconds, over the work
    _index(small_video, config)  # already indexed: nothing ran, nothing learned
    assert json.loads((config.home / speed.FILE).read_text())[speed.cpu_key()] == entry


def test_learning_never_fails_a_run(
    tmp_path: Path, small_video: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.ingest import pipeline

    def no_estimate(*args: object, **kwargs: object) -> None:
        raise NotImplementedError("a plugin stage without an estimate")

    monkeypatch.setattr(speed, "MIN_CPU_SECONDS", 0.0)
    monkeypatch.setattr(pipeline, "estimate_path", no_estimate)
    config = settings_at(tmp_path, speakers="off")
    _index(small_video, config)  # indexed, and nothing learned
    assert not (config.home / speed.FILE).exists()
    assert Library(config.library_uri).list_videos()[0].stages["detect"]
