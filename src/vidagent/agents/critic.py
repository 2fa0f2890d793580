"""The critic, the answer's reader: before an answer is returned, a model reads its cited
moments and says, of each, whether it answers the question with this answer, and of the
whole whether it agrees; on a disagreement the strategy gets one more bounded round with the
reader's note.

It runs where a reader is configured: with ``critic=auto`` when a vision model is (it is shown
two frames of each cited span beside the quotes), with ``critic=on`` also with a text model
(the ``llm``: it reads the quotes alone); never for a published configuration
(:meth:`vidagent.agents.base.Agent.reader`). It is one call (at most five moments, the frames
through the question's :class:`~vidagent.agents.looker.FrameLooker`, so the frame budget
holds), whose cost is in the run's totals. Its reply gives ``MOMENT <n>: answers`` or ``does
not answer`` per moment (recorded as each citation's ``reader``), then ``VERDICT: agree`` or
``disagree`` and a ``NOTE:``. A reply without a verdict, a failed call or a spent budget
leaves the answer as it is (the record says why).

The second round is the same strategy answering again in a new run under the first (its events
carry their own run id), asked the question followed by :data:`SECOND_ROUND` with the earlier
answer and the note; it is bounded by :data:`ROUND_STEPS` steps and by what is left of the
question's budget (the meter is the question's). Its answer is checked like the first, read by
the reader in one more call, and is the one returned; where the reader disagrees with it too,
it abstains (:data:`READER_ABSTAINS`) under the abstain policy, as an answer the word check
finds nowhere does; a text reader cannot see, so an answer with a claim about what is seen
(unverified: no vision model) is not withheld by it. One disagreement may be the reader's mistake, and the second round lets
the strategy look again; two mean the strategy found nothing the reader accepts, which is
what abstention is for (a distractor said elsewhere in the video is "found" by the words).
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from vidagent.agents.types import Question, Review
from vidagent.tools.base import Evidence

if TYPE_CHECKING:
    from vidagent.agents.looker import FrameLooker
    from vidagent.agents.run import Run
    from vidagent.agents.types import Answer, Verification

#: Steps the strategy's second round may take.
ROUND_STEPS = 3
#: Moments shown to the reader, at most.
MOMENTS = 5
SECOND_ROUND = (
    "\n\nAn earlier answer to this question was: {answer}\n"
    "A reviewer who looked at the cited frames and text disagreed: {note}\n"
    "Check again and give your final answer."
)
#: Why an answer abstains when the reader disagreed with it and, after the second round, with
#: the strategy's second answer too.
READER_ABSTAINS = "the reader disagreed with the answer, and with the strategy's second answer"
SEEN = "The frames above are from the moments the answer cites."
UNSEEN = "You cannot see the video: read what its index holds at each moment."
VERDICT = re.compile(r"VERDICT\s*:\s*\**\s*(agree|disagree)", re.IGNORECASE)
NOTE = re.compile(r"NOTE\s*:\s*(.+)", re.IGNORECASE | re.DOTALL)
MOMENT = re.compile(
    r"MOMENT\s*(\d+)\s*:\s*\**\s*(answers|does\s+not\s+answer)", re.IGNORECASE | re.MULTILINE
)


def _moments(v: Verification, spans: list[Evidence]) -> str:
    lines = []
    for n, s in enumerate(spans, 1):
        mine = [c for c in v.citations if Evidence(c.video_id, *c.cited) == s]
        for c in mine[:1]:
            said = f' {c.source}: "{c.text}"' if c.source else " nothing of the answer here"
            lines.append(f"{n}. {c.t0:.1f}-{c.t1:.1f} s ({c.label}){said}")
    return "\n".join(lines) or "- (no citations)"


def review(question: Question, answer: Answer, looker: FrameLooker) -> Review:
    """One reader call on ``answer`` (its verification must be set)."""
    from vidagent.budget import BudgetExceeded, Stopped
    from vidagent.exceptions import MediaError, ProviderError
    from vidagent.models.base import ChatRequest, Message
    from vidagent.prompts import load_prompt

    v = answer.verification
    assert v is not None
    spans = shown(v)
    try:
        content = looker.content(spans, "Moment {n} ({t0:.1f}-{t1:.1f} s):") if looker.sees else []
        if not looker.sees:
            looker.meter.check()
        prompt = (
            load_prompt("critic")
            .replace("{seen}", SEEN if looker.sees else UNSEEN)
            .replace("{question}", question.prompt)
            .replace("{answer}", answer.text)
            .replace("{citations}", _moments(v, spans))
        )
        # a text reader gets a plain message: servers whose chat template reads a string (the
        # llama.cpp server's) refuse a list of parts
        message = Message("user", (*content, prompt)) if content else Message("user", prompt)
        request = ChatRequest((message,), max_tokens=400)
        reply = looker.client.chat(request).text
    except (BudgetExceeded, Stopped) as e:
        return Review("none", f"not reviewed: {e}")
    except (MediaError, ProviderError) as e:
        return Review("none", f"not reviewed: {type(e).__name__}: {e}")
    moments = {}
    for n, said in MOMENT.findall(reply):
        if 1 <= int(n) <= len(spans):
            moments[int(n)] = "answers" if said.lower() == "answers" else "does-not-answer"
    verdict = VERDICT.search(reply)
    note = NOTE.search(reply)
    said = (note.group(1) if note else reply).strip()[:500]
    if verdict is None:
        return Review("none", f"the reviewer gave no verdict: {said[:200]!r}", moments=moments)
    return Review(verdict.group(1).lower(), said, moments=moments)


def with_reader(v: Verification, said: Review) -> Verification:
    """``v`` with the reader's verdict on each moment set on its citations."""
    spans = shown(v)
    number = {s: n for n, s in enumerate(spans, 1)}
    citations = tuple(
        dataclasses.replace(c, reader=said.moments.get(number.get(key, 0), ""))
        for c in v.citations
        for key in [Evidence(c.video_id, *c.cited)]
    )
    return dataclasses.replace(v, citations=citations)


def shown(v: Verification) -> list[Evidence]:
    """The moments shown to the reader: ``v``'s distinct cited spans, the first
    :data:`MOMENTS`."""
    return list(dict.fromkeys(Evidence(c.video_id, *c.cited) for c in v.citations))[:MOMENTS]


def second_round(run: Run, answer: Answer, note: str) -> Run:
    """The run of the strategy's one more round: a child of ``run`` asked the question with
    the earlier answer and the note, bounded by :data:`ROUND_STEPS` steps."""
    q = run.question
    asked = q.text + SECOND_ROUND.format(answer=answer.text, note=note)
    child = run.child("critic_round", note=note)
    child.question = Question(asked, q.video_ids, q.options, q.task)
    child.step_limit = ROUND_STEPS
    child.step_base = run.meter.steps
    return child
