"""The perception stages: transcribe, read_text and detect, on real and generated video."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import av
import cv2
import numpy as np
import pytest
from tqdm import tqdm

from vidagent.config import Settings, load_settings
from vidagent.ingest.base import IngestContext, Stage
from vidagent.ingest.detect import Detect
from vidagent.ingest.read_text import ReadText, thumbnail, unchanged
from vidagent.ingest.structure import index_structure
from vidagent.ingest.transcribe import SAMPLE_RATE, Transcribe, cut_windows
from vidagent.library import ClipRow, Library
from vidagent.media import probe
from vidagent.media.synth import make_video
from vidagent.models.base import (
    Adapter,
    Capabilities,
    Detection,
    Segment,
    TextLine,
    Transcript,
    Word,
)
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.rapidocr import RapidOCRAdapter

MakeContext = Callable[..., IngestContext]


@pytest.fixture(scope="session")
def realmedia() -> ModuleType:
    """``tests/realmedia.py``; its ``get_clip(name)`` skips the test when the clip is missing."""
    spec = importlib.util.spec_from_file_location(
        "realmedia", Path(__file__).resolve().parents[1] / "realmedia.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def settings() -> Settings:
    return load_settings({"cache": "off"})


@pytest.fixture
def make_context(tmp_path: Path, settings: Settings) -> MakeContext:
    """``make_context(path, models=None)``: index the structure of ``path`` into a fresh Library."""

    def make(path: Path, models: Models | None = None) -> IngestContext:
        library = Library(tmp_path / "library")
        report = index_structure(library, path, settings)
        return IngestContext(library, models or Models(settings), settings, report.video, path)

    return make


def run_stage(
    stage: Stage, ctx: IngestContext, clips: Sequence[ClipRow] | None = None
) -> list[ClipRow]:
    """Run a stage the way the pipeline does, on its pending clips (or on ``clips``)."""
    todo = list(clips) if clips is not None else stage.pending(ctx)
    if todo:
        stage.start()
        with tqdm(total=len(todo), disable=True) as bar:
            stage.run(ctx, todo, bar)
        stage.flush(ctx)
    return todo


def make_slides(
    path: Path,
    slides: Sequence[tuple[float, str]],
    fps: int = 10,
    size: tuple[int, int] = (640, 360),
) -> Path:
    """A video of still slides: ``(seconds, text)`` each, dark text on a light background."""
    container = av.open(str(path), "w")
    try:
        stream = container.add_stream("libx264", rate=Fraction(fps), options={"preset": "veryfast"})
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        n = 0
        for seconds, text in slides:
            rgb = np.full((size[1], size[0], 3), 235, np.uint8)  # (H, W, 3) uint8
            org = (60, size[1] // 2)
            cv2.putText(rgb, text, org, cv2.FONT_HERSHEY_SIMPLEX, 2.0, (20, 20, 20), 5, cv2.LINE_AA)
            for _ in range(round(seconds * fps)):
                frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
                frame.pts, n = n, n + 1
                container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    finally:
        container.close()
    return path


# Words tiny.en hears in wannaworktogether.mp4, with the clip (5 s) each is spoken in.
SPOKEN = {"teacher": 3, "artist": 4, "photograph": 11, "website": 21}


def _word(text: str) -> str:
    return re.sub(r"[^a-z']", "", text.lower())


class CountingOCR(Adapter):
    """Wraps an OCR adapter and keeps every frame it is asked to read."""

    provider = "counting"
    capabilities = Capabilities(roles=frozenset({"ocr"}))

    def __init__(self, inner: Adapter) -> None:
        super().__init__("ocr")
        self.inner = inner
        self.frames: list[np.ndarray] = []

    def read_text(self, images: list[np.ndarray]) -> list[list[TextLine]]:
        self.frames += images
        return self.inner.read_text(images)


# -- transcribe -----------------------------------------------------------------------------------


def test_windows_are_cut_in_the_pause_nearest_the_boundary() -> None:
    rng = np.random.default_rng(0)
    audio = (0.3 * rng.standard_normal(25 * SAMPLE_RATE)).astype(np.float32)  # (S,) speech-like
    audio[round(11.2 * SAMPLE_RATE) : round(11.6 * SAMPLE_RATE)] = 0.0  # a pause near 10 s
    windows = cut_windows(audio, 25.0, window=10.0, search=2.0)
    assert len(windows) == 3
    assert windows[0][0] == 0.0 and windows[-1][1] == 25.0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows))
    assert 11.2 <= windows[0][1] <= 11.6  # in the pause, not at the nominal 10 s
    # A remainder shorter than the search range joins the last window.
    assert len(cut_windows(audio, 21.0, window=10.0, search=2.0)) == 2


def test_windows_come_from_pieces_as_from_the_whole_waveform() -> None:
    """The stage never holds the whole audio: loudness and window samples are taken from
    pieces of any size, and are exactly those of the whole waveform."""
    from vidagent.ingest.transcribe import cut_at_pauses, loudness
    from vidagent.media import audio_spans

    rng = np.random.default_rng(1)
    audio = (0.3 * rng.standard_normal(round(31.37 * SAMPLE_RATE))).astype(np.float32)
    audio[round(9.1 * SAMPLE_RATE) : round(9.5 * SAMPLE_RATE)] = 0.0
    cuts = [0, *sorted(rng.integers(1, len(audio), 40)), len(audio)]
    pieces = [audio[a:b] for a, b in itertools.pairwise(cuts)]
    rms, samples = loudness(pieces)
    assert samples == len(audio) and len(rms) == len(audio) // 320
    for window, search in ((10.0, 2.0), (7.3, 1.1)):
        windows = cut_at_pauses(rms, samples, 31.37, window, search)
        assert windows == cut_windows(audio, 31.37, window, search)
        for wanted in (windows, windows[1::2]):  # every window, or those a rerun redoes
            got = list(audio_spans(iter(pieces), wanted))
            assert len(got) == len(wanted)
            for piece, (a, b) in zip(got, wanted, strict=True):
                whole = audio[round(a * SAMPLE_RATE) : round(b * SAMPLE_RATE)]
                assert np.array_equal(piece, whole)


@pytest.mark.realmedia
@pytest.mark.models
def test_transcribe_real_speech_into_segments_and_clips(
    make_context: MakeContext, realmedia: ModuleType
) -> None:
    path = realmedia.get_clip("wannaworktogether.mp4")
    ctx = make_context(path)
    stage = Transcribe(window_seconds=60)  # three windows, two cuts inside the narration
    run_stage(stage, ctx)

    calls = [r for r in ctx.models.ledger.records() if r.operation == "transcribe"]
    assert len(calls) == 3
    segments = ctx.library.transcript(ctx.video.video_id)
    assert len({s.segment_index for s in segments}) == len(segments)
    words = [w for s in segments for w in json.loads(s.words)]
    starts = [w[0] for w in words]
    assert starts == sorted(starts)
    assert all(0.0 <= w[0] <= w[1] <= ctx.video.duration + 0.5 for w in words)
    heard = {_word(w[2]): w[0] for w in words}
    assert set(SPOKEN) <= set(heard)

    clips = ctx.library.clips(ctx.video.video_id)
    fp = stage.fingerprint(ctx.settings)
    assert all(c.transcript_model == fp for c in clips)
    for word, index in SPOKEN.items():
        clip = clips[index]
        assert clip.t0 <= heard[word] < clip.t1
        assert word in [_word(w) for w in clip.transcript.split()]
    # Every word lands in exactly one clip: none lost or doubled at window cuts.
    assert sum(len(c.transcript.split()) for c in clips) == len(words)
    assert stage.note == ""


def _fake_transcript() -> Transcript:
    """The same two words at the start of every window."""
    words = (Word(0.0, 0.05, "hi"), Word(0.05, 0.1, "there"))
    return Transcript("en", (Segment(0.0, 0.1, "hi there", words),))


def test_transcribe_resumes_only_windows_of_pending_clips(
    small_video: Path, make_context: MakeContext, settings: Settings
) -> None:
    asr = FakeAdapter(transcript=_fake_transcript())
    ctx = make_context(small_video, Models.from_adapters({"asr": asr}, settings))
    stage = Transcribe(window_seconds=4)  # cuts within 1 s of 4 s and 8 s
    run_stage(stage, ctx)
    vid = ctx.video.video_id
    before = ctx.library.clips(vid)
    assert len(asr.requests) == 3
    segments = ctx.library.transcript(vid)
    assert [s.segment_index for s in segments] == [0, 10000, 20000]
    cuts = [s.t0 for s in segments]  # each window's words start at its first sample
    assert cuts[0] == 0.0 and 3.0 <= cuts[1] <= 5.0 and 7.0 <= cuts[2] <= 9.0
    assert [c.transcript for c in before] == ["hi there hi there", "hi there", ""]

    ctx.library.update_clips(vid, [{"clip_index": 1, "transcript_model": ""}])
    assert [c.clip_index for c in run_stage(stage, ctx)] == [1]
    # Clip 1 is [5, 10): the second and third windows it overlaps are stored (clips 0 and 2,
    # which they complete, are), so its transcript comes from their words, transcribing nothing.
    assert len(asr.requests) == 3
    assert ctx.library.clips(vid) == before
    assert ctx.library.transcript(vid) == segments

    # Clips 1 and 2 pending: the third window, which only they complete, runs again, alone.
    ctx.library.update_clips(vid, [{"clip_index": i, "transcript_model": ""} for i in (1, 2)])
    assert [c.clip_index for c in run_stage(stage, ctx)] == [1, 2]
    seconds = [len(r.audio) / SAMPLE_RATE for r in asr.requests[3:]]
    assert len(seconds) == 1 and seconds[0] >= 12.0 - cuts[2] - 0.01
    assert ctx.library.clips(vid) == before
    assert ctx.library.transcript(vid) == segments


def test_video_without_audio_gets_empty_transcripts(
    tmp_path: Path, make_context: MakeContext
) -> None:
    path = tmp_path / "silent.mp4"
    make_video(path, duration=6, size=(160, 96))
    ctx = make_context(path)
    stage = Transcribe()
    assert len(run_stage(stage, ctx)) == 2
    clips = ctx.library.clips(ctx.video.video_id)
    assert [(c.transcript, c.transcript_model) for c in clips] == [
        ("", "faster-whisper:tiny.en")
    ] * 2
    assert stage.note == "no audio track"
    assert ctx.models.ledger.records() == []
    assert ctx.library.transcript(ctx.video.video_id) == []
    assert stage.pending(ctx) == []


# -- read_text ------------------------------------------------------------------------------------


def test_unchanged_frames_ignore_noise_but_not_one_new_letter() -> None:
    rng = np.random.default_rng(1)
    slide = np.full((720, 1280, 3), 250, np.uint8)  # (H, W, 3) uint8
    cv2.putText(slide, "- a bullet point", (100, 150), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (0, 0, 0), 2)
    noisy = np.clip(slide + rng.normal(0, 4, slide.shape), 0, 255).astype(np.uint8)
    letter = slide.copy()
    cv2.putText(letter, "x", (700, 150), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (0, 0, 0), 2)
    assert unchanged(thumbnail(slide), thumbnail(noisy))
    assert not unchanged(thumbnail(slide), thumbnail(letter))


@pytest.mark.models
def test_ocr_finds_burned_in_text_only_in_clips_that_show_it(
    small_video: Path, make_context: MakeContext
) -> None:
    ctx = make_context(small_video)  # "HELLO VIDAGENT" from 5 s to 8 s; clips of 5 s
    stage = ReadText(fps=1.0)
    run_stage(stage, ctx)
    clips = ctx.library.clips(ctx.video.video_id)
    assert "HELLO VIDAGENT" in clips[1].ocr_text.splitlines()
    assert "HELLO" not in clips[0].ocr_text.upper() and "HELLO" not in clips[2].ocr_text.upper()
    assert all(c.ocr_model == "rapidocr:pp-ocr" for c in clips)
    assert stage.frames_seen == 12


@pytest.mark.models
def test_ocr_reads_a_still_slide_once(
    tmp_path: Path,
    make_context: MakeContext,
    settings: Settings,
) -> None:
    path = make_slides(tmp_path / "slides.mp4", [(6.0, "FIRST SLIDE"), (6.0, "SECOND SLIDE")])
    ocr = CountingOCR(RapidOCRAdapter("pp-ocr"))
    ctx = make_context(path, Models.from_adapters({"ocr": ocr}, settings))
    stage = ReadText(fps=1.0)
    run_stage(stage, ctx)
    assert stage.frames_seen == 12
    assert len(ocr.frames) == 2 == stage.frames_read  # one read per slide, 10 frames reused
    clips = ctx.library.clips(ctx.video.video_id)
    texts = [c.ocr_text for c in clips]
    assert texts == ["FIRST SLIDE", "FIRST SLIDE\nSECOND SLIDE", "SECOND SLIDE"]
    assert "read 2 of 12 frames" in stage.note
    # Each line at the frames it was read in (1 fps; the second slide from 6 s), reused
    # frames included: FIRST SLIDE's one read serves frames 0-5.
    assert [c.ocr_line_times() for c in clips] == [
        [("FIRST SLIDE", 0.0, 4.0)],
        [("FIRST SLIDE", 5.0, 5.0), ("SECOND SLIDE", 6.0, 9.0)],
        [("SECOND SLIDE", 10.0, 11.0)],
    ]
    assert all(c.ocr_times_recorded for c in clips)


@pytest.mark.models
def test_ocr_lines_keep_the_times_a_text_card_is_shown(
    small_video: Path, make_context: MakeContext
) -> None:
    ctx = make_context(small_video)  # "HELLO VIDAGENT" from 5 s to 8 s over a panning picture
    run_stage(ReadText(fps=1.0), ctx)
    clips = ctx.library.clips(ctx.video.video_id)
    hello = [x for x in clips[1].ocr_line_times() if x.text == "HELLO VIDAGENT"]
    assert hello == [("HELLO VIDAGENT", 5.0, 7.0)]  # the 1 fps frames at 5, 6 and 7 s
    assert json.loads(clips[1].ocr_lines)[0] == {"text": "HELLO VIDAGENT", "t0": 5.0, "t1": 7.0}


def test_ocr_lines_are_deduplicated_in_first_seen_order(
    small_video: Path, make_context: MakeContext, settings: Settings
) -> None:
    calls = iter(range(1000))

    def read(rgb: np.ndarray) -> list[TextLine]:
        n = next(calls)
        return [
            TextLine("Title", (0, 0, 1, 1), 0.9),
            TextLine(f"frame {n // 2}", (0, 0, 1, 1), 0.9),
            TextLine("  TITLE ", (0, 0, 1, 1), 0.9),
        ]

    ctx = make_context(
        small_video, Models.from_adapters({"ocr": FakeAdapter(read_text_fn=read)}, settings)
    )
    run_stage(ReadText(fps=1.0), ctx)
    first = ctx.library.clips(ctx.video.video_id)[0]
    assert first.ocr_text == "Title\nframe 0\nframe 1\nframe 2"
    # The same lines, each from the first to the last 1 fps frame it was read in.
    assert first.ocr_line_times() == [
        ("Title", 0.0, 4.0),
        ("frame 0", 0.0, 1.0),
        ("frame 1", 2.0, 3.0),
        ("frame 2", 4.0, 4.0),
    ]


def test_ocr_resumes_only_pending_clips(
    small_video: Path, make_context: MakeContext, settings: Settings
) -> None:
    seen: list[int] = []

    def read(rgb: np.ndarray) -> list[TextLine]:
        seen.append(len(seen))
        return [TextLine(f"read {len(seen)}", (0, 0, 1, 1), 0.9)]

    ctx = make_context(
        small_video, Models.from_adapters({"ocr": FakeAdapter(read_text_fn=read)}, settings)
    )
    run_stage(ReadText(fps=1.0), ctx)
    vid = ctx.video.video_id
    before = ctx.library.clips(vid)
    assert len(seen) == 12  # the synthetic video pans: no frame is unchanged

    ctx.library.update_clips(vid, [{"clip_index": 1, "ocr_model": ""}])
    assert [c.clip_index for c in run_stage(ReadText(fps=1.0), ctx)] == [1]
    after = ctx.library.clips(vid)
    assert len(seen) == 12 + 5  # the five frames of [5, 10)
    assert len(after) == 3
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1].ocr_text == "\n".join(f"read {n}" for n in range(13, 18))
    assert after[1].ocr_line_times() == [(f"read {n}", n - 8.0, n - 8.0) for n in range(13, 18)]
    assert after[1].ocr_model == "rapidocr:pp-ocr"


class Crash(Exception):
    pass


class FrameOCR(Adapter):
    """Reads each frame as one line naming its mean grey level; raises at frame ``crash_at``."""

    provider = "frame"
    capabilities = Capabilities(roles=frozenset({"ocr"}))  # one frame a call

    def __init__(self, crash_at: int | None = None) -> None:
        super().__init__("ocr")
        self.crash_at, self.read = crash_at, 0

    def read_text(self, images: list[np.ndarray]) -> list[list[TextLine]]:
        out = []
        for rgb in images:
            self.read += 1
            if self.read == self.crash_at:
                raise Crash(self.read)
            out.append([TextLine(f"mean {int(rgb.mean()) // 8}", (0, 0, 1, 1), 0.9)])
        return out


def test_ocr_killed_mid_stage_resumes_with_every_line_and_time_once(
    small_video: Path,
    make_context: MakeContext,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = make_context(small_video, Models.from_adapters({"ocr": FrameOCR()}, settings))
    run_stage(ReadText(fps=1.0, batch=1), ctx)
    whole = ctx.library.clips(ctx.video.video_id)
    assert all(c.ocr_times_recorded and c.ocr_line_times() for c in whole)

    monkeypatch.setattr(ReadText, "flush_every", 0.0)  # every clip its own commit
    crashing = Models.from_adapters({"ocr": FrameOCR(crash_at=8)}, settings)
    resumed = IngestContext(ctx.library, crashing, settings, ctx.video, ctx.path)
    vid = ctx.video.video_id
    ctx.library.update_clips(vid, [{"clip_index": i, "ocr_model": ""} for i in range(3)])
    with pytest.raises(Crash):  # in clip 1 (frames 5-9 s), after clip 0 was stored
        run_stage(ReadText(fps=1.0, batch=1), resumed)
    assert [c.ocr_model != "" for c in ctx.library.clips(vid)] == [True, False, False]

    resumed.models = Models.from_adapters({"ocr": FrameOCR()}, settings)
    assert [c.clip_index for c in run_stage(ReadText(fps=1.0, batch=1), resumed)] == [1, 2]
    assert ctx.library.clips(vid) == whole  # each clip once, its lines and their times whole


# -- detect ---------------------------------------------------------------------------------------


@pytest.mark.realmedia
@pytest.mark.models
def test_detect_finds_pedestrians(make_context: MakeContext, realmedia: ModuleType) -> None:
    path = realmedia.get_clip("vtest.avi")  # 768x576 street scene
    ctx = make_context(path)
    clips = ctx.library.clips(ctx.video.video_id)
    stage = Detect(fps=1.0)
    run_stage(stage, ctx, clips[:6])  # the first 30 s
    after = ctx.library.clips(ctx.video.video_id)
    records = [d for c in after[:6] for d in json.loads(c.detections)]
    people = {d["t"] for d in records if d["label"] == "person"}
    assert len(people) >= 0.8 * 30  # a person in most of the 30 sampled frames
    for d in records:
        x0, y0, x1, y1 = d["box"]
        assert 0 <= x0 < x1 <= 768 and 0 <= y0 < y1 <= 576
        assert 0.0 <= d["t"] < 30.0
    assert all(c.detect_model == "opencv:hog+haar" for c in after[:6])
    assert all(c.detect_model == "" for c in after[6:])
    assert (
        stage.note
        == f"{len(records)} detections in 30 frames (0 unchanged, their detections reused)"
    )


def test_detect_boxes_are_in_display_pixels(
    small_video: Path, make_context: MakeContext, settings: Settings
) -> None:
    sizes: list[tuple[int, ...]] = []

    def detect(rgb: np.ndarray) -> list[Detection]:
        sizes.append(rgb.shape)
        h, w = rgb.shape[:2]
        return [
            Detection("thing", (w / 4, h / 4, w / 2, h / 2), 0.87654),
            Detection("edge", (-5, -5, w + 5, h), 0.5),
        ]

    ctx = make_context(
        small_video, Models.from_adapters({"detector": FakeAdapter(detect_fn=detect)}, settings)
    )
    run_stage(Detect(fps=1.0, size=320), ctx)
    assert set(sizes) == {(180, 320, 3)}
    first = json.loads(ctx.library.clips(ctx.video.video_id)[0].detections)
    assert first[:2] == [
        {"t": 0.0, "label": "thing", "box": [160.0, 90.0, 320.0, 180.0], "score": 0.877},
        {"t": 0.0, "label": "edge", "box": [0.0, 0.0, 640.0, 360.0], "score": 0.5},
    ]
    assert [d["t"] for d in first[::2]] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_detect_reuses_the_detections_of_an_unchanged_picture(
    tmp_path: Path, make_context: MakeContext, settings: Settings
) -> None:
    """A still picture is detected once: its repeats get its detections at their own times,
    and a picture that changes is detected again."""
    from fractions import Fraction

    import av

    path = tmp_path / "still.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 320, 180, "yuv420p"
        for i in range(100):  # 10 s: one picture for 6 s, then another
            rgb = np.full((180, 320, 3), 90, np.uint8)
            x = 40 if i < 60 else 200
            rgb[60:120, x : x + 60] = 250
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, 10)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    seen: list[int] = []

    def detect(rgb: np.ndarray) -> list[Detection]:
        seen.append(int(np.argmax(rgb[90, :, 0] > 200)))  # where the box starts
        return [Detection("box", (float(seen[-1]), 60.0, seen[-1] + 60.0, 120.0), 0.9)]

    ctx = make_context(
        path, Models.from_adapters({"detector": FakeAdapter(detect_fn=detect)}, settings)
    )
    stage = Detect(fps=1.0)
    run_stage(stage, ctx)
    assert len(seen) == 2 and abs(seen[0] - 40) <= 2 and abs(seen[1] - 200) <= 2
    found = [d for c in ctx.library.clips(ctx.video.video_id) for d in json.loads(c.detections)]
    assert [d["t"] for d in found] == [float(t) for t in range(10)]  # every frame, its own time
    assert [d["box"][0] for d in found] == [found[0]["box"][0]] * 6 + [found[6]["box"][0]] * 4
    assert stage.note == "10 detections in 10 frames (8 unchanged, their detections reused)"


def test_detect_resumes_only_pending_clips(
    small_video: Path, make_context: MakeContext, settings: Settings
) -> None:
    seen: list[int] = []

    def detect(rgb: np.ndarray) -> list[Detection]:
        seen.append(len(seen))
        return [Detection("person", (0, 0, 10, 10), len(seen) / 100)]

    ctx = make_context(
        small_video, Models.from_adapters({"detector": FakeAdapter(detect_fn=detect)}, settings)
    )
    run_stage(Detect(fps=1.0), ctx)
    vid = ctx.video.video_id
    before = ctx.library.clips(vid)
    ctx.library.update_clips(vid, [{"clip_index": 2, "detect_model": ""}])
    assert [c.clip_index for c in run_stage(Detect(fps=1.0), ctx)] == [2]
    after = ctx.library.clips(vid)
    assert len(seen) == 12 + 2  # the two frames of [10, 12)
    assert after[:2] == before[:2] and len(after) == 3
    assert [d["t"] for d in json.loads(after[2].detections)] == [10.0, 11.0]


# -- all three ------------------------------------------------------------------------------------


def test_a_new_model_spec_redoes_only_its_stage(
    small_video: Path, make_context: MakeContext, settings: Settings
) -> None:
    fakes = {
        "asr": FakeAdapter(transcript=_fake_transcript()),
        "ocr": FakeAdapter(),
        "detector": FakeAdapter(),
    }
    ctx = make_context(small_video, Models.from_adapters(fakes, settings))
    stages = [Transcribe(), ReadText(fps=1.0), Detect(fps=1.0)]
    for stage in stages:
        run_stage(stage, ctx)
        assert stage.pending(ctx) == []
    changed = load_settings({"cache": "off", "ocr": "fake:x"})
    ctx2 = IngestContext(ctx.library, ctx.models, changed, ctx.video, ctx.path)
    assert [len(s.pending(ctx2)) for s in stages] == [0, 3, 0]


def test_estimates(small_video: Path, settings: Settings) -> None:
    info = probe(small_video)
    hour = dataclasses.replace(info, duration=3600.0)
    asr = Transcribe().estimate(hour, 720, settings)
    assert (asr.calls, asr.input_tokens) == (60, 0)  # one a 60-s window
    assert 60 <= asr.seconds <= 600
    assert Transcribe().estimate(dataclasses.replace(info, has_audio=False), 3, settings).calls == 0
    ocr = ReadText(fps=1.0).estimate(info, 3, settings)
    assert (ocr.frames, ocr.calls) == (12, 2) and ocr.seconds > 0
    det = Detect(fps=1.0).estimate(info, 3, settings)
    assert (det.frames, det.calls) == (12, 2) and det.seconds > 0
    assert (
        ReadText(fps=1.0)
        .estimate(info, 3, load_settings({"ocr": "fake:x"}))
        .notes[0]
        .startswith("no measured")
    )
