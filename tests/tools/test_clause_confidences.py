"""Reading the per-clause confidences a captioning model writes (VideoAgent2 appendix A.1)."""

from __future__ import annotations

import pytest

from vidagent.tools.perception import Clause, mean_confidence, parse_clause_confidences


def test_the_papers_own_example() -> None:
    caption = (
        "The image shows a small kitchen counter with a kettle (confidence=0.94),\n"
        "a round black electronic device (confidence=0.85), a loaf of bread (confidence=0.73),\n"
        "and some cleaning supplies (confidence=0.95). There is a trash can on the floor\n"
        "(confidence=0.85) and a blue tiled backsplash (confidence=0.62)."
    )
    assert parse_clause_confidences(caption) == [
        Clause("The image shows a small kitchen counter with a kettle", 0.94),
        Clause("a round black electronic device", 0.85),
        Clause("a loaf of bread", 0.73),
        Clause("and some cleaning supplies", 0.95),
        Clause("There is a trash can on the floor", 0.85),
        Clause("and a blue tiled backsplash", 0.62),
    ]


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("a man walks (confidence: 0.8).", 0.8),
        ("a man walks [0.8].", 0.8),
        ("a man walks (0.8)", 0.8),
        ("a man walks (Confidence Score = 0.8)", 0.8),
        ("a man walks (conf 0.8)", 0.8),
        ("a man walks {confidence=.8}", 0.8),
        ("a man walks, confidence: 0.8", 0.8),
        ("a man walks (confidence=80%)", 0.8),
        ("a man walks (80%)", 0.8),
        ("a man walks (confidence=80)", 0.8),
        ("a man walks (confidence = 1)", 1.0),
        ("a man walks (CONFIDENCE=0)", 0.0),
    ],
)
def test_formats_models_write_instead(caption: str, expected: float) -> None:
    assert parse_clause_confidences(caption) == [Clause("a man walks", expected)]


def test_list_numbers_and_references_are_not_confidences() -> None:
    clauses = parse_clause_confidences("Two people [1] stand by (2) a door (confidence=0.7).")
    assert clauses == [Clause("Two people [1] stand by (2) a door", 0.7)]


def test_out_of_range_values_are_not_confidences() -> None:
    clauses = parse_clause_confidences("a sign reads 2024 (confidence=250) (0.4)")
    assert clauses == [Clause("a sign reads 2024 (confidence=250)", 0.4)]


def test_text_after_the_last_confidence_keeps_no_confidence() -> None:
    clauses = parse_clause_confidences("A red car (confidence=0.9). Maybe rain in the distance.")
    assert clauses == [Clause("A red car", 0.9), Clause("Maybe rain in the distance", None)]
    assert mean_confidence(clauses) == pytest.approx(0.9)


def test_a_caption_without_confidences() -> None:
    clauses = parse_clause_confidences("A kitchen with a kettle.")
    assert clauses == [Clause("A kitchen with a kettle", None)]
    assert mean_confidence(clauses) is None
    assert parse_clause_confidences("") == []


def test_mean_over_clauses() -> None:
    clauses = parse_clause_confidences("a (confidence=0.9), b (confidence=0.5), c [0.7]")
    assert [c.text for c in clauses] == ["a", "b", "c"]
    assert mean_confidence(clauses) == pytest.approx(0.7)
