"""vidagent.geometry: the one copy of interval and box IoU, IoP, merge and unit rows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import vidagent
from vidagent.geometry import (
    box_iou,
    covered_length,
    interval_iop,
    interval_iou,
    intervals_iou,
    merge_intervals,
    unit_rows,
)

PACKAGE = Path(vidagent.__file__).parent


def test_interval_iou_is_overlap_over_the_joint_span() -> None:
    assert interval_iou((0, 10), (5, 15)) == pytest.approx(5 / 15)
    assert interval_iou((2, 4), (0, 10)) == pytest.approx(0.2)
    assert interval_iou((0, 1), (2, 3)) == 0.0  # disjoint
    assert interval_iou((5, 3), (0, 10)) == 0.0  # reversed: no extent
    assert interval_iou((1, 1), (1, 1)) == 0.0  # empty union, no division error


def test_interval_iop_is_overlap_over_the_prediction() -> None:
    assert interval_iop((2, 4), (0, 10)) == 1.0  # inside the gold span
    assert interval_iop((0, 10), (2, 4)) == pytest.approx(0.2)
    assert interval_iop((8, 12), (0, 10)) == pytest.approx(0.5)
    assert interval_iop((3, 3), (0, 10)) == 0.0


def test_merge_joins_touching_and_overlapping_intervals_in_order() -> None:
    assert merge_intervals([(5, 7), (0, 2), (2, 3), (6, 9)]) == [(0.0, 3.0), (5.0, 9.0)]
    assert covered_length([(0, 2), (1, 3), (10, 11)]) == 4.0


def test_intervals_iou_counts_each_second_once() -> None:
    gold = [(0, 4), (2, 6)]  # covers 0-6
    pred = [(3, 8), (10, 12)]  # covers 5 + 2 seconds
    assert intervals_iou(gold, pred) == pytest.approx(3 / (6 + 7 - 3))
    assert intervals_iou([(0, 1)], [(0, 1)]) == 1.0
    assert intervals_iou([], []) == 0.0


def test_box_iou() -> None:
    assert box_iou((0, 0, 2, 2), (1, 1, 3, 3)) == pytest.approx(1 / 7)
    assert box_iou((0, 0, 1, 1), (0, 0, 1, 1)) == 1.0
    assert box_iou((0, 0, 1, 1), (2, 2, 3, 3)) == 0.0


def test_unit_rows_scales_to_length_one_and_keeps_zero_rows() -> None:
    rows = unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))  # (2, 2)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    assert unit_rows(np.ones((1, 4)), np.float64).dtype == np.float64


#: Functions outside geometry.py whose names say they compute an overlap or a unit row, each
#: allowed only as a named wrapper that calls geometry (an official scorer's own name).
WRAPPERS = {
    ("bench/tasks/videozerobench.py", "tiou"),  # the official tiou_multi
    ("bench/tasks/timelens.py", "spans_iou"),  # compute_metrics.py's or TimeLens2's IoU
}
GEOMETRY_NAME = re.compile(r"(^|_)(t?iou|iop|unit_rows|merge_intervals)$|^_unit$")


def test_no_module_but_geometry_defines_its_own_iou_or_unit_rows() -> None:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "geometry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and GEOMETRY_NAME.search(node.name):
                found.add((path.relative_to(PACKAGE).as_posix(), node.name))
    assert found == WRAPPERS
