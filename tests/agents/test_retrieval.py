"""The ``retrieval`` baseline: options scored by retrieved evidence, no llm call, ties unanswered."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agentkit import INDEX_SPECS
from clirun import vidagent

from vidagent.agents.base import Question
from vidagent.agents.evidence import lexical_text, video_named
from vidagent.agents.retrieval.agent import RetrievalAgent, words
from vidagent.agents.strategies import strategy_class
from vidagent.app.benchmarks import RunConfig, run_benchmark
from vidagent.bench.rundir import read_rows
from vidagent.cli.render import render
from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.ingest import index_video
from vidagent.library import Library
from vidagent.library.schema import ClipRow, DescriberFacts, TranscriptSegment
from vidagent.models.base import ChatRequest
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.models.perception import LABEL as DESCRIBER_LABEL
from vidagent.trace import ModelCall, PhaseChanged

#: The fakes, with the real offline OCR: the burned-in "HELLO VIDAGENT" (5-8 s) is read.
SPECS = {**INDEX_SPECS, "ocr": "rapidocr:pp-ocr"}
QUESTION = "What text appears on screen?"
OPTIONS = ("GOODBYE", "HELLO VIDAGENT", "No text")


@pytest.fixture(scope="module")
def indexed(small_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    settings = load_settings(SPECS)
    library = Library(tmp_path_factory.mktemp("lib") / "lib")
    stages = RetrievalAgent.stages
    result = index_video(small_video, library=library, settings=settings, stages=stages)
    assert result.video is not None
    return library, result.video.video_id, settings


def refusing(request: ChatRequest) -> str:
    raise AssertionError("the retrieval baseline called the llm")


def run_agent(indexed: Any, question: Question, **options: Any) -> Any:
    library, _, settings = indexed
    llm = FakeAdapter.function(refusing)
    embed = FakeAdapter("hash", {"dim": "32"})
    models = Models.from_adapters({"llm": llm, "embed": embed}, settings)
    answer = RetrievalAgent(library, models, **options).run(question)
    assert not llm.requests  # the fake raises on any call; nothing was asked either
    return answer


def test_the_option_shown_on_screen_wins_with_its_span_as_evidence(indexed: Any) -> None:
    _, vid, _ = indexed
    answer = run_agent(indexed, Question(QUESTION, (vid,), OPTIONS))
    assert (answer.choice, answer.parsed, answer.text) == (1, True, "(B) HELLO VIDAGENT")
    assert [e.to_list() for e in answer.evidence] == [[vid, 5.0, 10.0]]  # the clip of 5-8 s
    phases = answer.trace.of(PhaseChanged)
    assert [p.phase for p in phases] == ["retrieval"] * 3
    scored = {p.data["option"]: p.data for p in phases}
    assert scored["(B) HELLO VIDAGENT"]["matches"] == ["hello", "vidagent"]
    assert scored["(B) HELLO VIDAGENT"]["lexical"] == 1.0
    assert scored["(A) GOODBYE"]["matches"] == [] and scored["(A) GOODBYE"]["lexical"] == 0.0
    best = scored["(B) HELLO VIDAGENT"]["score"]
    others = max(scored["(A) GOODBYE"]["score"], scored["(C) No text"]["score"])
    assert best > others
    # a cosine plus a word share is a ranking score, not a confidence: none is claimed
    assert best > 1.0 and answer.confidence is None
    assert best == pytest.approx(scored["(B) HELLO VIDAGENT"]["dense"] + 1.0)


def test_no_llm_is_called_one_step_is_counted(indexed: Any) -> None:
    _, vid, _ = indexed
    answer = run_agent(indexed, Question(QUESTION, (vid,), OPTIONS))
    calls = answer.trace.of(ModelCall)
    assert [c.role for c in calls] == ["embed"] * 4  # one query per option, the citations' check
    assert answer.trace.totals.steps == 1


def test_the_totals_say_no_price_for_a_hosted_model_without_one(indexed: Any) -> None:
    import dataclasses

    library, vid, settings = indexed
    # the embedder as a hosted model that neither the settings nor genai-prices price
    remote = dataclasses.replace(FakeAdapter.capabilities, local=False)
    embed = FakeAdapter("hash", {"dim": "32"}, capabilities=remote)
    models = Models.from_adapters({"llm": FakeAdapter.function(refusing), "embed": embed}, settings)
    answer = RetrievalAgent(library, models).run(Question(QUESTION, (vid,), OPTIONS))
    totals = answer.trace.totals
    assert totals.unpriced == ["fake:hash?dim=32"] and totals.cost_usd == 0.0
    assert all(not c.priced for c in answer.trace.of(ModelCall))
    (line,) = [s for s in render(answer.trace.events) if s.startswith("1 step, ")]
    assert ", $0 + no price for fake:hash?dim=32, " in line
    # the same embedder run in this process is free: no "no price" line
    local = run_agent(indexed, Question(QUESTION, (vid,), OPTIONS))
    assert local.trace.totals.unpriced == []
    assert not any("no price" in s for s in render(local.trace.events))


def test_a_tie_gives_no_answer(indexed: Any) -> None:
    _, vid, _ = indexed
    # the same words in another order: the same bag of words, the same evidence, the same score
    answer = run_agent(indexed, Question(QUESTION, (vid,), ("HELLO VIDAGENT", "VIDAGENT HELLO")))
    assert (answer.parsed, answer.choice, answer.text, answer.reason) == (False, None, "", "tie")
    assert answer.evidence == () and "(A), (B) tie" in answer.note


def test_without_the_lexical_term_the_shown_words_no_longer_decide(indexed: Any) -> None:
    _, vid, _ = indexed
    answer = run_agent(indexed, Question(QUESTION, (vid,), OPTIONS), lexical_weight=0.0)
    scored = [p.data for p in answer.trace.of(PhaseChanged)]
    assert all(s["score"] == s["dense"] for s in scored)


def test_a_grounding_question_returns_the_best_clip_as_an_interval(indexed: Any) -> None:
    _, vid, _ = indexed
    answer = run_agent(indexed, Question("HELLO VIDAGENT shown", (vid,), task="ground"))
    assert (answer.text, answer.parsed) == ("[5.0, 10.0]", True)
    assert [e.to_list() for e in answer.evidence] == [[vid, 5.0, 10.0]]
    (shown,) = [line for line in render(answer.trace.events) if " · retrieval " in line]
    assert shown.startswith("step 1 · retrieval best clip · score 0.")
    assert shown.endswith(" · small.mp4 00:00:05–00:00:10 → [5.0, 10.0]")


COUNTDOWN = [(4.0, 4.5, "three"), (5.0, 5.5, "two"), (6.0, 6.5, "one")]
COUNTDOWN += [(7.0, 7.4, "lift"), (7.4, 7.9, "off"), (11.0, 11.5, "lift")]


def spoken_countdown(
    small_video: Path, tmp_path: Path, said: list[tuple[float, float, str]] = COUNTDOWN
) -> tuple[Library, str, Any]:
    """``small_video`` indexed with a fake ASR that hears a countdown, word by word (by
    default "lift off" at 7.0-7.9 s, inside the clip of 5-10 s), as one segment."""
    from vidagent.models.base import Segment, Transcript, Word
    from vidagent.models.registry import create_adapter

    text = " ".join(w for *_, w in said)
    heard = Transcript(
        "en", (Segment(said[0][0], said[-1][1], text, tuple(Word(*w) for w in said)),)
    )
    settings = load_settings(INDEX_SPECS)
    adapters = {
        "asr": FakeAdapter(transcript=heard),
        "embed": FakeAdapter("hash", {"dim": "32"}),
        "ocr": FakeAdapter(),
        "detector": FakeAdapter(),
        "llm": FakeAdapter.function(refusing),
        "vlm": create_adapter("perception:describer", settings, "vlm"),
    }
    models = Models.from_adapters(adapters, settings)
    library = Library(tmp_path / "lib")
    result = index_video(
        small_video, library=library, settings=settings, models=models, stages=RetrievalAgent.stages
    )
    assert result.video is not None
    return library, result.video.video_id, settings


def test_grounding_is_tightened_to_the_spoken_words_times(
    small_video: Path, tmp_path: Path
) -> None:
    indexed = spoken_countdown(small_video, tmp_path)
    _, vid, _ = indexed
    answer = run_agent(indexed, Question("someone says lift off", (vid,), task="ground"))
    # "lift" is the word matched ("off" is a stop word), its run the one at 7.0-7.4 s (the
    # later "lift" at 11 s is in another clip), widened by the "off" said right after it, and
    # padded 0.3 s either side as a citation's quote is
    assert answer.text == "[6.7, 8.2]" and answer.confidence is None
    assert [e.to_list() for e in answer.evidence] == [[vid, 6.7, 8.2]]
    (phase,) = answer.trace.of(PhaseChanged)
    assert phase.data["tightened"] == "spoken words" and phase.data["matches"] == ["lift"]


def test_a_number_said_in_digits_is_the_option_that_says_it_in_words(
    small_video: Path, tmp_path: Path
) -> None:
    # Whisper writes a countdown in digits; the option "one" found none of its words there,
    # and "ten" won (a new-user trial, on countdown.mp4)
    said = [(4.0, 4.5, "3,"), (5.0, 5.5, "2,"), (6.0, 6.5, "1,"), (7.0, 7.4, "lift")]
    indexed = spoken_countdown(small_video, tmp_path, [*said, (7.4, 7.9, "off.")])
    question = Question("What number is said last?", (indexed[1],), ("ten", "one", "five"))
    answer = run_agent(indexed, question)
    assert (answer.choice, answer.text) == (1, "(B) one")
    assert answer.trace is not None and answer.trace.answer is not None
    (cited,) = answer.trace.answer.citations
    assert (cited.label, cited.matched) == ("found", ["1"])  # as the transcript writes it


def test_grounding_keeps_a_phrase_said_across_the_clips_edge(
    small_video: Path, tmp_path: Path
) -> None:
    # "lift" ends at 5.3 s, its middle in the clip of 0-5 s; "off" is in the next clip
    said = [(3.0, 3.5, "two"), (4.0, 4.5, "one"), (4.6, 5.3, "lift"), (5.3, 5.8, "off")]
    indexed = spoken_countdown(small_video, tmp_path, said)
    answer = run_agent(indexed, Question("someone says lift off", (indexed[1],), task="ground"))
    assert answer.text == "[4.3, 6.1]"


def test_grounding_is_the_stretch_that_says_the_event_not_a_run_of_two_sentences(
    small_video: Path, tmp_path: Path
) -> None:
    # "… copyright to that creativity. It's true. Copyright protects your creativity": the
    # words of both sentences are under 2 s apart, one run; the second says the whole event
    said = [(6.0, 6.5, "copyright"), (6.9, 7.5, "creativity."), (7.8, 8.2, "true.")]
    said += [(8.6, 9.0, "Copyright"), (9.0, 9.4, "protects"), (9.4, 9.6, "your")]
    said += [(9.6, 9.9, "creativity.")]
    indexed = spoken_countdown(small_video, tmp_path, said)
    event = Question("copyright protects your creativity", (indexed[1],), task="ground")
    answer = run_agent(indexed, event)
    assert answer.text == "[8.3, 10.2]"  # 8.6-9.9 s, padded


def test_an_open_question_returns_the_best_clips_text(indexed: Any) -> None:
    _, vid, _ = indexed
    answer = run_agent(indexed, Question("HELLO VIDAGENT", (vid,)))
    assert answer.text == "HELLO VIDAGENT" and answer.parsed and answer.choice is None
    assert [e.to_list() for e in answer.evidence] == [[vid, 5.0, 10.0]]


def test_an_open_questions_speech_is_answered_in_whole_sentences(
    indexed: Any, tmp_path: Path
) -> None:
    library, vid, settings = indexed
    shutil.copytree(library.uri, tmp_path / "lib")
    copy = Library(tmp_path / "lib")
    # A sentence said across the clips' edge at 5 s: clip 1 (5-10 s) holds its words from
    # "at" on, as ingest cuts a clip's speech (each word where its middle is)
    said = [(3.0, 3.4, "We"), (3.4, 3.9, "meet"), (3.9, 4.6, "Thursday"), (5.1, 5.4, "at")]
    said += [(5.4, 5.9, "seven"), (5.9, 6.3, "near"), (6.3, 6.9, "HELLO"), (6.9, 7.5, "VIDAGENT.")]
    times = json.dumps([[t0, t1, w, 0.9] for t0, t1, w in said])
    text = " ".join(w for _, _, w in said)
    copy.put_transcript(vid, [TranscriptSegment(vid, 0, 3.0, 7.5, text, times)])
    copy.update_clips(vid, [{"clip_index": 0, "transcript": "We meet Thursday"}])
    copy.update_clips(vid, [{"clip_index": 1, "transcript": "at seven near HELLO VIDAGENT."}])
    answer = run_agent((copy, vid, settings), Question("HELLO VIDAGENT", (vid,)))
    assert answer.text == "We meet Thursday at seven near HELLO VIDAGENT."
    assert [e.to_list() for e in answer.evidence] == [[vid, 3.0, 10.0]]


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("the first", "a"),
        ("The second video.", "b"),
        ("third one", "c"),
        ("2nd", "b"),
        ("the last one", "c"),
        ("Video 3", "c"),
        ("clip #1", "a"),
        ("garden.mp4", "b"),
        ("Garden", "b"),
        ("the fourth", None),
        ("Video 0", None),
        ("both", None),
        ("the first two", None),
    ],
)
def test_an_option_names_a_video_by_its_place_number_or_file_name(
    option: str, named: str | None
) -> None:
    assert video_named(option, ["a", "b", "c"], ["call.mp4", "garden.mp4", "x.mkv"]) == named


def test_which_video_is_answered_from_what_each_video_holds(
    indexed: Any, slide_video: Path, tmp_path: Path
) -> None:
    library, vid, settings = indexed
    shutil.copytree(library.uri, tmp_path / "lib")
    both = Library(tmp_path / "lib")
    stages = RetrievalAgent.stages
    slides = index_video(slide_video, library=both, settings=settings, stages=stages).video
    assert slides is not None
    asked = "Which video shows SLIDE TWO on screen?"
    for order, right in [((vid, slides.video_id), 1), ((slides.video_id, vid), 0)]:
        question = Question(asked, order, ("the first", "the second"))
        answer = run_agent((both, vid, settings), question)
        assert answer.choice == right
        assert {e.video_id for e in answer.evidence} == {slides.video_id}
        phases = answer.trace.of(PhaseChanged)
        assert [p.data["by"] for p in phases] == ["video", "video"]


def test_a_question_naming_one_of_its_videos_is_answered_from_that_video(
    indexed: Any, slide_video: Path, tmp_path: Path
) -> None:
    library, vid, settings = indexed
    shutil.copytree(library.uri, tmp_path / "lib")
    both = Library(tmp_path / "lib")
    slides = index_video(slide_video, library=both, settings=settings, stages=RetrievalAgent.stages)
    assert slides.video is not None
    ids = (vid, slides.video.video_id)
    for named, where in [
        ("the first video", vid),
        ("video 2", ids[1]),
        ("slides.mp4", ids[1]),
        ("the last clip", ids[1]),
    ]:
        question = Question(f"What text appears on screen in {named}?", ids)
        answer = run_agent((both, vid, settings), question)
        assert {e.video_id for e in answer.evidence} == {where}, named
        (scope,) = [p for p in answer.trace.of(PhaseChanged) if p.phase == "scope"]
        assert scope.data["videos"] == [where]
    # naming both, or neither, searches both: no scope
    for asked in ("What text appears in the first video and in slides.mp4?", QUESTION):
        answer = run_agent((both, vid, settings), Question(asked, ids))
        assert not [p for p in answer.trace.of(PhaseChanged) if p.phase == "scope"]


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("What is said in the second video?", ("b",)),
        ("In Video 3, who speaks?", ("c",)),
        ("What is on screen in GARDEN.MP4?", ("b",)),
        ("What does the garden look like?", ()),  # a stem alone is often a word
        ("Does the first clip or the last clip show a car?", ("a", "c")),
        ("What happens in video 7?", ()),
        ("Where is call.mp4.bak kept?", ()),
    ],
)
def test_the_videos_a_question_names(question: str, named: tuple[str, ...]) -> None:
    from vidagent.agents.evidence import videos_asked_about

    names = ["call.mp4", "garden.mp4", "x.mkv"]
    assert videos_asked_about(question, ["a", "b", "c"], names) == named


def test_which_video_asks_for_the_words_that_do_not_name_a_video() -> None:
    from vidagent.agents.evidence import held_words

    assert held_words("Which video shows a countdown?") == {"show", "countdown"}
    assert held_words("In which of the clips does someone mention dogs?") == {"mention", "dog"}
    assert held_words("Which video?") == {"video"}  # nothing else asked: its own words


def test_words_drop_stop_words_case_and_plurals() -> None:
    assert words("The Dogs are in the PARK, 3 dogs!") == {"dog", "park", "3"}
    assert words("glass class") == {"glass", "class"}


def test_registered_with_its_index_plan_and_checked_options(indexed: Any) -> None:
    assert strategy_class("retrieval") is RetrievalAgent
    _, vid, _ = indexed
    started = run_agent(indexed, Question(QUESTION, (vid,), OPTIONS)).trace.events[0]
    # the plan's stages, and detection, which the describer's captions read (it is the captioner)
    stages = ["transcribe", "read_text", "detect", "speakers", "caption", "embed"]
    assert started.index["stages"] == stages
    assert started.index["embed_text"] == "caption+speech+text"
    assert started.settings == {
        "tool_mode": "auto",
        "max_tokens": None,
        "top_k": 8,
        "lexical_weight": 1.0,
        "fields": ["transcript", "ocr_text", "caption"],
    }
    with pytest.raises(ConfigError, match="top_k must be at least 1"):
        RetrievalAgent.parse_options({"top_k": 0})
    with pytest.raises(ConfigError, match="retrieval has no option temperature"):
        RetrievalAgent.parse_options({"temperature": 0.2})


def test_ask_shows_each_options_score_live(small_video: Path, _isolated_home: Path) -> None:
    env = {f"VIDAGENT_{k.upper()}": v for k, v in SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=[]"  # any llm call would fail the run
    out = vidagent(
        "ask",
        str(small_video),
        QUESTION,
        *(a for o in OPTIONS for a in ("-o", o)),
        "--strategy",
        "retrieval",
        home=_isolated_home,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    shown = [line for line in lines if line.startswith("step 1 · retrieval ")]
    assert len(shown) == 3
    assert shown[1].startswith("step 1 · retrieval (B) HELLO VIDAGENT · score 1.")
    assert shown[1].endswith("lexical 1.00: hello, vidagent) · small.mp4 00:00:05–00:00:10")
    assert shown[0].startswith("step 1 · retrieval (A) GOODBYE · score 0.")
    assert "answer: (B) HELLO VIDAGENT" in lines
    assert "  evidence: small.mp4 00:00:05–00:00:10" in lines
    assert any(line.startswith("1 step, 0 frames, 4 model calls") for line in lines)


def make_videos(folder: Path, *names: str) -> None:
    from vidagent.media.synth import make_video

    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        make_video(folder / f"{name}.mp4", duration=3, size=(160, 96), fps=10)


def test_bench_run_with_the_baseline_writes_rows_without_an_llm(tmp_path: Path) -> None:
    data = tmp_path / "nextqa"
    make_videos(data / "videos", "v1")
    head = "video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4"
    rows = [
        f"v1,30,160,96,what colour is the ball,1,{q},CW,zero,one,two,three,four" for q in (0, 1)
    ]
    (data / "val.csv").write_text("\n".join([head, *rows]) + "\n")
    out = tmp_path / "run"
    settings = load_settings({**INDEX_SPECS, "llm": "fake:scripted?replies=[]"})
    summary = run_benchmark(
        RunConfig("nextqa", data, strategy="retrieval"), settings=settings, out=out
    )
    assert (summary.ran, summary.errors) == (2, 0)
    found = read_rows(out / "predictions.jsonl").values()
    # five embedding calls, one per option's search; the citation check embeds nothing, as the
    # cited clips hold no text it could quote for a ball (the describer's caption is not read,
    # and its whole-frame facts are read only for a claim about the picture itself)
    assert [(r["error"], r["steps"], r["model_calls"]) for r in found] == [(None, 1, 5)] * 2


def test_bench_run_grounds_charades_sta_with_intervals(
    tmp_path: Path, _isolated_home: Path
) -> None:
    data = tmp_path / "charades"
    make_videos(data / "videos", "AAAAA")
    (data / "charades_sta_test.txt").write_text("AAAAA 0.0 2.0##a person opens a door.\n")
    env = {f"VIDAGENT_{k.upper()}": v for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=[]"  # any llm call would fail the question
    out = tmp_path / "run"
    done = vidagent(
        "bench",
        "run",
        "charades_sta",
        "--data",
        str(data),
        "-s",
        "retrieval",
        "--out",
        str(out),
        "--quiet",
        home=_isolated_home,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    (row,) = read_rows(out / "predictions.jsonl").values()
    assert row["error"] is None and row["prediction"] == "[0.0, 3.0]"
    assert row["parsed"] == [0.0, 3.0] and row["score"] is not None
    assert row["evidence"] == [[row["evidence"][0][0], 0.0, 3.0]]


def test_a_describer_captions_wording_is_not_found_as_the_videos_words(indexed: Any) -> None:
    # Every clip's caption is the perception describer's ("[perception describer: measured
    # facts, not a vision-language model] … One continuous shot."): its label and sentence
    # frames are not what the video says or shows, and no option is found in them.
    _, vid, _ = indexed
    options = ("a vision-language model", "one continuous shot", "HELLO VIDAGENT")
    answer = run_agent(indexed, Question("What does the video show?", (vid,), options))
    scored = {p.data["option"]: p.data for p in answer.trace.of(PhaseChanged)}
    assert scored["(A) a vision-language model"]["matches"] == []
    assert scored["(B) one continuous shot"]["matches"] == []
    assert scored["(C) HELLO VIDAGENT"]["matches"] == ["hello", "vidagent"]
    assert answer.choice == 2


def test_the_words_of_a_describer_caption_are_its_measured_values() -> None:
    facts = DescriberFacts(
        people=6, faces=1, objects={"dog": 2}, colours=(("green", 0.3), ("gray", 0.2)),
        brightness="dim", motion="static", picture="Picture: mostly green (30%), gray (20%).",
    )  # fmt: skip
    caption = f"{DESCRIBER_LABEL} 6 people in view. One continuous shot."
    described = ClipRow("v", 0, 0.0, 5.0, caption=caption, facts=facts.to_json())
    assert lexical_text(described) == "6 people 1 faces 2 dog mostly green gray dim static"
    model = ClipRow("v", 0, 0.0, 5.0, caption="A model walks on a runway.", transcript="one two")
    assert lexical_text(model) == "one two A model walks on a runway."
    # A describer caption stored without its facts (an older index) gives no words at all.
    assert lexical_text(ClipRow("v", 0, 0.0, 5.0, caption=caption)) == ""
