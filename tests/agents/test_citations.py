"""Checked citations and abstention: every answer's evidence spans are checked against the
index in the runtime, whatever the strategy; each label says what was checked (the claim's
words found here, partly, not found, or not checkable here), with the quote at its own time;
an answer whose checked claims are found nowhere it cites abstains under ``auto``, and a claim
that cannot be checked here is reported unverified, never withheld."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agentkit import INDEX_SPECS
from factories import video_record

from vidagent.agents.base import Agent, Answer, Question
from vidagent.agents.critic import READER_ABSTAINS
from vidagent.agents.run import Run
from vidagent.agents.types import INSUFFICIENT
from vidagent.app.results import AskResult
from vidagent.cli.render import render_answer
from vidagent.config import load_settings
from vidagent.exceptions import ConfigError
from vidagent.library import Library
from vidagent.library.schema import Artifact, ClipRow, TranscriptSegment
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


def test_an_option_naming_a_video_is_checked_for_the_questions_words_in_that_video(
    library: Library,
) -> None:
    other = "w" * 16
    library.put_video(video_record(other, name="call.mp4"))
    asked = "Which video says a license is totally free?"
    first = Question(asked, (VID, other), ("the first", "the second"))
    e = answered(ask(library, first, "A", [(4.0, 8.0)]))  # the first is VID: it says them
    (c,) = e.citations
    assert (c.label, c.text, e.abstained) == ("found", "license is totally free", False)
    assert c.matched == ["license", "totally", "free"]  # not "says", "video" or "the first"
    # "the second" (the other video) cited at VID's moment: that video's moments are not there
    e = answered(ask(library, first, "B", [(4.0, 8.0)]))
    assert [c.label for c in e.citations] == ["not-found"] and e.abstained
    named = Question(asked, (other, VID), ("call.mp4", "v" * 16 + ".mp4"))
    assert answered(ask(library, named, "B", [(4.0, 8.0)])).citations[0].label == "found"
    someone = "In which clip does someone say that a license is totally free?"
    anyone = Question(someone, (VID, other), ("Video 1", "Video 2"))
    assert answered(ask(library, anyone, "A", [(4.0, 8.0)])).citations[0].label == "found"


def test_who_says_is_found_where_that_speaker_says_the_words_asked_about(
    library: Library,
) -> None:
    thanks = json.dumps([[9.0, 9.5, "thanks", 0.9]])
    library.put_transcript(
        VID,
        [
            TranscriptSegment(VID, 0, 4.2, 8.5, SPOKEN, json.dumps(WORDS), "fake:echo", "S1"),
            TranscriptSegment(VID, 1, 9.0, 9.5, "thanks", thanks, "fake:echo", "S2"),
        ],
    )
    library.put_artifact(Artifact(VID, "speakers", "names", data={"S1": "Dr Lee"}))
    who = Question('Who says "totally free"?', (VID,), ("S1", "S2", "the narrator"))
    e = answered(ask(library, who, "A", [(4.0, 8.0)]))
    (c,) = e.citations
    assert (c.label, c.speaker, e.abstained) == ("found", "S1 (Dr Lee)", False)
    assert c.matched == ["s1"]
    named = Question('Who says "totally free"?', (VID,), ("Dr Lee", "S2"))
    assert answered(ask(library, named, "A", [(4.0, 8.0)])).citations[0].label == "found"
    # S2 says something else; nobody's label is "the narrator": neither is found, both abstain
    for letter, spans in [("B", [(4.0, 8.0), (8.9, 9.6)]), ("C", [(4.0, 8.0)])]:
        e = answered(ask(library, who, letter, spans))
        assert {c.label for c in e.citations} == {"not-found"} and e.abstained
    # a question that is not "who says …?" never finds a speaker's label
    what = Question("Which speaker label talks here?", (VID,), ("S1", "S2"))
    assert answered(ask(library, what, "A", [(4.0, 8.0)])).citations[0].label == "not-found"


def test_a_spoken_answer_is_found_and_quoted_at_its_words_own_times(library: Library) -> None:
    answer = ask(library, COST, "B", [(4.0, 8.0)])
    e = answered(answer)
    assert (answer.letter, e.abstained, e.schema) == ("B", False, 2)
    (c,) = e.citations
    assert (c.label, c.source, c.cited) == ("found", "speech", [4.0, 8.0])
    # "totally free" are words 5-6, said 5.8-6.5 s: the quote is those words, 0.3 s either side
    assert (c.text, c.matched) == ("totally free", ["totally", "free"])
    assert (c.t0, c.t1) == (5.5, 6.8) and c.support == 1.0
    assert e.claims == [
        {
            "text": "How much does a license cost? it is totally free",
            "citations": [0],
            "support": 1.0,
            "status": "found",
        }
    ]


def test_a_sentence_two_cited_spans_share_is_quoted_once(library: Library) -> None:
    # "totally free" (5.8-6.5 s) crosses the edge of the two cited spans
    e = answered(ask(library, COST, "B", [(4.0, 6.0), (6.0, 8.0)]))
    (c,) = e.citations
    assert (c.label, c.text, c.t0, c.t1, c.cited) == ("found", "totally free", 5.5, 6.8, [4.0, 6.0])
    assert e.claims[0]["citations"] == [0] and not e.abstained


def test_a_quotes_padded_times_are_kept_to_the_millisecond() -> None:
    from vidagent.agents.citations.check import Checker
    from vidagent.agents.citations.pieces import Piece
    from vidagent.agents.types import Claim

    words = ((4.0, 5.0, "I"), (5.23, 6.75, "Paul."))  # 5.23 - 0.3 is 4.930000000000001
    piece = Piece(VID, 4.0, 7.0, "speech", "I am Paul.", words)
    checker = Checker(None, None, spans={VID: (0.0, 60.0)})  # type: ignore[arg-type]
    claim = Claim("Who? Paul", frozenset({"paul"}))
    assert checker.quote(claim, piece) == (4.93, 7.05, "Paul.")
    # asked about a window (`--last`) from 5 s: the padding stops at its start
    windowed = Checker(None, None, spans={VID: (5.0, 60.0)})  # type: ignore[arg-type]
    assert windowed.quote(claim, piece) == (5.0, 7.05, "Paul.")


def test_part_of_the_key_words_is_partial(library: Library) -> None:
    q = Question("How much does a license cost?", (VID,), ("ten dollars", "totally free of charge"))
    (c,) = answered(ask(library, q, "B", [(4.0, 8.0)])).citations
    assert (c.label, c.text, c.matched) == ("partial", "totally free", ["totally", "free"])
    assert c.support == round(2 / 3, 3)


def test_a_wrong_option_is_not_found_and_abstains_keeping_its_letter(library: Library) -> None:
    answer = ask(library, COST, "A", [(4.0, 8.0)])
    e = answered(answer)
    assert answer.letter == "A" and e.text == "A"  # the letter stays: accuracy is comparable
    assert [c.label for c in e.citations] == ["not-found"]
    assert (e.citations[0].t0, e.citations[0].t1) == (4.0, 8.0)  # nothing to quote
    assert e.abstained and answer.abstained and e.abstain_policy == "auto"
    assert e.abstain_reason == "none of the answer's key words is said or shown where it cites"


def test_a_claim_about_what_is_seen_is_unchecked_and_not_withheld(library: Library) -> None:
    # nothing in the video says or shows "umbrella" or a colour: without a vision model the
    # claim cannot be checked here, so it stands, unverified
    q = Question("What colour is the umbrella the woman carries?", (VID,), ("red", "green"))
    answer = ask(library, q, "B", [(0.0, 4.0)])
    e = answered(answer)
    assert [c.label for c in e.citations] == ["unchecked"]
    assert e.unverified and not e.abstained and e.claims[0]["status"] == "unchecked"
    # the same words asked about as speech are checked, and not found
    said = Question("What colour does the narrator say the umbrella is?", (VID,), ("red", "green"))
    e = answered(ask(library, said, "B", [(0.0, 4.0)]))
    assert [c.label for c in e.citations] == ["not-found"] and e.abstained and not e.unverified


def test_a_claims_words_are_found_by_their_stems(library: Library) -> None:
    # the option paraphrases the line CREATIVE COMMONS (8-12 s): "creativity" and "creative"
    # share a stem, as "derived" and "derivative" do; matched names the words as shown
    q = Question(
        "Which words are shown at the end?", (VID,), ("creativity and the commons", "a price")
    )
    (c,) = answered(ask(library, q, "A", [(8.0, 12.0)])).citations
    assert (c.label, c.source, c.text) == ("found", "on-screen text", "CREATIVE COMMONS")
    assert c.matched == ["creative", "commons"]


def test_a_thing_placed_in_the_picture_is_unchecked_without_a_vision_model(
    library: Library,
) -> None:
    # the question places its subject in the picture: what lies there is seen, and no word of
    # either option is said or shown anywhere, so without a vision model it is not checkable
    placed = Question(
        "What lies on the grass in the lower left corner of the picture?",
        (VID,),
        ("a football", "a yellow bag"),
    )
    e = answered(ask(library, placed, "B", [(0.0, 4.0)]))
    assert [c.label for c in e.citations] == ["unchecked"] and e.unverified and not e.abstained
    # asked without a place in the picture or a look, the claim is checked, and not found
    plain = Question("What lies on the grass?", (VID,), ("a football", "a yellow bag"))
    e = answered(ask(library, plain, "B", [(0.0, 4.0)]))
    assert [c.label for c in e.citations] == ["not-found"] and e.abstained


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
    assert [(c.source, c.label) for c in first] == [("speech", "found")]
    assert [(c.source, c.text, c.t0, c.t1, c.label) for c in second] == [
        ("on-screen text", "CREATIVE COMMONS", 8.0, 12.0, "partial")
    ]


def test_an_on_screen_line_is_cited_at_the_frames_it_was_read_in(library: Library) -> None:
    lines = json.dumps([{"text": "CREATIVE COMMONS", "t0": 9.0, "t1": 10.5}])
    library.put_clips(
        VID, [ClipRow(VID, 2, 8.0, 12.0, ocr_text="CREATIVE COMMONS", ocr_lines=lines)]
    )
    q = Question("Which organisation is shown?", (VID,), ("Creative Commons", "Red Hat"))
    (c,) = answered(ask(library, q, "A", [(8.0, 12.0)])).citations
    assert (c.label, c.source, c.t0, c.t1) == ("found", "on-screen text", 9.0, 10.5)


@pytest.mark.parametrize(
    ("policy", "text", "abstained"),
    [
        ("auto", INSUFFICIENT, True),
        ("always-report", "A dog barks at a cat.", True),
        ("never", "A dog barks at a cat.", False),
    ],
)
def test_a_free_form_answer_found_nowhere_abstains_by_policy(
    library: Library, policy: str, text: str, abstained: bool
) -> None:
    q = Question("What does the narrator say happens?", (VID,))
    answer = ask(library, q, "A dog barks at a cat.", [(0.0, 4.0)], abstain=policy)
    e = answered(answer)
    assert (answer.text, e.text, e.abstained) == (text, text, abstained)
    assert e.withheld == ("A dog barks at a cat." if policy == "auto" else "")
    assert [c.label for c in e.citations] == ["not-found"]


def test_a_sentence_said_twice_is_one_claim(library: Library) -> None:
    # SmolLM2 wrote its one sentence twice; the second copy was a claim with no citation of
    # its own, listed "not cited", and the answer abstained
    q = Question("What does the narrator say about a license?", (VID,))
    once = answered(ask(library, q, "A license is totally free.", [(4.0, 8.0)]))
    said = "A license is totally free.  a license is  totally free. A license is totally free!"
    twice = answered(ask(library, q, said, [(4.0, 8.0)]))
    assert [c["text"] for c in twice.claims] == ["A license is totally free."]
    assert [c.label for c in twice.citations] == [c.label for c in once.citations] == ["found"]
    assert (twice.abstained, twice.text) == (once.abstained, said) == (False, said)


def test_an_answer_citing_nothing_abstains(library: Library) -> None:
    q = Question("What does the narrator say?", (VID,))
    e = answered(ask(library, q, "Someone speaks.", []))
    assert (
        e.abstained
        and e.abstain_reason == "the answer cites no evidence"
        and e.text == INSUFFICIENT
    )


def test_a_quoted_time_never_leaves_the_video(library: Library) -> None:
    words = [[11.0, 11.6, "totally", 0.9], [11.6, 12.3, "free", 0.9]]  # ASR ran past the end
    library.put_transcript(
        VID, [TranscriptSegment(VID, 0, 11.0, 12.3, "totally free", json.dumps(words))]
    )
    (c,) = answered(ask(library, COST, "B", [(11.5, 11.5)])).citations  # an instant (a frame)
    assert c.label == "found" and (c.t0, c.t1) == (10.7, 12.0)


def test_numbers_are_read_whole(library: Library) -> None:
    # "1,000 euros" was partial at "£40,000" (its "000"), and "7am" one word "7 am" never found
    words = [[9.0, 9.4, "about", 0.9], [9.4, 9.9, "£40", 0.9], [9.9, 10.5, ",000", 0.9]]
    words += [[11.0, 11.3, "at", 0.9], [11.3, 11.9, "7am.", 0.9]]
    said = "About £40,000 at 7am."
    library.put_transcript(VID, [TranscriptSegment(VID, 0, 9.0, 11.9, said, json.dumps(words))])
    cost = Question("How much does it cost?", (VID,), ("1,000 euros", "40,000 pounds"))
    (c,) = answered(ask(library, cost, "A", [(8.0, 12.0)])).citations
    assert c.label == "not-found" and c.matched == []
    (c,) = answered(ask(library, cost, "B", [(8.0, 12.0)])).citations
    assert (c.label, c.matched) == ("partial", ["40,000"])  # as said; no pounds said: "£"
    when = Question("When do they meet?", (VID,), ("7 pm", "7 am"))
    (c,) = answered(ask(library, when, "B", [(8.0, 12.0)])).citations
    assert (c.label, c.matched) == ("found", ["7am"])


def test_a_quote_writes_a_word_the_asr_split_off_onto_the_one_before(library: Library) -> None:
    # whisper hears "about £40,000" as the words "about", "£40", ",000"
    words = [[9.0, 9.4, "about", 0.9], [9.4, 9.9, "£40", 0.9], [9.9, 10.5, ",000", 0.9]]
    said = "About £40,000."
    library.put_transcript(VID, [TranscriptSegment(VID, 0, 9.0, 10.5, said, json.dumps(words))])
    q = Question("How much does it cost?", (VID,), ("£40,000", "£10"))
    (c,) = answered(ask(library, q, "A", [(8.0, 12.0)])).citations
    assert (c.label, c.text) == ("found", "£40,000")


def test_detections_are_read_at_their_frames(library: Library) -> None:
    q = Question("Is anyone in view at the start?", (VID,), ("nobody", "a person"))
    (c,) = answered(ask(library, q, "B", [(0.0, 4.0)])).citations
    assert (c.label, c.source, c.t0, c.t1) == ("found", "detection", 1.5, 1.5)


@pytest.mark.parametrize(("said", "label"), [("yes, a blue screen", "found"), ("no", "not-found")])
def test_a_vision_model_looks_at_the_frames_the_text_found_nothing_in(
    library: Library, said: str, label: str
) -> None:
    vlm = FakeAdapter.function(lambda req: f"1: {said}")
    q = Question("What colour is the screen?", (VID,), ("red", "blue"))
    answer = ask(library, q, "B", [(0.0, 4.0), (8.0, 12.0)], vlm=vlm, critic="on")
    e = answered(answer)
    looked = [r for r in vlm.requests if r.image_count()]
    # the caption of 0-4 s says "blue": only 8-12 s is looked at, two frames, in one call
    assert len(looked) >= 1 and looked[0].image_count() == 2
    first, second = e.citations
    assert (first.label, first.source, first.text) == ("found", "caption", first.text)
    assert (second.label, second.source) == (label, "vision")
    assert answer.trace is not None and answer.trace.totals.frames >= 2


def test_a_vision_reply_that_names_no_span_leaves_a_seen_claim_unchecked(library: Library) -> None:
    # the model looked but said nothing of any span: the claim was not checked, so it is
    # reported unverified, never withheld as not found
    vlm = FakeAdapter.function(lambda req: "A picture of a street.")
    q = Question("What colour is the car?", (VID,), ("red", "green"))
    e = answered(ask(library, q, "A", [(0.0, 4.0)], vlm=vlm, critic="on"))
    assert [c.label for c in e.citations] == ["unchecked"]
    assert e.unverified and not e.abstained
    assert "named no span" in e.verify_note


def test_with_critic_on_the_perception_describer_is_no_vision_model(library: Library) -> None:
    # it takes images but answers no question: the llm reads the quotes, no frame is looked at
    measures = dataclasses.replace(FakeAdapter.capabilities, describer=True)
    describer = FakeAdapter.function(lambda req: "Picture: mostly grey.", capabilities=measures)
    blind = dataclasses.replace(FakeAdapter.capabilities, supports_images=False)
    reader = FakeAdapter.function(
        lambda req: "MOMENT 1: answers\nVERDICT: agree\nNOTE: fine.", capabilities=blind
    )
    adapters: dict[str, Any] = {
        "llm": reader,
        "vlm": describer,
        "embed": FakeAdapter("hash", {"dim": "512"}),
    }
    hub = Models.from_adapters(adapters, load_settings({**INDEX_SPECS, "abstain": "auto"}))
    q = Question("What colour is the car?", (VID,), ("red", "green"))
    agent = Cites(library, hub, options={"text": "A", "spans": [(0.0, 4.0)], "critic": "on"})
    e = answered(agent.run(q))
    assert not describer.requests and len(reader.requests) == 1
    assert e.critic["verdict"] == "agree" and e.unverified and not e.abstained


def test_the_looker_keeps_the_frame_budget(library: Library) -> None:
    from vidagent.budget import Budget

    vlm = FakeAdapter.function(lambda req: "1: yes")
    q = Question("What colour is the screen?", (VID,), ("red", "blue"))
    agent = Cites(
        library,
        models(vlm),
        budget=Budget(frames=1),
        options={"text": "B", "spans": [(0.0, 4.0), (8.0, 12.0)], "critic": "on"},
    )
    answer = agent.run(q)
    e = answered(answer)
    assert not [r for r in vlm.requests if r.image_count()]  # 2 frames would pass the budget
    assert e.verify_note.startswith("frames not looked at: frames budget")
    assert "not reviewed: frames budget" in e.critic["note"]


def test_published_answers_are_never_changed(library: Library) -> None:
    vlm = FakeAdapter.function(lambda req: "1: yes")
    agent = Cites(
        library,
        models(vlm),
        options={"text": "A dog barks at a cat.", "spans": [(0.0, 4.0)]},
        published=True,
    )
    answer = agent.run(Question("What does the narrator say?", (VID,)))
    e = answered(answer)
    assert e.text == "A dog barks at a cat." and e.abstained and e.abstain_policy == "always-report"
    assert not vlm.requests and not e.critic  # no frames looked at, no reader


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
    assert '    found       talk.mp4 00:00:05.5–00:00:06.8 speech: "totally free"' in block
    assert "    not-found   talk.mp4 00:00:00–00:00:04" in block
    body = AskResult(Trace.load(tmp_path / "t.jsonl")).to_json()
    assert [c["label"] for c in body["answer"]["citations"]] == ["found", "not-found"]
    assert body["answer"]["abstained"] is False


def test_a_trace_written_before_the_new_labels_is_read_as_written(tmp_path: Path) -> None:
    old = {
        "kind": "answer",
        "t": 1.0,
        "text": "B",
        "choice": 1,
        "parsed": True,
        "forced": False,
        "reason": "answered",
        "confidence": None,
        "evidence": [[VID, 4.0, 8.0]],
        "citations": [
            {
                "video_id": VID,
                "t0": 5.0,
                "t1": 7.3,
                "cited": [4.0, 8.0],
                "label": "supported",
                "support": 0.9,
                "source": "speech",
                "text": "license is totally free for everyone",
                "claim": 0,
            }
        ],
    }
    (tmp_path / "old.jsonl").write_text(json.dumps(old) + "\n")
    (e,) = Trace.load(tmp_path / "old.jsonl").of(Answered)
    assert e.schema == 1 and e.citations[0].label == "supported" and e.citations[0].reader == ""
    assert "supported" in render_answer(e, {VID: "talk.mp4"}, list(COST.options))


def test_a_claim_that_cites_no_moment_says_so() -> None:
    # The retrieval baseline answers a caption of five sentences and cites its clip for the
    # first: the other four were listed with nothing under them, as if checked and found clean.
    cited = {"video_id": VID, "t0": 0.0, "t1": 4.0, "cited": [0.0, 4.0], "label": "not-found"}
    cited |= {"support": 0.0, "claim": 0}
    e = Answered(
        1.0,
        "No people detected. No speech.",
        None,
        True,
        False,
        "answered",
        None,
        [],
        citations=[cited],
        claims=[
            {"text": "No people detected.", "citations": [0], "status": "not-found"},
            {"text": "No speech.", "citations": [], "status": "not-found"},
        ],
    )
    lines = render_answer(e, {VID: "talk.mp4"}).splitlines()
    at = lines.index('    claim 2: "No speech."')
    assert lines[at + 1] == "      not cited   no moment is cited for this claim"
    assert "not cited" not in "\n".join(lines[:at])  # the first claim has its citation


def test_no_answer_claims_nothing() -> None:
    # a cancelled run's empty answer to a multiple-choice question had the question itself for
    # its claim, checked and found nowhere (found by a new user cancelling an ask)
    from vidagent.agents.citations.claims import claims_of

    question = Question("How many people walk past?", (VID,), ("one", "two", "many"))
    stopped = Answer("", None, False, True, "stopped")
    assert claims_of(question, stopped) == ()
    assert claims_of(question, dataclasses.replace(stopped, text="maybe two"))  # text: a claim
    ground = Question("the man opens the door", (VID,), task="ground")
    assert claims_of(ground, stopped) == ()
    assert claims_of(ground, dataclasses.replace(stopped, text="[3.0, 5.0]"))


def test_an_unreadable_answer_says_what_could_not_be_read() -> None:
    # A free-form question whose model could not be reached: no option was ever offered, so
    # "no option could be read" was the wrong thing to say (found with a dead endpoint).
    e = Answered(1.0, "", None, False, True, "model_error", None, [])
    free = render_answer(e).splitlines()
    assert free[:2] == ["answer: (none)", "  (no answer was given: recorded as unparsable)"]
    chosen = render_answer(dataclasses.replace(e, text="maybe"), options=["yes", "no"])
    assert "  (no option could be read from this answer: recorded as unparsable)" in chosen


def test_an_answer_is_valid_against_its_shipped_json_schema(
    library: Library, tmp_path: Path
) -> None:
    import jsonschema

    from vidagent.trace import CITATION_LABELS

    schema = json.loads(
        (
            Path(__file__).resolve().parents[2] / "src/vidagent/schemas/answer.schema.json"
        ).read_text()
    )
    assert schema["$defs"]["label"]["enum"] == list(CITATION_LABELS)
    seen = Question("What colour is the umbrella the woman carries?", (VID,), ("red", "green"))
    for question, text, spans in [
        (COST, "B", [(4.0, 8.0), (0.0, 4.0)]),
        (seen, "B", [(0.0, 4.0)]),
        (Question("What does the narrator say?", (VID,)), "Someone speaks.", []),
    ]:
        answer = Cites(library, models(), options={"text": text, "spans": spans}).run(question)
        assert answer.trace is not None
        body = AskResult(answer.trace).to_json()["answer"]
        jsonschema.validate(body, schema)
    found = Cites(library, models(), options={"text": "B", "spans": [(4.0, 8.0)]}).run(COST)
    assert found.trace is not None
    wrong = AskResult(found.trace).to_json()["answer"]
    wrong["citations"][0]["label"] = "supported"  # a schema-1 label in a schema-2 answer
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, schema)
    wrong["schema"] = 1  # as a trace written before the new labels: valid
    jsonschema.validate(wrong, schema)


def test_the_label_vocabulary_is_the_documented_one() -> None:
    from vidagent.trace import CITATION_LABELS

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs/strategies/index.md").read_text()
    assert all(f"`{label}`" in doc for label in CITATION_LABELS)
    assert CITATION_LABELS == ("found", "partial", "not-found", "unchecked")


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
        if "Answer: B" in request.messages[-1].text:
            return "MOMENT 1: answers\nVERDICT: agree\nNOTE: a blue screen."
        if "VERDICT" in request.messages[-1].text:
            return (
                "MOMENT 1: does not answer\nVERDICT: disagree\n"
                "NOTE: the frames show a blue screen, not red."
            )
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
    # the critic's and the checks' calls are the question's: a look at the frames of the first
    # answer (its "red" is nowhere in the text), its review, and the second answer's review
    # (its "blue" is in the caption, so no frames are looked at to check it)
    assert [c.role for c in answer.trace.of(ModelCall)].count("tool_vlm") == 3
    assert e.critic["second_verdict"] == "agree" and not e.abstained
    lines = render_answer(e, {VID: "talk.mp4"}, list(q.options)).splitlines()
    assert lines[-2:] == [  # the reader's verdict, shown as the JSON has it
        "  reader: disagrees: the frames show a blue screen, not red.",
        '    (answered again in place of "A"; the reader on this answer: agrees)',
    ]
    assert answer.trace.totals.model_calls == len(answer.trace.of(ModelCall))
    assert answer.trace.totals.steps == 2  # one step, and one of the bounded second round


@pytest.mark.parametrize("free", [False, True])
def test_an_answer_the_reader_disagrees_with_twice_abstains(library: Library, free: bool) -> None:
    # whatever the strategy answers, the reader finds that its moments do not answer the
    # question: a distractor the video says elsewhere is where the words are, not the answer
    vlm = FakeAdapter.function(
        lambda req: (
            "MOMENT 1: does not answer\nVERDICT: disagree\nNOTE: no moment says it."
            if "VERDICT" in req.messages[-1].text
            else "1: yes, a blue screen"
        )
    )
    options = () if free else ("red", "blue")
    q = Question("What colour is the screen?", (VID,), options)
    answer = Reconsiders(library, models(vlm), options={"critic": "on"}).run(q)
    e = answered(answer)
    assert e.critic["revised"] and e.critic["second_verdict"] == "disagree"
    assert e.abstained and e.abstain_reason == READER_ABSTAINS
    # a letter is kept, marked abstained; free-form text is withheld
    assert (e.text, e.withheld) == ((INSUFFICIENT, "B") if free else ("B", ""))
    kept = Reconsiders(library, models(vlm), options={"critic": "on", "abstain": "never"}).run(q)
    assert not answered(kept).abstained  # "never" records no abstention, the reader's neither


def test_a_text_reader_does_not_withhold_what_it_cannot_see(library: Library) -> None:
    # a colour nothing in the index says or shows: unchecked with no vision model, and a reader
    # of the quotes alone has not checked it either, however often it disagrees
    blind = dataclasses.replace(FakeAdapter.capabilities, supports_images=False)
    disagree = "MOMENT 1: does not answer\nVERDICT: disagree\nNOTE: nothing says so."
    adapters: dict[str, Any] = {
        "llm": FakeAdapter.function(lambda req: disagree, capabilities=blind),
        "embed": FakeAdapter("hash", {"dim": "512"}),
    }
    hub = Models.from_adapters(adapters, load_settings({**INDEX_SPECS}))
    q = Question("What colour is the car?", (VID,), ("red", "green"))
    e = answered(Reconsiders(library, hub, options={"critic": "on", "abstain": "auto"}).run(q))
    assert e.critic["second_verdict"] == "disagree" and e.unverified and not e.abstained
    assert [c.label for c in e.citations] == ["unchecked"]


def test_the_reader_says_of_each_moment_whether_it_answers(library: Library) -> None:
    # a text reader (critic=on with no vision model) reads the quotes in one call; its verdict
    # on each moment is recorded on the citations
    def llm_reply(request: Any) -> str:
        assert "You cannot see the video" in request.messages[-1].text
        return "MOMENT 1: answers\nMOMENT 2: does not answer\nVERDICT: agree\nNOTE: said at 6 s"

    blind = dataclasses.replace(FakeAdapter.capabilities, supports_images=False)
    adapters: dict[str, Any] = {
        "llm": FakeAdapter.function(llm_reply, capabilities=blind),
        "embed": FakeAdapter("hash", {"dim": "512"}),
    }
    hub = Models.from_adapters(adapters, load_settings({**INDEX_SPECS}))
    agent = Cites(
        library, hub, options={"text": "B", "spans": [(4.0, 8.0), (0.0, 4.0)], "critic": "on"}
    )
    answer = agent.run(COST)
    e = answered(answer)
    assert [(c.label, c.reader) for c in e.citations] == [
        ("found", "answers"),
        ("not-found", "does-not-answer"),
    ]
    assert e.critic["verdict"] == "agree" and not e.critic["revised"]
    assert answer.trace is not None
    assert [c.role for c in answer.trace.of(ModelCall)].count("llm") == 1


def test_a_critic_that_agrees_changes_nothing(library: Library) -> None:
    vlm = FakeAdapter.function(
        lambda req: "VERDICT: agree\nNOTE: fine" if "VERDICT" in req.messages[-1].text else "1: yes"
    )
    q = Question("What colour is the screen?", (VID,), ("red", "blue"))
    e = answered(Reconsiders(library, models(vlm), options={"critic": "on"}).run(q))
    assert (e.text, e.critic["verdict"], e.critic["revised"]) == ("A", "agree", False)


def test_a_bench_run_records_abstention_but_keeps_every_answer(tmp_path: Path) -> None:
    from vidagent.app.benchmarks import RunConfig, run_benchmark
    from vidagent.bench.rundir import read_rows
    from vidagent.media.synth import make_video

    data = tmp_path / "nextqa"
    (data / "videos").mkdir(parents=True)
    make_video(data / "videos" / "v1.mp4", duration=3, size=(160, 96), fps=10)
    head = "video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4"
    row = "v1,30,160,96,what does the man say he holds,1,0,CW,a guitar,a banana,a kite,a lamp,x"
    (data / "val.csv").write_text(f"{head}\n{row}\n")
    settings = load_settings({**INDEX_SPECS, "llm": "fake:scripted?replies=[]", "abstain": "auto"})
    run_benchmark(
        RunConfig("nextqa", data, strategy="retrieval"), settings=settings, out=tmp_path / "run"
    )
    (found,) = read_rows(tmp_path / "run" / "predictions.jsonl").values()
    # nothing in a synthetic clip says any of these: recorded as abstained, the letter kept
    assert (
        found["abstained"] is True and found["letter"] is not None and found["parsed"] is not None
    )
    assert found["citations"] and set(found["citations"]) <= {"found", "partial", "not-found"}
    assert found["unverified"] is False


def test_the_cli_prints_labelled_citations_and_the_abstention(
    small_video: Path, _isolated_home: Path
) -> None:
    from clirun import vidagent

    env = {f"VIDAGENT_{k.upper()}": str(v) for k, v in INDEX_SPECS.items()}
    env["VIDAGENT_LLM"] = "fake:scripted?replies=[]"  # the retrieval baseline calls no llm
    asked = ("ask", str(small_video), "What does the man say?", "-o", "a guitar", "-o", "a kite")
    out = vidagent(*asked, "-s", "retrieval", "--abstain", "auto", home=_isolated_home, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("  abstained (auto): none of the answer's key") for line in lines)
    assert "  citations:" in lines
    assert any(line.startswith("    not-found   small.mp4 00:00:") for line in lines)
    wrong = vidagent(*asked, "--abstain", "maybe", home=_isolated_home, env=env)
    assert (
        wrong.returncode == 2
        and "'maybe' is not one of 'auto', 'never', 'always-report'" in wrong.stderr
    )
    # without --abstain, the abstain setting decides (ask's own "auto" overrode it); the
    # environment's here (INDEX_SPECS says "never")
    setting = vidagent(*asked, "-s", "retrieval", "--json", home=_isolated_home, env=env)
    body = json.loads(setting.stdout)
    assert body["answer"]["abstain_policy"] == "never"
    # the ids the citations give, named as files (the JSON had ids only)
    (video,) = body["videos"]
    assert video["name"] == "small.mp4" and video["duration"] > 0
    assert {c["video_id"] for c in body["answer"]["citations"]} == {video["video_id"]}
    env["VIDAGENT_ABSTAIN"] = "always-report"
    setting = vidagent(*asked, "-s", "retrieval", "--json", home=_isolated_home, env=env)
    assert json.loads(setting.stdout)["answer"]["abstain_policy"] == "always-report"


def test_a_front_end_option_left_out_leaves_the_setting_to_decide(library: Library) -> None:
    q = Question("What does the narrator say happens?", (VID,))
    e = answered(ask(library, q, "A dog barks at a cat.", [(0.0, 4.0)], abstain=None))
    assert e.abstain_policy == "auto"  # models()'s setting
    for abstain in ("auto", "never", "always-report"):
        chosen = ask(library, q, "A dog barks at a cat.", [(0.0, 4.0)], abstain=abstain)
        assert answered(chosen).abstain_policy == abstain


def test_a_grounding_answer_keeps_its_interval_when_it_abstains(library: Library) -> None:
    q = Question("someone says a dog barks", (VID,), task="ground")
    e = answered(ask(library, q, "[1.0, 2.0]", [(0.0, 4.0)]))
    assert e.abstained and e.text == "[1.0, 2.0]" and not e.withheld


DESCRIBED = (
    "[perception describer: measured facts, not a vision-language model] People were not "
    "checked. No on-screen text. Picture: mostly black (70%), red (28%), white (2%); brightness "
    '0.11 (dark); little motion (0.03). One continuous shot. Speech: "so a license is totally".'
)
FACTS = json.dumps(
    {
        "picture": "Picture: mostly black (70%), red (28%), white (2%); brightness 0.11 (dark); "
        "little motion (0.03).",
        "colours": [["black", 0.7], ["red", 0.28], ["white", 0.02]],
        "brightness": "dark",
        "brightness_level": 0.11,
        "motion": "little motion",
        "motion_level": 0.03,
        "speech": "so a license is totally",
    }
)


def described(library: Library) -> Library:
    """The fixture's second clip captioned by the perception describer, its facts kept: a
    dark, partly red picture, and a quote of the clip's speech."""
    library.put_clips(
        VID,
        [
            ClipRow(
                VID,
                1,
                4.0,
                8.0,
                caption=DESCRIBED,
                facts=FACTS,
                transcript="so a license is totally free",
            )
        ],
    )
    return library


def test_the_colours_of_the_frame_are_not_quoted_for_a_thing_in_it(library: Library) -> None:
    # 28% of the frame is red: that says nothing about a car
    q = Question("What colour does the narrator say the car is?", (VID,), ("red", "blue"))
    answer = ask(described(library), q, "A", [(4.0, 8.0)])
    e = answered(answer)
    assert [c.label for c in e.citations] == ["not-found"]
    assert e.abstained and answer.letter == "A"


def test_the_frames_measured_darkness_is_quoted_for_a_claim_about_the_picture(
    library: Library,
) -> None:
    # "dark" is in the question, offered as an alternative: it is what the option answers
    q = Question("Is the scene dark or brightly lit?", (VID,), ("bright daylight", "dark, lit"))
    e = answered(ask(described(library), q, "B", [(4.0, 8.0)]))
    (c,) = e.citations
    assert c.label in ("found", "partial") and not e.abstained
    assert c.source == "picture" and c.text.startswith("Picture: mostly black")


def test_a_pictures_labels_are_not_its_facts(library: Library) -> None:
    # "brightness 0.11 (dark)": the measured value is dark; the label's stem, "bright", is not
    # what the picture shows, so the other option is not found in it (nor noted as here)
    q = Question("Is the scene dark or brightly lit?", (VID,), ("brightly lit", "dark"))
    (c,) = answered(ask(described(library), q, "A", [(4.0, 8.0)])).citations
    assert c.label == "not-found"
    (c,) = answered(ask(described(library), q, "B", [(4.0, 8.0)])).citations
    assert (c.label, c.source, c.matched, c.notes) == ("found", "picture", ["dark"], [])


def test_the_describers_caption_is_never_quoted(library: Library) -> None:
    # its quote of the speech would cite the whole clip; the transcript knows the words' times
    e = answered(ask(described(library), COST, "B", [(4.0, 8.0)]))
    assert {c.source for c in e.citations} == {"speech"}
    # with no facts kept (an index written before them), the caption is still not read
    library.put_clips(VID, [ClipRow(VID, 1, 4.0, 8.0, caption=DESCRIBED)])
    q = Question("How dark is the picture?", (VID,), ("dark", "bright"))
    e = answered(ask(library, q, "A", [(4.0, 8.0)]))
    assert "caption" not in {c.source for c in e.citations}


def test_a_contraction_is_no_content_word(library: Library) -> None:
    # "don't" once counted as the words "don" and "t", found in any phrase with a don't
    said = "please don't give it up"
    timed = [[0.5 + 0.5 * i, 0.9 + 0.5 * i, w, 0.9] for i, w in enumerate(said.split())]
    library.put_transcript(
        VID, [TranscriptSegment(VID, 0, 0.5, 3.4, said, json.dumps(timed), "fake:echo")]
    )
    q = Question("What does the narrator say copyright protects against?", (VID,))
    q = Question(q.text, (VID,), ("uses you don't consent to",))
    e = answered(ask(library, q, "A", [(0.0, 4.0)]))
    assert [c.label for c in e.citations] == ["not-found"] and e.abstained


def test_a_span_that_cuts_a_sentence_quotes_the_sentence(library: Library) -> None:
    # the span ends at 5 s, inside the sentence; "totally free" is said at 5.8-6.5 s
    (c,) = answered(ask(library, COST, "B", [(4.0, 5.0)])).citations
    assert (c.label, c.text, c.t0, c.t1) == ("found", "totally free", 5.5, 6.8)


def test_a_moment_holding_another_option_says_so(library: Library) -> None:
    q = Question("How much does a license cost?", (VID,), ("it is totally free", "a license"))
    (c,) = answered(ask(library, q, "A", [(4.0, 8.0)])).citations
    assert c.label == "found" and c.notes == ['other-option-here: "a license" is here too']
    alone = Question("How much does a license cost?", (VID,), ("it is totally free", "a fee"))
    (c,) = answered(ask(library, alone, "A", [(4.0, 8.0)])).citations
    assert c.notes == []


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
    durations |= {"countdown.mp4": 8.0, "garden.mp4": 60.0, "conversation.mp4": 64.0}
    durations |= {"two_voices.mp4": 24.0}  # generated: benchmarks/clips.py
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["part"] for r in rows} == set(bench.PARTS)
    for r in rows:
        assert r["video"] in durations and len(r["options"]) >= 2, r["id"]
        if r["answer"] is None:
            assert r["spans"] is None, r["id"]
            continue
        assert 0 <= r["answer"] < len(r["options"]) and r["spans"], r["id"]
        assert all(0 <= a < b <= durations[r["video"]] for a, b in r["spans"]), r["id"]


def test_every_named_rule_names_a_test_that_exists() -> None:
    from vidagent.agents.citations.rules import RULES

    root = Path(__file__).resolve().parents[2]
    for rule in RULES:
        path, _, name = rule.test.partition("::")
        assert f"def {name}(" in (root / path).read_text(), rule.name
        assert rule.origin and rule.name
