"""The words the checker reads questions with, one :class:`Lexicon` per language.

Only what a question *names* is read from these lists: whether it asks about what is said or
what is written (then its claims are checked against speech and on-screen text, whatever a
vision model could add), whether it asks how something looks or what is seen at a place in the picture (then a
claim none of whose words the video says, shows or detects anywhere cannot be checked without
a vision model), and
whether it asks about the picture itself (its colours, brightness, motion: then the perception
describer's whole-frame facts may be quoted for it). A question in a language without a
lexicon is read with no stop words and names nothing: its claims are checked against
everything the index holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vidagent.agents.evidence import STOP_WORDS


@dataclass(frozen=True)
class Lexicon:
    """One language's word lists (content words as :func:`~.claims.words` gives them)."""

    stop: frozenset[str]
    #: Words naming what is said: a question holding one asks about speech.
    said: frozenset[str]
    #: Words naming what is written or displayed as text.
    written: frozenset[str]
    #: Words asking about the picture itself, not a thing in it.
    picture: frozenset[str]
    #: Words asking how something looks, or placing it in the picture: a question holding one
    #: (and naming neither speech nor text) asks about what is seen.
    seen: frozenset[str]


_SAID = (
    "say says said saying narrator narrates narration tell tells told speak speaks spoken "
    "speaker hear heard voice dialogue mention mentions mentioned sing sings sung call calls "
    "called announce announces announced name names named ask asks asked answer answers"
)
_WRITTEN = (
    "screen onscreen written write title titles credits credited caption captions sign signs "
    "displayed page text logo banner heading card slide listed printed stamped spelled label "
    "read reads"
)
_SEEN = (
    "colour color colours colors coloured colored wear wears wearing worn dressed hold holds "
    "holding held carry carries carrying look looks looking appear appears appearance see sees "
    "seen visible show shows shown pictured background foreground shape "
    # a question placing its subject in the picture ("…in the lower left corner of the
    # picture?") asks what is seen there
    "picture pictures image images frame frames corner"
)
_PICTURE = (
    "video clip scene picture image frame screen shot camera view footage background whole "
    "overall colour color light lit lighting bright brightly brightness dark darkness dim "
    "motion move moving static still fixed show shown look appear visible mostly dominant"
)

LEXICONS: dict[str, Lexicon] = {
    "en": Lexicon(
        STOP_WORDS,
        frozenset(_SAID.split()),
        frozenset(_WRITTEN.split()),
        frozenset(_PICTURE.split()),
        frozenset(_SEEN.split()),
    ),
}
#: For text in a language with no lexicon: no stop words, nothing named.
NONE = Lexicon(frozenset(), frozenset(), frozenset(), frozenset(), frozenset())
_LATIN = re.compile(r"[A-Za-z]")
_ANY_LETTER = re.compile(r"[^\W\d_]")


def lexicon_for(text: str) -> Lexicon:
    """The lexicon of ``text``'s language: English where its letters are Latin ones (the only
    lexicon shipped), else :data:`NONE`."""
    letters = _ANY_LETTER.findall(text)
    latin = sum(1 for c in letters if _LATIN.match(c))
    return LEXICONS["en"] if not letters or latin / len(letters) >= 0.5 else NONE
