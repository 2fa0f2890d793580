"""Index real and generated media with the embedded offline models, then find things by meaning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from clirun import vidagent

from vidagent.app import search
from vidagent.config import load_settings
from vidagent.ingest import index_video
from vidagent.ingest.pipeline import IndexResult
from vidagent.library import Library
from vidagent.media.synth import make_video
from vidagent.models.client import Models
from vidagent.models.registry import module_available

pytestmark = pytest.mark.skipif(
    not (
        module_available("faster_whisper")
        and module_available("sentence_transformers")
        and module_available("rapidocr")
    ),
    reason="the offline extras (vidagent[offline]) are not installed",
)


@pytest.fixture(scope="module")
def narrated(
    real_index: Path, real_results: dict[str, IndexResult], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Library, str, Path]:
    """The narrated clip indexed through every default stage, from the run's shared index
    (tests/conftest.py): this module's own copy of its Library, and the home it lies in."""
    home = tmp_path_factory.mktemp("home")
    shutil.copytree(real_index, home / "library")
    settings = load_settings({"home": home, "cache": "off"})
    result = real_results["wannaworktogether.mp4"]
    return Library(settings.library_uri), result.structure.video.video_id, home


def overlaps(t0: float, t1: float, a: float, b: float) -> bool:
    return t0 < b and a < t1


def test_spoken_words_are_in_the_transcript_at_their_times(
    narrated: tuple[Library, str, Path],
) -> None:
    lib, vid, _ = narrated
    segments = lib.transcript(vid)
    text = " ".join(s.text for s in segments).lower()
    for word in ("teacher", "artist", "copyright", "website"):
        assert word in text
    artist = next(s for s in segments if "artist" in s.text.lower())
    assert 20.0 < artist.t0 < 24.0  # "And the artist who builds beauty..." starts near 22 s
    clips = lib.clips(vid)
    assert len(clips) == 36 and all(
        c.transcript_model.startswith("faster-whisper:tiny.en") for c in clips
    )


def test_search_for_a_spoken_phrase_returns_its_span(narrated: tuple[Library, str, Path]) -> None:
    lib, vid, home = narrated
    with Models(load_settings({"home": home, "cache": "off"})) as models:
        hits = search(
            lib,
            "an artist who builds beauty out of bits and pieces she finds online",
            models=models,
            top=3,
        )
    assert hits[0].clip.video_id == vid
    assert overlaps(hits[0].clip.t0, hits[0].clip.t1, 21.9, 26.3)

    cli = vidagent(
        "search",
        "wannaworktogether.mp4",
        "copyright protects your creativity against uses you don't consent to",
        "--json",
        "--top",
        "3",
        home=home,
    )
    assert cli.returncode == 0, cli.stderr
    top = json.loads(cli.stdout)[0]
    assert overlaps(top["t0"], top["t1"], 69.5, 73.0)
    assert top["start"].count(":") == 2  # HH:MM:SS


def test_burned_in_text_is_read_and_found(tmp_path: Path) -> None:
    video = tmp_path / "sign.mp4"
    make_video(video, duration=30, shots=2, text_overlays=[(12.0, 18.0, "FIRE EXIT ON THE LEFT")])
    settings = load_settings({"home": tmp_path / "home", "cache": "off"})
    result = index_video(video, settings=settings, stages=("read_text", "caption", "embed"))
    lib = Library(settings.library_uri)
    vid = result.structure.video.video_id
    read = {c.clip_index: c.ocr_text for c in lib.clips(vid) if c.ocr_text}
    assert set(read) == {2, 3} and all("FIRE EXIT ON THE LEFT" in text for text in read.values())
    with Models(settings) as models:
        hits = search(lib, "emergency fire exit", models=models, top=2)
    assert {h.clip.clip_index for h in hits} == {2, 3}


def test_a_describer_caption_is_written_again_when_a_perception_stage_runs_after_it(
    tmp_path: Path,
) -> None:
    # The describer's caption states what the perception stages found, or that they had not
    # run: indexing detections after the captions must not leave "People were not checked."
    video = tmp_path / "walk.mp4"
    make_video(video, duration=10, shots=1)
    settings = load_settings({"home": tmp_path / "home", "cache": "off"})
    first = index_video(video, settings=settings, stages=("caption",))
    lib = Library(settings.library_uri)
    vid = first.structure.video.video_id
    assert all("People were not checked." in c.caption for c in lib.clips(vid))
    index_video(video, settings=settings, stages=("detect",))
    again = index_video(video, settings=settings, stages=("caption",))
    captioned = {r.stage: r for r in again.stages}["caption"]
    assert captioned.clips == len(lib.clips(vid))  # every caption pending again, none skipped
    assert not any("People were not checked." in c.caption for c in lib.clips(vid))
    assert all(c.caption_model.endswith("|facts=detect") for c in lib.clips(vid))
    unchanged = index_video(video, settings=settings, stages=("caption",))
    assert {r.stage: r for r in unchanged.stages}["caption"].clips == 0  # now up to date
