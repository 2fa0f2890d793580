"""Risk–coverage: how accuracy trades against abstaining, from each answer's own score.

A run that may abstain is judged at every threshold, not one: rank the answers by how sure they
are, keep the top share (the **coverage**) and take the **risk** of those kept, one minus the
points they earn over the points they could (so graded scores such as IoU count as earned).
The curve is risk against coverage at each distinct score; its area, **AURC**, is the mean risk
over the coverage levels ``1/n … n/n`` (Geifman et al., 2019), lower is better. Answers with an
equal score are kept or dropped together: each of them is charged the risk of the whole tie.

Each answer's score is the ``support`` its citation check (:mod:`vidagent.agents.citations`)
recorded in its row where
the row has one, else the strategy's own ``confidence`` (VideoAgent2's, EEA's); an answer with
neither is left out, and the count says how many are in. Rows with an error are left out (a
harness or provider failure is not an answer); an unparsable answer is in, and wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidagent.bench.base import Outcome


@dataclass(frozen=True)
class RiskCoverage:
    """A run's risk–coverage curve and its area.

    Attributes:
        source: the row field the answers are ranked by (``support`` or ``confidence``).
        answers: answers on the curve.
        points: ``(coverage, risk)`` at each distinct score, most sure first.
        aurc: the area under the curve (mean risk over the coverage levels).
    """

    source: str
    answers: int
    points: tuple[tuple[float, float], ...]
    aurc: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "answers": self.answers,
            "aurc": round(self.aurc, 6),
            "points": [[round(c, 6), round(r, 6)] for c, r in self.points],
        }


def answer_score(row: Mapping[str, Any]) -> tuple[str, float] | None:
    """The field an answer is ranked by and its value: ``support``, else ``confidence``."""
    for key in ("support", "confidence"):
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return key, float(value)
    return None


def risk_coverage(
    outcomes: Sequence[Outcome], rows: Mapping[str, Mapping[str, Any]]
) -> RiskCoverage | None:
    """The curve over the scored answers whose rows carry a score; ``None`` when none does."""
    ranked: list[tuple[float, float, float]] = []  # (score, earned, possible)
    sources: set[str] = set()
    for o in outcomes:
        row = rows.get(o.id)
        if row is None or row.get("error") is not None or o.possible <= 0:
            continue
        found = answer_score(row)
        if found is None:
            continue
        sources.add(found[0])
        ranked.append((found[1], o.earned, o.possible))
    if not ranked:
        return None
    ranked.sort(key=lambda r: -r[0])
    n = len(ranked)
    points: list[tuple[float, float]] = []
    area, earned, possible, i = 0.0, 0.0, 0.0, 0
    while i < n:
        j = i
        while j < n and ranked[j][0] == ranked[i][0]:  # a tie is kept or dropped whole
            earned += ranked[j][1]
            possible += ranked[j][2]
            j += 1
        risk = 1.0 - earned / possible
        points.append((j / n, risk))
        area += risk * (j - i)
        i = j
    source = "support" if sources == {"support"} else "+".join(sorted(sources))
    return RiskCoverage(source, n, tuple(points), area / n)
