"""Shared helpers for the benchmark tests: where the real annotation files live."""

from __future__ import annotations

from pathlib import Path

import pytest

#: The real annotation files (NExT-QA val, HGA's predictions, EgoSchema's subset answers).
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks"


@pytest.fixture
def shared_benchmarks() -> Path:
    """The shared benchmark folder; the test skips when this checkout has none."""
    if not (SHARED / "nextqa" / "val.csv").is_file():
        pytest.skip(f"real benchmark files not found at {SHARED}")
    return SHARED
