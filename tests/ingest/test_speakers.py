"""The speakers stage: who speaks each transcript segment, on a generated two-voice meeting.

``two_voices.mp4`` (``benchmarks/clips.py``) alternates two espeak-ng voices, three lines each,
at known times; Whisper tiny.en transcribes it and Resemblyzer's bundled encoder labels it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from clirun import vidagent
from factories import INDEX_SPECS, video_record
from realmedia import get_clip

from vidagent.app import Session
from vidagent.app.speakers import check_known
from vidagent.config import Settings, load_settings
from vidagent.exceptions import ConfigError
from vidagent.ingest.pipeline import index_path
from vidagent.ingest.speakers import cluster, label_segments
from vidagent.library import Library
from vidagent.library.schema import Artifact
from vidagent.models import voices
from vidagent.models.client import Models

pytestmark = pytest.mark.skipif(
    not voices.available(), reason="the voice encoder is not installed (vidagent[speakers])"
)


def _settings(root: Path, **more: Any) -> Settings:
    specs = {**INDEX_SPECS, "asr": "faster-whisper:tiny.en", "library": str(root / "library")}
    return load_settings({**specs, "home": str(root / "home"), **more})


def _index(path: Path, settings: Settings, stages: list[str]) -> Any:
    library = Library(settings.library_uri)
    with Models(settings) as models:
        return index_path(path, library=library, settings=settings, models=models, stages=stages)


@pytest.fixture(scope="module")
def meeting(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str, list[Any]]:
    """The two-voice clip indexed once (transcribe, speakers, embed), its reference turns."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng): no voices to tell")
    clips = _benchmark_clips()
    path = get_clip("two_voices.mp4")
    settings = _settings(tmp_path_factory.mktemp("speakers"))
    result = _index(path, settings, ["transcribe", "speakers", "embed"])
    assert result.video is not None
    return settings, result.video.video_id, clips.spoken_turns(clips.TWO_VOICES_SPEECH)


def _benchmark_clips() -> Any:
    import importlib.util

    source = Path(__file__).resolve().parents[2] / "benchmarks" / "clips.py"
    spec = importlib.util.spec_from_file_location("_vidagent_bench_clips", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _labels_by_voice(library: Library, vid: str, turns: list[Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in library.transcript(vid):
        mid = (s.t0 + s.t1) / 2
        voice = next(v for a, b, v in turns if a - 0.5 <= mid <= b + 0.5)
        out.setdefault(voice, set()).add(s.speaker)
    return out


def test_each_voice_gets_its_own_label(meeting: tuple[Settings, str, list[Any]]) -> None:
    settings, vid, turns = meeting
    library = Library(settings.library_uri)
    segments = library.transcript(vid)
    assert len(segments) >= 6
    by_voice = _labels_by_voice(library, vid, turns)
    # The first voice speaks first: S1; every line of one voice has one label, the other's
    # the other.
    assert by_voice == {turns[0][2]: {"S1"}, turns[1][2]: {"S2"}}
    talk = library.artifact(vid, "speakers")
    assert talk is not None and set(talk.data["speakers"]) == {"S1", "S2"}


def test_a_second_run_labels_nothing_and_a_lost_checkpoint_or_new_transcript_relabels(
    meeting: tuple[Settings, str, list[Any]],
) -> None:
    settings, vid, _ = meeting
    library = Library(settings.library_uri)
    path = Path(library.get_video(vid).source)
    again = _index(path, settings, ["transcribe", "speakers"])
    assert [(s.stage, s.clips) for s in again.stages] == [("transcribe", 0), ("speakers", 0)]
    before = [s.speaker for s in library.transcript(vid)]

    # Killed after the rows were labelled, before the artefact: the rerun labels again.
    library.delete_artifacts(vid, "speakers", [""])
    rerun = _index(path, settings, ["speakers"])
    assert rerun.stages[0].clips > 0
    assert [s.speaker for s in library.transcript(vid)] == before

    # A changed transcript (a new ASR run) is labelled anew; its old labels are not trusted.
    segments = library.transcript(vid)
    library.put_transcript(vid, [s.__class__(**{**s.__dict__, "speaker": ""}) for s in segments])
    library.put_transcript(
        vid, [segments[0].__class__(**{**segments[0].__dict__, "text": " Changed."}), *segments[1:]]
    )
    assert _index(path, settings, ["speakers"]).stages[0].clips > 0
    assert [s.speaker for s in library.transcript(vid)] == before
    library.put_transcript(vid, segments)


def test_off_labels_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path, speakers="off")
    from vidagent.media.synth import make_video

    path = tmp_path / "v.mp4"
    make_video(path, duration=2.0, audio="tone")
    result = _index(path, settings, ["transcribe", "speakers"])
    assert result.stages[-1].clips == 0 and result.stages[-1].note == "off (settings.speakers)"
    assert result.video is not None
    assert Library(settings.library_uri).artifact(result.video.video_id, "speakers") is None


def test_the_voice_encoder_is_loaded_ahead_only_for_a_video_with_sound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pipeline loads the encoder (torch: 2-3 s, ~200 MB) while transcription and text
    # reading run; a silent video's speakers stage labels nothing, so it needs none.
    from vidagent.media.synth import make_video

    made: list[int] = []

    class Counted(voices.VoiceEncoder):
        def __init__(self) -> None:
            made.append(1)
            super().__init__()

    monkeypatch.setattr(voices, "VoiceEncoder", Counted)
    settings = _settings(tmp_path, asr="fake:echo?text=hello there")
    stages = ["transcribe", "read_text", "speakers"]  # two stages at once: the encoder warms
    silent, sound = tmp_path / "silent.mp4", tmp_path / "sound.mp4"
    make_video(silent, duration=2.0, size=(160, 96), fps=10)
    make_video(sound, duration=2.0, size=(160, 96), fps=10, audio="tone")
    result = _index(silent, settings, stages)
    assert (made, result.stages[-1].note) == ([], "no audio track")
    # it has the stage: it said to index it with that stage
    silence = pytest.raises(ConfigError, match="its speakers: none: nobody speaks in it")
    with Session(settings) as session, silence:
        session.rename_speaker("silent.mp4", "S1", "Bob")
    _index(sound, settings, stages)
    assert made == [1]


def test_without_the_voice_encoder_nothing_is_pending_until_it_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo's quick setup has no voice encoder: the stage must not show a progress bar on
    # every index and question, and must label the video once the encoder is there.
    settings = _settings(tmp_path)
    path = get_clip("two_voices.mp4")
    monkeypatch.setattr(voices, "available", lambda: False)
    result = _index(path, settings, ["transcribe", "speakers"])
    assert result.video is not None
    ran = result.stages[-1]
    assert (ran.clips, ran.note) == (0, "not labelled: pip install 'vidagent[speakers]'")
    assert Library(settings.library_uri).artifact(result.video.video_id, "speakers") is None
    monkeypatch.undo()
    again = _index(path, settings, ["transcribe", "speakers"])
    assert again.stages[-1].clips > 0
    labels = {s.speaker for s in Library(settings.library_uri).transcript(result.video.video_id)}
    assert len(labels - {""}) == 2


def test_rename_and_search_by_speaker(meeting: tuple[Settings, str, list[Any]]) -> None:
    settings, vid, _ = meeting
    with Session(settings) as session:
        named = session.rename_speaker(vid, "s1", "Dr Lee")
        assert [(s.label, s.name) for s in named.speakers if s.name] == [("S1", "Dr Lee")]
        with pytest.raises(ConfigError, match="no speaker 'S9'.*S1, S2"):
            session.rename_speaker(vid, "S9", "Nobody")
        # another speaker's name or label: search by it would find one of the two only
        with pytest.raises(ConfigError, match="'dr lee' already names S1 in "):
            session.rename_speaker(vid, "S2", "dr lee")
        # a label is said to be one ("'s1' already names S1" read as if S1 had that name)
        with pytest.raises(ConfigError, match="'s1' is the label of another speaker \\(S1\\)"):
            session.rename_speaker(vid, "S2", "s1")
        # a label no speaker here has: another video's speaker, or one here diarized again
        with pytest.raises(ConfigError, match="'S3' reads as a speaker's label"):
            session.rename_speaker(vid, "S2", "S3")
        # markup SubRip would show (<b> as bold; "-->" trips its parsers), a name no line can
        # carry, and a control character are refused; an emoji's joiner is no control
        with pytest.raises(ConfigError, match="holds no < or >"):
            session.rename_speaker(vid, "S2", "Dr Lee <b>&</b> --> x")
        with pytest.raises(ConfigError, match="at most 80 characters, not 81"):
            session.rename_speaker(vid, "S2", "x" * 81)
        with pytest.raises(ConfigError, match="printable text"):
            session.rename_speaker(vid, "S2", "\u202eevil")  # a right-to-left override
        named = session.rename_speaker(vid, "S2", "\U0001f469\u200d\u2695\ufe0f Dr Kim")
        assert "\u200d" in next(s.name for s in named.speakers if s.label == "S2")
        session.rename_speaker(vid, "S2", "")
        session.rename_speaker(vid, "S1", "dr LEE")  # its own name, in other case: fine
        session.rename_speaker(vid, "S1", "Dr Lee")
        segments = session.library.transcript(vid)
        clips = session.library.clips(vid)
        sizes = []
        for who, label in (("Dr Lee", "S1"), ("S2", "S2")):
            spans = [(s.t0, s.t1) for s in segments if s.speaker == label]
            theirs = {c.clip_index for c in clips if any(a < c.t1 and b > c.t0 for a, b in spans)}
            hits = session.search("the meeting", videos=[vid], top=len(clips), speaker=who)
            assert {h.hit.clip.clip_index for h in hits} == theirs  # all theirs, no other
            sizes.append(len(theirs))
        assert min(sizes) < len(clips)  # a clip where one speaks alone: the filter filtered
        with pytest.raises(ConfigError, match=r"no speaker 'S9'; its speakers: S1 \(Dr Lee\), S2"):
            session.search("the meeting", videos=[vid], speaker="S9")  # not "no matching clips"
        with pytest.raises(ConfigError, match="no speaker 'Dr Leigh'"):
            session.search("the meeting", speaker="Dr Leigh")  # the whole Library
        everyone = session.search("the meeting", videos=[vid], top=5)
        assert {w for h in everyone for w in h.speakers} == {"S1 (Dr Lee)", "S2"}
        shown = session.show(vid).to_json()["transcript"]
        assert {(t["speaker"], t["speaker_name"]) for t in shown} == {("S1", "Dr Lee"), ("S2", "")}
        session.rename_speaker(vid, "S1", "")  # an empty name removes it
        assert all(not s.name for s in session.speakers(vid).speakers)


def test_a_speaker_is_known_if_any_video_searched_has_it(tmp_path: Path) -> None:
    library = Library(tmp_path / "lib")
    talk = {"S1": {"seconds": 4.0, "segments": 2}, "S2": {"seconds": 3.0, "segments": 1}}
    a, b, c = "a" * 16, "b" * 16, "c" * 16
    for vid in (a, b, c):
        library.put_video(video_record(vid))
    for vid in (a, b):
        library.put_artifact(Artifact(vid, "speakers", "", data={"speakers": talk}))
    library.put_artifact(Artifact(b, "speakers", "names", data={"S2": "Bob"}))
    check_known(library, [a, b], "bob")  # a name given in one of them
    check_known(library, [a], "s2")
    with pytest.raises(ConfigError, match="none of the 2 videos searched has a speaker 'S3'"):
        check_known(library, [a, b], "S3")
    with pytest.raises(ConfigError, match=r"has no speaker 'S3'; its speakers: S1, S2 \(Bob\)"):
        check_known(library, [b], "S3")
    with pytest.raises(ConfigError, match="its speakers: none"):  # not labelled
        check_known(library, [c], "S1")


def test_the_cli_lists_renames_shows_and_filters(
    meeting: tuple[Settings, str, list[Any]], tmp_path: Path
) -> None:
    settings, vid, _ = meeting
    env = {"VIDAGENT_LIBRARY": settings.library_uri, "VIDAGENT_EMBED": settings.embed}
    home = tmp_path / "home"
    listed = vidagent("speakers", vid, home=home, env=env)
    assert listed.returncode == 0 and listed.stdout.splitlines()[0].startswith(("S1", "S2"))
    renamed = vidagent("speakers", vid, "rename", "S2", "Bob Smith", home=home, env=env)
    assert "Bob Smith" in renamed.stdout
    shown = vidagent("show", vid, home=home, env=env).stdout
    assert "S2 (Bob Smith): " in shown and " S1: " in shown  # each line with its speaker
    found = vidagent("search", vid, "budget", "--speaker", "bob smith", home=home, env=env)
    assert found.returncode == 0 and "S2 (Bob Smith)" in found.stdout
    nobody = vidagent("search", vid, "budget", "--speaker", "S7", home=home, env=env)
    assert nobody.returncode == 1 and "has no speaker 'S7'; its speakers: S1" in nobody.stderr
    assert nobody.stderr.startswith("error: two_voices.mp4 has no speaker")  # not its id
    bad = vidagent("speakers", vid, "rename", "S7", "X", home=home, env=env)
    assert bad.returncode != 0 and "no speaker 'S7'" in bad.stderr
    vidagent("speakers", vid, "rename", "S2", "", home=home, env=env)


def test_clusters_find_the_number_of_speakers_and_absorb_a_cough() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=256), rng.normal(size=256)
    rows = [a + 0.2 * rng.normal(size=256) for _ in range(6)]
    rows += [b + 0.2 * rng.normal(size=256) for _ in range(5)]
    rows.append(rng.normal(size=256))  # one odd window: less than min_seconds on its own
    vectors = np.array(rows, np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    found = cluster(vectors, np.full(len(rows), 1.6), threshold=0.4, min_seconds=3.0)
    assert len(set(found[:6])) == 1 and len(set(found[6:11])) == 1 and found[0] != found[6]
    assert found[11] in (found[0], found[6])  # absorbed, not a third speaker
    labels = label_segments(13, list(range(12)), found)  # segment 12 has no window
    assert labels[:7] == ["S1"] * 6 + ["S2"] and labels[12] == ""


def test_the_retrieval_baseline_answers_who_says_from_the_labels(
    meeting: tuple[Settings, str, list[Any]],
) -> None:
    settings, vid, _ = meeting
    with Session(settings) as session:
        session.rename_speaker(vid, "S2", "Bob")
        try:
            # Options that name speakers: the one whose segment says the quoted words wins.
            chosen = session.ask(
                vid,
                'Who says "the budget figures"?',
                options=["Ann (S1)", "Bob"],
                strategy="retrieval",
                trace=False,
            )
            assert chosen.answer is not None and chosen.answer.choice == 1
            (where,) = chosen.answer.evidence
            # Bob's line (Whisper's segment, 4.6-7.9 s; its end moves by a few hundredths with the
            # threads it runs on), not the clip
            assert where.t0 == pytest.approx(4.6, abs=0.1) and where.t1 == pytest.approx(
                7.9, abs=0.1
            )
            # A citation of speech says who says the quote.
            quoted = session.ask(
                vid,
                "What about the budget figures for the library?",
                strategy="retrieval",
                trace=False,
            )
            answered = quoted.trace.answer
            assert answered is not None
            budget = [c for c in answered.citations if "budget" in c.text]
            assert budget and {(c.source, c.speaker) for c in budget} == {("speech", "S2 (Bob)")}
            # An open question: the speaker, as shown.
            said = session.ask(
                vid, "Who said the roof repairs cost?", strategy="retrieval", trace=False
            )
            assert said.answer is not None and said.answer.text == "S1"
        finally:
            session.rename_speaker(vid, "S2", "")
