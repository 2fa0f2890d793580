"""Checking an answer's cited spans against the index, and the abstention verdict.

Each cited span (at most :data:`MAX_SPANS`) is read as pieces (:mod:`.pieces`), and for each
claim (:mod:`.claims`) the piece holding most of its key words is cited, its label stating
what was checked (:data:`~vidagent.trace.CITATION_LABELS`):

- ``found``: every key word is in the piece (for a "who says …?" claim a speech segment saying
  at least half of the words asked about holds its speaker's label and name too: "S1" is found
  where S1 says "goodbye"); the quote is those words as said (from the first
  matched word to the last, at their own times with :data:`PAD_SECONDS` either side), or the
  line as shown (at the frames it was read in), or the detection (at its frames);
- ``partial``: some of them are (quoted the same way);
- ``not-found``: none of what the index holds in the span holds any of them (or the span is
  in another video than the one the chosen option names: "the second", "Video 2");
- ``unchecked``: none is there, and the claim is about what is seen, so with no vision model
  it cannot be checked here: the question asks how something looks and names neither speech
  nor text (:mod:`.lexicon`), and none of its key words is said, shown or detected anywhere in
  the video.

Among pieces holding as many key words, the narrowest in time is cited (a spoken phrase over a
clip's caption), then the one nearest the claim by the ``embed`` role's cosine (one batched
call per answer). The cosine ranks; it never labels. A piece's ``support`` is the share of the
claim's key words it holds.

Where a vision model is configured, the spans of claims the text did not find are shown to it
(one batched call, through the :class:`~vidagent.agents.looker.FrameLooker` that owns sampling
and the frame budget), asked whether each span shows the claim: ``yes`` is ``found`` with the
source ``vision`` and its reply as the quote; ``no`` leaves ``not-found`` (or turns
``unchecked`` into ``not-found``: it was checked). A span its reply says nothing of (a reply
naming no span, a failed call, a spent frame budget) keeps the label the text gave it, so a
claim about what is seen stays ``unchecked`` unless the model really answered.

Abstention (:data:`~vidagent.agents.types.AbstainPolicy`): an answer abstains when it makes
checked claims and none of them is found or partly found where it cites (or it cites nothing);
a claim that could not be checked here is reported unverified and never withheld. With
``auto`` a free-form answer that abstains is replaced by
:data:`~vidagent.agents.types.INSUFFICIENT` (its text kept in the record); a multiple-choice or
grounding answer keeps its letter or interval, marked abstained, so benchmark accuracy stays
comparable. ``always-report`` records the verdict and changes nothing (the benchmark harness);
``never`` records none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from vidagent.agents.citations.claims import claims_of, held, surface
from vidagent.agents.citations.pieces import Piece, clip_pieces, pieces_in, speech
from vidagent.agents.citations.rules import notes
from vidagent.agents.types import AbstainPolicy, Claim, ClaimStatus, Verification
from vidagent.library.schema import spoken
from vidagent.trace import Citation

if TYPE_CHECKING:
    from vidagent.agents.looker import FrameLooker
    from vidagent.agents.types import Answer, Question
    from vidagent.models.client import Client
    from vidagent.tools.base import Evidence
    from vidagent.tools.index import IndexView

#: Seconds kept either side of a quote's first and last matched word.
PAD_SECONDS = 0.3
#: Cited spans checked (a run's evidence holds at most five).
MAX_SPANS = 5
#: Pieces of indexed content embedded per answer (the nearest clips first).
MAX_PIECES = 240
RANK: dict[str, int] = {"unchecked": 0, "not-found": 0, "partial": 1, "found": 2}
YES = re.compile(r"^\W*(?:span\s*)?(\d+)\W+(yes|no)\b", re.IGNORECASE | re.MULTILINE)


@dataclass
class Checker:
    """Checks the citations of one answer.

    Args:
        index: the index, read-only.
        embed: the ``embed`` role's client (ranks pieces holding as many key words).
    """

    index: IndexView
    embed: Client
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    _everywhere: dict[str, frozenset[str]] = field(default_factory=dict)

    def span(self, video_id: str) -> tuple[float, float]:
        """The part of the video the run saw (:meth:`IndexView.span`: its time window, if
        any, else the whole video)."""
        if video_id not in self.spans:
            self.spans[video_id] = self.index.span(video_id)
        return self.spans[video_id]

    def everywhere(self, video_id: str) -> frozenset[str]:
        """Every word the video says, shows or has detected, read once per video."""
        if video_id not in self._everywhere:
            end = self.span(video_id)[1]
            found: set[str] = set()
            for p in speech(self.index, video_id, 0.0, end):
                found |= held(p.text)
            for clip in self.index.clips(video_id, 0.0, end):
                for p in clip_pieces(clip):
                    if p.source != "picture":
                        found |= held(p.text)
            self._everywhere[video_id] = frozenset(found)
        return self._everywhere[video_id]

    def checkable(self, claim: Claim, video_ids: Sequence[str]) -> bool:
        """Whether ``claim`` can be checked by what the index holds: the question names speech
        or text, asks about the picture itself or not how something looks, or one of its key
        words is somewhere in the video (else it is ``unchecked`` until a vision model looks,
        :func:`look`)."""
        if claim.names_speech_or_text or claim.about_picture:
            return True
        if not claim.asks_seen:
            return True
        return any(claim.key_words & self.everywhere(v) for v in video_ids)

    def check(self, claims: Sequence[Claim], spans: Sequence[Evidence]) -> list[Citation]:
        """Each span checked for its best claim, and for every other claim it holds key words
        of; a quote is cited once, at the first span that holds it (two cited clips that share
        a sentence across their edge quote the same words at the same times)."""
        picture = any(c.about_picture for c in claims)
        per_span = [
            [p for p in pieces_in(self.index, s) if picture or p.source != "picture"] for s in spans
        ]
        texts = list(dict.fromkeys(p.text for ps in per_span for p in ps))[:MAX_PIECES]
        cosines = self._cosines([c.text for c in claims], texts)  # (claims, pieces)
        column = {t: i for i, t in enumerate(texts)}
        videos = list(dict.fromkeys(s.video_id for s in spans))
        open_ = [self.checkable(c, videos) for c in claims]
        kept: list[Citation] = []
        quoted: set[tuple[int, str, float, float, str, str]] = set()
        for span, pieces in zip(spans, per_span, strict=True):
            found = [
                self._best(k, claim, span, pieces, cosines[k], column, open_[k])
                for k, claim in enumerate(claims)
            ]
            best = max(range(len(found)), key=lambda k: (RANK[found[k].label], found[k].support))
            for k, c in enumerate(found):
                if k != best and RANK[c.label] == 0:
                    continue
                quote = (c.claim, c.video_id, c.t0, c.t1, c.source, c.text)
                if c.source and quote in quoted:
                    continue  # the same words at the same times, quoted for an earlier span
                quoted.add(quote)
                kept.append(c)
        return kept

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
        cosines: np.ndarray,  # (P,) for this claim
        column: dict[str, int],
        checkable: bool,
    ) -> Citation:
        """The citation of ``span`` for claim ``k`` (module docstring)."""
        cited = [span.t0, span.t1]
        if claim.video_id and span.video_id != claim.video_id:
            pieces = ()  # another video than the one the answer names
        scored = []
        for p in pieces:
            if p.source == "picture" and not claim.about_picture:
                continue
            matched = claim.key_words & held(_holds(claim, p))
            cosine = float(cosines[column[p.text]]) if p.text in column else 0.0
            scored.append((len(matched), p.t0 - p.t1, cosine, matched, p))
        if not scored or max(s[0] for s in scored) == 0:
            label = "not-found" if checkable else "unchecked"
            return Citation(span.video_id, span.t0, span.t1, cited, label, 0.0, claim=k)
        count, _, _, matched, piece = max(scored, key=lambda s: s[:3])
        label = "found" if count == len(claim.key_words) else "partial"
        t0, t1, quote = self.quote(claim, piece)
        return Citation(
            span.video_id,
            t0,
            t1,
            cited,
            label,
            round(count / len(claim.key_words), 3),
            piece.source,
            quote,
            k,
            surface(_holds(claim, piece), matched),
            notes=notes(claim, piece),
            speaker=piece.speaker,
        )

    def quote(self, claim: Claim, piece: Piece) -> tuple[float, float, str]:
        """The quote of ``piece`` for ``claim`` and its time: of speech, the words from the
        first matched key word to the last, at their own times with :data:`PAD_SECONDS`
        either side; else the piece at its own time. Clamped to the part of the video the run
        saw (a quote of ``--last 10s`` began up to 0.3 s before it), to the millisecond (a padded
        word time reads 4.93, not 4.930000000000001)."""
        t0, t1, text = piece.t0, piece.t1, piece.text
        if piece.words:
            words = [w[2] for w in piece.words]
            # Whisper splits "£40,000" into "£40" and ",000": a word with the part after it
            after = [*words[1:], ""]
            glued = [
                w + (n if n.startswith(",") else "") for w, n in zip(words, after, strict=True)
            ]
            hit = [i for i, w in enumerate(glued) if held(w) & claim.key_words]
            if hit:
                a, b = hit[0], hit[-1] + (glued[hit[-1]] != words[hit[-1]])
                t0 = piece.words[a][0] - PAD_SECONDS
                t1 = piece.words[b][1] + PAD_SECONDS
                text = spoken(w[2] for w in piece.words[a : b + 1])
        lo, hi = self.span(piece.video_id)
        t0, t1 = round(max(lo, min(t0, hi)), 3), round(max(lo, min(t1, hi)), 3)
        return t0, max(t0, t1), text


def _holds(claim: Claim, piece: Piece) -> str:
    """What ``claim``'s key words are looked for in: the piece's text (or values), and for a
    "who says …?" claim a speech segment's speaker too (``S1 (Dr Lee)``) where the segment
    says at least half of the words asked about."""
    says = claim.who and 2 * len(claim.who & held(piece.holds)) >= len(claim.who)
    return f"{piece.holds} {piece.speaker}" if says and piece.speaker else piece.holds


def statuses(claims: Sequence[Claim], citations: Sequence[Citation]) -> tuple[ClaimStatus, ...]:
    """Each claim's best label over its citations (``not-found`` for a claim cited nowhere,
    ``unchecked`` when every citation of it is)."""
    out: list[ClaimStatus] = []
    for k in range(len(claims)):
        mine = [c.label for c in citations if c.claim == k]
        if "found" in mine:
            out.append("found")
        elif "partial" in mine:
            out.append("partial")
        elif mine and all(label == "unchecked" for label in mine):
            out.append("unchecked")
        else:
            out.append("not-found")
    return tuple(out)


def support_of(citations: Sequence[Citation], status: Sequence[ClaimStatus], free: bool) -> float:
    """The answer's support: its best citation's share of key words found, or (``free``: a
    free-form answer) the mean of that over its checked claims."""
    best = [
        max((c.support for c in citations if c.claim == k), default=0.0)
        for k, s in enumerate(status)
        if s != "unchecked"
    ]
    if not best:
        return 0.0
    return sum(best) / len(best) if free else max(best)


def verdict(
    status: Sequence[ClaimStatus], citations: Sequence[Citation], policy: AbstainPolicy
) -> tuple[bool, str]:
    """Whether the answer abstains under ``policy``, and why (module docstring)."""
    if policy == "never":
        return False, ""
    if not status:
        return True, "the answer makes no statement to check"
    checked = [s for s in status if s != "unchecked"]
    if not checked:
        return False, ""
    if not citations:
        return True, "the answer cites no evidence"
    if all(s == "not-found" for s in checked):
        return True, "none of the answer's key words is said or shown where it cites"
    return False, ""


def verify(
    question: Question,
    answer: Answer,
    *,
    index: IndexView,
    embed: Client,
    looker: FrameLooker | None,
    policy: AbstainPolicy,
) -> Verification:
    """Check ``answer``'s citations for ``question`` (module docstring); ``looker``: a
    configured vision model's, which looks at the spans of claims the text did not find
    (None: no vision model, so visual claims are ``unchecked``)."""
    several = len(question.video_ids) > 1
    names = [index.video(v).name for v in question.video_ids] if several else []
    claims = claims_of(question, answer, names)
    spans = tuple(dict.fromkeys(answer.evidence))[:MAX_SPANS]
    checker = Checker(index, embed)
    citations = checker.check(claims, spans) if claims else []
    note = "" if looker is not None else "the cited frames were not looked at (no vision model)"
    if looker is not None and claims and spans:
        citations, note = look(looker, claims, spans, citations)
    status = statuses(claims, citations)
    support = support_of(citations, status, question.free)
    abstained, reason = verdict(status, citations, policy)
    unverified = "unchecked" in status
    return Verification(
        tuple(claims),
        tuple(citations),
        status,
        support,
        policy,
        abstained,
        unverified,
        reason,
        note=note,
    )


def look(
    looker: FrameLooker,
    claims: Sequence[Claim],
    spans: Sequence[Evidence],
    citations: list[Citation],
) -> tuple[list[Citation], str]:
    """The citations after a vision model looked at the spans the text found nothing in (one
    batched call), and a note on what was not done."""
    from vidagent.budget import BudgetExceeded, Stopped
    from vidagent.exceptions import MediaError, ProviderError
    from vidagent.models.base import ChatRequest, Message
    from vidagent.prompts import load_prompt

    unseen = [c for c in citations if c.label in ("not-found", "unchecked")]
    wanted = [s for s in spans if any((s.video_id, s.t0, s.t1) == _key(c) for c in unseen)]
    if not wanted:
        return citations, ""
    try:
        content = looker.content(wanted, "Span {n} ({t0:.1f}-{t1:.1f} s):")
        statement = " ".join(c.text for c in claims)
        prompt = load_prompt("verify_vision").replace("{statement}", statement)
        content.append(prompt.replace("{spans}", str(len(wanted))))
        request = ChatRequest((Message("user", tuple(content)),), max_tokens=200)
        reply = looker.client.chat(request).text
    except (BudgetExceeded, Stopped) as e:
        return citations, f"frames not looked at: {e}"
    except (MediaError, ProviderError) as e:
        return citations, f"frames not looked at: {type(e).__name__}: {e}"
    seen = {int(n): yes.lower() == "yes" for n, yes in YES.findall(reply)}
    if not seen:
        return citations, f"the vision model's reply named no span: {reply.strip()[:120]!r}"
    number = {(s.video_id, s.t0, s.t1): n for n, s in enumerate(wanted, 1)}
    out = []
    for c in citations:
        n = number.get(_key(c), 0)
        if c.label in ("not-found", "unchecked") and n in seen:
            if seen[n]:
                c = replace(
                    c, label="found", support=1.0, source="vision", text=reply.strip()[:200]
                )
            else:
                c = replace(c, label="not-found", source="vision")
        out.append(c)
    return out, ""


def _key(c: Citation) -> tuple[str, float, float]:
    return (c.video_id, c.cited[0], c.cited[1])
