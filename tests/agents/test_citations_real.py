"""Checked citations on a real clip with the embedded defaults: the spoken answer's citation is
found and quoted at its word's own time inside the clip's true span, a question about speech
the clip cannot answer abstains (its letter kept, marked abstained), a question about a thing
seen is not checkable without a vision model (unverified, not withheld), and the frames'
measured darkness is quoted for a claim about the picture."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from realmedia import get_clip

from vidagent.agents.base import Answer
from vidagent.app import Session
from vidagent.config import load_settings

pytestmark = [pytest.mark.models, pytest.mark.realmedia]

Ask = Callable[[str, list[str]], Answer]


@pytest.fixture(scope="module")
def ask(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ask]:
    """Asks the retrieval default about Megamind.avi, indexed once for the module."""
    clip = get_clip("Megamind.avi")
    home = tmp_path_factory.mktemp("home")
    with Session(load_settings({"home": home, "cache": "off"}, env={})) as session:

        def asked(question: str, options: list[str]) -> Answer:
            result = session.ask(clip, question, options=options, strategy="retrieval", trace=False)
            assert result.answer is not None and result.answer.verification is not None
            return result.answer

        yield asked


def test_a_spoken_answer_is_tightened_to_its_words(ask: Ask) -> None:
    book = ask(
        "According to the dialogue, you don't judge a book by what?",
        ["its cover", "its title", "its price"],
    )
    assert book.letter == "A" and not book.abstained
    assert book.verification is not None
    found = [c for c in book.verification.citations if c.label == "found"]
    assert found and all(c.source == "speech" for c in found)
    # "don't judge a book by its cover" is said in the first 5 s (hand-checked); the quote
    # is the word "cover" at its own time, not the 5 s clip
    c = found[0]
    assert 0.0 <= c.t0 < c.t1 <= 5.0 and c.t1 - c.t0 < 1.5
    assert c.text.lower().strip(" .,") == "cover"


def test_a_question_the_clip_cannot_answer_abstains(ask: Ask) -> None:
    planet = ask(
        "Which planet does the dialogue say they will fly to?", ["Mars", "Venus", "Jupiter"]
    )
    assert planet.abstained and planet.letter is not None
    assert planet.verification is not None
    assert all(c.label == "not-found" for c in planet.verification.citations)


def test_the_frames_colours_support_the_picture_and_not_a_thing_in_it(ask: Ask) -> None:
    # the describer measured the frames mostly black, but a taxi's colour is a thing in the
    # picture: with no vision model the claim is not checkable here, reported, not withheld
    taxi = ask(
        "What colour is the taxi parked outside the restaurant?", ["yellow", "black", "green"]
    )
    assert not taxi.abstained and taxi.verification is not None
    assert taxi.verification.unverified
    assert all(c.label == "unchecked" for c in taxi.verification.citations)
    # ... and the frames' measured darkness is quoted for the picture (brightness 0.11-0.14)
    # (a question whose words are not the options': where every option's words are in the
    # question, retrieval's word term is 0 for each and its choice rests on the embedding alone)
    dark = ask("How is the picture lit?", ["mostly dark", "mostly bright"])
    assert dark.letter == "A" and not dark.abstained and dark.verification is not None
    picture = [c for c in dark.verification.citations if c.label in ("found", "partial")]
    assert picture and all(c.source == "picture" for c in picture)
