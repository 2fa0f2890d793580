"""Multiple-choice answers are read from what models write, and never guessed."""

from __future__ import annotations

import pytest

from vidagent.agents.answer import extract_choice, format_options

OPTIONS = ["a technology documentary", "a cooking show", "a red car", "car"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("C", 2),
        ("(C)", 2),
        ("C.", 2),
        ("C) a red car", 2),
        ("**B**", 1),
        ("Answer: (D)", 3),
        ("The answer is B.", 1),
        ("Best option: A", 0),
        ("(A) A technology documentary", 0),
        ("After inspecting the frames, the chain holds the gate, so (D).", 3),
        ("It is a cooking show", 1),
        ("a red car", 2),  # "car" is inside "a red car": the longer option wins
        ("A man walks in", None),  # the article, not option A
        ("(A) or (B)", None),  # two options: ambiguous
        ("Answer: A, or maybe answer: B", None),
        ("I cannot tell from the frames", None),
        ("E", None),  # only four options
        ("", None),
    ],
)
def test_extract_choice(text: str, expected: int | None) -> None:
    assert extract_choice(text, OPTIONS) == expected


def test_no_options_means_no_choice() -> None:
    assert extract_choice("A", []) is None


def test_format_options() -> None:
    assert format_options(["x", "y"]) == "(A) x\n(B) y"
