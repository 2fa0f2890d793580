"""Evidence a person can take away: an answer exported as clips cut exactly to their spans,
frames, a contact sheet, subtitles, a timeline and an ``index.json`` that its shipped schema
accepts; contact sheets and whole-transcript subtitles of a video."""

from __future__ import annotations

import itertools
import json
import zipfile
from pathlib import Path
from typing import Any

import av
import jsonschema
import pytest
from factories import INDEX_SPECS

from vidagent.app import Session
from vidagent.app.export import export_schema
from vidagent.app.sheets import span_frames, tile_labels
from vidagent.config import load_settings
from vidagent.exceptions import ConfigError, UserError
from vidagent.library.schema import Artifact, TranscriptSegment
from vidagent.media import frames_at, probe
from vidagent.media.synth import make_video, read_counter
from vidagent.trace import Answered, Citation, RunStarted, Trace

#: the second segment's words: "closes" is said a second after "it"
WORDS = [
    [6.0, 6.5, "and", 0.9],
    [6.5, 7.2, "then", 0.9],
    [7.2, 7.6, "it", 0.9],
    [8.4, 9.0, "closes", 0.9],
]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A 12 s counter video with a tone, indexed with the fakes; a transcript of two segments,
    the first said by S1, named "Dr Lee", the second with its words' times. Returns (home,
    library, video id)."""
    root = tmp_path_factory.mktemp("export")
    video = root / "talk.mp4"
    make_video(video, duration=12, fps=25, size=(320, 180), counter=True, audio="tone", gop=50)
    home, lib = root / "home", root / "lib"
    settings = load_settings({**INDEX_SPECS, "home": str(home)}, env={})
    with Session(settings, library=lib) as session:
        result = session.index_file(video, stages=["transcribe"])
        vid = result.structure.video.video_id
        segments = [
            TranscriptSegment(vid, 0, 2.0, 4.0, "the door opens now", "[]", "fake", "S1"),
            TranscriptSegment(vid, 1, 6.0, 9.0, "and then it closes", json.dumps(WORDS), "fake"),
        ]
        session.library.put_transcript(vid, segments)
        # the name a user gave S1 (`vidagent speakers VIDEO rename S1 "Dr Lee"`), which
        # subtitles and bundles show in the label's place
        session.library.put_artifact(Artifact(vid, "speakers", "names", data={"S1": "Dr Lee"}))
    return home, lib, vid


def _session(home: Path, lib: Path) -> Session:
    return Session(load_settings({**INDEX_SPECS, "home": str(home)}, env={}), library=lib)


def _answer_trace(
    path: Path, vid: str, citations: list[Citation] | None = None, **answered: Any
) -> Path:
    trace = Trace(path)
    trace.emit(RunStarted(0.0, "retrieval", "When does the door open?", [], [], {}, {}))
    citations = citations or [
        Citation(vid, 2.5, 3.5, [2.0, 4.0], "found", 1.0, "speech", "the door opens", 0),
        Citation(vid, 7.0, 7.0, [7.0, 7.0], "unchecked", 0.0, "", "", 1),
    ]
    said = {"text": "At 2 s.", "forced": False, "reason": "answered", **answered}
    trace.emit(Answered(1.0, choice=None, parsed=True, confidence=None, evidence=[],
                        citations=citations, **said))  # fmt: skip
    trace.close()
    return path


def test_an_export_holds_exact_clips_frames_sheet_subtitles_and_a_valid_index(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, lib, vid = indexed
    trace = _answer_trace(home / "traces" / "20260101-000000-retrieval-abcdef.jsonl", vid)
    with _session(home, lib) as session:
        result = session.export(out=tmp_path / "bundle")  # the last answer's trace
    out = result.path
    index = json.loads((out / "index.json").read_text())
    jsonschema.validate(index, export_schema())
    assert index["schema_version"] == 1 and index["trace"] == str(trace)
    assert index["question"] == "When does the door open?" and index["answer"] == "At 2 s."
    first, second = index["citations"]
    assert (first["t0"], first["t1"], first["label"]) == (2.0, 4.0, "found")
    # the exact span: the clip starts on frame 50 (2.0 s at 25 fps), not on a keyframe (0, 50
    # frames apart) and lasts the span, with its audio
    clip = probe(out / first["clip"])
    assert abs(clip.duration - 2.0) < 0.1 and clip.has_audio
    assert read_counter(frames_at(clip, [0.0])[0]) == 50
    # a span of no length is widened to a second around it
    assert (second["t0"], second["t1"]) == (6.5, 7.5)
    assert read_counter(frames_at(probe(out / second["clip"]), [0.0])[0]) == round(6.5 * 25)
    assert 2 <= len(first["frames"]) <= 4 and all(
        (out / f["file"]).is_file() for f in first["frames"]
    )
    assert (out / index["videos"][0]["sheet"]).stat().st_size > 1000
    srt = (out / first["subtitles"]["srt"]).read_text()
    assert "00:00:00,000 --> 00:00:02,000\nDr Lee: the door opens now" in srt
    vtt = (out / "transcript.vtt").read_text()
    assert vtt.startswith("WEBVTT") and "00:00:02.000 --> 00:00:04.000\n<v Dr Lee>the door" in vtt
    timeline = (out / "timeline.md").read_text()
    assert "**Question:** When does the door open?" in timeline
    assert f"[{first['clip']}]({first['clip']})" in timeline and "> the door opens" in timeline
    assert "Quoted from 00:00:02.5-00:00:03.5." in timeline  # the quote's own time in the span
    assert first["transcript"][0]["speaker"] == "Dr Lee"
    assert first["transcript"][0]["label"] == "S1"  # the label `vidagent speakers` lists
    # the widened span 6.5-7.5 holds "then it" of "and then it closes", at those words' times
    assert second["transcript"] == [{"t0": 6.5, "t1": 7.5, "text": "then it", "speaker": ""}]


def test_a_sentence_two_cited_spans_share_is_split_between_their_clips_and_said_once(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, lib, vid = indexed
    citations = [  # two clips that meet at 8.0 s, inside "and then it closes" (6-9 s)
        Citation(vid, 5.0, 8.0, [5.0, 8.0], "found", 1.0, "speech", "and then it", 0),
        Citation(vid, 8.0, 10.0, [8.0, 10.0], "partial", 0.5, "speech", "closes", 0),
    ]
    trace = _answer_trace(tmp_path / "t.jsonl", vid, citations)
    with _session(home, lib) as session:
        out = session.export(trace, out=tmp_path / "bundle").path
    index = json.loads((out / "index.json").read_text())
    first, second = (c["transcript"] for c in index["citations"])
    assert [(d["t0"], d["t1"], d["text"]) for d in first] == [(6.0, 7.6, "and then it")]
    assert [(d["t0"], d["t1"], d["text"]) for d in second] == [(8.4, 9.0, "closes")]
    clip_srt = (out / index["citations"][1]["subtitles"]["srt"]).read_text()
    assert clip_srt == "1\n00:00:00,400 --> 00:00:01,000\ncloses\n"  # from the clip's start
    # the bundle's subtitles: the sentence once, whole, at its own time
    assert (out / "transcript.srt").read_text() == (
        "1\n00:00:06,000 --> 00:00:09,000\nand then it closes\n"
    )


def test_an_export_zip_holds_the_bundle_and_a_missing_answer_is_one_line(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, lib, vid = indexed
    trace = _answer_trace(tmp_path / "t.jsonl", vid)
    with _session(home, lib) as session:
        result = session.export(trace, out=tmp_path / "ev", as_zip=True)
        assert result.path == tmp_path / "ev.zip"
        names = zipfile.ZipFile(result.path).namelist()
        assert "ev/index.json" in names and any(n.endswith(".mp4") for n in names)
        # a file of that name, a zip among them (the bundle of an earlier answer, or a video
        # named .zip by mistake), is kept: refused in one line, as a folder not empty is
        (tmp_path / "kept.zip").write_bytes(b"not ours")
        for out in (result.path, tmp_path / "kept.zip"):
            before = out.read_bytes()
            with pytest.raises(UserError, match="exists; name another with -o, or remove it"):
                session.export(trace, out=out)
            assert out.read_bytes() == before
        empty = Trace(tmp_path / "none.jsonl")
        empty.emit(RunStarted(0.0, "retrieval", "Q?", [], [], {}, {}))
        empty.close()
        with pytest.raises(UserError, match="the run gave no answer"):
            session.export(empty.path)
        stopped = Trace(tmp_path / "stopped.jsonl")  # Stop pressed: an empty answer (a bundle)
        stopped.emit(RunStarted(0.0, "retrieval", "Q?", [], [], {}, {}))
        stopped.emit(Answered(1.0, text="", choice=None, parsed=False, forced=True,
                              reason="stopped", confidence=None, evidence=[], citations=[]))  # fmt: skip
        stopped.close()
        with pytest.raises(UserError, match=r"the run gave no answer \(it was stopped\)"):
            session.export(stopped.path, out=tmp_path / "stopped")
        assert not (tmp_path / "stopped").exists()
        with pytest.raises(UserError, match="is not empty"):
            session.export(trace, out=tmp_path)
        # a trace edited, or of another file: its spans outside the video are said so, not cut
        # as one frame labelled with the asked times
        outside = [
            Citation(vid, 500.0, 510.0, [500.0, 510.0], "found", 1.0, "speech", "x", 0),
            Citation(vid, -20.0, -10.0, [-20.0, -10.0], "found", 1.0, "speech", "x", 1),
            Citation(vid, 2.5, 3.5, [2.0, 4.0], "found", 1.0, "speech", "the door opens", 2),
        ]
        edited = session.export(
            _answer_trace(tmp_path / "o.jsonl", vid, outside), out=tmp_path / "o"
        )
        errors = [c["error"] for c in edited.index["citations"]]
        assert errors[:2] == [
            "500.0-510.0 s lies outside talk.mp4 (0-12.0 s)",
            "-20.0--10.0 s lies outside talk.mp4 (0-12.0 s)",
        ]
        assert (
            errors[2] is None and [c["clip"] for c in edited.index["citations"]][:2] == [None] * 2
        )
        assert len(list((tmp_path / "o" / "clips").glob("*.mp4"))) == 1
        # a damaged trace (a time edited by hand) is refused in one line, not an OverflowError
        # (1e300 seconds as a wall-clock time) or a TypeError ("abc"), by export and replay
        for n, bad in enumerate((float("nan"), 1e300, "abc")):
            damaged = [Citation(vid, bad, 3.0, [2.0, 4.0], "found", 1.0, "speech", "x", 0)]  # type: ignore[arg-type]
            trace = _answer_trace(tmp_path / f"n{n}.jsonl", vid, damaged)
            with pytest.raises(
                UserError, match=r"a citation's t0 \(.+\) is not seconds of a video"
            ):
                session.export(trace, out=tmp_path / f"n{n}")
            with pytest.raises(UserError, match="is not seconds of a video"):
                session.replay(trace)


def test_a_withheld_or_forced_answer_says_so_in_the_bundle(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    # the timeline said "**Answer:** insufficient evidence" alone, and index.json "abstained"
    # with no reason: a person reading the bundle took a withheld, forced answer for an answer
    home, lib, vid = indexed
    trace = _answer_trace(
        tmp_path / "w.jsonl",
        vid,
        text="insufficient evidence",
        forced=True,
        reason="max_steps",
        note="no valid action",
        abstained=True,
        abstain_policy="auto",
        abstain_reason="none of the answer's key words is said or shown where it cites",
        withheld="At 2 s.",
    )
    with _session(home, lib) as session:
        out = session.export(trace, out=tmp_path / "w").path
    index = json.loads((out / "index.json").read_text())
    jsonschema.validate(index, export_schema())
    assert (index["forced"], index["reason"], index["note"]) == (
        True,
        "max_steps",
        "no valid action",
    )
    assert (index["abstain_policy"], index["withheld"]) == ("auto", "At 2 s.")
    assert index["abstain_reason"].startswith("none of the answer's key words")
    timeline = (out / "timeline.md").read_text()
    assert (
        "*Forced:* the run ended (max_steps; no valid action) and was made to answer." in timeline
    )
    assert (
        "*Abstained (auto):* none of the answer's key words is said or shown where it cites."
        ' It withheld: "At 2 s.".' in timeline
    )


def test_a_contact_sheet_uses_the_stored_thumbnails_where_they_cover_the_span(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    home, lib, vid = indexed
    with _session(home, lib) as session:
        whole = session.sheet(vid, out=tmp_path / "s.png", count=6)
        assert whole.thumbnails == 6 and (whole.t0, whole.t1) == (0.0, 12.0)
        # 20 frames in 2 s: denser than the thumbnails, so most are decoded
        close = session.sheet(vid, t_from=2.0, t_to=4.0, count=20, out=tmp_path / "c.jpg")
        assert close.thumbnails < 20 and len(close.times) == 20
        # a span within a second says where it is (it said 00:00:02-00:00:02)
        tight = session.sheet(vid, t_from=2.4, t_to=2.6, count=2, out=tmp_path / "t.png")
        assert (tight.to_json()["start"], tight.to_json()["end"]) == ("00:00:02.4", "00:00:02.6")
        with av.open(str(close.path)) as img:
            assert next(img.decode(video=0)).width > 300
        with pytest.raises(UserError, match="--to must be after --from"):
            session.sheet(vid, t_from=5.0, t_to=4.0)
        for bad in (float("nan"), float("inf"), 1e308, -5.0):  # as the HTTP API's query reads them
            with pytest.raises(UserError, match="--from .* is not a time in the video"):
                session.sheet(vid, t_from=bad)
            with pytest.raises(UserError, match="--to .* is not a time in the video"):
                session.sheet(vid, t_to=bad)
        # 8 points over 6 s: a thumbnail midway between two of them is shown once
        spread = session.sheet(vid, t_from=0, t_to=6, count=8, out=tmp_path / "m.png")
        assert len(set(spread.times)) == 8
        # tiles even to half a spacing (10 over 6 s drew a gap of 1.67 spacings: a thumbnail
        # half a spacing off each way)
        even = session.sheet(vid, t_from=0, t_to=6, count=10, out=tmp_path / "e.png")
        gaps = [b - a for a, b in itertools.pairwise(even.times)]
        assert min(gaps) >= 0.5 * 0.6 - 1e-6 and max(gaps) <= 1.5 * 0.6 + 1e-6
        # more tiles than the span has frames (0.2 s at 25 fps: 5): each frame drawn once
        dense = session.sheet(vid, t_from=2.4, t_to=2.6, count=20, out=tmp_path / "d.png")
        assert len(set(dense.times)) == len(dense.times) == 5
        assert dense.note == "the span holds 5 frames: 5 drawn, not 20"
        # a tile per frame, each a different one, labelled with its own time: tiles midway
        # between frames drew one twice and the other never (10 of a second at 10 fps: 8)
        second = session.sheet(vid, t_from=2.0, t_to=3.0, count=25, out=tmp_path / "f.png")
        assert second.times == [round(2.0 + k / 25, 3) for k in range(25)]
        drawn, _ = span_frames(session.library, session.library.get_video(vid), second.times)
        assert [read_counter(rgb) for _, rgb in drawn] == list(range(50, 75))
        labels = tile_labels(second.times)  # three read "00:00:02.0" to a tenth
        assert len(set(labels)) == 25 and labels[:2] == ["00:00:02.000", "00:00:02.040"]
        assert tile_labels([2.0, 2.5]) == ["00:00:02", "00:00:02.5"]
        # one tile: a frame inside the span (half a second's reach took a thumbnail outside)
        one = session.sheet(vid, t_from=2.61, t_to=2.79, count=1, out=tmp_path / "1.png")
        assert one.times == [2.68] and one.thumbnails == 0
        with pytest.raises(UserError, match="at least one column, not -2"):
            session.sheet(vid, columns=-2)
        with pytest.raises(UserError, match="srt, vtt or txt, not 'ass'"):
            session.subtitles(vid, "ass")  # type: ignore[arg-type]
        # more columns than frames: one row of the frames there are (not 10**9 columns wide)
        row = session.sheet(vid, count=2, columns=10**9, out=tmp_path / "r.png")
        with av.open(str(row.path)) as img:
            assert next(img.decode(video=0)).width < 1000


def test_a_sheet_of_a_video_whose_file_is_gone_says_it_shows_fewer_frames(
    tmp_path: Path,
) -> None:
    # 120 frames asked, 60 drawn from the thumbnails, exit 0 and not a word of why
    video = tmp_path / "moved.mp4"
    make_video(video, duration=6, fps=25, size=(160, 96), counter=True)
    settings = load_settings({**INDEX_SPECS, "home": str(tmp_path / "home")}, env={})
    with Session(settings, library=tmp_path / "lib") as session:
        vid = session.index_file(video, stages=[]).structure.video.video_id
        video.rename(tmp_path / "elsewhere.mp4")
        drawn = session.sheet(vid, count=20, out=tmp_path / "s.png")
    assert 0 < len(drawn.times) < 20 and drawn.thumbnails == len(drawn.times)
    assert drawn.note == (
        f"moved.mp4's file is gone: {len(drawn.times)} of the 20 frames asked, the index's "
        "thumbnails in the span"
    )
    assert drawn.to_json()["note"] == drawn.note


def test_the_whole_transcript_as_subtitles_with_speakers(
    indexed: tuple[Path, Path, str],
) -> None:
    home, lib, vid = indexed
    with _session(home, lib) as session:
        srt = session.subtitles(vid, "srt")
        vtt = session.subtitles(vid, "vtt")
    assert srt.splitlines()[:3] == [
        "1",
        "00:00:02,000 --> 00:00:04,000",
        "Dr Lee: the door opens now",
    ]
    assert "2\n00:00:06,000 --> 00:00:09,000\nand then it closes" in srt
    assert vtt.startswith("WEBVTT\n\n00:00:02.000 --> 00:00:04.000\n<v Dr Lee>the door opens now")


def test_a_long_segment_is_split_into_cues_a_viewer_can_read() -> None:
    # A Whisper segment of 16 s and 153 characters was one cue (guidelines: 7 s, 84 characters)
    from types import SimpleNamespace

    from vidagent.app.subtitles import subtitles

    sentence = (
        "We will now count down from ten for the launch of the rocket. Everyone stand clear "
        "of the pad, and put your goggles on, because the engines are very bright indeed"
    )
    said = sentence.split(" ")
    words = [[1.0 + 0.5 * i, 1.4 + 0.5 * i, w, 0.9] for i, w in enumerate(said)]
    long = SimpleNamespace(t0=0.8, t1=words[-1][1], text=" ".join(said), words=json.dumps(words))
    short = SimpleNamespace(t0=20.0, t1=21.0, text="Lift off.", words="[]")
    cues = [c.split("\n") for c in subtitles([long, short], "srt").strip().split("\n\n")]
    texts = [c[2] for c in cues]
    assert " ".join(texts[:-1]) == long.text and texts[-1] == "Lift off."
    assert texts[0].endswith("rocket.")  # broken after the sentence, not mid-phrase
    for _, time, text in cues:
        a, b = (
            3600 * int(x[:2]) + 60 * int(x[3:5]) + float(x[6:].replace(",", "."))
            for x in time.split(" --> ")
        )
        assert b - a <= 7.0 and len(text) <= 84, (time, text)
    assert cues[0][1].startswith("00:00:01,000")  # the first word's own time, not the segment's


def test_an_export_s_subtitles_split_a_long_segment_as_show_does(tmp_path: Path) -> None:
    # The bundle's transcript.srt cut the segments to the cited spans without their words, so
    # a long one stayed one cue (7.72 s on the countdown clip) where `show --srt` split it
    video = tmp_path / "talk.mp4"
    make_video(video, duration=12, fps=10, size=(160, 96), audio="tone", gop=10)
    home, lib = tmp_path / "home", tmp_path / "lib"
    sentence = "we will now count down from ten for the launch, everyone stand clear of the pad"
    said = sentence.split(" ")
    words = [[0.5 * i, 0.5 * i + 0.4, w, 0.9] for i, w in enumerate(said)]
    with _session(home, lib) as session:
        vid = session.index_file(video, stages=["transcribe"]).structure.video.video_id
        long = TranscriptSegment(vid, 0, 0.0, words[-1][1], " ".join(said), json.dumps(words), "")
        session.library.put_transcript(vid, [long])
        cited = [Citation(vid, 0.0, 9.0, [0.0, 9.0], "found", 1.0, "speech", "count down", 0)]
        _answer_trace(tmp_path / "t.jsonl", vid, cited)
        out = session.export(tmp_path / "t.jsonl", out=tmp_path / "bundle").path
        shown = session.subtitles(vid, "srt")
    for srt in ((out / "transcript.srt").read_text(), shown):
        cues = [c.split("\n") for c in srt.strip().split("\n\n")]
        assert len(cues) == 2 and cues[0][2].endswith("launch,"), srt  # after the clause
        assert " ".join(c[2] for c in cues) == long.text
    assert (out / "transcript.srt").read_text() == shown


def test_the_commands_export_draw_and_write_subtitles_or_say_why_not_in_one_line(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    from clirun import vidagent

    home, lib, vid = indexed
    trace = _answer_trace(tmp_path / "t.jsonl", vid)
    run = {"home": home, "env": {"VIDAGENT_LIBRARY": str(lib)}}
    video = home.parent / "talk.mp4"
    kept = video.read_bytes()
    done = vidagent("export", str(trace), "-o", str(tmp_path / "b"), "--zip", **run)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {tmp_path / 'b.zip'}: 2 citations, 2 clips")
    # two claims cited at one span share its clip: one clip written, one counted (it said 2)
    same = [Citation(vid, 2.5, 3.5, [2.0, 4.0], "found", 1.0, "speech", "the door", k)
            for k in (0, 1)]  # fmt: skip
    shared = _answer_trace(tmp_path / "s.jsonl", vid, same)
    once = vidagent("export", str(shared), "-o", str(tmp_path / "c"), **run)
    assert once.returncode == 0, once.stderr
    assert once.stdout.startswith(f"wrote {tmp_path / 'c'}: 2 citations, 1 clip,")
    assert len(list((tmp_path / "c" / "clips").glob("*.mp4"))) == 1
    drawn = vidagent(
        "sheet", vid, "--from", "0:02", "--to", "4", "-o", str(tmp_path / "s.png"), **run
    )
    assert (
        drawn.returncode == 0 and "6 frames" not in drawn.stdout and (tmp_path / "s.png").is_file()
    )
    written = vidagent("show", vid, "--vtt", "-o", str(tmp_path / "t.vtt"), **run)
    assert written.returncode == 0 and (tmp_path / "t.vtt").read_text().startswith("WEBVTT")
    nested = tmp_path / "subs" / "new" / "t.srt"  # a folder not there yet (a crash before)
    written = vidagent("show", vid, "--srt", "-o", str(nested), **run)
    assert written.returncode == 0 and nested.read_text().startswith("1\n00:")
    both = vidagent("show", vid, "--srt", "--vtt", **run)  # the last flag won, silently
    assert both.returncode == 2 and "give --srt or --vtt, not both" in both.stderr
    printed = vidagent("show", vid, "--srt", **run)
    assert "Dr Lee: the door opens now" in printed.stdout
    (tmp_path / "a-file").write_text("")
    long = "y" * 300
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    for _ in range(2):  # a .txt of subtitles written before is replaced
        again = vidagent("show", vid, "--srt", "-o", str(tmp_path / "t.txt"), **run)
        assert again.returncode == 0 and (tmp_path / "t.txt").read_text().startswith("1\n00:")
    for args, message in [
        (("export", str(tmp_path / "nope.jsonl")), "no such trace file"),
        (
            ("export", str(trace), "-o", str(tmp_path / "a-file" / "b")),
            f"cannot write {tmp_path / 'a-file' / 'b'}: Not a directory",
        ),
        # a name too long to look at, a folder to make that is a file, a place where no file
        # can be made: each was an "unexpected" error, its traceback in a crash log
        (("export", str(trace), "-o", str(tmp_path / long)), f"{long}: File name too long"),
        (("show", vid, "--srt", "-o", str(tmp_path / f"{long}.srt")), "File name too long"),
        (("sheet", vid, "-o", str(tmp_path / f"{long}.png")), "File name too long"),
        (
            ("sheet", vid, "-o", str(tmp_path / "a-file" / "s.png")),
            f"{tmp_path / 'a-file'} is a file, not a folder",
        ),
        (("sheet", vid, "-o", "/proc/s.png"), "cannot write /proc/s.png: No such file"),
        (("sheet", vid, "--from", "20"), "is past the end"),
        (("sheet", vid, "--from", "nan"), "'nan' is not a time; use seconds or HH:MM:SS"),
        (("sheet", vid, "--to", "1:inf"), "'1:inf' is not a time"),
        (("sheet", vid, "--count", "100000"), "shows at most 400 frames, not 100000"),
        (("sheet", vid, "-o", str(tmp_path / "s.gif")), "written as .png or .jpg"),
        (("sheet", vid, "-o", str(tmp_path / ".png")), "give the sheet a name before its suffix"),
        (("show", vid, "-o", str(tmp_path / "x")), "give --srt or --vtt"),
        (
            ("show", vid, "--srt", "-o", str(tmp_path / "a-file" / "t.srt")),
            f"cannot write {tmp_path / 'a-file' / 't.srt'}: Not a directory",
        ),
        # the video itself named as the output: kept, not replaced
        (("show", vid, "--srt", "-o", str(video)), f"{video} exists and is not a subtitle file"),
        (("show", vid, "--vtt", "-o", str(notes)), f"{notes} exists and is not a subtitle file"),
        # SubRip in a .vtt file (written in silence before)
        (("show", vid, "--srt", "-o", str(tmp_path / "t.vtt")), "give --vtt, or name a .srt"),
        (("ask", vid, "What opens?", "--trace", str(video)), f"{video} exists and is not a trace"),
    ]:
        failed = vidagent(*args, **run)
        assert failed.returncode != 0 and message in failed.stderr.strip().splitlines()[-1]
        assert "Traceback" not in failed.stderr
    assert video.read_bytes() == kept and notes.read_text() == "my notes\n"
    from vidagent.trace import check_target

    check_target(trace)  # a trace named again is replaced


def test_a_video_moved_after_its_clip_was_cut_keeps_the_clip_and_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # moved mid-export, between the clip and its frames: the warning said the clip was left
    # out, and timeline.md "Not exported", while the clip was in the bundle
    from vidagent.media import cut

    video = tmp_path / "talk.mp4"
    make_video(video, duration=6, fps=10, size=(160, 96), audio="tone", gop=10)
    home, lib = tmp_path / "home", tmp_path / "lib"
    real = cut.cut_span

    def then_moved(*args: object, **kwargs: object) -> object:
        done = real(*args, **kwargs)  # type: ignore[arg-type]
        video.rename(tmp_path / "moved.mp4")
        return done

    with _session(home, lib) as session:
        vid = session.index_file(video, stages=["transcribe"]).structure.video.video_id
        cited = [Citation(vid, 1.0, 3.0, [1.0, 3.0], "found", 1.0, "speech", "", 0)]
        trace = _answer_trace(tmp_path / "t.jsonl", vid, cited)
        monkeypatch.setattr(cut, "cut_span", then_moved)
        done = session.export(trace, out=tmp_path / "ev")
    (only,) = done.index["citations"]
    assert only["clip"] and (done.path / only["clip"]).is_file() and not only["frames"]
    assert only["error"] and "no such file" in only["error"]
    assert len(done.warnings) == 1 and done.warnings[0].endswith("its frames are left out")
    timeline = (done.path / "timeline.md").read_text()
    assert "Frames not exported: " in timeline and "\nNot exported" not in timeline


def test_an_export_cut_short_leaves_nothing_half_written_and_runs_again(
    indexed: tuple[Path, Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C (or a full disk) mid-bundle left a clip cut short, without audio, and the same
    # command then refused the folder as "not empty"
    from vidagent.media import cut

    home, lib, vid = indexed
    trace = _answer_trace(tmp_path / "t.jsonl", vid)
    real = cut.cut_span
    calls: list[int] = []

    def interrupted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the second clip: the first already written
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cut, "cut_span", interrupted)
    with _session(home, lib) as session:
        for out in (tmp_path / "ev", tmp_path / "ev.zip"):
            calls.clear()
            with pytest.raises(KeyboardInterrupt):
                session.export(trace, out=out)
            assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]  # nothing left
        monkeypatch.setattr(cut, "cut_span", real)
        done = session.export(trace, out=tmp_path / "ev")
    assert (
        done.path == tmp_path / "ev" and len(list((tmp_path / "ev" / "clips").glob("*.mp4"))) == 2
    )


def test_a_file_replaced_under_its_name_is_not_cut_as_the_video_indexed(tmp_path: Path) -> None:
    # Another file copied over the indexed one: export cut its clips from the other file
    # and labelled them with the indexed video's citations and subtitles.
    video = tmp_path / "swap.mp4"
    make_video(video, duration=12, fps=25, size=(160, 96), counter=True, gop=25)
    settings = load_settings({**INDEX_SPECS, "home": str(tmp_path / "home")}, env={})
    with Session(settings, library=tmp_path / "lib") as session:
        vid = session.index_file(video, stages=["transcribe"]).structure.video.video_id
        trace = _answer_trace(tmp_path / "t.jsonl", vid)
        make_video(video, duration=12, fps=25, size=(160, 96), counter=False, gop=25)
        result = session.export(trace, out=tmp_path / "ev")
        errors = {c["error"] for c in result.index["citations"]}
        changed = "has changed since it was indexed (another file stands under its name)"
        assert errors == {f"swap.mp4: {video}: {changed}"}
        assert not (tmp_path / "ev" / "clips").exists()
        sheet = session.sheet(vid, count=20, out=tmp_path / "s.png")  # denser than thumbnails
        assert sheet.to_json()["decoded"] == 0  # the index's own pictures, none of the other


def test_a_trace_from_another_home_says_so_and_names_its_video(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    # It said "no longer in the Library" (it never was in this one), headed the timeline by
    # an id the trace names, and "(no speech)" under speech it could not read
    home, lib, _ = indexed
    trace = Trace(tmp_path / "elsewhere.jsonl")
    other = {"video_id": "f14d6782aaaabbbb", "name": "garden.mp4", "duration": 60.0}
    trace.emit(RunStarted(0.0, "retrieval", "Who?", [], [other], {}, {}))
    cited = Citation(other["video_id"], 30.0, 32.0, [30.0, 32.0], "found", 1.0, "speech", "x", 0)
    trace.emit(Answered(1.0, "Maria.", None, True, False, "", None, [], citations=[cited]))
    trace.close()
    with _session(home, lib) as session:
        result = session.export(trace.path, out=tmp_path / "ev")
    here = "not in this Library (removed, or the trace was written with another --home)"
    assert result.warnings == [f"video f14d6782aaaabbbb (garden.mp4) is {here}"]
    assert result.index["videos"][0]["name"] == "garden.mp4"
    assert "## 1. garden.mp4 " in (tmp_path / "ev" / "timeline.md").read_text()
    assert f"(unknown: the video is {here})" in (tmp_path / "ev" / "transcript.txt").read_text()


def test_the_last_answer_is_the_newest_run_that_gave_one(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    # a run stopped before it answered ends with an empty answer: the export took it
    _, lib, vid = indexed
    with _session(tmp_path / "home", lib) as session:
        folder = session.traces_folder
        folder.mkdir(parents=True, exist_ok=True)
        answered = _answer_trace(folder / "20260101-000000-retrieval-a.jsonl", vid)
        stopped = _answer_trace(folder / "20260101-000100-retrieval-b.jsonl", vid, [],
                                text="", reason="stopped")  # fmt: skip
        import os

        os.utime(answered, (1_000_000, 1_000_000))
        os.utime(stopped, (2_000_000, 2_000_000))
        assert session.last_answer_trace() == answered


def test_one_name_where_a_list_is_taken_is_one_video_and_top_is_checked(
    indexed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    # a string was taken letter by letter ("no video 't'"), and top="3" a TypeError inside
    import shutil

    home, lib, vid = indexed
    copy = Path(shutil.copytree(lib, tmp_path / "lib"))  # the module's Library stays as it is
    with _session(home, copy) as session:
        source = session.library.get_video(vid).source
        (report,) = list(session.index(source, stages=["embed"]))
        assert report.ok and report.result is not None
        hits = session.search("the door opens", videos=vid, top=2)
        assert hits and {h.hit.clip.video_id for h in hits} == {vid}
        for top in ("3", 0, -1, True):
            with pytest.raises(ConfigError, match="top must be a whole number of hits"):
                session.search("the door opens", top=top)  # type: ignore[arg-type]
        # frames: a size under 1 gave a 1x1 picture, NaN a frame
        assert len(session.frames(vid, [1.0], size=64)) == 1
        with pytest.raises(ConfigError, match="size must be a whole number of pixels"):
            session.frames(vid, [1.0], size=0)
        with pytest.raises(ConfigError, match="times must be finite seconds"):
            session.frames(vid, [float("nan")], size=64)
        # a time outside the video gave its last (or first) frame, as if there
        with pytest.raises(ConfigError, match=r"^30, -1 s: outside talk.mp4 \(0-12.00 s\)$"):
            session.frames(vid, [1.0, 30.0, -1.0], size=64)
