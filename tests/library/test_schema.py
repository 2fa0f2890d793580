"""The typed readers of the clips table's JSON columns: ``ocr_lines`` and ``facts``."""

from __future__ import annotations

import json

import pytest

from vidagent.library.schema import ClipRow, DescriberFacts, spoken


def test_describer_facts_round_trip_keeping_what_was_measured_as_none() -> None:
    facts = DescriberFacts(
        people=0,
        faces=0,
        lines=(),  # OCR ran and read nothing readable: a measurement
        colours=(("blue", 0.6), ("white", 0.3)),
        brightness="mid",
        brightness_level=0.52,
        cuts=(),
        speech="",
        picture="Picture: mostly blue (60%), white (30%); brightness 0.52 (mid).",
        report=("Picture: mostly blue (60%), white (30%); brightness 0.52 (mid).",),
    )
    stored = json.loads(facts.to_json())
    assert stored["lines"] == [] and stored["speech"] == "" and stored["people"] == 0
    assert "motion" not in stored and "objects" not in stored  # not measured: left out
    assert stored["colours"] == [["blue", 0.6], ["white", 0.3]]
    assert DescriberFacts.from_json(facts.to_json()) == facts
    assert DescriberFacts().to_json() != "{}"  # a describer's facts are never "none recorded"


def test_no_facts_and_facts_of_a_later_version() -> None:
    assert ClipRow("v", 0, 0.0, 5.0).describer_facts() is None
    assert DescriberFacts.from_json("{}") is None
    later = DescriberFacts.from_json('{"people": 2, "gaze": "left"}')
    assert later == DescriberFacts(people=2)
    with pytest.raises(ValueError, match="JSON object"):
        DescriberFacts.from_json("[1]")


def test_ocr_line_times_fall_back_to_the_clip_only_where_not_recorded() -> None:
    timed = ClipRow(
        "v", 1, 5.0, 10.0, ocr_text="OPEN\nDAY", ocr_lines='[{"text": "OPEN", "t0": 6, "t1": 8}]'
    )
    assert timed.ocr_times_recorded and timed.ocr_line_times() == [("OPEN", 6.0, 8.0)]
    untimed = ClipRow("v", 1, 5.0, 10.0, ocr_text="OPEN  DAY\n\n x7 ")
    assert not untimed.ocr_times_recorded
    assert untimed.ocr_line_times() == [("OPEN DAY", 5.0, 10.0), ("x7", 5.0, 10.0)]
    nothing = ClipRow("v", 1, 5.0, 10.0)
    assert nothing.ocr_times_recorded and nothing.ocr_line_times() == []


@pytest.mark.parametrize(
    ("words", "text"),
    [
        (["About", "£40", ",000", "paid."], "About £40,000 paid."),  # faster-whisper's split
        (["It", "is", "3", ".5", "metres"], "It is 3.5 metres"),
        (["up", "50", "%", "(", "roughly", ")"], "up 50% (roughly)"),
        (["", " Good", "morning,", "all."], "Good morning, all."),
        ([], ""),
    ],
)
def test_spoken_joins_words_as_they_were_said(words: list[str], text: str) -> None:
    assert spoken(words) == text
