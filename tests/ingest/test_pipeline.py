"""The whole ingest pipeline: resumable after SIGKILL, exact, and selective when a model changes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from vidagent.config import load_settings
from vidagent.exceptions import IndexStopped, LibraryError, NotAVideoError
from vidagent.ingest import STAGES, index_video
from vidagent.ingest.pipeline import index_path
from vidagent.library import Library
from vidagent.media.synth import make_video
from vidagent.models.base import Detection, Segment, TextLine, TranscribeRequest, Transcript
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter

CAPTION = json.dumps(
    {
        "clip_start_time": "00:00:00",
        "clip_end_time": "00:00:05",
        "new_subject_registry": {},
        "clip_description": {
            "subjects_present": [],
            "captions": "A coloured scene with a moving disc.",
        },
    }
)
FAKES = {
    "llm": "fake:echo?reply=A short test video.",
    "vlm": "fake:echo?reply=" + CAPTION,
    "embed": "fake:hash?dim=32",
    "asr": "fake:echo?text=hello there",
    "ocr": "fake:a",
    "detector": "fake:a",
}


def fake_models(settings, ocr_text: str = "HELLO") -> Models:  # type: ignore[no-untyped-def]
    adapters = {
        "llm": FakeAdapter(options={"reply": "A short test video."}),
        "vlm": FakeAdapter(options={"reply": CAPTION}),
        "embed": FakeAdapter("hash", {"dim": settings.embed.split("dim=")[1]}),
        "asr": FakeAdapter(transcript=Transcript("en", (Segment(0.0, 2.0, "hello there"),))),
        "ocr": FakeAdapter(read_text_fn=lambda img: [TextLine(ocr_text, (0, 0, 10, 10), 0.9)]),
        "detector": FakeAdapter(detect_fn=lambda img: [Detection("person", (0, 0, 50, 100), 0.8)]),
    }
    return Models.from_adapters(adapters, settings)


def runs(result) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {r.stage: r.clips for r in result.stages}


def test_all_stages_then_nothing_left_to_do(small_video: Path, tmp_path: Path) -> None:
    settings = load_settings({**FAKES, "cache": "off"})
    lib = Library(tmp_path / "lib")
    first = index_video(small_video, library=lib, settings=settings, models=fake_models(settings))
    assert runs(first) == {
        "transcribe": 3,
        "read_text": 3,
        "detect": 3,
        "speakers": 3,
        "caption": 3,
        "embed": 3,
        "summarize": 3,
    }
    again = index_video(small_video, library=lib, settings=settings, models=fake_models(settings))
    assert all(n == 0 for n in runs(again).values())
    video = lib.list_videos()[0]
    assert set(video.stages) == {"structure", *STAGES}


def test_changing_one_model_redoes_only_its_work(small_video: Path, tmp_path: Path) -> None:
    settings = load_settings({**FAKES, "cache": "off"})
    lib = Library(tmp_path / "lib")
    index_video(small_video, library=lib, settings=settings, models=fake_models(settings))
    vid = lib.list_videos()[0].video_id
    before = {c.clip_index: c for c in lib.clips(vid)}

    # A new OCR model: OCR redone for every clip; captions, speech and detections untouched;
    # embeddings redone only because the embedded text changed; the summary made no new call.
    ocr_settings = settings.model_copy(update={"ocr": "fake:b"})
    result = index_video(
        small_video, library=lib, settings=ocr_settings, models=fake_models(ocr_settings, "WORLD")
    )
    assert (
        runs(result)["read_text"] == 3
        and runs(result)["transcribe"] == 0
        and runs(result)["caption"] == 0
    )
    assert runs(result)["embed"] == 3
    after = {c.clip_index: c for c in lib.clips(vid)}
    assert all(
        after[i].ocr_text == "WORLD" and after[i].caption == before[i].caption for i in before
    )

    # A new embedding model (another dimension): only the vectors are redone, never mixed.
    emb_settings = ocr_settings.model_copy(update={"embed": "fake:hash?dim=48"})
    result = index_video(
        small_video, library=lib, settings=emb_settings, models=fake_models(emb_settings, "WORLD")
    )
    assert runs(result) == {
        "transcribe": 0,
        "read_text": 0,
        "detect": 0,
        "speakers": 0,
        "caption": 0,
        "embed": 3,
        "summarize": 0,
    }
    assert lib.manifest.embeddings["clip_vectors"] == {"spec": "fake:hash?dim=48", "dim": 48}
    assert len(lib.clip_vector_hashes(vid)) == 3
    assert len(lib.clips(vid)) == 3


def test_a_bad_file_raises_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_text("not a video")
    settings = load_settings({**FAKES, "cache": "off"})
    lib = Library(tmp_path / "lib")
    with pytest.raises(NotAVideoError):
        index_video(bad, library=lib, settings=settings, models=fake_models(settings))
    assert lib.list_videos() == []


class WaitingASR(FakeAdapter):
    """Transcribes only once OCR has started: indexing deadlocks (and this times out) unless
    transcribe and read_text run at the same time."""

    def __init__(self, ocr_started: threading.Event) -> None:
        # its own model name: one endpoint, one slot, so it must not share OCR's "fake:echo"
        super().__init__("asr", transcript=Transcript("en", (Segment(0.0, 2.0, "hello there"),)))
        self.ocr_started = ocr_started

    def transcribe(self, request: TranscribeRequest) -> Transcript:
        assert self.ocr_started.wait(timeout=30), "read_text did not run beside transcribe"
        time.sleep(0.3)  # while OCR reads
        return super().transcribe(request)


class WarmEmbed(FakeAdapter):
    """A fake embedder that records where its weights were loaded."""

    def __init__(self, dim: str) -> None:
        super().__init__("hash", {"dim": dim})
        self.warmed: list[str] = []

    def warm(self) -> None:
        self.warmed.append(threading.current_thread().name)


def test_independent_stages_run_at_once_while_the_embedder_loads(
    small_video: Path, tmp_path: Path
) -> None:
    settings = load_settings({**FAKES, "cache": "off"})
    lib = Library(tmp_path / "lib")
    models = fake_models(settings)
    started = threading.Event()
    ocr = models._adapters["ocr"]  # type: ignore[index]
    read = ocr.read_text
    ocr.read_text = lambda images: (started.set(), time.sleep(0.3), read(images))[2]  # type: ignore[method-assign]
    models._adapters["asr"] = WaitingASR(started)  # type: ignore[index]
    embed = WarmEmbed(settings.embed.split("dim=")[1])
    models._adapters["embed"] = embed  # type: ignore[index]
    bad = tmp_path / "bad.mp4"
    bad.write_text("not a video")
    with pytest.raises(NotAVideoError):
        index_video(bad, library=lib, settings=settings, models=models)
    assert embed.warmed == []  # a file that cannot be indexed loads no weights
    result = index_video(small_video, library=lib, settings=settings, models=models)
    assert [r.stage for r in result.stages] == list(STAGES)  # reported in stage order
    assert len(embed.warmed) == 1 and embed.warmed[0].startswith("ingest")
    vid = lib.list_videos()[0].video_id
    assert runs(result) == dict.fromkeys(STAGES, 3)
    assert set(lib.get_video(vid).stages) == {"structure", *STAGES}  # every lane's entry kept
    assert all(c.ocr_text == "HELLO" for c in lib.clips(vid))
    assert len(lib.clip_vector_hashes(vid)) == 3
    # "indexed in N s" is wall time: the overlapping stages' seconds (0.3 s or more of each
    # together) are not added up
    assert result.structure is not None
    added = result.structure.seconds + sum(r.seconds for r in result.stages)
    assert result.seconds < added - 0.2
    # and the runs say which overlapped (the command line marks them "[at once]")
    assert {r.stage for r in result.stages if r.at_once} >= {"transcribe", "read_text", "detect"}


def test_without_overlap_the_stages_run_one_after_another(
    small_video: Path, tmp_path: Path
) -> None:
    settings = load_settings({**FAKES, "cache": "off"})
    lib = Library(tmp_path / "lib")
    models = fake_models(settings)
    order: list[str] = []
    for role, method in (("asr", "transcribe"), ("ocr", "read_text"), ("detector", "detect")):
        adapter = models._adapters[role]  # type: ignore[index]
        call = getattr(adapter, method)
        setattr(adapter, method, lambda *a, _c=call, _r=role: (order.append(_r), _c(*a))[1])
    result = index_path(small_video, library=lib, settings=settings, models=models, overlap=False)
    assert result.error is None
    assert order == sorted(order, key=["asr", "ocr", "detector"].index)  # never interleaved
    assert not any(r.at_once for r in result.stages)


def test_a_stop_asked_for_between_clips_keeps_what_finished_and_the_rerun_does_the_rest(
    small_video: Path, tmp_path: Path
) -> None:
    settings = load_settings({**FAKES, "cache": "off"})
    lib = Library(tmp_path / "lib")
    models = fake_models(settings)
    vlm = models._adapters["vlm"]  # type: ignore[index]
    called = [0]
    caption = vlm.chat
    vlm.chat = lambda request: (called.__setitem__(0, called[0] + 1), caption(request))[1]  # type: ignore[method-assign]
    with pytest.raises(IndexStopped):
        index_path(
            small_video,
            library=lib,
            settings=settings,
            models=models,
            should_stop=lambda: called[0] > 0,
        )
    (video,) = lib.list_videos()
    captioned = sum(1 for c in lib.clips(video.video_id) if c.caption_model)
    assert 1 <= captioned < 3 and "caption" not in video.stages  # stopped inside the stage
    assert {"transcribe", "read_text", "detect"} <= set(video.stages)
    result = index_path(small_video, library=lib, settings=settings, models=models)
    assert runs(result)["caption"] == 3 - captioned and runs(result)["embed"] == 3
    assert len(lib.clips(video.video_id)) == 3
    assert all(
        c.caption == "A coloured scene with a moving disc." for c in lib.clips(video.video_id)
    )


def test_ctrl_c_in_the_caller_stops_the_stages_running_in_threads(
    small_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C reaches the calling thread (here: as transcription's stage is recorded) while
    # detection, in a thread of its own, is on its frames: it stops after the clip it is on
    # instead of finishing the video.
    from vidagent.ingest.detect import Detect

    settings = load_settings({**FAKES, "cache": "off"})
    lib = Library(tmp_path / "lib")
    models = fake_models(settings)
    detect, interrupted = Detect._detect, threading.Event()

    def held(*args: Any) -> Any:
        # on its frames until the caller is interrupted (outside the model call: a local
        # model's slot held here would hold transcription up too)
        interrupted.wait(30)
        return detect(*args)

    def on_stage(run: Any) -> None:
        if run.stage == "transcribe":
            interrupted.set()
            raise KeyboardInterrupt

    monkeypatch.setattr(Detect, "_detect", held)
    with pytest.raises(KeyboardInterrupt):
        index_path(small_video, library=lib, settings=settings, models=models, on_stage=on_stage)
    (video,) = lib.list_videos()
    detected = sum(1 for c in lib.clips(video.video_id) if c.detect_model)
    assert 1 <= detected < 3 and "detect" not in video.stages


def test_ocr_and_detection_take_their_frames_from_the_structure_pass_or_one_decode(
    small_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.ingest import sampling

    decodes: list[int] = []
    original = sampling.iter_sampled_frames

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        decodes.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(sampling, "iter_sampled_frames", counted)
    seen: dict[str, list[tuple[int, int]]] = {}
    # (run, library, OCR and detector model, overlap, decodes OCR and detection make)
    plan = (
        ("kept", "a", "a", True, 0),  # the structure pass kept their frames
        ("shared", "a", "b", True, 1),  # structure already done: one decode for both
        ("apart", "c", "a", False, 2),  # one after another: each decodes
    )
    for name, library, model, overlap, expected in plan:
        models_set = {"ocr": f"fake:{model}", "detector": f"fake:{model}"}
        settings = load_settings({**FAKES, **models_set, "cache": "off"})
        lib = Library(tmp_path / library)
        models = fake_models(settings)
        frames: list[tuple[int, int]] = []
        for role, method in (("ocr", "read_text"), ("detector", "detect")):
            adapter = models._adapters[role]  # type: ignore[index]
            call = getattr(adapter, method)
            setattr(
                adapter,
                method,
                lambda images, *a, _c=call, _s=frames: (
                    _s.extend((i.size, int(i.sum())) for i in images),
                    _c(images, *a),
                )[1],
            )
        decodes.clear()
        result = index_path(
            small_video,
            library=lib,
            settings=settings,
            models=models,
            stages=("read_text", "detect"),
            overlap=overlap,
        )
        assert runs(result) == {"read_text": 3, "detect": 3}
        vid = result.video.video_id  # type: ignore[union-attr]
        assert all(c.ocr_text == "HELLO" and "person" in c.detections for c in lib.clips(vid))
        seen[name] = sorted(frames)
        assert len(decodes) == expected, name
    assert seen["kept"] == seen["shared"] == seen["apart"]  # each stage got the same frames


def test_kept_frames_are_let_go_once_no_stage_left_samples_frames(
    small_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.ingest import pipeline

    kept: list[pipeline.KeptFrames] = []
    original = pipeline.KeptFrames

    def noted(*args, **kwargs):  # type: ignore[no-untyped-def]
        kept.append(original(*args, **kwargs))
        return kept[-1]

    monkeypatch.setattr(pipeline, "KeptFrames", noted)
    settings = load_settings({**FAKES, "cache": "off"})
    models = fake_models(settings)
    held_at_caption: list[int] = []
    vlm = models._adapters["vlm"]  # type: ignore[index]
    chat = vlm.chat
    vlm.chat = lambda request: (  # type: ignore[method-assign]
        held_at_caption.append(len(kept[0].frames)),
        chat(request),
    )[1]
    detected: list[int] = []
    detector = models._adapters["detector"]  # type: ignore[index]
    detect = detector.detect
    detector.detect = lambda images, *a: (  # type: ignore[method-assign]
        detected.append(len(kept[0].frames)),
        detect(images, *a),
    )[1]
    result = index_path(
        small_video,
        library=Library(tmp_path / "lib"),
        settings=settings,
        models=models,
        stages=("read_text", "detect", "caption"),
    )
    assert runs(result) == {"read_text": 3, "detect": 3, "caption": 3}
    assert detected and min(detected) == 6  # held while OCR and detection read them
    assert held_at_caption and max(held_at_caption) == 0


def test_ocr_reads_run_ahead_of_the_clips_they_store_and_store_the_same(
    small_video: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vidagent.ingest import read_text

    settings = load_settings({**FAKES, "cache": "off"})
    stored: dict[int, dict[int, str]] = {}
    for ahead in (0, 1):
        monkeypatch.setattr(read_text, "_READS_AHEAD", ahead)
        models = fake_models(settings)
        busy, most, lock = [0], [0], threading.Lock()

        def read(images, _busy=busy, _most=most, _lock=lock):  # type: ignore[no-untyped-def]
            with _lock:
                _busy[0] += 1
                _most[0] = max(_most[0], _busy[0])
            time.sleep(0.1)  # a read of a clip's frames outlasts decoding the next clip's
            with _lock:
                _busy[0] -= 1
            return [[TextLine(f"mean {int(i.mean())}", (0, 0, 9, 9), 0.9)] for i in images]

        ocr = models._adapters["ocr"]  # type: ignore[index]
        ocr.read_text = read  # type: ignore[method-assign]
        # a read a frame, and two reads at once, as RapidOCR serves them
        ocr.capabilities = dataclasses.replace(ocr.capabilities, batch_size=1, concurrency=2)
        lib = Library(tmp_path / f"lib-{ahead}")
        result = index_path(
            small_video,
            library=lib,
            settings=settings,
            models=models,
            stages=("read_text",),
            options={"read_text": {"batch": 1, "fps": 2.0}},
        )
        vid = result.video.video_id  # type: ignore[union-attr]
        stored[ahead] = {c.clip_index: c.ocr_text for c in lib.clips(vid)}
        assert most[0] == ahead + 1  # reads at once
    assert stored[1] == stored[0] and all(stored[1].values())


def _count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_sigkill_at_any_moment_then_rerun_finishes_exactly(tmp_path: Path) -> None:
    video = tmp_path / "long.mp4"
    make_video(video, duration=40, shots=4, fps=10, size=(320, 180))  # 8 clips
    log = tmp_path / "vlm-calls.jsonl"
    env = {
        **os.environ,
        "VIDAGENT_HOME": str(tmp_path / "home"),
        "VIDAGENT_CACHE": "off",
        **{f"VIDAGENT_{k.upper()}": v for k, v in FAKES.items()},
        "VIDAGENT_VLM": FAKES["vlm"] + f"&delay=0.25&log={log}",
        "VIDAGENT_OCR": "fake:echo",
        "VIDAGENT_DETECTOR": "fake:echo",
    }
    cmd = [sys.executable, "-m", "vidagent", "index", str(video), "--json", "--no-progress"]
    for delay in (1.5, 2.5, 3.5):
        # Leaving the block closes the pipes and reaps the killed process.
        with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr

    lib = Library(tmp_path / "home" / "library")
    (v,) = lib.list_videos()
    clips = lib.clips(v.video_id)
    assert [c.clip_index for c in clips] == list(range(8))  # exactly one row per clip
    assert all(c.caption == "A coloured scene with a moving disc." for c in clips)
    assert sorted(lib.clip_vector_hashes(v.video_id)) == list(range(8))
    assert len(lib.frames(v.video_id)) == 40
    # Each kill can interrupt at most one caption call in flight; finished clips never repeat.
    assert 8 <= _count_lines(log) <= 8 + 3
    assert set(v.stages) == {"structure", *STAGES}


def _transcribed(root: Path) -> tuple[int, int]:
    """Clips whose transcript is stored, of all clips (0, 0 before the Library has any)."""
    try:
        lib = Library(root, create=False)
    except LibraryError:
        return 0, 0
    videos = lib.list_videos()
    if not videos:
        return 0, 0
    clips = lib.clips(videos[0].video_id)
    return sum(bool(c.transcript_model) for c in clips), len(clips)


def test_a_killed_index_keeps_the_transcript_it_finished(tmp_path: Path) -> None:
    video = tmp_path / "talk.mp4"
    make_video(video, duration=150, fps=5, size=(160, 96), audio="tone")  # 30 clips
    log = tmp_path / "asr-calls.jsonl"

    def env(home: Path) -> dict[str, str]:
        # The same spec on every run: it is the transcript's fingerprint (delay and log too).
        asr = f"fake:echo?text=hello there&delay=2&log={log}"
        fakes = {f"VIDAGENT_{k.upper()}": v for k, v in FAKES.items()}
        return {**os.environ, **fakes, "VIDAGENT_HOME": str(home), "VIDAGENT_ASR": asr}

    cmd = [sys.executable, "-m", "vidagent", "index", str(video)]
    cmd += ["--stages", "transcribe", "--json", "--no-progress"]
    home = tmp_path / "home"
    with subprocess.Popen(cmd, env=env(home), stdout=subprocess.PIPE) as proc:
        # Killed once some clips' transcript is stored and before all are: mid-stage.
        kept = (0, 0)
        while proc.poll() is None:
            kept = _transcribed(home / "library")
            if 0 < kept[0] < kept[1]:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert 0 < kept[0] < kept[1] == 30, f"not killed mid-stage: {kept} clips transcribed"
    before = _count_lines(log)

    done = subprocess.run(cmd, env=env(home), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    # 150 s is three windows of about 60 s: the rerun transcribes only those not yet stored.
    assert json.loads(done.stdout)["stages"]["transcribe"]["clips"] <= 30 - kept[0]
    assert _count_lines(log) - before < 3
    log.unlink()
    reference = tmp_path / "reference"
    clean = subprocess.run(cmd, env=env(reference), capture_output=True, check=False)
    assert clean.returncode == 0
    got, want = Library(home / "library"), Library(reference / "library")
    (vid,) = [v.video_id for v in want.list_videos()]
    assert got.transcript(vid) == want.transcript(vid)  # no segment lost or doubled
    assert got.clips(vid) == want.clips(vid)
