"""Citations a person can check: every answer's evidence spans verified against the index, for
every strategy, in one place (:meth:`vidagent.agents.base.Agent.run` calls :func:`verify` on the
answer the strategy returned, before it is recorded).

What is checked. The answer is split into **claims**: for a multiple-choice question one claim,
the question with the chosen option (its *key words* are the option's content words not in the
question, since the question's own words are in the video whatever was chosen; and, when the
question offers alternatives, ``dark or brightly lit?``, the option's words among them that no
other option holds: ``dark`` is what the option ``dark, lit by candles`` answers; and when another
option holds all of these, the words, function words too, that only this option holds: ``all``
tells ``All rights reserved`` from ``Some rights reserved``); for a free-form
answer each sentence is a claim (its key words are its content words not in the question, all
of them when that leaves none); for a grounding answer, the event described. Each cited span
(the strategy's evidence, at most five) is read through the index (:class:`~vidagent.tools.index.
IndexView`): the clips overlapping it and, inside them,

- **speech**: each transcript segment with a word inside the span, read whole (a span that cuts
  a sentence cites the sentence), its words with their own times (a segment without word times
  is read inside the span's clips: where its words are is not known);
- **on-screen text**: each distinct OCR line of a clip, with the line above it;
- **caption**: each sentence of a clip's caption (a sentence supports a claim on its own, not
  the paragraph's sum; of the perception describer's caption, the label is no content, the
  quote of the clip's speech is left to the transcript, which knows its words' times, and the
  quote of its on-screen lines to the lines);
- **detections**: each label detected in a clip (``3 person detections``), at its frames' times;
- **graph events**: each relation and timed action of the entity graph overlapping the span.

Each piece is scored for a claim as ``support = DENSE_WEIGHT * max(cos, 0) + LEXICAL_WEIGHT *
lexical`` (``cos``: the ``embed`` role's cosine between the claim and the piece, one batched
embedding call per answer; ``lexical``: the share of the claim's key words found in the piece;
a claim without key words is scored by ``cos`` alone; words are read as
:func:`~vidagent.agents.evidence.words` reads them, but a contraction is one word, ``don't`` no
content word rather than ``don`` and ``t``). A span's support for a claim is its best
piece's; its label is ``supported`` (``>= SUPPORTED``), ``weak`` (``>= WEAK``) or
``unsupported``, but five rules make a supported citation ``weak``, support unchanged:

- **a bare value on screen among its rivals** (:func:`unlabelled`): an on-screen line holding
  nothing but the answer's key words (a name, a number) with none of the question's other
  words on the line above it, in a video that also shows another option on a line of its
  own. A credits roll shows every name; ``Sara Kraft`` under ``NARRATOR`` answers "Who is
  credited as the narrator?" and not "Who wrote the script?". Where no other option is shown,
  the line showing the option is the answer ("What does the button say?" ``Get a License``);
- **a span that says less of the claim than another** cited for it: of a claim's supported
  citations, those holding fewer of its key words than the best one are weak. When one span
  says "totally free" and another only "free" (a word the video says throughout), the first
  is where the answer is;
- **an option the video also says among its rivals, away from what the question asks**
  (:meth:`Checker.weakened`): where the video says or shows another option too (all its
  key words in one sentence or on-screen line), the option's words being said is no evidence
  that they answer the question, so a piece is supported only if it holds as many of the
  question's own words as the other option's best place does (then, on a tie, as many in the
  sentences either side of it, or on the line above). A benchmark's distractors are often
  the video's own words: "reserve all rights", said of copyright, does not answer "What does
  sharing your creativity let people do?", which the sentence saying "learn from it" does;
- **speech, for a question about what is shown** (:func:`asks_on_screen`): a question naming
  the screen, a title, a page or the credits, and nothing said, is answered by what is shown;
  a spoken phrase with the option's words is weak ("What are you free to do, according to the
  licence page shown on screen?" is not answered by "will you allow commercial uses");
- **an option said before another, for a question about the last** (:func:`position_asked`):
  a question about the last (first) line, screen or title, or the video's end (beginning), is
  not answered by a piece that another option is said or shown after (before). "With which word
  does the last line of the dialogue begin?" is not answered by "Of course", said at 0 s, when
  "Well" opens a line at 9.6 s.

None changes the answer's support, so none makes an answer abstain. The weights and
thresholds were chosen before measuring (an even mix; a span whose words hold all the claim's
key words is supported whatever its cosine); the first two rules were found on the first three
parts of ``benchmarks/citations.py``'s question set and measured on its fourth, written after
them; the next two (and the function-word key words) on the first five, and measured on the
sixth; the last on the fifth and sixth; all five were measured on the seventh, written after
them (docs/strategies/index.md, "Checked citations and abstention": on questions the checker
was not fixed on, far fewer supported citations are inside than on those it was).

What the question asks about. The perception describer's ``Picture:`` sentence holds pixel
statistics of the whole frame (its dominant colours, brightness, motion): they describe the
picture, not any thing in it, so they are scored only for a claim about the picture itself,
one whose question asks about nothing but the picture (its content words outside the option are
all in :data:`PICTURE_WORDS`: ``Is the scene dark or brightly lit?``). A frame that is 28% red
says nothing of the narrator's car, and the word ``red`` in it no longer supports "the narrator's
car is red". Other pieces are scored for every claim: a caption, a line or a phrase that holds
the answer's words is what a person checking it would read (a phrase using the option's word in
another sense, ``Red Hat`` for ``red``, can still match: the embedder's term is the only
guard there). Requiring the question's other words in the cited span as well was tried and
measured (``benchmarks/citations.py``): it withheld more right answers than wrong ones, since a
question's words are seldom the video's ("Which organisation does the video promote?" is
answered by "Creative Commons", said with neither "organisation" nor "promote"). They are
weighed only where the option's words alone cannot tell (above): a bare value on screen, and
an option the video also says among its rivals, where they are counted against the rival's
place, not required.

Of a span's pieces, the one cited is, among those earning the best label, the one holding most
of the claim's key words, then the most precise (the narrowest in time, so a spoken phrase wins
over a clip's caption), then the one with the highest support. Times are tightened to where
the support is: a spoken piece to the words of the claim it holds (the first to the last
matched word, :data:`PAD_WORDS` words of context either side, within its segment), or to the
segment's words when no key word matched; a detection to the frames it was seen in; a graph
event to its own interval; an on-screen line or a caption to its clip (the index keeps an OCR
line per clip, not the frame it was read in). A tightened time may leave the cited span (an
instant cited by EEA's frame memory becomes the phrase around it, a clip that cuts a sentence
the sentence's words) but never the video: it is clamped to ``[0, duration]``.

Where a vision model is configured (``tool_vlm`` takes images and is not the perception
describer), the cited spans' frames are also shown to it in one batched call (two frames per
span, within the question's frame budget; a spent budget skips it and says so), asked whether
each span shows the claim: a ``yes`` raises an unsupported span to ``weak`` and a weak one to
``supported`` (the text found nothing, the pixels did); a ``no`` lowers nothing, since a
vision model misses what speech says.

Abstention (:data:`AbstainPolicy`): the answer's support is its best citation's (multiple
choice, grounding) or the mean over its claims of each claim's best citation (free form). With
``auto`` (the default), an answer with no citation, or whose support is below
:data:`ABSTAIN_BELOW` (so every citation is unsupported), is an abstention: a free-form answer's
text becomes :data:`INSUFFICIENT` (the withheld text is kept in the record); a multiple-choice
answer keeps its letter, marked abstained, so benchmark accuracy stays comparable (a grounding
answer keeps its interval the same way).
``always-report`` records the same verdict and never changes the text (the benchmark harness's
setting: a paper's number is never changed); ``never`` records no abstention. The reason is in
the answer event of the trace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from vidagent.agents.evidence import words as content_words
from vidagent.models.perception import LABEL as DESCRIBER_LABEL
from vidagent.tools.base import Evidence

if TYPE_CHECKING:
    from vidagent.agents.base import Answer, Question
    from vidagent.agents.run import Run
    from vidagent.library.schema import ClipRow
    from vidagent.models.client import Client
    from vidagent.tools.index import IndexView

AbstainPolicy = Literal["auto", "never", "always-report"]
ABSTAIN_POLICIES: tuple[AbstainPolicy, ...] = ("auto", "never", "always-report")
Label = Literal["supported", "weak", "unsupported"]
RANK: dict[Label, int] = {"unsupported": 0, "weak": 1, "supported": 2}
Position = Literal["first", "last"]
Source = Literal["speech", "on-screen text", "caption", "detection", "graph", "vision"]

DENSE_WEIGHT = 0.5
LEXICAL_WEIGHT = 0.5
#: A citation at or above this support is ``supported``.
SUPPORTED = 0.5
#: A citation at or above this support (and below :data:`SUPPORTED`) is ``weak``.
WEAK = 0.3
#: ``auto`` abstains when the answer's support is below this (every citation unsupported).
ABSTAIN_BELOW = WEAK
#: Words of context kept either side of a spoken claim's matched words.
PAD_WORDS = 2
#: Cited spans verified (a run's evidence holds at most five).
MAX_SPANS = 5
#: Pieces of indexed content scored per answer (the nearest clips first).
MAX_PIECES = 240
#: Frames per span shown to a vision model.
VISION_FRAMES = 2
#: The text of a free-form answer withheld for want of evidence.
INSUFFICIENT = "insufficient evidence"
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
TOKEN = re.compile(r"[a-z0-9]+")
#: A question offering alternatives (``dark or brightly lit?``): its words may be the answer's.
ALTERNATIVES = re.compile(r"\bor\b", re.IGNORECASE)
#: How the perception describer's sentence of whole-frame pixel statistics opens
#: (:func:`vidagent.ingest.describe.describe_clip`).
PICTURE_SENTENCE = "Picture:"
#: How the describer's caption ends when the clip has speech: a quote of it.
SPEECH_QUOTE = re.compile(r'\s*Speech: ".*"\.\s*$', re.DOTALL)
#: The describer's quote of the clip's on-screen lines: ``On-screen text: "a" | "b".``
ON_SCREEN_QUOTE = re.compile(r'On-screen text: ".*?"\.(?=\s|$)', re.DOTALL)
#: Words (as :func:`~vidagent.agents.evidence.words` gives them) that ask about the picture
#: itself, not a thing in it: a question whose content words outside the option are all here
#: can be supported by the describer's whole-frame statistics (module docstring).
_PICTURE = (
    "video clip scene picture image frame screen shot camera view footage background whole "
    "overall colour color light lit lighting bright brightly brightness dark darkness dim "
    "motion move moving static still fixed show shown look appear visible mostly dominant"
)
PICTURE_WORDS = frozenset(_PICTURE.split())
_SHOWN = (
    "screen onscreen shown show shows written title titles credits credited caption captions "
    "sign signs displayed page text logo banner heading card slide listed appear appears "
    "printed stamped spelled"
)
_SAID = (
    "say says said saying narrator narrates tell tells told speak speaks spoken speaker hear "
    "heard voice dialogue mention mentions mentioned sing sings sung"
)
_PLACE = (
    r"line|lines|screen|scene|shot|sentence|word|words|card|frame|title|slide|image|thing|"
    r"question|credit|credits|name|page"
)
#: A question about the first or the last of something, or the video's beginning or end
#: (:func:`position_asked`); group 1 or 2 names it, or group 3 (``at the end``).
POSITION = re.compile(
    rf"\b(?:(first|opening|earliest)|(last|final|closing|latest))\s+(?:[\w-]+\s+)?(?:{_PLACE})\b"
    r"|\bat the (?:very )?(end|beginning|start)\b",
    re.IGNORECASE,
)
#: Words (as :func:`tokens` gives them) of a question about what is shown: the on-screen
#: text, a title, the credits (module docstring).
SHOWN_WORDS = frozenset(_SHOWN.split())
#: Words of a question about what is said: with one of them, a question is not about what is
#: shown alone (:func:`asks_on_screen`).
SAID_WORDS = frozenset(_SAID.split())


@dataclass(frozen=True)
class Citation:
    """One cited span checked for one claim.

    Attributes:
        video_id: the video.
        t0, t1: the tightened time of the support (the cited span when nothing supports it).
        cited: the span as the strategy cited it, ``(t0, t1)``.
        label: ``supported``, ``weak`` or ``unsupported``.
        support: the score in ``[0, 1]`` that gave the label.
        source: what the support was found in (``speech``, ``on-screen text``, ``caption``,
            ``detection``, ``graph``, ``vision``), ``""`` when nothing was found.
        text: the supporting text (a phrase, a line, a caption, the vision model's reply).
        claim: the index of the claim it is checked for.
    """

    video_id: str
    t0: float
    t1: float
    cited: tuple[float, float]
    label: Label
    support: float
    source: str = ""
    text: str = ""
    claim: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "video_id": self.video_id,
            "t0": round(self.t0, 2),
            "t1": round(self.t1, 2),
            "cited": [round(self.cited[0], 2), round(self.cited[1], 2)],
            "label": self.label,
            "support": round(self.support, 3),
            "source": self.source,
            "text": self.text,
            "claim": self.claim,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Citation:
        return cls(
            d["video_id"],
            d["t0"],
            d["t1"],
            (d["cited"][0], d["cited"][1]),
            d["label"],
            d["support"],
            d.get("source", ""),
            d.get("text", ""),
            d.get("claim", 0),
        )


@dataclass(frozen=True)
class Claim:
    """A statement of the answer that its citations are checked for.

    Attributes:
        text: the statement (the question with the option, or a sentence).
        key_words: the words its support must hold (module docstring).
        about_picture: the question asks about the picture itself, so the describer's
            whole-frame statistics may support it (module docstring).
        asked: the question's content words that are not key words: what a bare value on
            screen must be labelled with to answer it (module docstring).
        rivals: the key words of each other option of a multiple-choice question.
        on_screen: the question asks what is shown, and nothing of what is said (module
            docstring).
        position: the question asks about the ``first`` or the ``last`` of something (a
            line, a screen) or the video's beginning or end (:func:`position_asked`).
    """

    text: str
    key_words: frozenset[str]
    about_picture: bool = False
    asked: frozenset[str] = frozenset()
    rivals: tuple[frozenset[str], ...] = ()
    on_screen: bool = False
    position: Position | None = None

    def to_json(self, citations: Sequence[Citation], number: int) -> dict[str, Any]:
        mine = [i for i, c in enumerate(citations) if c.claim == number]
        best = max((citations[i].support for i in mine), default=0.0)
        return {"text": self.text, "citations": mine, "support": round(best, 3)}


@dataclass(frozen=True)
class Verification:
    """What checking an answer's citations found, and the abstention verdict.

    Attributes:
        claims: the answer's claims (one for multiple choice).
        citations: each cited span checked for a claim (every span for its best claim, and
            again for every other claim it supports at least weakly).
        support: the answer's support (module docstring).
        policy: the abstention policy applied.
        abstained: the support is insufficient (``auto`` and ``always-report``; never with
            ``never``).
        reason: why it abstained, in words (``""`` when it did not).
        withheld: the free-form text replaced by :data:`INSUFFICIENT` (``""``: none).
        note: what was not checked, and why (no vision model, a spent budget).
    """

    claims: tuple[Claim, ...] = ()
    citations: tuple[Citation, ...] = ()
    support: float = 0.0
    policy: AbstainPolicy = "auto"
    abstained: bool = False
    reason: str = ""
    withheld: str = ""
    note: str = ""

    def claims_json(self) -> list[dict[str, Any]]:
        return [c.to_json(self.citations, i) for i, c in enumerate(self.claims)]


@dataclass(frozen=True)
class Piece:
    """A piece of indexed content inside a cited span, with its own time."""

    video_id: str
    t0: float
    t1: float
    source: Source
    text: str
    words: tuple[tuple[float, float, str], ...] = field(default=(), repr=False)
    #: the describer's whole-frame statistics (colours, brightness, motion)
    picture: bool = False
    #: the line above an on-screen line in its clip (its heading, in a list or a credits roll)
    above: str = ""


class Place(NamedTuple):
    """A sentence the video says or a line it shows, read for where another option is."""

    t0: float
    t1: float
    content: frozenset[str]  # its content words (:func:`words`)
    held: frozenset[str]  # the words it holds for a key word (:func:`held`)
    near: frozenset[str]  # the content words around it: the sentences either side, the line above
    line: bool  # an on-screen line


# -- claims --------------------------------------------------------------------------------------

#: A contraction of a function word (``don't``, ``you're``, ``we'll``): no content of its own.
CONTRACTION = re.compile(r"\b[a-z]+'(?:t|re|ll|ve|d|m)\b", re.IGNORECASE)
POSSESSIVE = re.compile(r"'s\b", re.IGNORECASE)


def words(text: str) -> set[str]:
    """The content words of ``text`` (:func:`vidagent.agents.evidence.words`), contractions
    read whole: ``don't`` is no content word (not ``don`` and ``t``), ``narrator's`` is
    ``narrator`` and ``it's`` is ``it``."""
    plain = CONTRACTION.sub(" ", text.replace("\u2019", "'"))
    return content_words(POSSESSIVE.sub("", plain))


def tokens(text: str) -> set[str]:
    """Every word of ``text``, lower-cased, function words too (``all``, ``some``, ``no``)."""
    return set(TOKEN.findall(text.lower()))


def held(text: str) -> set[str]:
    """The words a piece of ``text`` holds, as a claim's key words are matched against it: its
    content words (:func:`words`) and every word as written (:func:`tokens`), since a key word
    may be a function word (:func:`option_key_words`)."""
    return words(text) | tokens(text)


def asks_on_screen(question: str) -> bool:
    """Whether ``question`` asks about what is shown (:data:`SHOWN_WORDS`) and names nothing
    said (:data:`SAID_WORDS`): ``Which licence name is shown on the licence page?``, not
    ``What does the narrator say while the title is shown?``."""
    asked = tokens(question)
    return bool(asked & SHOWN_WORDS) and not asked & SAID_WORDS


def position_asked(question: str) -> Position | None:
    """``first`` or ``last`` when ``question`` asks about the first or last of something
    (:data:`POSITION`: ``the last line of the dialogue``, ``the final screen``, ``at the end of
    the video``), else None (``How long does copyright last?``)."""
    found = POSITION.search(question)
    if found is None:
        return None
    return "first" if found.group(1) or found.group(3) in ("beginning", "start") else "last"


def claims_of(question: Question, answer: Answer) -> tuple[Claim, ...]:
    """The claims an answer makes (module docstring)."""
    asked = words(question.text)
    on_screen = asks_on_screen(question.text)
    if question.task == "ground":
        return (Claim(question.text.strip(), frozenset(words(question.text))),)
    if question.options:
        if answer.choice is not None:
            option = question.options[answer.choice]
            others = [o for i, o in enumerate(question.options) if i != answer.choice]
            key = option_key_words(question.text, option, others)
            rivals = [
                option_key_words(question.text, o, [x for x in question.options if x is not o])
                for o in others
            ]
            return (
                Claim(
                    f"{question.text.strip()} {option.strip()}",
                    key,
                    about_picture(question.text, option),
                    frozenset(asked - key),
                    tuple(rivals),
                    on_screen,
                    position_asked(question.text),
                ),
            )
        key = frozenset(words(answer.text) - asked)
        text = f"{question.text.strip()} {answer.text.strip()}"
        picture = about_picture(question.text, answer.text)
        return (Claim(text, key, picture, frozenset(asked), on_screen=on_screen),)
    found = []
    for sentence in SENTENCE.split(answer.text.strip()):
        sentence = sentence.strip()
        if sentence and words(sentence):
            own = frozenset(words(sentence) - asked or words(sentence))
            picture = about_picture(question.text, sentence)
            claim = Claim(sentence, own, picture, frozenset(asked - own), on_screen=on_screen)
            found.append(claim)
    return tuple(found)


def option_key_words(question: str, option: str, others: Sequence[str]) -> frozenset[str]:
    """The words an option's support must hold: its own outside the question; when the
    question offers alternatives, those of the question that no other option holds; and when
    another option holds all of these (``All rights reserved``, ``Some rights reserved``), the
    words, function words too, that only this option holds (``all``)."""
    asked, own = words(question), words(option)
    key = own - asked
    if ALTERNATIVES.search(question):
        offered = set().union(*(words(o) for o in others)) if others else set()
        key |= (own & asked) - offered
    if key and any(key <= words(o) for o in others):
        key |= tokens(option) - tokens(question) - set().union(*(tokens(o) for o in others))
    return frozenset(key or own)


def about_picture(question: str, answer: str) -> bool:
    """Whether ``question`` asks about the picture itself: its content words outside the
    answer's are all :data:`PICTURE_WORDS` (``Is the scene dark or brightly lit?``, not ``What
    colour is the narrator's car?``)."""
    return not (words(question) - words(answer) - PICTURE_WORDS)


# -- what the index holds inside a span -----------------------------------------------------------


def pieces_in(index: IndexView, span: Evidence) -> list[Piece]:
    """The indexed content inside ``span``: speech segments (words in the span's clips),
    on-screen lines, captions, detections by label, graph events."""
    clips = index.clips(span.video_id, span.t0, span.t1)
    lo = min([span.t0, *(c.t0 for c in clips)])
    hi = max([span.t1, *(c.t1 for c in clips)])
    found = _speech(index, span.video_id, lo, hi)
    for clip in clips:
        found += _clip_pieces(clip)
    found += [
        Piece(span.video_id, a, b, "graph", text)
        for a, b, text in index.graph_events(span.video_id, lo, hi)
    ]
    return found


def _speech(index: IndexView, video_id: str, lo: float, hi: float) -> list[Piece]:
    pieces = []
    for seg in index.transcript(video_id, lo, hi):
        timed = tuple((float(w[0]), float(w[1]), str(w[2])) for w in json.loads(seg.words or "[]"))
        # a segment with a word inside the span is read whole: a span that cuts a sentence
        # cites the sentence, and the citation is tightened to its words
        if any(lo <= (w[0] + w[1]) / 2 <= hi for w in timed):
            text = " ".join(w[2].strip() for w in timed)
            pieces.append(Piece(video_id, timed[0][0], timed[-1][1], "speech", text, timed))
        elif not timed and seg.text.strip():  # no word times: where it is said is not known
            pieces.append(
                Piece(video_id, max(seg.t0, lo), min(seg.t1, hi), "speech", seg.text.strip())
            )
    return pieces


def _clip_pieces(clip: ClipRow) -> list[Piece]:
    vid, t0, t1 = clip.video_id, clip.t0, clip.t1
    lines = _lines(clip.ocr_text)
    found = [
        Piece(vid, t0, t1, "on-screen text", line, above=lines[i - 1] if i else "")
        for i, line in enumerate(lines)
    ]
    found += [
        Piece(vid, t0, t1, "caption", text, picture=picture)
        for text, picture in caption_sentences(clip.caption)
    ]
    seen: dict[str, list[float]] = {}
    try:
        detections = json.loads(clip.detections or "[]")
    except json.JSONDecodeError:
        detections = []
    for d in detections if isinstance(detections, list) else []:
        if isinstance(d, dict) and d.get("label"):
            seen.setdefault(str(d["label"]), []).append(float(d.get("t", t0)))
    for label, times in seen.items():
        noun = label if len(times) == 1 else f"{label} ({len(times)} detections)"
        found.append(Piece(vid, min(times), max(times), "detection", f"{noun} seen"))
    return found


def caption_sentences(caption: str) -> list[tuple[str, bool]]:
    """A caption's sentences, each with whether it is the perception describer's whole-frame
    statistics. Of a describer's caption, the label is no content, and its quotes of the
    clip's speech and on-screen text are left out: the transcript's segments are pieces with
    their own words' times, and the quote, scored as well as they are, would cite the whole
    clip instead; the OCR lines are pieces one line at a time, and the quote, every line in
    one sentence, would let a name support a question its line does not answer."""
    text = caption.strip()
    describer = text.startswith(DESCRIBER_LABEL)
    if describer:
        text = SPEECH_QUOTE.sub("", text[len(DESCRIBER_LABEL) :])
        text = ON_SCREEN_QUOTE.sub(" ", text).strip()
    out = []
    for sentence in SENTENCE.split(text):
        sentence = sentence.strip()
        if sentence:
            out.append((sentence, describer and sentence.startswith(PICTURE_SENTENCE)))
    return out


def _lines(text: str) -> list[str]:
    return list(dict.fromkeys(x.strip() for x in text.splitlines() if x.strip()))


# -- scoring -------------------------------------------------------------------------------------


def label_of(support: float) -> Label:
    if support >= SUPPORTED:
        return "supported"
    return "weak" if support >= WEAK else "unsupported"


def unlabelled(claim: Claim, piece: Piece) -> bool:
    """Whether ``piece`` is a bare value on screen that nothing above it ties to the question:
    an on-screen line holding only the claim's key words (a name, a number) whose line above
    (a credit's role, a form's field) holds none of the question's words. ``Sara Kraft`` under
    ``NARRATOR`` answers "Who is credited as the narrator?", not "Who wrote the script?"."""
    if piece.source != "on-screen text" or not claim.asked:
        return False
    own = words(piece.text)
    return bool(own) and own <= claim.key_words and not (words(piece.above) & claim.asked)


def lexical(claim: Claim, piece: Piece) -> float:
    if not claim.key_words:
        return 0.0
    return len(claim.key_words & held(piece.text)) / len(claim.key_words)


def score(claim: Claim, piece: Piece, cosine: float) -> float:
    if not claim.key_words:
        return max(cosine, 0.0)
    return DENSE_WEIGHT * max(cosine, 0.0) + LEXICAL_WEIGHT * lexical(claim, piece)


def tightened(claim: Claim, piece: Piece, duration: float) -> tuple[float, float, str]:
    """Where in ``piece`` the support for ``claim`` is, and its text (module docstring)."""
    t0, t1, text = piece.t0, piece.t1, piece.text
    if piece.words:
        hit = [i for i, w in enumerate(piece.words) if held(w[2]) & claim.key_words]
        if hit:
            a = max(hit[0] - PAD_WORDS, 0)
            b = min(hit[-1] + PAD_WORDS, len(piece.words) - 1)
            t0, t1 = piece.words[a][0], piece.words[b][1]
            text = " ".join(w[2].strip() for w in piece.words[a : b + 1])
    t0, t1 = max(0.0, min(t0, duration)), max(0.0, min(t1, duration))
    return t0, max(t0, t1), text


@dataclass
class Checker:
    """Checks the citations of one answer (:func:`verify` builds one)."""

    index: IndexView
    embed: Client  # the embed role's
    durations: dict[str, float] = field(default_factory=dict)
    places: dict[str, list[Place]] = field(default_factory=dict)  # per video, read when needed
    rivals: dict[tuple[Claim, str], list[Place]] = field(default_factory=dict)
    #: each sentence's context words, by video and text
    around: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)

    def duration(self, video_id: str) -> float:
        if video_id not in self.durations:
            self.durations[video_id] = self.index.duration(video_id)
        return self.durations[video_id]

    def _places(self, video_id: str) -> list[Place]:
        """Each sentence the video says and each line it shows (read once per video)."""
        if video_id not in self.places:
            found = []
            said = _speech(self.index, video_id, 0.0, self.duration(video_id))
            text = [p.text for p in said]
            for i, p in enumerate(said):
                near = frozenset(words(" ".join(text[max(i - 1, 0) : i] + text[i + 1 : i + 2])))
                content, holds = frozenset(words(p.text)), frozenset(held(p.text))
                found.append(Place(p.t0, p.t1, content, holds, near, False))
                self.around[(video_id, p.text)] = near
            for clip in self.index.clips(video_id, 0.0, self.duration(video_id)):
                lines = _lines(clip.ocr_text)
                for i, line in enumerate(lines):
                    above = frozenset(words(lines[i - 1])) if i else frozenset()
                    content, holds = frozenset(words(line)), frozenset(held(line))
                    found.append(Place(clip.t0, clip.t1, content, holds, above, True))
            self.places[video_id] = found
        return self.places[video_id]

    def contested(self, claim: Claim, video_id: str) -> bool:
        """Whether the video shows another option of ``claim`` on a line of its own (a line
        whose words are all the option's or the question's, one of them the option's)."""
        return any(
            p.line and p.content and p.content <= rival | claim.asked and p.content & rival
            for rival in claim.rivals
            for p in self._places(video_id)
        )

    def rival_places(self, claim: Claim, video_id: str) -> list[Place]:
        """The places where the video says or shows another option of ``claim`` (all its key
        words in one sentence or on one line)."""
        if (claim, video_id) not in self.rivals:
            places = self._places(video_id)
            found = [p for p in places if any(r and r <= p.held for r in claim.rivals)]
            self.rivals[(claim, video_id)] = found
        return self.rivals[(claim, video_id)]

    def weakened(self, claim: Claim, piece: Piece) -> bool:
        """Whether a piece that supports ``claim`` is made weak by what the question asks
        (module docstring): speech for a question about what is shown; a bare value on screen
        among its rivals; an option said away from the question's words where another is said
        among them; an option said before (after) another for a question about the last (first)
        one. The video's other sentences and lines are read only when there are rivals to look
        for, once per video."""
        if claim.on_screen and piece.source == "speech":
            return True
        if not claim.rivals:
            return False
        if unlabelled(claim, piece) and self.contested(claim, piece.video_id):
            return True
        rivals = self.rival_places(claim, piece.video_id)
        if not rivals:
            return False
        best = max((len(claim.asked & p.content), len(claim.asked & p.near)) for p in rivals)
        if self.context(claim, piece) < best:
            return True
        if claim.position == "last":
            return any(p.t0 >= piece.t1 for p in rivals)
        if claim.position == "first":
            return any(p.t1 <= piece.t0 for p in rivals)
        return False

    def context(self, claim: Claim, piece: Piece) -> tuple[int, int]:
        """How many of the question's words ``piece`` holds, and how many the text around it
        holds (a sentence's neighbours, a line's line above), as they are counted for the
        places of :meth:`rival_places`."""
        if piece.source == "speech":
            self._places(piece.video_id)  # reads the video's sentences, with what is around each
            near = self.around.get((piece.video_id, piece.text), frozenset())
        else:
            near = frozenset(words(piece.above))
        return len(claim.asked & words(piece.text)), len(claim.asked & near)

    def check(self, claims: Sequence[Claim], spans: Sequence[Evidence]) -> list[Citation]:
        """Each span checked for its best claim, and for every other claim it supports; a
        supported citation that holds fewer of its claim's key words than another is weak
        (module docstring)."""
        per_span = [pieces_in(self.index, s) for s in spans]
        texts = list(dict.fromkeys(p.text for ps in per_span for p in ps))[:MAX_PIECES]
        cosines = self._cosines([c.text for c in claims], texts)  # (claims, pieces)
        column = {t: i for i, t in enumerate(texts)}
        kept: list[tuple[Citation, float]] = []
        for span, pieces in zip(spans, per_span, strict=True):
            found = [
                self._best(k, claim, span, pieces, cosines, column)
                for k, claim in enumerate(claims)
            ]
            best = max(range(len(found)), key=lambda k: found[k][0].support) if found else None
            kept += [f for k, f in enumerate(found) if k == best or f[0].label != "unsupported"]
        most = [
            max((cover for c, cover in kept if c.claim == k and c.label == "supported"), default=0)
            for k in range(len(claims))
        ]
        return [
            replace(c, label="weak") if c.label == "supported" and cover < most[c.claim] else c
            for c, cover in kept
        ]

    def _cosines(self, claims: list[str], texts: list[str]) -> np.ndarray:
        if not claims or not texts:
            return np.zeros((len(claims), len(texts)), dtype=np.float32)
        vectors: np.ndarray = self.embed.embed([*claims, *texts]).vectors  # (C + P, D)
        cosines: np.ndarray = vectors[: len(claims)] @ vectors[len(claims) :].T  # (C, P)
        return cosines

    def _best(
        self,
        k: int,
        claim: Claim,
        span: Evidence,
        pieces: Sequence[Piece],
        cosines: np.ndarray,
        column: dict[str, int],
    ) -> tuple[Citation, float]:
        """The citation of ``span`` for claim ``k``, and the share of the claim's key words
        its piece holds."""
        scored = []
        for n, p in enumerate(pieces):
            if p.text in column and (claim.about_picture or not p.picture):
                support = score(claim, p, float(cosines[k, column[p.text]]))
                label = label_of(support)
                if label == "supported" and self.weakened(claim, p):
                    label = "weak"
                scored.append((label, support, lexical(claim, p), n, p))
        cited = (span.t0, span.t1)
        if not scored:
            return Citation(span.video_id, span.t0, span.t1, cited, "unsupported", 0.0, claim=k), 0
        # Among the pieces that earn the best label, the one holding most of the key words
        # wins, then the one that pins the time closest (a spoken phrase over a clip's
        # caption), then the higher support.
        label, support, cover, _, piece = max(
            scored, key=lambda x: (RANK[x[0]], x[2], x[4].t0 - x[4].t1, x[1], -x[3])
        )
        if support < WEAK:  # nothing to point at: the cited span stays as it was
            unsupported = Citation(
                span.video_id, span.t0, span.t1, cited, "unsupported", support, claim=k
            )
            return unsupported, 0
        t0, t1, text = tightened(claim, piece, self.duration(span.video_id))
        citation = Citation(span.video_id, t0, t1, cited, label, support, piece.source, text, k)
        return citation, cover


# -- the answer's verdict -----------------------------------------------------------------------


def answer_support(claims: Sequence[Claim], citations: Sequence[Citation], free: bool) -> float:
    """The best citation's support, or (``free``: a free-form answer) the mean over claims of
    each claim's best citation."""
    if not claims or not citations:
        return 0.0
    best = [
        max((c.support for c in citations if c.claim == k), default=0.0) for k in range(len(claims))
    ]
    return sum(best) / len(best) if free else max(best)


def verdict(
    claims: Sequence[Claim], citations: Sequence[Citation], support: float, policy: AbstainPolicy
) -> tuple[bool, str]:
    """Whether the answer abstains under ``policy``, and why."""
    if policy == "never":
        return False, ""
    if not claims:
        return True, "the answer makes no statement to check"
    if not citations:
        return True, "the answer cites no evidence"
    if all(c.label == "unsupported" for c in citations):
        return True, f"no cited span supports the answer (best support {support:.2f} < {WEAK})"
    if support < ABSTAIN_BELOW:
        return True, f"the answer's support {support:.2f} is below {ABSTAIN_BELOW}"
    return False, ""


def verify(run: Run, answer: Answer, policy: AbstainPolicy, *, vision: bool = True) -> Verification:
    """Check ``answer``'s citations for ``run``'s question (module docstring); ``vision``:
    also show the spans' frames to the ``tool_vlm`` role (the agent decides:
    :meth:`~vidagent.agents.base.Agent.looks`)."""
    question, agent = run.question, run.agent
    claims = claims_of(question, answer)
    spans = tuple(dict.fromkeys(answer.evidence))[:MAX_SPANS]
    checker = Checker(agent.index, agent.models.client("embed"))
    with run.active():
        citations = checker.check(claims, spans) if claims else []
        note = "" if vision else "the cited frames were not looked at (no vision model)"
        if vision and claims and spans:
            citations, note = look(run, claims, spans, citations)
    free = not question.options and question.task == "answer"
    support = answer_support(claims, citations, free)
    abstained, reason = verdict(claims, citations, support, policy)
    return Verification(
        tuple(claims), tuple(citations), support, policy, abstained, reason, note=note
    )


# -- looking at the frames -----------------------------------------------------------------------

YES = re.compile(r"^\W*(?:span\s*)?(\d+)\W+(yes|no)\b", re.IGNORECASE | re.MULTILINE)


def vision_model(client: Client) -> bool:
    """Whether ``client`` (the ``tool_vlm`` role's) is a configured vision model: it takes
    images, is not the perception describer, and is not a ``fake:`` scripted model."""
    caps = client.capabilities
    return caps.supports_images and not caps.describer and not client.spec.startswith("fake:")


def look(
    run: Run, claims: Sequence[Claim], spans: Sequence[Evidence], citations: list[Citation]
) -> tuple[list[Citation], str]:
    """The citations after a configured vision model looked at each span's frames (one
    batched call), and a note on what was not done."""
    from vidagent.budget import BudgetExceeded
    from vidagent.exceptions import MediaError, ProviderError
    from vidagent.models.base import ChatRequest, ImagePart, Message
    from vidagent.prompts import load_prompt

    client = run.agent.models.client("tool_vlm")
    per = VISION_FRAMES
    if client.capabilities.max_images:
        per = max(1, min(per, client.capabilities.max_images // len(spans)))
    limit = run.agent.budget.frames
    try:
        run.meter.check()
        if limit is not None and run.meter.frames + per * len(spans) > limit:
            raise BudgetExceeded("frames", run.meter.frames, limit)
        content: list[str | ImagePart] = []
        for n, s in enumerate(spans, 1):
            times = [s.t0 + (s.t1 - s.t0) * (i + 0.5) / per for i in range(per)]
            content.append(f"Span {n} ({s.t0:.1f}-{s.t1:.1f} s):")
            content += run.agent.index.frame_images(s.video_id, times, size=512)
        statement = " ".join(c.text for c in claims)
        prompt = load_prompt("verify_vision").replace("{statement}", statement)
        content.append(prompt.replace("{spans}", str(len(spans))))
        request = ChatRequest((Message("user", tuple(content)),), max_tokens=200)
        reply = client.chat(request).text
    except BudgetExceeded as e:
        return citations, f"frames not looked at: the {e.budget} budget is spent"
    except (MediaError, ProviderError) as e:
        return citations, f"frames not looked at: {type(e).__name__}: {e}"
    run.meter.frames += per * len(spans)
    seen = {int(n): yes.lower() == "yes" for n, yes in YES.findall(reply)}
    if not seen:
        return citations, f"the vision model's reply named no span: {reply.strip()[:120]!r}"
    out = []
    for c in citations:
        n = next(
            (
                i
                for i, s in enumerate(spans, 1)
                if (s.video_id, s.t0, s.t1) == (c.video_id, *c.cited)
            ),
            0,
        )
        if seen.get(n) and c.label != "supported":
            label: Label = "weak" if c.label == "unsupported" else "supported"
            lifted = max(c.support, WEAK if label == "weak" else SUPPORTED)
            if c.source:
                c = Citation(
                    c.video_id, c.t0, c.t1, c.cited, label, lifted, c.source, c.text, c.claim
                )
            else:
                c = Citation(
                    c.video_id,
                    c.t0,
                    c.t1,
                    c.cited,
                    label,
                    lifted,
                    "vision",
                    reply.strip()[:200],
                    c.claim,
                )
        out.append(c)
    return out, ""
