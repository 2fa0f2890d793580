"""Contact sheets as images: the title a narrow sheet can show, and names the font cannot draw."""

from __future__ import annotations

import numpy as np

from vidagent.media import sheet
from vidagent.media.sheet import contact_sheet

TITLE = "wannaworktogether.mp4  00:00:40-00:00:41  (ab12cd34)  recorded 2026-05-01T09:30:00Z"


def test_a_title_wider_than_the_sheet_is_broken_into_lines_it_shows_whole() -> None:
    # one tile is 332 pixels wide: the title was cut at "00:00:40-0", losing the video's id
    # and when it was recorded
    frame = np.zeros((90, 160, 3), np.uint8)
    one = contact_sheet([("00:00:40", frame)], title=TITLE)
    wide = contact_sheet([("00:00:40", frame)] * 4, columns=4, title=TITLE)
    lines = sheet._wrapped(TITLE, one.shape[1] - 2 * sheet._GAP)
    assert " ".join(" ".join(lines).split()) == " ".join(TITLE.split())  # every word shown
    assert len(lines) > 1
    assert all(sheet._width(line, sheet._TITLE_SCALE) <= one.shape[1] for line in lines)
    assert one.shape[0] - wide.shape[0] == sheet._TITLE_LINE * (len(lines) - 1)
    # drawn where the lines are: text pixels in the second line's band
    band = one[20 + 6 : 20 + sheet._TITLE_LINE + 2]
    assert (band > 150).any()


def test_a_name_the_font_cannot_draw_keeps_its_letters_where_it_can() -> None:
    # "réunion 会议.mp4" was drawn "r?union ??.mp4"
    assert sheet._ascii("réunion 会议.mp4") == "reunion ??.mp4"
    assert sheet._ascii("Ünïcödé — ok") == "Unicode ? ok"
