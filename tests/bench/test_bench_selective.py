"""Risk–coverage curves and AURC from each answer's support or confidence."""

from __future__ import annotations

from typing import Any

import pytest

from vidagent.bench.base import Outcome
from vidagent.bench.selective import risk_coverage


def _run(*answers: tuple[float | None, float]) -> tuple[list[Outcome], dict[str, Any]]:
    """Outcomes and rows from (support, earned) pairs, one point possible each."""
    outcomes = [Outcome(str(i), earned) for i, (_, earned) in enumerate(answers)]
    rows = {str(i): {"id": str(i), "error": None, "support": s} for i, (s, _) in enumerate(answers)}
    return outcomes, rows


def _flat(points: Any) -> list[float]:
    return [x for point in points for x in point]


def test_the_curve_keeps_the_surest_answers_first() -> None:
    rc = risk_coverage(*_run((0.9, 1), (0.8, 0), (0.7, 1), (0.6, 0)))
    assert rc is not None and rc.source == "support" and rc.answers == 4
    assert _flat(rc.points) == pytest.approx(
        _flat(((0.25, 0.0), (0.5, 0.5), (0.75, 1 / 3), (1.0, 0.5)))
    )
    assert rc.aurc == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)


def test_a_better_ranking_has_a_smaller_area_and_the_last_point_is_the_error_rate() -> None:
    good = risk_coverage(*_run((0.9, 1), (0.8, 1), (0.7, 0), (0.6, 0)))
    bad = risk_coverage(*_run((0.9, 0), (0.8, 0), (0.7, 1), (0.6, 1)))
    assert good is not None and bad is not None
    assert good.aurc == pytest.approx((0 + 0 + 1 / 3 + 0.5) / 4) and good.aurc < bad.aurc
    assert good.points[-1] == bad.points[-1] == (1.0, 0.5)


def test_tied_answers_are_kept_or_dropped_together() -> None:
    rc = risk_coverage(*_run((0.5, 1), (0.5, 0), (0.2, 0)))
    assert rc is not None
    assert _flat(rc.points) == pytest.approx(_flat(((2 / 3, 0.5), (1.0, 2 / 3))))
    assert rc.aurc == pytest.approx((0.5 + 0.5 + 2 / 3) / 3)


def test_graded_points_errors_and_unscored_answers() -> None:
    outcomes = [Outcome("a", 0.75), Outcome("b", 0.25), Outcome("c", 1.0), Outcome("d", 0.0)]
    rows = {
        "a": {"error": None, "confidence": 0.9},  # no citation check: the strategy's confidence
        "b": {"error": None, "confidence": 0.1},
        "c": {"error": "boom", "confidence": 1.0},  # a failure is not an answer
        "d": {"error": None},  # nothing to rank it by
    }
    rc = risk_coverage(outcomes, rows)
    assert rc is not None and rc.source == "confidence" and rc.answers == 2
    assert _flat(rc.points) == pytest.approx(_flat(((0.5, 0.25), (1.0, 0.5))))
    assert risk_coverage(outcomes, {"d": {"error": None}}) is None
