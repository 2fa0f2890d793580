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
else its caption, and that clip is the evidence. Its speech is answered in whole transcript
segments: a sentence the clip's edge cuts is completed from the transcript, and the evidence
widened to where it is said.

"Which video …?" with options naming the question's videos ("the second", "Video 2", a file
name) scores each option by what the question alone retrieves from that video
(:meth:`~vidagent.agents.evidence.Finder.videos`), its word share over the question's words
that do not name a video (:func:`~vidagent.agents.evidence.held_words`); the ``retrieval``
phase says ``by="video"``.

A question about several videos that names one of them ("In the second video, what …?",
"video 2", "… in garden.mp4?") is answered from that video alone, which a ``scope`` phase
names; naming several, or none, it searches them all.

"Who says …?" is answered from the transcript's speaker labels where there are any
(:func:`~vidagent.agents.evidence.speaker_scores` for options that name speakers,
:func:`~vidagent.agents.evidence.who_says` for an open question: the speaker of the segment
saying most of the quoted words, that segment the evidence); the ``retrieval`` phase then says
``by="speaker"``.

A grounding question (``task == "ground"``, ``vidagent ground`` without a model endpoint) is
answered from the index alone. The ``top_k`` clips nearest the event's description are scored
like an option (their cosine plus ``lexical_weight`` times the share of the description's
content words in their text) and the best one is the answer's span, tightened to word times:
where the description's words are spoken in that clip (the transcript keeps each word's
times), the interval is the run of matched words with the most distinct ones (words less than
:data:`WORD_GAP` seconds apart belong to one run; a run with a word overlapping the clip counts
and may reach past its edges), cut to its shortest stretch holding every word it matched,
from its first word's start to its last word's end, widened by the description's stop words
spoken right before or after it ("lift" then "off": "off" is a stop word) and by
:data:`~vidagent.agents.citations.check.PAD_SECONDS` either side, as a citation's quote is. On-screen text is read from frames sampled every few
seconds and stored per clip without times, so a clip matched only by what it shows keeps the
clip's ``[t0, t1]``.

The answer carries no ``confidence``: an option's score is a sum of a cosine and a word share
(0 to 2 with the default weight), a ranking score and not a probability, so it is reported as
``score`` in the ``retrieval`` phases and never as a confidence (which vidagent keeps in
[0, 1]).

Each option's score, words matched and spans are a ``retrieval`` phase in the trace, so
``vidagent ask --strategy retrieval`` shows them live. The whole run is one step and makes no
call to the ``llm`` role at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidagent.agents.answer import option_letter
from vidagent.agents.base import Agent, Answer, IndexPlan
from vidagent.agents.citations.check import PAD_SECONDS
from vidagent.agents.evidence import (
    DENSE_TOP,
    STOP_WORDS,
    TIE,
    WORD,
    Field,
    Finder,
    OptionScore,
    best,
    scope,
    span,
    speaker_scores,
    who_says,
    words,
)
from vidagent.exceptions import ConfigError
from vidagent.tools.base import Evidence

if TYPE_CHECKING:
    from vidagent.agents.run import Run
    from vidagent.library.schema import ClipHit, ClipRow

__all__ = [
    "DENSE_TOP",
    "STOP_WORDS",
    "TIE",
    "WORD_GAP",
    "OptionScore",
    "RetrievalAgent",
    "RetrievalOptions",
    "words",
]

#: Seconds between two spoken words of the event's description that still make one run.
WORD_GAP = 2.0


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
    stages = ("transcribe", "read_text", "speakers", "caption", "embed")
    calls = ("embed",)  # no llm: the question and options are embedded, nothing is asked

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
        ids = self._scope(run)
        if q.options:
            return self._choose(run, finder, ids)
        if q.task != "ground" and (said := who_says(self.index, q.text, ids)):
            spoken, matched = said
            where = Evidence(spoken.video_id, spoken.t0, spoken.t1)
            run.phase(
                "retrieval",
                by="speaker",
                matches=list(matched),
                spans=[where.to_list()],
                answer=spoken.shown,
            )
            return Answer(spoken.shown, evidence=(where,))
        hits = finder.search(q.text, ids)
        if not hits:
            return Answer("", parsed=False, reason="no_evidence", note="no clip was retrieved")
        if q.task == "ground":
            return self._ground(run, finder, hits)
        top = hits[0]
        clip, where = top.clip, span(top)
        text = next(
            (t.strip() for t in (clip.transcript, clip.ocr_text, clip.caption) if t.strip()), ""
        )
        if clip.transcript.strip() and (whole := self._whole_speech(clip)):
            text, where = whole
        run.phase(
            "retrieval", score=round(top.score, 4), spans=[where.to_list()], answer=text[:200]
        )
        return Answer(text, parsed=bool(text), evidence=(where,))

    def _scope(self, run: Run) -> tuple[str, ...]:
        """The videos searched: the question's, or the one of them its words name ("In the
        second video, …", "… in garden.mp4?"; :func:`~vidagent.agents.evidence.scope`), which a ``scope``
        phase names. A question naming several, or none, searches them all."""
        named = scope(self.index, run.question)
        if named != run.question.video_ids:
            run.phase("scope", videos=list(named), names=[self.index.video(named[0]).name])
        return named

    def _whole_speech(self, clip: ClipRow) -> tuple[str, Evidence] | None:
        """The transcript segments ``clip``'s speech comes from (a word's midpoint inside it, as
        ingest cuts a clip's speech), whole, and the span from the clip's or their first start
        to the clip's or their last end, whichever is wider: a sentence the clip's edge cuts
        ("…after the 15th of" | "May.") is answered whole, and cited where it is said."""
        said = [
            s
            for s in self.index.transcript(clip.video_id, clip.t0, clip.t1)
            if any(clip.t0 <= (w[0] + w[1]) / 2 < clip.t1 for w in json.loads(s.words or "[]"))
        ]
        text = " ".join(s.text.strip() for s in said if s.text.strip())
        if not text:
            return None
        t0, t1 = min(clip.t0, said[0].t0), max(clip.t1, said[-1].t1)
        return text, Evidence(clip.video_id, t0, t1)

    def _ground(self, run: Run, finder: Finder, hits: list[ClipHit]) -> Answer:
        """The best clip for the event (cosine plus word share), tightened to the times of
        its matched spoken words where there are any."""
        wanted = words(run.question.text)
        scored = [(finder.score([hit], wanted), n) for n, hit in enumerate(hits)]
        best_score, n = max(scored, key=lambda s: (s[0].score, -s[1]))
        hit = hits[n]
        clip = hit.clip
        spoken = self._spoken_run(clip.video_id, clip.t0, clip.t1, run.question.text)
        t0, t1 = clip.t0, clip.t1
        if spoken:  # the words' own times, padded as a citation's quote is (Whisper's word
            # times are off by a few tenths: "lift off" said at 6.90-7.55 s, timed 7.18-7.74)
            end = self.index.video(clip.video_id).duration
            t0 = round(max(0.0, spoken[0][0] - PAD_SECONDS), 3)
            t1 = round(min(end, spoken[0][1] + PAD_SECONDS), 3)
        where = Evidence(clip.video_id, t0, t1)
        text = f"[{t0:.1f}, {t1:.1f}]"
        run.phase(
            "retrieval",
            score=round(best_score.score, 4),
            matches=sorted(spoken[1]) if spoken else list(best_score.matches),
            tightened="spoken words" if spoken else "clip",
            spans=[where.to_list()],
            answer=text,
        )
        return Answer(text, evidence=(where,))

    def _spoken_run(
        self, video_id: str, t0: float, t1: float, event: str
    ) -> tuple[tuple[float, float], set[str]] | None:
        """The run of the event's content words spoken at ``[t0, t1]`` with the most distinct
        ones (the earliest on a tie), widened by the event's stop words spoken right next to it
        ("lift" + "off"): its ``(start, end)`` and content words; None when none is spoken.

        A run counts when one of its words overlaps ``[t0, t1]``, and it may reach past the
        clip's edges: a clip holds the words whose middle lies in it, so a phrase said across
        an edge is split between two clips ("lift" at 6.9-7.5 s, its middle before a clip
        starting at 7.2 s, "off" inside it), and the clip alone would lose it."""
        wanted = words(event)
        small = set(WORD.findall(event.casefold())) & STOP_WORDS
        said: list[tuple[float, float, str]] = []  # every word spoken around the clip, in order
        for segment in self.index.transcript(video_id, t0 - WORD_GAP, t1 + WORD_GAP):
            for w0, w1, text, *_ in json.loads(segment.words or "[]"):
                said.append((float(w0), float(w1), str(text)))
        said.sort()
        runs: list[list[int]] = []  # indices into said of content words of the event
        for n, (w0, _, text) in enumerate(said):
            if not words(text) & wanted:
                continue
            if runs and w0 - said[runs[-1][-1]][1] < WORD_GAP:
                runs[-1].append(n)
            else:
                runs.append([n])
        runs = [r for r in runs if any(said[n][1] > t0 and said[n][0] < t1 for n in r)]
        if not runs:
            return None

        def found(run: list[int]) -> set[str]:
            return set().union(*(words(said[n][2]) & wanted for n in run))

        chosen = max(runs, key=lambda r: (len(found(r)), -r[0]))
        # the shortest stretch of it that holds every word it found, the earliest on a tie: a
        # run of two sentences ("… copyright to that creativity. It's true. Copyright protects
        # your creativity") is the one that says the event, not both
        whole = found(chosen)
        first, last = chosen[0], chosen[-1]
        for i, a in enumerate(chosen):
            have: set[str] = set()
            for b in chosen[i:]:
                have |= words(said[b][2]) & wanted
                if have == whole:
                    if said[b][1] - said[a][0] < said[last][1] - said[first][0]:
                        first, last = a, b
                    break
        while first > 0 and set(WORD.findall(said[first - 1][2].casefold())) <= small:
            first -= 1
        while last + 1 < len(said) and set(WORD.findall(said[last + 1][2].casefold())) <= small:
            last += 1
        return (said[first][0], said[last][1]), found(chosen)

    def _choose(self, run: Run, finder: Finder, ids: tuple[str, ...]) -> Answer:
        q = run.question
        by_speaker = speaker_scores(self.index, q.text, q.options, ids)
        by_video = None if by_speaker else finder.videos(q.text, q.options, q.video_ids)
        scores = by_speaker or by_video or finder.options(q.text, q.options, ids)
        by = {"by": "speaker"} if by_speaker else {"by": "video"} if by_video else {}
        for i, (option, scored) in enumerate(zip(q.options, scores, strict=False)):
            run.phase(
                "retrieval",
                **by,
                option=f"({option_letter(i)}) {option}",
                score=round(scored.score, 4),
                dense=round(scored.dense, 4),
                lexical=round(scored.lexical, 4),
                matches=list(scored.matches),
                spans=[e.to_list() for e in scored.spans],
            )
        top = best(scores)
        if len(top) > 1:
            tied = ", ".join(f"({option_letter(i)})" for i in top)
            return Answer(
                "",
                parsed=False,
                reason="tie",
                note=f"options {tied} tie at {scores[top[0]].score:.4f}; a baseline does not guess",
            )
        i = top[0]
        return Answer(
            f"({option_letter(i)}) {q.options[i]}",
            choice=i,
            evidence=scores[i].spans,
        )

    def score_option(self, hits: list[ClipHit], option_words: set[str]) -> OptionScore:
        """An option's score from the clips its query retrieved (best first) and its words."""
        return self.finder().score(hits, option_words)
