"""The answer runtime's values: what is asked, what a run concluded, what checking it found.

Every module of the runtime imports these and none of them imports back: the strategies'
base (:mod:`.base`), one question's run (:mod:`.run`), the citation checker
(:mod:`.citations`) and the critic (:mod:`.critic`). :func:`answered` is the one mapping from an
:class:`Answer` to the fields of its trace event (:class:`~vidagent.trace.Answered`), so no
caller copies an answer into an event by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from vidagent.agents.answer import GROUND_QUESTION, option_letter, question_with_options
from vidagent.tools.base import Evidence
from vidagent.trace import ANSWER_SCHEMA, Citation

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.trace import Trace

AbstainPolicy = Literal["auto", "never", "always-report"]
ABSTAIN_POLICIES: tuple[AbstainPolicy, ...] = ("auto", "never", "always-report")
Label = Literal["found", "partial", "not-found", "unchecked"]
#: The text of a free-form answer withheld for want of evidence.
INSUFFICIENT = "insufficient evidence"


@dataclass(frozen=True)
class Question:
    """A question about one or more indexed videos; ``options`` make it multiple-choice.

    ``task`` is ``"answer"`` for a question, ``"ground"`` for temporal grounding: ``text``
    describes an event and the answer is its ``[start, end]`` in seconds (a strategy that
    grounds, such as AVI, asks for it in its own format; the others read the text as a
    question).
    """

    text: str
    video_ids: tuple[str, ...]
    options: tuple[str, ...] = ()
    task: Literal["answer", "ground"] = "answer"

    @property
    def prompt(self) -> str:
        """The question with its options as ``(A) …`` lines; for grounding, a question asking
        when the event happens."""
        if self.task == "ground":
            return GROUND_QUESTION.format(event=self.text.strip())
        return question_with_options(self.text, self.options)

    @property
    def free(self) -> bool:
        """A free-form question: neither multiple choice nor grounding."""
        return not self.options and self.task == "answer"


@dataclass(frozen=True)
class Claim:
    """A statement of the answer that its citations are checked for.

    Attributes:
        text: the statement (the question with the option, or a sentence).
        key_words: the words a moment must say or show to be ``found`` for it.
        about_picture: the question asks about the picture itself (its colours, brightness,
            motion), so the perception describer's whole-frame facts may be quoted for it.
        asked: the question's content words that are not key words.
        rivals: the key words of each other option of a multiple-choice question.
        others: those other options, in the same order.
        asks_seen: the question asks how something looks (its colour, what is worn or held).
        names_speech_or_text: the question names what is said or what is written, so the
            claim is checked against speech and on-screen text whatever a vision model could
            add.
        video_id: the video the chosen option names ("the second", "Video 2"), where only
            that video's moments can hold the claim; empty for any other claim.
        who: the words a "who says …?" question asks about ("Who says goodbye?": its stems):
            a speech segment saying at least half of them holds its speaker's label and name as
            well as its words; empty for any other question.
    """

    text: str
    key_words: frozenset[str]
    about_picture: bool = False
    asked: frozenset[str] = frozenset()
    rivals: tuple[frozenset[str], ...] = ()
    names_speech_or_text: bool = False
    others: tuple[str, ...] = ()
    asks_seen: bool = False
    video_id: str = ""
    who: frozenset[str] = frozenset()


ClaimStatus = Literal["found", "partial", "not-found", "unchecked"]


@dataclass(frozen=True)
class Verification:
    """What checking an answer's citations found, and the abstention verdict.

    Attributes:
        claims: the answer's claims (one for multiple choice).
        citations: each cited span checked for a claim (every span for its best claim, and
            again for every other claim it holds words of).
        statuses: each claim's best label over its citations (``unchecked``: a claim about
            what is seen, with no vision model to check it).
        support: the answer's support: the share of key words its best citation holds
            (free form: the mean over its checked claims).
        policy: the abstention policy applied.
        abstained: its checked claims are found nowhere it cites (``auto`` and
            ``always-report``; never with ``never``).
        unverified: some claim could not be checked here; it is reported, never withheld.
        reason: why it abstained, in words (``""`` when it did not).
        withheld: the free-form text replaced by :data:`INSUFFICIENT` (``""``: none).
        note: what was not checked, and why (no vision model, a spent budget).
    """

    claims: tuple[Claim, ...] = ()
    citations: tuple[Citation, ...] = ()
    statuses: tuple[ClaimStatus, ...] = ()
    support: float = 0.0
    policy: AbstainPolicy = "auto"
    abstained: bool = False
    unverified: bool = False
    reason: str = ""
    withheld: str = ""
    note: str = ""

    def claims_json(self) -> list[dict[str, Any]]:
        out = []
        for k, claim in enumerate(self.claims):
            mine = [i for i, c in enumerate(self.citations) if c.claim == k]
            best = max((self.citations[i].support for i in mine), default=0.0)
            status = self.statuses[k] if k < len(self.statuses) else "not-found"
            out.append(
                {"text": claim.text, "citations": mine, "support": round(best, 3), "status": status}
            )
        return out


@dataclass(frozen=True)
class Review:
    """What the critic (the reader) said: ``agree``, ``disagree`` or ``none`` (no verdict
    could be had), its note, whether a second round ran, its verdict on each cited moment
    (citation index -> :data:`~vidagent.trace.READER_VERDICTS`), and where a second round ran,
    its verdict on that round's answer (``second``; ``""`` where it was not read: the round
    was stopped)."""

    verdict: str
    note: str
    revised: bool = False
    first_answer: str = ""
    moments: Mapping[int, str] = field(default_factory=dict)
    second: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "note": self.note,
            "revised": self.revised,
            "first_answer": self.first_answer,
            **({"second_verdict": self.second} if self.revised else {}),
        }


@dataclass(frozen=True)
class Answer:
    """What a run concluded.

    Attributes:
        text: the answer as the model gave it.
        choice: the chosen option's index for multiple choice, else ``None`` (also when the
            text names no option: then ``parsed`` is False).
        parsed: a multiple-choice answer named exactly one option, or an open answer is
            non-empty.
        forced: the model was asked for a final answer because the search could not go on.
        reason: ``answered``, ``max_steps``, ``budget:<name>``, ``format_errors``,
            ``repeated_failures``, ``model_error``, ``stopped`` (the caller's ``should_stop``)
            or a strategy's own (``plan_done``).
        confidence: the strategy's confidence in [0, 1], when it has one (VideoAgent2's cf / 5);
            None where it has none: a ranking score (retrieval's) is reported as a score.
        evidence: video spans the answer rests on.
        note: why a forced answer was forced, in words (a model error's message).
        verification: its citations checked and the abstention verdict (set by
            :meth:`~vidagent.agents.base.Agent.run`; None on an answer a strategy has just
            made).
        review: what the critic said, where it ran.
        trace: the run's events.
        unanswered: the model never answered: every call for an answer failed, the forced final
            answer's too (its error is in ``note``); not an answer that names nothing, which
            the model did give.
    """

    text: str
    choice: int | None = None
    parsed: bool = True
    forced: bool = False
    reason: str = "answered"
    confidence: float | None = None
    evidence: tuple[Evidence, ...] = ()
    note: str = ""
    unanswered: bool = False
    verification: Verification | None = field(default=None, compare=False, repr=False)
    review: Review | None = field(default=None, compare=False, repr=False)
    trace: Trace | None = field(default=None, compare=False, repr=False)

    @property
    def letter(self) -> str | None:
        return option_letter(self.choice) if self.choice is not None else None

    @property
    def abstained(self) -> bool:
        """The answer's checked claims are found nowhere it cites (:mod:`.citations`)."""
        return self.verification is not None and self.verification.abstained


def answered(answer: Answer) -> dict[str, Any]:
    """The fields of the :class:`~vidagent.trace.Answered` event recording ``answer``."""
    checked = answer.verification or Verification()
    return {
        "text": answer.text,
        "choice": answer.choice,
        "parsed": answer.parsed,
        "forced": answer.forced,
        "reason": answer.reason,
        "confidence": answer.confidence,
        "evidence": [e.to_list() for e in answer.evidence],
        "note": answer.note,
        "citations": list(checked.citations),
        "claims": checked.claims_json(),
        "support": round(checked.support, 3),
        "abstained": checked.abstained,
        "abstain_policy": checked.policy,
        "abstain_reason": checked.reason,
        "withheld": checked.withheld,
        "verify_note": checked.note,
        "critic": answer.review.to_json() if answer.review is not None else {},
        "unverified": checked.unverified,
        "schema": ANSWER_SCHEMA,
    }


#: The perception stages whose rows the offline describer reads to caption a clip (the first
#: stages of the pipeline, in its order).
DESCRIBER_READS = ("transcribe", "read_text", "detect")


@dataclass(frozen=True)
class IndexPlan:
    """What a strategy needs indexed before a question: the ingest stages it reads, and the
    index settings they must run with (e.g. DVD as published: ``caption_transcripts=False``,
    ``embed_text="caption"``; AVI's captions: ``caption_style="avi"``); the application layer
    indexes a file through it. ``note``: one line for the user when the plan departs from the
    paper at a cost (EEA captioning clips for want of an image embedder); the trace's first
    event carries it and ``ask`` shows it."""

    stages: tuple[str, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""

    def stages_run(self, settings: Settings) -> tuple[str, ...]:
        """The stages the plan runs under ``settings``: its own, and where it captions with
        the offline describer (which writes a clip's caption from the rows of the perception
        stages), those stages too, in pipeline order. So a strategy's captions are the same
        whatever ran on the video before: without detection the describer says "People were
        not checked", and a video indexed with ``vidagent index`` first had its people counted,
        so one benchmark command scored differently by what had been indexed before it."""
        from vidagent.models.registry import provider_capabilities

        indexed = settings.model_copy(update=dict(self.settings))
        if "caption" not in self.stages:
            return self.stages
        if not provider_capabilities(indexed.spec("captioner")).describer:
            return self.stages
        # the describer's inputs are the pipeline's first stages, in this order; the transcript
        # only where captions see it
        reads = [s for s in DESCRIBER_READS if s != "transcribe" or indexed.caption_transcripts]
        wanted = [s for s in DESCRIBER_READS if s in reads or s in self.stages]
        return (*wanted, *(s for s in self.stages if s not in DESCRIBER_READS))

    def describe(self, settings: Settings) -> dict[str, Any]:
        """What the trace records of the index: the stages and the index settings in force."""
        indexed = settings.model_copy(update=dict(self.settings))
        return {
            "stages": list(self.stages_run(settings)),
            "caption_transcripts": indexed.caption_transcripts,
            "caption_style": indexed.caption_style,
            "embed_text": indexed.embed_text,
            **({"note": self.note} if self.note else {}),
        }
