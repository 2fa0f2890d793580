"""The claims an answer makes, and the key words a moment must say or show for each.

Words are matched by their stems (:func:`stems`: Snowball's English stemmer over the content
words), so a claim's ``derived`` is found in a moment's ``derivative`` and ``licences`` in
``licence``; a word of another language is stemmed the same way on both sides.

For a multiple-choice question one claim: the question with the chosen option. Its key words
are the option's content words that are not the question's (the question's own words are in
the video whatever was chosen); when the question offers alternatives (``dark or brightly
lit?``), also the option's words among them that no other option holds; and when another
option holds all of these, the words, function words too, that only this option holds
(``all`` tells ``All rights reserved`` from ``Some rights reserved``). For a free-form answer
each sentence is a claim (its content words not in the question, all of them when that leaves
none); for a grounding answer, the event described. When the question has several videos and the
chosen option names one of them ("the second", "Video 2", its file name:
:func:`~vidagent.agents.evidence.video_named`), the key words are the question's own content
words, less those naming a video, speech or text ("Which video mentions a budget?": ``budget``),
and only that video's moments can hold them. When the question asks who says something ("Who
says goodbye?", :func:`~vidagent.agents.evidence.said_words`), a speech segment saying at least
half of the words asked about holds its speaker's label and name besides its words: "S1" is
found where S1 says "goodbye" (and "the man with glasses" is found nowhere: no label says it).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING

import snowballstemmer

from vidagent.agents.citations.lexicon import Lexicon, lexicon_for
from vidagent.agents.evidence import (
    NUMBER_WORDS,
    STOP_WORDS,
    VIDEO_WORDS,
    WORD,
    numbers_apart,
    said_words,
    video_named,
)
from vidagent.agents.evidence import words as content_words
from vidagent.agents.types import Claim

if TYPE_CHECKING:
    from vidagent.agents.types import Answer, Question

SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
TOKEN = re.compile(r"[a-z0-9]+")
#: A word as written: a number with its thousands separators, else a run of letters and digits.
WRITTEN = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|[a-z0-9]+")
#: A question offering alternatives (``dark or brightly lit?``): its words may be the answer's.
ALTERNATIVES = re.compile(r"\bor\b", re.IGNORECASE)
#: A contraction of a function word (``don't``, ``you're``, ``we'll``): no content of its own.
CONTRACTION = re.compile(r"\b[a-z]+'(?:t|re|ll|ve|d|m)\b", re.IGNORECASE)
POSSESSIVE = re.compile(r"'s\b", re.IGNORECASE)
_STEMMER = snowballstemmer.stemmer("english")
_STEMMER_LOCK = threading.Lock()  # a Snowball stemmer keeps its word in itself while it works


def _unshortened(text: str) -> str:
    """``text`` with contractions of function words and possessive ``'s`` taken out."""
    return POSSESSIVE.sub("", CONTRACTION.sub(" ", text.replace("\u2019", "'")))


def _plain(text: str) -> str:
    """:func:`_unshortened` ``text``, its numbers read whole
    (:func:`~vidagent.agents.evidence.numbers_apart`)."""
    return numbers_apart(_unshortened(text))


def words(text: str) -> set[str]:
    """The content words of ``text`` (:func:`vidagent.agents.evidence.words`), contractions
    read whole: ``don't`` is no content word (not ``don`` and ``t``), ``narrator's`` is
    ``narrator`` and ``it's`` is ``it``."""
    return content_words(_plain(text))


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """``word``'s Snowball English stem (``derivative`` and ``derived``: ``deriv``)."""
    with _STEMMER_LOCK:
        return str(_STEMMER.stemWord(word))


def stems(text: str) -> set[str]:
    """The stems of ``text``'s content words (read as :func:`words` reads them, a number in
    words as its digits): what key words are, and what they are matched against."""
    found = WORD.findall(_plain(text).casefold())
    return {stem(NUMBER_WORDS.get(w, w)) for w in found if w not in STOP_WORDS}


def surface(text: str, keys: frozenset[str] | set[str]) -> list[str]:
    """The words of ``text`` that hold one of ``keys``, as written there, once each and in
    order (what a citation says it matched): a number as written (``£40,000``'s ``40,000``,
    ``7am``) where its key words are read whole (:func:`_plain`)."""
    seen: dict[str, None] = {}
    for written in WRITTEN.findall(_unshortened(text).casefold()):
        forms = WORD.findall(numbers_apart(written))
        held = any(w in keys or stem(NUMBER_WORDS.get(w, w)) in keys for w in forms)
        if held and written not in seen:
            seen[written] = None
    return list(seen)


def tokens(text: str) -> set[str]:
    """Every word of ``text``, lower-cased, function words too (``all``, ``some``, ``no``)."""
    return set(TOKEN.findall(text.lower()))


def held(text: str) -> set[str]:
    """The words a piece of ``text`` holds, as key words are matched against it: its content
    words' stems and every word as written (a key word may be a function word)."""
    return stems(text) | tokens(text)


def names_speech_or_text(question: str, lexicon: Lexicon) -> bool:
    """Whether ``question`` names what is said or what is written (``What does the narrator
    say…``, ``Which title is shown…``)."""
    asked = tokens(question)
    return bool(asked & (lexicon.said | lexicon.written))


def asks_seen(question: str, lexicon: Lexicon) -> bool:
    """Whether ``question`` asks how something looks (``What colour is the bus?``, ``What
    does the woman carry?``)."""
    return bool(tokens(question) & lexicon.seen)


def about_picture(question: str, answer: str, lexicon: Lexicon) -> bool:
    """Whether ``question`` asks about the picture itself: its content words outside the
    answer's are all picture words (``Is the scene dark or brightly lit?``, not ``What colour
    is the narrator's car?``)."""
    return bool(lexicon.picture) and not (words(question) - words(answer) - lexicon.picture)


def option_key_words(question: str, option: str, others: Sequence[str]) -> frozenset[str]:
    """The words an option's moment must hold (module docstring)."""
    asked, own = stems(question), stems(option)
    key = own - asked
    if ALTERNATIVES.search(question):
        offered = set().union(*(stems(o) for o in others)) if others else set()
        key |= (own & asked) - offered
    if key and any(key <= stems(o) for o in others):
        key |= tokens(option) - tokens(question) - set().union(*(tokens(o) for o in others))
    return frozenset(key or own)


def claims_of(question: Question, answer: Answer, names: Sequence[str] = ()) -> tuple[Claim, ...]:
    """The claims ``answer`` makes (module docstring); ``names``: the file names of the
    question's videos, in order (an option may name one)."""
    lexicon = lexicon_for(question.text)
    asked = stems(question.text)
    named = names_speech_or_text(question.text, lexicon)
    seen = asks_seen(question.text, lexicon)
    if question.task == "ground":
        if not answer.text.strip():
            return ()  # no answer (a stopped run's): no moment is claimed
        text = question.text.strip()
        return (Claim(text, frozenset(asked), names_speech_or_text=named, asks_seen=seen),)
    # "Who says goodbye?" "S1": S1 is found where S1 says the words asked about
    quoted = frozenset(stem(w) for w in said_words(question.text))
    claims = _claims(question, answer, names, lexicon, asked, named, seen)
    return tuple(replace(c, who=quoted) for c in claims) if quoted else claims


def _claims(
    question: Question,
    answer: Answer,
    names: Sequence[str],
    lexicon: Lexicon,
    asked: set[str],
    named: bool,
    seen: bool,
) -> tuple[Claim, ...]:
    """The claims of :func:`claims_of`, without the words a "who says …?" question asks about."""
    if question.options:
        if answer.choice is None and not answer.text.strip():
            return ()  # no answer (a stopped run's, a failed one's): nothing is claimed
        if answer.choice is None:  # no option named: the text is what is claimed
            key = frozenset(stems(answer.text) - asked)
            text = f"{question.text.strip()} {answer.text.strip()}"
            picture = about_picture(question.text, answer.text, lexicon)
            return (Claim(text, key, picture, frozenset(asked), (), named, (), seen),)
        option = question.options[answer.choice]
        if len(question.video_ids) > 1 and (
            video := video_named(option, question.video_ids, names)
        ):
            # "Which video mentions a budget?" "the second": the question's own words are what
            # that video must say or show (less the words naming speech, text or a video)
            naming = VIDEO_WORDS | lexicon.said | lexicon.written
            said = {stem(w) for w in words(question.text) if w not in naming}
            key = frozenset(said or asked)
            text = f"{question.text.strip()} {option.strip()}"
            return (Claim(text, key, False, frozenset(asked - key), (), named, (), seen, video),)
        others = [o for i, o in enumerate(question.options) if i != answer.choice]
        key = option_key_words(question.text, option, others)
        rivals = tuple(
            option_key_words(question.text, o, [x for x in question.options if x is not o])
            for o in others
        )
        return (
            Claim(
                f"{question.text.strip()} {option.strip()}",
                key,
                about_picture(question.text, option, lexicon),
                frozenset(asked - key),
                rivals,
                named,
                tuple(others),
                seen,
            ),
        )
    found, said = [], set()
    for sentence in SENTENCE.split(answer.text.strip()):
        sentence = sentence.strip()
        again = " ".join(TOKEN.findall(sentence.lower()))  # a sentence said twice: one claim
        if sentence and stems(sentence) and again not in said:
            said.add(again)
            own = frozenset(stems(sentence) - asked or stems(sentence))
            picture = about_picture(question.text, sentence, lexicon)
            found.append(Claim(sentence, own, picture, frozenset(asked - own), (), named, (), seen))
    return tuple(found)
