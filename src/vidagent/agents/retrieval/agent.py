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
its best dense clips, at most :data:`~vidagent.agents.run.EVIDENCE_SPANS`. The retrieval and
scoring are :mod:`vidagent.agents.evidence`, which evidence first shows an agent's model too.

An open question (no options) is answered with the best clip's speech, else its on-screen text,
else its caption; a grounding question (``task == "ground"``) with the best clip's
``[t0, t1]``. Either way the evidence is that clip.

Each option's score, words matched and spans are a ``retrieval`` phase in the trace, so
``vidagent ask --strategy retrieval`` shows them live. The whole run is one step and makes no
call to the ``llm`` role at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidagent.agents.answer import option_letter
from vidagent.agents.base import Agent, Answer, IndexPlan
from vidagent.agents.evidence import (
    DENSE_TOP,
    STOP_WORDS,
    TIE,
    Field,
    Finder,
    OptionScore,
    best,
    span,
    words,
)
from vidagent.exceptions import ConfigError

if TYPE_CHECKING:
    from vidagent.agents.run import Run
    from vidagent.library.schema import ClipHit

__all__ = [
    "DENSE_TOP",
    "STOP_WORDS",
    "TIE",
    "OptionScore",
    "RetrievalAgent",
    "RetrievalOptions",
    "words",
]


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

    def finder(self) -> Finder:
        o = self.options
        return Finder(self.index, o.top_k, o.lexical_weight, o.fields)

    def solve(self, run: Run) -> Answer:
        next(run.steps(1))  # the whole baseline is one step; the budgets are checked before it
        finder = self.finder()
        finder.check()
        q = run.question
        if q.options:
            return self._choose(run, finder)
        hits = finder.search(q.text, q.video_ids)
        if not hits:
            return Answer("", parsed=False, reason="no_evidence", note="no clip was retrieved")
        top = hits[0]
        clip, where = top.clip, span(top)
        if q.task == "ground":
            text = f"[{clip.t0:.1f}, {clip.t1:.1f}]"
        else:
            text = next(
                (t.strip() for t in (clip.transcript, clip.ocr_text, clip.caption) if t.strip()), ""
            )
        run.phase(
            "retrieval", score=round(top.score, 4), spans=[where.to_list()], answer=text[:200]
        )
        return Answer(text, parsed=bool(text), confidence=round(top.score, 4), evidence=(where,))

    def _choose(self, run: Run, finder: Finder) -> Answer:
        q = run.question
        scores = finder.options(q.text, q.options, q.video_ids)
        for i, (option, scored) in enumerate(zip(q.options, scores, strict=False)):
            run.phase(
                "retrieval",
                option=f"({option_letter(i)}) {option}",
                score=round(scored.score, 4),
                dense=round(scored.dense, 4),
                lexical=round(scored.lexical, 4),
                matches=list(scored.matches),
                spans=[e.to_list() for e in scored.spans],
            )
        top = best(scores)
        score = round(scores[top[0]].score, 4)
        if len(top) > 1:
            tied = ", ".join(f"({option_letter(i)})" for i in top)
            return Answer(
                "",
                parsed=False,
                reason="tie",
                confidence=score,
                note=f"options {tied} tie at {scores[top[0]].score:.4f}; a baseline does not guess",
            )
        i = top[0]
        return Answer(
            f"({option_letter(i)}) {q.options[i]}",
            choice=i,
            confidence=score,
            evidence=scores[i].spans,
        )

    def score_option(self, hits: list[ClipHit], option_words: set[str]) -> OptionScore:
        """An option's score from the clips its query retrieved (best first) and its words."""
        return self.finder().score(hits, option_words)
