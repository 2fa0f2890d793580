"""Checked citations and abstention (issue 33): every answer's evidence spans are verified
against the index in the runtime, whatever the strategy; supported ones are tightened to the
words that support them; an answer nothing supports abstains under ``auto``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agentkit import INDEX_SPECS
from factories import video_record

from vidagent.agents.base import Agent, Answer, Question
from vidagent.agents.run import Run
from vidagent.agents.verify import INSUFFICIENT
from vidagent.app.results import AskResult
from vidagent.cli.render import render_answer
from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.library import Library
from vidagent.library.schema import ClipRow, TranscriptSegment
from vidagent.models.client import Models
from vidagent.models.fake import FakeAdapter
from vidagent.tools.base import Evidence
from vidagent.trace import Answered, ChildStarted, ModelCall, Trace

VID = "v" * 16
SPOKEN = "so a license is totally free for everyone who asks"
WORDS = [
    [round(4.2 + 0.4 * i, 2), round(4.5 + 0.4 * i, 2), w, 0.9] for i, w in enumerate(SPOKEN.split())
]


@pytest.fixture
def library(tmp_path: Path, small_video: Path) -> Library:
    """A 12 s video (the synthetic clip's pixels) whose index holds speech with word times at
    4.2-8.5 s, the on-screen line CREATIVE COMMONS at 8-12 s, a caption and a detection."""
    lib = Library(tmp_path / "lib")
    record = video_record(VID, duration=12.0)
    lib.put_video(type(record)(**{**record.__dict__, "source": str(small_video)}))
    detections = json.dumps([{"t": 1.5, "label": "person", "box": [0, 0, 9, 9], "score": 0.9}])
    lib.put_clips(
        VID,
        [
            ClipRow(
                VID, 0, 0.0, 4.0, caption="A blue screen with moving shapes.", detections=detections
            ),
            ClipRow(VID, 1, 4.0, 8.0, transcript="so a license is totally free"),
            ClipRow(
                VID, 2, 8.0, 12.0, transcript="for everyone who asks", ocr_text="CREATIVE COMMONS"
            ),
        ],
    )
    lib.put_transcript(
        VID, [TranscriptSegment(VID, 0, 4.2, 8.5, SPOKEN, json.dumps(WORDS), "fake:echo")]
    )
    return lib


@dataclass(frozen=True)
class Said:
    """What the test strategy answers and cites."""

    text: str = ""
    spans: tuple[tuple[float, float], ...] = ()


class Cites(Agent):
    """A strategy that answers what it is told, citing the spans it is told: what a strategy
    returns is all verification sees."""

    name = "cites"
    Options = Said

    def solve(self, run: Run) -> Answer:
        run.evidence = tuple(Evidence(VID, a, b) for a, b in self.options.spans)
        return run.answer(self.options.text)


def models(vlm: FakeAdapter | None = None) -> Models:
    adapters: dict[str, Any] = {"llm": FakeAdapter(), "embed": FakeAdapter("hash", {"dim": "512"})}
    if vlm is not None:
        adapters["vlm"] = vlm
    return Models.from_adapters(adapters, load_settings({**INDEX_SPECS, "abstain": "auto"}))


def ask(library: Library, question: Question, text: str, spans: Any, **runtime: Any) -> Answer:
    agent = Cites(
        library, models(runtime.pop("vlm", None)), options={"text": text, "spans": spans, **runtime}
    )
    return agent.run(question)


COST = Question("How much does a license cost?", (VID,), ("ten dollars", "it is totally free"))


def answered(answer: Answer) -> Answered:
    assert answer.trace is not None and answer.trace.answer is not None
    return answer.trace.answer


def test_a_spoken_answer_is_supported_and_tightened_to_its_words(library: Library) -> None:
    answer = ask(library, COST, "B", [(4.0, 8.0)])
    e = answered(answer)
    assert (answer.letter, e.abstained) == ("B", False)
    (c,) = e.citations
    assert (c["label"], c["source"], c["cited"]) == ("supported", "speech", [4.0, 8.0])
    # "totally free" are words 5-6 (5.8-6.5 s); two words of context either side
    assert c["text"] == "license is totally free for everyone"
    assert (c["t0"], c["t1"]) == (5.0, 7.3)
    assert e.claims == [
        {
            "text": "How much does a license cost? it is totally free",
            "citations": [0],
            "support": c["support"],
        }
    ]


def test_a_wrong_option_is_unsupported_and_abstains_keeping_its_letter(library: Library) -> None:
    answer = ask(library, COST, "A", [(4.0, 8.0)])
    e = answered(answer)
    assert answer.letter == "A" and e.text == "A"  # the letter stays: accuracy is comparable
    assert [c["label"] for c in e.citations] == ["unsupported"]
    assert (e.citations[0]["t0"], e.citations[0]["t1"]) == (4.0, 8.0)  # nothing to tighten to
    assert e.abstained and answer.abstained and e.abstain_policy == "auto"
    assert e.abstain_reason.startswith("no cited span supports the answer")


def test_a_free_form_answer_cites_each_claim(library: Library) -> None:
    text = "The license is totally free. The video promotes Creative Commons."
    answer = ask(
        library, Question("What does the video say?", (VID,)), text, [(4.0, 8.0), (8.0, 12.0)]
    )
    e = answered(answer)
    assert e.text == text and not e.abstained
    assert [c["text"] for c in e.claims] == [
        "The license is totally free.",
        "The video promotes Creative Commons.",
    ]
    first, second = ([e.citations[i] for i in claim["citations"]] for claim in e.claims)
    assert [(c["source"], c["label"]) for c in first] == [("speech", "supported")]
    assert 4.2 <= first[0]["t0"] < first[0]["t1"] <= 8.5
    assert [(c["source"], c["text"], c["t0"], c["t1"]) for c in second] == [
        ("on-screen text", "CREATIVE COMMONS", 8.0, 12.0)
    ]


@pytest.mark.parametrize(
    ("policy", "text", "abstained"),
    [
        ("auto", INSUFFICIENT, True),
        ("always-report", "A dog barks at a cat.", True),
        ("never", "A dog barks at a cat.", False),
    ],
)
def test_an_unsupported_free_form_answer_abstains_by_policy(
    library: Library, policy: str, text: str, abstained: bool
) -> None:
    q = Question("What happens?", (VID,))
    answer = ask(library, q, "A dog barks at a cat.", [(0.0, 4.0)], abstain=policy)
    e = answered(answer)
    assert (answer.text, e.text, e.abstained) == (text, text, abstained)
    assert e.withheld == ("A dog barks at a cat." if policy == "auto" else "")
    assert [c["label"] for c in e.citations] == ["unsupported"]


def test_an_answer_citing_nothing_abstains(library: Library) -> None:
    e = answered(ask(library, Question("What happens?", (VID,)), "Someone speaks.", []))
    assert (
        e.abstained
        and e.abstain_reason == "the answer cites no evidence"
        and e.text == INSUFFICIENT
    )


def test_a_tightened_time_never_leaves_the_video(library: Library) -> None:
    words = [[11.0, 11.6, "totally", 0.9], [11.6, 12.3, "free", 0.9]]  # ASR ran past the end
    library.put_transcript(
        VID, [TranscriptSegment(VID, 0, 11.0, 12.3, "totally free", json.dumps(words))]
    )
    (c,) = answered(ask(library, COST, "B", [(11.5, 11.5)])).citations  # an instant (a frame)
    assert c["label"] == "supported" and (c["t0"], c["t1"]) == (11.0, 12.0)


def test_detections_and_captions_are_read(library: Library) -> None:
    q = Question("Is anyone in view at the start?", (VID,), ("nobody", "a person"))
    (c,) = answered(ask(library, q, "B", [(0.0, 4.0)])).citations
    assert (c["label"], c["source"], c["t0"], c["t1"]) == ("supported", "detection", 1.5, 1.5)


def test_a_vision_model_looks_at_the_cited_frames_once(library: Library) -> None:
    vlm = FakeAdapter.function(lambda req: "1: yes, a blue screen\n2: no")
    q = Question("What colour is the screen?", (VID,), ("red", "blue"))
    answer = ask(library, q, "B", [(0.0, 4.0), (8.0, 12.0)], vlm=vlm, critic="on")
    e = answered(answer)
    looked = [r for r in vlm.requests if r.image_count()]
    assert len(looked) >= 1 and looked[0].image_count() == 4  # two frames of each span, one call
    first, second = e.citations
    assert first["label"] in ("weak", "supported") and second["label"] == "unsupported"
    assert answer.trace is not None and answer.trace.totals.frames >= 4


def test_published_answers_are_never_changed(library: Library) -> None:
    vlm = FakeAdapter.function(lambda req: "1: yes")
    agent = Cites(
        library,
        models(vlm),
        options={"text": "A dog barks at a cat.", "spans": [(0.0, 4.0)]},
        published=True,
    )
    answer = agent.run(Question("What happens?", (VID,)))
    e = answered(answer)
    assert e.text == "A dog barks at a cat." and e.abstained and e.abstain_policy == "always-report"
    assert not vlm.requests and not e.critic  # no frames looked at, no reviewer


def test_bad_runtime_settings_are_one_line_errors(library: Library) -> None:
    with pytest.raises(
        ConfigError, match=r"^abstain: choose auto, never or always-report \(got 'maybe'\)$"
    ):
        Cites(library, models(), options={"abstain": "maybe"})
    with pytest.raises(ConfigError, match=r"^critic: choose auto, on or off"):
        Cites(library, models(), options={"critic": "sometimes"})


def test_the_cli_json_and_replay_show_the_citations(library: Library, tmp_path: Path) -> None:
    agent = Cites(library, models(), options={"text": "B", "spans": [(4.0, 8.0), (0.0, 4.0)]})
    answer = agent.run(COST, Trace(tmp_path / "t.jsonl"))
    block = render_answer(answered(answer), {VID: "talk.mp4"}, list(COST.options))
    assert "  citations:" in block
    assert (
        '    supported   talk.mp4 00:00:05–00:00:07.3 speech: "license is totally free for everyone"'
        in block
    )
    assert "    unsupported talk.mp4 00:00:00–00:00:04" in block
    body = AskResult(Trace.load(tmp_path / "t.jsonl")).to_json()
    assert [c["label"] for c in body["answer"]["citations"]] == ["supported", "unsupported"]
    assert body["answer"]["abstained"] is False


class Reconsiders(Agent):
    """Answers A, and B when the question carries a reviewer's note (a second round)."""

    name = "reconsiders"

    def solve(self, run: Run) -> Answer:
        run.evidence = (Evidence(VID, 0.0, 4.0),)
        for _ in run.steps():
            break
        return run.answer("B" if "reviewer" in run.question.text else "A")


def test_the_critic_disagrees_and_the_strategy_answers_once_more(library: Library) -> None:
    def vlm_reply(request: Any) -> str:
        if "VERDICT" in request.messages[-1].text:
            return "VERDICT: disagree\nNOTE: the frames show a blue screen, not red."
        return "1: no"

    vlm = FakeAdapter.function(vlm_reply)
    q = Question("What colour is the screen?", (VID,), ("red", "blue"))
    answer = Reconsiders(library, models(vlm), options={"critic": "on"}).run(q)
    e = answered(answer)
    assert answer.letter == "B" and e.critic["verdict"] == "disagree" and e.critic["revised"]
    assert e.critic["first_answer"] == "A" and "blue screen" in e.critic["note"]
    assert answer.trace is not None
    rounds = [c for c in answer.trace.of(ChildStarted) if c.name == "critic_round"]
    assert len(rounds) == 1 and rounds[0].data["note"] == e.critic["note"]
    # the critic's and the checks' calls are the question's: 2 frame looks + 1 review
    assert [c.role for c in answer.trace.of(ModelCall)].count("tool_vlm") == 3
    assert answer.trace.totals.model_calls == len(answer.trace.of(ModelCall))
    assert answer.trace.totals.steps == 2  # one step, and one of the bounded second round


def test_a_critic_that_agrees_changes_nothing(library: Library) -> None:
    vlm = FakeAdapter.function(
        lambda req: "VERDICT: agree\nNOTE: fine" if "VERDICT" in req.messages[-1].text else "1: yes"
    )
    q = Question("What colour is the screen?", (VID,), ("red", "blue"))
    e = answered(Reconsiders(library, models(vlm), options={"critic": "on"}).run(q))
    assert (e.text, e.critic["verdict"], e.critic["revised"]) == ("A", "agree", False)


def test_a_bench_run_records_abstention_but_keeps_every_answer(tmp_path: Path) -> None:
    from vidagent.app.benchmarks import RunConfig, run_benchmark
    from vidagent.bench.report import load_run
    from vidagent.bench.rundir import read_rows
    from vidagent.media.synth import make_video

    data = tmp_path / "nextqa"
    (data / "videos").mkdir(parents=True)
    make_video(data / "videos" / "v1.mp4", duration=3, size=(160, 96), fps=10)
    head = "video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4"
    row = "v1,30,160,96,what is the man holding,1,0,CW,a guitar,a banana,a kite,a lamp,a sword"
    (data / "val.csv").write_text(f"{head}\n{row}\n")
    settings = load_settings({**INDEX_SPECS, "llm": "fake:scripted?replies=[]", "abstain": "auto"})
    run_benchmark(
        RunConfig("nextqa", data, strategy="retrieval"), settings=settings, out=tmp_path / "run"
    )
    (found,) = read_rows(tmp_path / "run" / "predictions.jsonl").values()
    # nothing in a synthetic clip is any of these: recorded as abstained, the letter kept
    assert (
        found["abstained"] is True and found["letter"] is not None and found["parsed"] is not None
    )
    assert found["citations"] and set(found["citations"]) <= {"supported", "weak", "unsupported"}
    report = load_run(tmp_path / "run", resamples=10)
    assert report.means["coverage"] == 0.0 and report.means["selective"] is None


def test_the_cli_prints_labelled_citations_and_the_abstention(
    small_video: Path, _isolated_home: Path
) -> None:
    from clirun import vidagent

    env = {f"VIDAGENT_{k.upper()}": str(v) for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=[]"  # the retrieval baseline calls no llm
    asked = ("ask", str(small_video), "What is the man holding?", "-o", "a guitar", "-o", "a kite")
    out = vidagent(*asked, "-s", "retrieval", "--abstain", "auto", home=_isolated_home, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("  abstained (auto): no cited span supports") for line in lines)
    assert "  citations:" in lines
    assert any(line.startswith("    unsupported small.mp4 00:00:") for line in lines)
    wrong = vidagent(*asked, "--abstain", "maybe", home=_isolated_home, env=env)
    assert (
        wrong.returncode == 2
        and "'maybe' is not one of 'auto', 'never', 'always-report'" in wrong.stderr
    )


def test_a_grounding_answer_keeps_its_interval_when_it_abstains(library: Library) -> None:
    q = Question("a dog barks at a cat", (VID,), task="ground")
    e = answered(ask(library, q, "[1.0, 2.0]", [(0.0, 4.0)]))
    assert e.abstained and e.text == "[1.0, 2.0]" and not e.withheld


def test_a_spoken_phrase_is_cited_over_the_caption_that_quotes_it(library: Library) -> None:
    # A caption that quotes the clip's speech (as the perception describer's does) may match the
    # claim better than the speech itself; only the speech knows its words' times, so it is cited.
    quoted = 'How much does a license cost? Speech: "so a license is totally free".'
    library.put_clips(
        VID, [ClipRow(VID, 1, 4.0, 8.0, caption=quoted, transcript="so a license is totally free")]
    )
    assert [c.caption for c in library.clips(VID) if c.clip_index == 1] == [quoted]
    (c,) = answered(ask(library, COST, "B", [(4.0, 8.0)])).citations
    assert (c["label"], c["source"], c["t0"], c["t1"]) == ("supported", "speech", 5.0, 7.3)


DESCRIBED = (
    "[perception describer: measured facts, not a vision-language model] People were not "
    "checked. No on-screen text. Picture: mostly black (70%), red (28%), white (2%); brightness "
    '0.11 (dark); little motion (0.03). One continuous shot. Speech: "so a license is totally".'
)


def described(library: Library) -> Library:
    """The fixture's second clip captioned by the perception describer: a dark, partly red
    picture, and a quote of the clip's speech."""
    library.put_clips(
        VID,
        [ClipRow(VID, 1, 4.0, 8.0, caption=DESCRIBED, transcript="so a license is totally free")],
    )
    return library


def test_the_colours_of_the_frame_do_not_support_a_claim_about_a_thing_in_it(
    library: Library,
) -> None:
    # 28% of the frame is red: that says nothing about a car, and "red" alone used to make
    # the describer's caption support "the narrator's car is red"
    q = Question("What colour is the narrator's car?", (VID,), ("red", "blue"))
    answer = ask(described(library), q, "A", [(4.0, 8.0)])
    e = answered(answer)
    assert [c["label"] for c in e.citations] == ["unsupported"]
    assert e.abstained and answer.letter == "A"


def test_the_frames_measured_darkness_supports_a_claim_about_the_picture(
    library: Library,
) -> None:
    # "dark" is in the question, offered as an alternative: it is what the option answers
    q = Question("Is the scene dark or brightly lit?", (VID,), ("bright daylight", "dark, lit"))
    e = answered(ask(described(library), q, "B", [(4.0, 8.0)]))
    (c,) = e.citations
    assert c["label"] != "unsupported" and not e.abstained
    assert c["source"] == "caption" and c["text"].startswith("Picture: mostly black")
    assert "dark" in c["text"]


def test_a_contraction_is_no_content_word(library: Library) -> None:
    # "don't" once counted as the words "don" and "t", found in any phrase with a don't
    said = "please don't give it up"
    timed = [[0.5 + 0.5 * i, 0.9 + 0.5 * i, w, 0.9] for i, w in enumerate(said.split())]
    library.put_transcript(
        VID, [TranscriptSegment(VID, 0, 0.5, 3.4, said, json.dumps(timed), "fake:echo")]
    )
    q = Question("What does copyright protect against?", (VID,), ("uses you don't consent to",))
    e = answered(ask(library, q, "A", [(0.0, 4.0)]))
    assert [c["label"] for c in e.citations] == ["unsupported"] and e.abstained


def test_the_describers_quote_of_the_speech_is_left_to_the_transcript() -> None:
    from vidagent.agents.verify import caption_sentences

    picture = DESCRIBED[DESCRIBED.index("Picture:") : DESCRIBED.index(" One continuous")]
    assert caption_sentences(DESCRIBED) == [
        ("People were not checked.", False),
        ("No on-screen text.", False),
        (picture, True),
        ("One continuous shot.", False),
    ]
    # the quote of the on-screen lines is left to the lines, each a piece of its own
    shown = DESCRIBED.replace("No on-screen text.", 'On-screen text: "Sara Kraft." | "NARRATOR".')
    assert [s for s, _ in caption_sentences(shown)][:2] == [
        "People were not checked.",
        picture,
    ]
    # a vision model's caption is read sentence by sentence, nothing left out
    assert caption_sentences('A man talks. Speech: "hi".') == [
        ("A man talks.", False),
        ('Speech: "hi".', False),
    ]


def test_a_span_repeating_one_word_of_the_answer_is_weak_beside_one_that_states_it(
    library: Library,
) -> None:
    # "free" is said at 0.5-3.4 s as well; the span that says "totally free" is the citation,
    # the other one only repeats a word of it (a word the video says throughout)
    said = "how much does a license cost feel free"
    timed = [[0.5 + 0.3 * i, 0.7 + 0.3 * i, w, 0.9] for i, w in enumerate(said.split())]
    spoken = TranscriptSegment(VID, 1, 4.2, 8.5, SPOKEN, json.dumps(WORDS), "fake:echo")
    library.put_transcript(
        VID, [TranscriptSegment(VID, 0, 0.5, 2.9, said, json.dumps(timed), "fake:echo"), spoken]
    )
    e = answered(ask(library, COST, "B", [(0.0, 4.0), (4.0, 8.0)]))
    repeats, states = e.citations
    assert repeats["text"].endswith("feel free") and repeats["support"] >= 0.5
    assert (repeats["label"], states["label"]) == ("weak", "supported")
    assert not e.abstained
    # alone, the span that repeats the word is still the answer's best support
    (alone,) = answered(ask(library, COST, "B", [(0.0, 4.0)])).citations
    assert alone["label"] == "supported"
    # a span whose caption says it all is cited by the caption, not by its narrower phrase
    # holding one word, so it is not made weak beside the other span
    library.put_clips(VID, [ClipRow(VID, 0, 0.0, 4.0, caption="The license is totally free.")])
    whole, states = answered(ask(library, COST, "B", [(0.0, 4.0), (4.0, 8.0)])).citations
    assert (whole["source"], whole["label"], states["label"]) == (
        "caption",
        "supported",
        "supported",
    )


CREDITS = "MUSIC + SOUND DESIGN\nLesser\nNARRATOR\nSara Kraft\nSCRIPT\nEric Steuer"


@pytest.mark.parametrize(
    ("question", "options", "label"),
    [
        ("Who is credited as the narrator?", ("Eric Steuer", "Sara Kraft"), "supported"),
        ("Who is credited for the sound design?", ("Eric Steuer", "Sara Kraft"), "weak"),
        ("Who wrote the script?", ("Eric Steuer", "Sara Kraft"), "weak"),
        # no other option is shown: the line showing this one is all there is to read
        ("Who wrote the script?", ("Ryan Junell", "Sara Kraft"), "supported"),
    ],
)
def test_a_name_on_screen_among_its_rivals_answers_only_what_its_heading_says(
    library: Library, question: str, options: tuple[str, str], label: str
) -> None:
    # a credits roll shows every name: only the line beside a name says what it is credited for
    library.put_clips(VID, [ClipRow(VID, 2, 8.0, 12.0, ocr_text=CREDITS)])
    q = Question(question, (VID,), options)
    (c,) = answered(ask(library, q, "B", [(8.0, 12.0)])).citations
    assert (c["source"], c["text"], c["label"]) == ("on-screen text", "Sara Kraft", label)


def test_a_span_that_cuts_a_sentence_cites_the_sentence(library: Library) -> None:
    # the cited clip ends at 4.0 s, inside "...people anywhere to use it": the sentence is read
    # whole, and the citation tightened to its words, past the clip's end
    said = "you are enabling people anywhere to use it"
    timed = [[2.0 + 0.5 * i, 2.3 + 0.5 * i, w, 0.9] for i, w in enumerate(said.split())]
    library.put_transcript(
        VID, [TranscriptSegment(VID, 0, 2.0, 5.8, said, json.dumps(timed), "fake:echo")]
    )
    q = Question("Who do you enable to use it?", (VID,), ("people anywhere", "only lawyers"))
    (c,) = answered(ask(library, q, "A", [(0.0, 4.0)])).citations
    assert (c["label"], c["source"]) == ("supported", "speech")
    assert "people anywhere" in c["text"] and c["t1"] > 4.0


def test_an_option_the_video_says_elsewhere_needs_the_questions_context(
    library: Library,
) -> None:
    # the video says both options; only the sentence saying "learn from it" is about what the
    # question asks (sharing your creativity): the other option, said where nothing of the
    # question is, is weak; the answer still does not abstain
    first = "sharing your creativity lets people learn from it"
    second = "you reserve all rights to a photograph"
    segments = []
    for n, (said, start) in enumerate([(first, 0.5), (second, 4.5)]):
        timed = [
            [start + 0.4 * i, start + 0.3 + 0.4 * i, w, 0.9] for i, w in enumerate(said.split())
        ]
        segments.append(
            TranscriptSegment(VID, n, start, timed[-1][1], said, json.dumps(timed), "x")
        )
    library.put_transcript(VID, segments)
    q = Question(
        "What does sharing your creativity let people do?",
        (VID,),
        ("learn from it", "reserve all rights"),
    )
    right = answered(ask(library, q, "A", [(0.0, 4.0)]))
    assert right.citations[0]["label"] == "supported"
    wrong = answered(ask(library, q, "B", [(4.0, 8.0)]))
    (c,) = wrong.citations
    assert c["label"] == "weak" and "reserve all rights" in c["text"] and c["support"] >= 0.5
    assert not wrong.abstained
    # where the video never says the other option, nothing tells the two apart: supported
    library.put_transcript(VID, segments[1:])
    (alone,) = answered(ask(library, q, "B", [(4.0, 8.0)])).citations
    assert alone["label"] == "supported"


@pytest.mark.parametrize(
    ("question", "label"),
    [
        ("What does the page shown on screen call a license?", "weak"),
        ("What does the narrator call a license?", "supported"),
    ],
)
def test_a_question_about_what_is_shown_is_not_answered_by_speech(
    library: Library, question: str, label: str
) -> None:
    # "totally free" is said at 4.2-8.5 s and shown nowhere
    q = Question(question, (VID,), ("ten dollars", "totally free"))
    (c,) = answered(ask(library, q, "B", [(4.0, 8.0)])).citations
    assert (c["source"], c["label"]) == ("speech", label)


def test_options_told_apart_by_a_function_word_need_that_word(library: Library) -> None:
    # "All rights reserved" and "Some rights reserved" share every content word: the line
    # showing "Some rights reserved." does not support "All rights reserved"
    library.put_clips(VID, [ClipRow(VID, 2, 8.0, 12.0, ocr_text="Some rights reserved.")])
    q = Question(
        "What does the last screen say about its rights?",
        (VID,),
        ("All rights reserved", "Some rights reserved"),
    )
    (shown,) = answered(ask(library, q, "B", [(8.0, 12.0)])).citations
    assert (shown["label"], shown["text"]) == ("supported", "Some rights reserved.")
    (other,) = answered(ask(library, q, "A", [(8.0, 12.0)])).citations
    assert other["label"] != "supported" and other["support"] < shown["support"]


@pytest.mark.parametrize(
    ("question", "first", "second"),
    [
        ("With which word does the last line of the dialogue begin?", "weak", "supported"),
        ("With which word does the first line of the dialogue begin?", "supported", "weak"),
        ("Which word comes up in the dialogue?", "supported", "supported"),
    ],
)
def test_the_first_or_last_line_is_the_one_said_before_or_after_the_other_option(
    library: Library, question: str, first: str, second: str
) -> None:
    # "sorry" opens the first line (0.5 s), "thanks" the last (4.5 s): for a question about
    # the last line, a citation of "sorry" is weak, for one about the first, "thanks" is
    segments = []
    for n, (said, start) in enumerate([("sorry about the delay", 0.5), ("thanks for coming", 4.5)]):
        timed = [
            [start + 0.4 * i, start + 0.3 + 0.4 * i, w, 0.9] for i, w in enumerate(said.split())
        ]
        segments.append(
            TranscriptSegment(VID, n, start, timed[-1][1], said, json.dumps(timed), "x")
        )
    library.put_transcript(VID, segments)
    q = Question(question, (VID,), ("sorry", "thanks"))
    (a,) = answered(ask(library, q, "A", [(0.0, 4.0)])).citations
    (b,) = answered(ask(library, q, "B", [(4.0, 8.0)])).citations
    assert (a["label"], b["label"]) == (first, second)


def test_the_citation_question_set_is_well_formed(monkeypatch: pytest.MonkeyPatch) -> None:
    # benchmarks/citations.py reads it: every answerable question has true spans inside its
    # clip, every unanswerable one none, and the parts are the ones the benchmark reports
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location(
        "bench_citations", root / "benchmarks/citations.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)
    spec.loader.exec_module(bench)
    rows = [json.loads(line) for line in bench.DATA.read_text().splitlines() if line.strip()]
    durations = {"wannaworktogether.mp4": 180.25, "vtest.avi": 79.5, "Megamind.avi": 11.25}
    durations |= {"countdown.mp4": 8.0, "garden.mp4": 60.0}  # generated: benchmarks/clips.py
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["part"] for r in rows} == set(bench.PARTS)
    for r in rows:
        assert r["video"] in durations and len(r["options"]) >= 2, r["id"]
        if r["answer"] is None:
            assert r["spans"] is None, r["id"]
            continue
        assert 0 <= r["answer"] < len(r["options"]) and r["spans"], r["id"]
        assert all(0 <= a < b <= durations[r["video"]] for a, b in r["spans"]), r["id"]
