"""The episodic reward of AgentCVR §3.4: ``R_total = R_ans + R_fmt``, in {0, 0.1, 1.0, 1.1}.

- ``R_fmt = 0.1`` when every invocation satisfied the format constraints: every master turn's
  *first* reply parsed as one valid action (:func:`~vidagent.agents.cvr.protocol.parse_master_action`:
  one JSON object, a known action, typed parameters, video indices in range, start < end, at
  most 128 frames, observe-only tasks never asking for captions) and the episode ended with an
  answer in the task's format. A reply rejected and retried, an environment error (a request the
  simulator could not serve), a format failure or an episode cut short by the context limit all
  make it 0. This is the spec's stricter reading (§3.4 [S], §9 #9) of the paper's sentence; the
  released code only checked tool names and JSON arguments.
- ``R_ans = 1`` when the final answer equals the script's: letters, sorted letter sets and
  orders compare exactly after the master protocol's normalisation; an FSA interval counts when
  its IoU with the answer is at least 0.5 (spec §9 #8: exact float equality is unusable).

**Turn limits (T_max = 20, T_tol = 10; the paper leaves the tolerance zone undefined).** The
master loop (:func:`~vidagent.agents.cvr.protocol.run_master`) implements them: from turn
T_tol + 1 each observation carries the turn count and a request to answer once the evidence
suffices; turn T_max accepts only an answer. The reward adds no penalty inside the zone: an
answer on turn 15 earns what an answer on turn 3 does, and a valid answer given on the forced
last turn keeps R_fmt (the master complied); an episode that ends without an answer (three
rejected replies, even on the forced turn) earns 0. Turn budgets are thus learned only through
reaching an answer at all, as in the paper, where the zone exists "to prevent infinite looping".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vidagent.geometry import interval_iou

FORMAT_REWARD = 0.1
IOU_THRESHOLD = 0.5


@dataclass(frozen=True)
class Reward:
    """One trajectory's reward and its parts."""

    answer: float
    format: float

    @property
    def total(self) -> float:
        return self.answer + self.format


def answer_reward(predicted: str | None, truth: str, task: str) -> float:
    """1.0 when the (normalised) predicted answer is the script's answer, else 0.0."""
    if predicted is None:
        return 0.0
    if task.upper() == "FSA":
        try:
            p, t = json.loads(predicted), json.loads(truth)
        except (json.JSONDecodeError, TypeError):
            return 0.0
        return 1.0 if interval_iou((p[0], p[1]), (t[0], t[1])) >= IOU_THRESHOLD else 0.0
    norm = predicted.strip().upper().replace(" ", "")
    return 1.0 if norm == truth.strip().upper().replace(" ", "") else 0.0


def format_ok(episode: Any) -> bool:
    """Every turn's first reply was a valid action, nothing failed, and an answer ended it."""
    if episode.final_answer is None or episode.reason not in ("answered", "forced_answer"):
        return False
    return all(not t.errors and t.tool_error is None for t in episode.turns)


def episode_reward(episode: Any | None, script: dict[str, Any]) -> Reward:
    """The reward of a finished episode on ``script`` (None: an episode cut short: 0)."""
    if episode is None:
        return Reward(0.0, 0.0)
    fmt = FORMAT_REWARD if format_ok(episode) else 0.0
    return Reward(answer_reward(episode.final_answer, script["answer"], script["task"]), fmt)
