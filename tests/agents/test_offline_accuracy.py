"""The offline default's accuracy floor: the ``retrieval`` baseline over the hand-checked
multiple-choice questions about the real clips (tests/data/offline_mcq, LVBench's format), with
the real index of the embedded models. A change that loses speech, on-screen text or the
evidence scoring fails here; ``benchmarks/offline_accuracy.py`` prints the full table."""

from __future__ import annotations

from pathlib import Path

import pytest
from realmedia import get_clip

from vidagent.app import Session
from vidagent.bench.tasks import lvbench
from vidagent.config import load_settings

pytestmark = [pytest.mark.models, pytest.mark.realmedia]

DATA = Path(__file__).resolve().parents[1] / "data" / "offline_mcq"
#: Today's code answers 11 of the 13 (it misses a count and a lighting question); the floor
#: leaves one question of slack for a different CPU's ASR or OCR.
FLOOR = 10
#: Answered from speech or on-screen text: these must stay right.
SPOKEN = ("ww-topic", "ww-org", "ww-own", "ww-cost", "mm-book", "mm-judge")


def test_retrieval_meets_its_floor_on_the_real_clips(real_library: Path, tmp_path: Path) -> None:
    clips = [get_clip(n) for n in ("wannaworktogether.mp4", "vtest.avi", "Megamind.avi")]
    loaded = lvbench.load(DATA, videos=clips[0].parent)
    assert not loaded.missing and len(loaded.samples) == 13
    settings = load_settings({"home": tmp_path, "cache": "off"}, env={})
    right, spans = set(), {}
    with Session(settings, library=real_library) as session:  # indexed once for the run
        for sample in loaded.samples:
            result = session.ask(
                sample.videos[0],
                sample.question,
                options=sample.options,
                strategy="retrieval",
                trace=False,
            )
            answer = result.answer
            assert answer is not None
            if answer.choice == sample.answer:
                right.add(sample.id)
                spans[sample.id] = [(e.t0, e.t1) for e in answer.evidence]
    assert set(SPOKEN) <= right, f"wrong: {sorted(set(SPOKEN) - right)}"
    assert len(right) >= FLOOR, f"{len(right)} of 13 right: {sorted(right)}"
    # the narrator's "working together to build a richer … culture" is 40-45 s
    assert (40.0, 45.0) in spans["ww-topic"]
