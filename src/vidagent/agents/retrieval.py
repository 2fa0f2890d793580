"""The ``retrieval`` strategy: a no-LLM baseline that scores each option by what the index finds.

In the spirit of the text-retrieval baselines that video-QA papers report as the floor of their
tables, it reasons about nothing: for each option of a multiple-choice question it embeds the
question with the option (the ``embed`` role), retrieves the ``top_k`` clips nearest to it over
the videos in scope, and scores the option by that evidence::

    score = dense + lexical_weight * lexical

- ``dense``: the mean cosine of the best :data:`DENSE_TOP` retrieved clips (fewer when fewer
  were found) between the question+option query and each clip's embedded text (caption, speech
  and on-screen text, as the embed stage writes it).
- ``lexical``: the share of the option's content words found in the retrieved clips' text
  (``fields``: transcript, on-screen text, caption), ``|W_opt ∩ W_clips| / |W_opt|``. Words are
  lower-cased alphanumeric runs with a plural ``s`` dropped; stop words and the question's own
  words are left out, since they cannot tell the options apart. So an option whose words are
  spoken or shown wins.

The best score is the answer. Options whose scores tie (within :data:`TIE`) give no answer
(``parsed`` False, reason ``tie``): a baseline never guesses. The answer's evidence is the spans
that scored the chosen option: the clips holding its matched words (most matches first), else
its best dense clips, at most :data:`~vidagent.agents.run.EVIDENCE_SPANS`.

An open question (no options) is answered with the best clip's speech, else its on-screen text,
else its caption; a grounding question (``task == "ground"``) with the best clip's
``[t0, t1]``. Either way the evidence is that clip.

Each option's score, words matched and spans are a ``retrieval`` phase in the trace, so
``vidagent ask --strategy retrieval`` shows them live. The whole run is one step and makes no
call to the ``llm`` role at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidagent.agents.answer import option_letter
from vidagent.agents.base import Agent, Answer, IndexPlan
from vidagent.agents.run import EVIDENCE_SPANS
from vidagent.exceptions import ConfigError
from vidagent.library.search import require_embedding
from vidagent.tools.base import Evidence

if TYPE_CHECKING:
    from vidagent.agents.run import Run
    from vidagent.library.schema import ClipHit

Field = Literal["transcript", "ocr_text", "caption"]

#: How many of the best retrieved clips the dense term averages.
DENSE_TOP = 3
#: Scores closer than this are a tie.
TIE = 1e-6
WORD = re.compile(r"[a-z0-9]+")
_STOP = (
    "a an the and or but of to in on at by for with from as is are was were be been being it its "
    "this that these those there here he she they them his her their we you i me my our your "
    "do does did done not no yes so than then what which who whom whose when where why how "
    "into onto over under about after before during while if up down out off all any some"
)
STOP_WORDS = frozenset(_STOP.split())


@dataclass(frozen=True)
class RetrievalOptions:
    """Settings of the retrieval baseline.

    Attributes:
        top_k: clips retrieved per option (and for an open or grounding question).
        lexical_weight: weight of the word-overlap term against the dense cosine term.
        fields: the clip text the word overlap reads.
    """

    top_k: int = 8
    lexical_weight: float = 1.0
    fields: tuple[Field, ...] = ("transcript", "ocr_text", "caption")

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ConfigError("retrieval option top_k must be at least 1")
        if self.lexical_weight < 0:
            raise ConfigError("retrieval option lexical_weight must not be negative")


@dataclass(frozen=True)
class OptionScore:
    """One option's evidence: its score, its two terms, the words found and the spans used."""

    score: float
    dense: float
    lexical: float
    matches: tuple[str, ...]
    spans: tuple[Evidence, ...]


def words(text: str) -> set[str]:
    """The content words of ``text``: lower-cased alphanumeric runs, plural ``s`` dropped,
    stop words left out."""
    found = set()
    for w in WORD.findall(text.casefold()):
        if w in STOP_WORDS:
            continue
        found.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return found


def _span(hit: ClipHit) -> Evidence:
    return Evidence(hit.clip.video_id, hit.clip.t0, hit.clip.t1)


class RetrievalAgent(Agent):
    """The no-LLM retrieval baseline; its options are :class:`RetrievalOptions`."""

    name = "retrieval"
    max_steps = 1
    Options = RetrievalOptions
    options: RetrievalOptions
    stages = ("transcribe", "read_text", "caption", "embed")

    def index_plan(self) -> IndexPlan:
        # The dense term needs speech and on-screen text in the embedded clip text.
        return IndexPlan(self.stages, {"embed_text": "caption+speech+text"})

    def solve(self, run: Run) -> Answer:
        next(run.steps(1))  # the whole baseline is one step; the budgets are checked before it
        require_embedding(self.library, self.models.client("embed").spec)
        q = run.question
        if q.options:
            return self._choose(run)
        hits = self._search(run, q.text)
        if not hits:
            return Answer("", parsed=False, reason="no_evidence", note="no clip was retrieved")
        best = hits[0]
        clip, span = best.clip, _span(best)
        if q.task == "ground":
            text = f"[{clip.t0:.1f}, {clip.t1:.1f}]"
        else:
            text = next(
                (t.strip() for t in (clip.transcript, clip.ocr_text, clip.caption) if t.strip()), ""
            )
        run.phase(
            "retrieval", score=round(best.score, 4), spans=[span.to_list()], answer=text[:200]
        )
        return Answer(text, parsed=bool(text), confidence=round(best.score, 4), evidence=(span,))

    def _search(self, run: Run, query: str) -> list[ClipHit]:
        vector = self.models.client("embed").embed([query]).vectors[0]  # (D,)
        q = run.question
        return self.library.search_clips(vector, video_ids=list(q.video_ids), k=self.options.top_k)

    def _choose(self, run: Run) -> Answer:
        q = run.question
        asked = words(q.text)
        scores = []
        for i, option in enumerate(q.options):
            scored = self.score_option(
                self._search(run, f"{q.text} {option}"), words(option) - asked
            )
            scores.append(scored)
            run.phase(
                "retrieval", option=f"({option_letter(i)}) {option}", score=round(scored.score, 4),
                dense=round(scored.dense, 4), lexical=round(scored.lexical, 4),
                matches=list(scored.matches), spans=[e.to_list() for e in scored.spans],
            )  # fmt: skip
        top = max(s.score for s in scores)
        best = [i for i, s in enumerate(scores) if top - s.score <= TIE]
        if len(best) > 1:
            tied = ", ".join(f"({option_letter(i)})" for i in best)
            return Answer(
                "", parsed=False, reason="tie", confidence=round(top, 4),
                note=f"options {tied} tie at {top:.4f}; a baseline does not guess",
            )  # fmt: skip
        i = best[0]
        return Answer(
            f"({option_letter(i)}) {q.options[i]}", choice=i, confidence=round(top, 4),
            evidence=scores[i].spans,
        )  # fmt: skip

    def score_option(self, hits: list[ClipHit], option_words: set[str]) -> OptionScore:
        """An option's score from the clips its query retrieved (best first) and its words."""
        top = hits[:DENSE_TOP]
        dense = sum(h.score for h in top) / len(top) if top else 0.0
        found: dict[int, set[str]] = {}
        for n, hit in enumerate(hits):
            text = " ".join(getattr(hit.clip, f) for f in self.options.fields)
            found[n] = option_words & words(text)
        matched = set().union(*found.values()) if found else set()
        lexical = len(matched) / len(option_words) if option_words else 0.0
        by_matches = sorted((n for n in found if found[n]), key=lambda n: (-len(found[n]), n))
        used = by_matches or list(range(len(top)))
        spans = tuple(_span(hits[n]) for n in used[:EVIDENCE_SPANS])
        score = dense + self.options.lexical_weight * lexical
        return OptionScore(score, dense, lexical, tuple(sorted(matched)), spans)
