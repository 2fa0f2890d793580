"""What the index retrieves for a question and each of its options: one implementation for the
``retrieval`` baseline (which scores the options by it) and for evidence first (which shows it to
an agent's model before its first step; see :mod:`vidagent.agents.run`).

For each option of a multiple-choice question the question with the option is embedded (the
``embed`` role) and the ``top_k`` clips nearest to it over the videos in scope are retrieved;
the option's score is::

    score = dense + lexical_weight * lexical

- ``dense``: the mean cosine of the best :data:`DENSE_TOP` retrieved clips (fewer when fewer
  were found) between the query and each clip's embedded text.
- ``lexical``: the share of the option's content words (:func:`words`, the question's own words
  left out) found in the retrieved clips' text (``fields``), ``|W_opt ∩ W_clips| / |W_opt|``.
  A caption of the perception describer is read as the values it measured
  (:meth:`~vidagent.library.schema.DescriberFacts.values`: ``6 people``, ``mostly green``,
  ``dim``), never as its wording: its label and sentence frames ("[perception describer:
  measured facts, not a vision-language model]", "One continuous shot", "No on-screen text")
  found "a language model", "one" or "a continuous shot" in every clip it captioned
  (:func:`lexical_text`).

An option's spans are the clips holding its matched words (most matches first), else its best
dense clips. An open question retrieves the clips nearest to the question alone.

**Who says …?** A question asking who says, said, asks, mentions or talks about something
(:data:`WHO_SAYS`) is answered from the speaker labels of the transcript
(:mod:`vidagent.ingest.speakers`) when its options name speakers (a label such as ``S2`` or a
name given with ``vidagent speakers VIDEO rename``, as a whole word of the option): each such
option scores the share of the question's quoted words (the text in quotes, else everything
after the verb; content words only) that one segment of that speaker says, its best segment
the span (:func:`speaker_scores`); an option naming no speaker scores 0. An open question of
that form is answered with the speaker of the segment saying most of those words
(:func:`who_says`). Where no option names a speaker, or nothing is labelled, the options are
scored as above.

**Which video …?** When a question has several videos and every option names one of them, by
its place in the question's order ("the first", "the second video", "Video 2", "clip 3", "the
last one") or its file name (:func:`video_named`), each option is scored by what the question
alone retrieves from that video: the same ``dense + lexical_weight * lexical`` with the
question's content words as the words (:meth:`Finder.videos`); the question with "the second"
appended would retrieve the same clips for every option.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidagent.agents.answer import option_letter
from vidagent.models.perception import LABEL as DESCRIBER_LABEL
from vidagent.timecode import clock
from vidagent.tools.base import Evidence

if TYPE_CHECKING:
    from vidagent.agents.types import Question
    from vidagent.library.schema import ClipHit, ClipRow
    from vidagent.tools.index import IndexView

Field = Literal["transcript", "ocr_text", "caption"]

#: How many of the best retrieved clips the dense term averages.
DENSE_TOP = 3
#: Scores closer than this are a tie.
TIE = 1e-6
#: Spans an option's evidence keeps (the answer's evidence at most, as in a run).
SPANS = 5
WORD = re.compile(r"[a-z0-9]+")
_STOP = (
    "a an the and or but of to in on at by for with from as is are was were be been being it its "
    "this that these those there here he she they them his her their we you i me my our your "
    "do does did done not no yes so than then what which who whom whose when where why how "
    "into onto over under about after before during while if up down out off all any some"
)
STOP_WORDS = frozenset(_STOP.split())
_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
_UNITS += " fifteen sixteen seventeen eighteen nineteen"
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety"
#: A number said in words is the number written in digits: Whisper writes a countdown as
#: "3, 2, 1, lift off." and an option says "one" (the option found none of its words there).
NUMBER_WORDS = {w: str(i) for i, w in enumerate(_UNITS.split())}
NUMBER_WORDS |= {w: str(20 + 10 * i) for i, w in enumerate(_TENS.split())}
NUMBER_WORDS |= {"hundred": "100", "thousand": "1000"}
#: A thousands separator inside a number ("1,000" was the words "1" and "000", and "000"
#: found every other thousand), and a time's am/pm written onto it ("7am" was one word that
#: "7 am" never found).
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_MERIDIEM = re.compile(r"(?<=\d)(?=[ap]\.?m\b)", re.IGNORECASE)


def numbers_apart(text: str) -> str:
    """``text`` with its numbers read whole: ``1,000`` as ``1000``, ``7am`` as ``7 am``."""
    return _MERIDIEM.sub(" ", _THOUSANDS.sub("", text))


FIELDS: tuple[Field, ...] = ("transcript", "ocr_text", "caption")
_PLACES = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5}
_PLACES |= {"1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5, "last": -1}
#: An option naming a video by its place: "the first", "the second video", "the last one".
VIDEO_PLACE = re.compile(
    rf"^(?:the\s+)?(?P<place>{'|'.join(_PLACES)})(?:\s+(?:one|video|clip))?\W*$", re.IGNORECASE
)
#: An option naming a video by its number: "Video 2", "clip #3".
VIDEO_NUMBER = re.compile(r"^(?:the\s+)?(?:video|clip)\s*#?\s*(?P<n>\d+)\W*$", re.IGNORECASE)


#: A video named inside a question by its place or number: "the second video", "clip #3".
PLACED_VIDEO = re.compile(
    rf"\b(?:(?P<place>{'|'.join(_PLACES)})\s+(?:video|clip)|(?:video|clip)\s*#?\s*(?P<n>\d+))\b",
    re.IGNORECASE,
)


#: The words of a question naming its videos ("Which video…", "…in which clip?") or no one in
#: particular ("…does someone say…?"): what an option naming a video needs its moments to hold
#: is the question's other words.
VIDEO_WORDS = frozenset(
    [
        "video",
        "videos",
        "clip",
        "clips",
        "someone",
        "somebody",
        "something",
        "anyone",
        "anybody",
        "anything",
    ]
)


def words(text: str) -> set[str]:
    """The content words of ``text``: lower-cased alphanumeric runs, plural ``s`` dropped,
    stop words left out, numbers in digits (:data:`NUMBER_WORDS`) and whole
    (:func:`numbers_apart`)."""
    found = set()
    for w in WORD.findall(numbers_apart(text).casefold()):
        if w in STOP_WORDS:
            continue
        w = w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
        found.add(NUMBER_WORDS.get(w, w))
    return found


def held_words(question: str) -> set[str]:
    """The content words a video must hold to answer "Which video …?" ``question``: its words
    less those naming a video or no one in particular (:data:`VIDEO_WORDS`; "Which video has a
    countdown?" asks for "countdown", and a narrator saying "pictures, videos" won it), or all
    of them where nothing else is asked."""
    return words(question) - words(" ".join(VIDEO_WORDS)) or words(question)


def lexical_text(clip: ClipRow, fields: Sequence[Field] = FIELDS) -> str:
    """The text of ``clip``'s ``fields`` that an option's words are looked for in: a perception
    describer's caption as the values it measured (module docstring), a model's as written."""
    texts = []
    for f in fields:
        if f != "caption":
            texts.append(getattr(clip, f))
        elif (facts := clip.describer_facts()) is not None:
            texts += facts.values()
        elif not clip.caption.startswith(DESCRIBER_LABEL):  # no facts kept: its wording alone
            texts.append(clip.caption)
    return " ".join(t for t in texts if t)


def span(hit: ClipHit) -> Evidence:
    return Evidence(hit.clip.video_id, hit.clip.t0, hit.clip.t1)


@dataclass(frozen=True)
class OptionScore:
    """One option's evidence: its score, its two terms, the words found and the spans used
    (with the clips behind them, best first)."""

    score: float
    dense: float
    lexical: float
    matches: tuple[str, ...]
    spans: tuple[Evidence, ...]
    hits: tuple[ClipHit, ...] = ()


@dataclass(frozen=True)
class Finder:
    """Retrieval over a Library's clip index with the ``embed`` role of ``models``.

    Attributes:
        top_k: clips retrieved per option (and for an open question).
        lexical_weight: weight of the word-overlap term against the dense cosine term.
        fields: the clip text the word overlap reads.
    """

    index: IndexView
    top_k: int = 8
    lexical_weight: float = 1.0
    fields: tuple[Field, ...] = FIELDS

    def check(self) -> None:
        """Raises LibraryError/EmbeddingMismatchError when the index cannot be searched."""
        self.index.check_search()

    def search(self, query: str, video_ids: Sequence[str]) -> list[ClipHit]:
        """The ``top_k`` clips nearest to ``query``, best first."""
        return self.index.search(query, video_ids, k=self.top_k)

    def options(
        self, question: str, options: Sequence[str], video_ids: Sequence[str]
    ) -> list[OptionScore]:
        """Each option's score from the clips its question+option query retrieves."""
        asked = words(question)
        return [
            self.score(self.search(f"{question} {option}", video_ids), words(option) - asked)
            for option in options
        ]

    def videos(
        self, question: str, options: Sequence[str], video_ids: Sequence[str]
    ) -> list[OptionScore] | None:
        """Each option's score as the video it names (module docstring; ``video_ids`` in the
        question's order); None unless there are several videos and every option names one."""
        if len(video_ids) < 2:
            return None
        names = [self.index.video(v).name for v in video_ids]
        named = [video_named(o, video_ids, names) for o in options]
        if None in named:
            return None
        asked = held_words(question)
        return [self.score(self.search(question, [v]), asked) for v in named if v is not None]

    def score(self, hits: list[ClipHit], option_words: set[str]) -> OptionScore:
        """An option's score from the clips its query retrieved (best first) and its words."""
        top = hits[:DENSE_TOP]
        dense = sum(h.score for h in top) / len(top) if top else 0.0
        found: dict[int, set[str]] = {}
        for n, hit in enumerate(hits):
            found[n] = option_words & words(lexical_text(hit.clip, self.fields))
        matched = set().union(*found.values()) if found else set()
        lexical = len(matched) / len(option_words) if option_words else 0.0
        by_matches = sorted((n for n in found if found[n]), key=lambda n: (-len(found[n]), n))
        used = (by_matches or list(range(len(top))))[:SPANS]
        score = dense + self.lexical_weight * lexical
        return OptionScore(
            score,
            dense,
            lexical,
            tuple(sorted(matched)),
            tuple(span(hits[n]) for n in used),
            tuple(hits[n] for n in used),
        )


def video_named(option: str, video_ids: Sequence[str], names: Sequence[str] = ()) -> str | None:
    """The video of ``video_ids`` (the question's, in order; ``names``: their file names) that
    ``option`` names by its place ("the second", "the last one"), its number ("Video 2") or its
    file name, with or without the extension; None when it names none of them."""
    text = option.strip()
    place = VIDEO_PLACE.match(text)
    number = VIDEO_NUMBER.match(text)
    n = _PLACES[place["place"].lower()] if place else int(number["n"]) if number else 0
    if n == -1:
        return video_ids[-1] if video_ids else None
    if 1 <= n <= len(video_ids):
        return video_ids[n - 1]
    folded = text.casefold()
    for video_id, name in zip(video_ids, names, strict=False):
        if folded in (name.casefold(), name.rsplit(".", 1)[0].casefold()):
            return video_id
    return None


def videos_asked_about(
    question: str, video_ids: Sequence[str], names: Sequence[str] = ()
) -> tuple[str, ...]:
    """The videos of ``video_ids`` (``names``: their file names) that ``question`` names by
    place ("the second video", "the last clip"), number ("video 2") or file name with its
    extension ("in garden.mp4"), in the question's order of videos; empty when it names none.
    A file name without its extension is not taken: a stem is often a word ("a.mp4", "talk")."""
    found: set[str] = set()
    for m in PLACED_VIDEO.finditer(question):
        n = _PLACES[m["place"].lower()] if m["place"] else int(m["n"])
        if n == -1 and video_ids:
            found.add(video_ids[-1])
        elif 1 <= n <= len(video_ids):
            found.add(video_ids[n - 1])
    folded = question.casefold()
    for video_id, name in zip(video_ids, names, strict=False):
        if name and re.search(rf"(?<![\w.]){re.escape(name.casefold())}(?!\.?\w)", folded):
            found.add(video_id)
    return tuple(v for v in video_ids if v in found)


def scope(index: IndexView, question: Question) -> tuple[str, ...]:
    """The videos to search for ``question``: its videos, or the one of them its words name
    (:func:`videos_asked_about`) where it asks about several. Naming several, or none, is all
    of them."""
    ids = question.video_ids
    if len(ids) < 2:
        return ids
    named = videos_asked_about(question.text, ids, [index.video(v).name for v in ids])
    return named if len(named) == 1 else ids


#: "Who says/said/asks/mentions/talks about …": the words after the verb are what is said.
WHO_SAYS = re.compile(
    r"\bwho\s+(?:says|said|asks|asked|mentions|mentioned|(?:talks|talked|speaks|spoke)\s+about)"
    r"\b(?P<rest>.*)",
    re.IGNORECASE | re.DOTALL,
)
QUOTED = re.compile(r"[\"\u201c]([^\"\u201d]+)[\"\u201d]")


def said_words(question: str) -> set[str]:
    """The content words a "who says …?" question asks about (the quoted text, else all after
    the verb); empty for any other question."""
    found = WHO_SAYS.search(question)
    if found is None:
        return set()
    quoted = QUOTED.findall(question)
    return words(" ".join(quoted) if quoted else found["rest"])


@dataclass(frozen=True)
class Spoken:
    """A labelled segment as a "who says" answer reads it."""

    video_id: str
    t0: float
    t1: float
    label: str
    shown: str  # ``S1 (Dr Lee)`` or ``S1``
    names: frozenset[str]  # the label and any given name, case-folded
    said: frozenset[str]  # its content words


def labelled_speech(index: IndexView, video_ids: Sequence[str]) -> list[Spoken]:
    """Every labelled transcript segment of the videos, in order."""
    out = []
    for vid in video_ids:
        given = index.speaker_names(vid)
        for s in index.transcript(vid):
            if s.speaker:
                name = given.get(s.speaker, "")
                shown = f"{s.speaker} ({name})" if name else s.speaker
                names = frozenset(n.casefold() for n in (s.speaker, name) if n)
                out.append(
                    Spoken(vid, s.t0, s.t1, s.speaker, shown, names, frozenset(words(s.text)))
                )
    return out


def _names_in(option: str, speech: Sequence[Spoken]) -> set[str]:
    """The names and labels of ``speech`` that ``option`` holds as whole words."""
    text = f" {' '.join(WORD.findall(option.casefold()))} "
    known = {n for s in speech for n in s.names}
    return {n for n in known if f" {' '.join(WORD.findall(n))} " in text}


def speaker_scores(
    index: IndexView, question: str, options: Sequence[str], video_ids: Sequence[str]
) -> list[OptionScore] | None:
    """Each option's score as the speaker it names (module docstring); None when the question
    is not "who says …?", nothing is labelled, or no option names a speaker."""
    wanted = said_words(question)
    if not wanted:
        return None
    speech = labelled_speech(index, video_ids)
    named = [_names_in(option, speech) for option in options]
    if not any(named):
        return None
    scores = []
    for names in named:
        theirs = [s for s in speech if s.names & names]
        found = max(theirs, key=lambda s: (len(s.said & wanted), -s.t0), default=None)
        matched = found.said & wanted if found else frozenset()
        share = len(matched) / len(wanted)
        where = (Evidence(found.video_id, found.t0, found.t1),) if found and matched else ()
        scores.append(OptionScore(share, 0.0, share, tuple(sorted(matched)), where))
    return scores


def who_says(
    index: IndexView, question: str, video_ids: Sequence[str]
) -> tuple[Spoken, tuple[str, ...]] | None:
    """The labelled segment saying most of a "who says …?" question's words (the earliest on
    a tie) and the words it says; None for another question or when none says any."""
    wanted = said_words(question)
    speech = labelled_speech(index, video_ids) if wanted else []
    found = max(speech, key=lambda s: (len(s.said & wanted), -s.t0), default=None)
    if found is None or not found.said & wanted:
        return None
    return found, tuple(sorted(found.said & wanted))


def best(scores: Sequence[OptionScore]) -> list[int]:
    """The indices of the options with the top score (several on a tie)."""
    top = max(s.score for s in scores)
    return [i for i, s in enumerate(scores) if top - s.score <= TIE]


# -- evidence first: what the model reads ---------------------------------------------------------

#: Words of a clip's speech or on-screen text shown per clip.
CLIP_WORDS = 40
#: Clips shown per option (and for an open question).
CLIPS_SHOWN = 2
HEAD_OPTIONS = (
    "Evidence the video index retrieved for the question and each option (the option's words "
    "found in the video, and the clips that hold them):"
)
ANSWER_HINT = "If this evidence answers the question, give the answer now."
HEAD_OPEN = "Evidence the video index retrieved for the question (the clips nearest to it):"


def clip_line(hit: ClipHit, *, several: bool = False) -> str:
    """``[00:00:05, 00:00:10] Speech: "…" On-screen text: "…"`` (the caption when neither)."""
    clip = hit.clip
    parts = []
    for label, text in (("Speech", clip.transcript), ("On-screen text", clip.ocr_text)):
        cut = text.split()
        if cut:
            more = " …" if len(cut) > CLIP_WORDS else ""
            parts.append(f'{label}: "{" ".join(cut[:CLIP_WORDS])}{more}"')
    if not parts and clip.caption.strip():
        parts.append(" ".join(clip.caption.split()[:CLIP_WORDS]))
    where = f"{clip.video_id[:8]} " if several else ""
    return f"[{where}{clock(round(clip.t0, 1))}, {clock(round(clip.t1, 1))}] " + " ".join(parts)


def render_options(options: Sequence[str], scores: Sequence[OptionScore], several: bool) -> str:
    """The evidence of each option, then the option it supports best (none on a tie)."""
    lines = [HEAD_OPTIONS]
    for i, (option, s) in enumerate(zip(options, scores, strict=False)):
        found = ", ".join(f'"{w}"' for w in s.matches) if s.matches else "none of its words"
        lines.append(f"({option_letter(i)}) {option}: found {found}.")
        # An option none of whose words were found still shows its nearest clips: hiding them
        # was tried and SmolLM2 then answered the demo question wrong (see the commit log).
        lines += [f"  {clip_line(h, several=several)}" for h in s.hits[:CLIPS_SHOWN]]
    top = best(scores)
    if len(top) == 1:
        i = top[0]
        lines.append(f"Best supported by the evidence: ({option_letter(i)}) {options[i]}.")
        lines.append(ANSWER_HINT)
    return "\n".join(lines)


def render_open(hits: Sequence[ClipHit], several: bool) -> str:
    return "\n".join([HEAD_OPEN, *(clip_line(h, several=several) for h in hits[: CLIPS_SHOWN + 1])])
