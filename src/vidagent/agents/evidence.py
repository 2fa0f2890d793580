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

An option's spans are the clips holding its matched words (most matches first), else its best
dense clips. An open question retrieves the clips nearest to the question alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidagent.agents.answer import option_letter
from vidagent.timecode import clock
from vidagent.tools.base import Evidence

if TYPE_CHECKING:
    from vidagent.library.schema import ClipHit
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
FIELDS: tuple[Field, ...] = ("transcript", "ocr_text", "caption")


def words(text: str) -> set[str]:
    """The content words of ``text``: lower-cased alphanumeric runs, plural ``s`` dropped,
    stop words left out."""
    found = set()
    for w in WORD.findall(text.casefold()):
        if w in STOP_WORDS:
            continue
        found.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return found


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

    def score(self, hits: list[ClipHit], option_words: set[str]) -> OptionScore:
        """An option's score from the clips its query retrieved (best first) and its words."""
        top = hits[:DENSE_TOP]
        dense = sum(h.score for h in top) / len(top) if top else 0.0
        found: dict[int, set[str]] = {}
        for n, hit in enumerate(hits):
            text = " ".join(getattr(hit.clip, f) for f in self.fields)
            found[n] = option_words & words(text)
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
