"""Contact sheets: frames laid out in a grid, each with a label (its time) drawn under it.

Pure image work on arrays the caller decoded (or read from the index's thumbnails): it knows
nothing of where the frames came from. Labels are drawn with OpenCV's Hershey font, which has
ASCII glyphs only: a letter with an accent is drawn without it (``réunion``: ``reunion``), and
any other character as ``?`` (a CJK name's characters each).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence

import cv2
import numpy as np

_BACKGROUND = 24  # near-black
_BLANK = 72  # a cell without a frame: grey, apart from the background
_GAP = 6
_LABEL_SCALE = 0.45
_TITLE_SCALE = 0.55
_TITLE_LINE = 20  # pixels from one title line to the next


def contact_sheet(
    tiles: Sequence[tuple[str, np.ndarray | None]],
    *,
    columns: int | None = None,
    tile_width: int = 320,
    title: str = "",
    blank: str = "no picture",
) -> np.ndarray:
    """A grid of ``tiles`` (``(label, rgb)`` pairs, in reading order) with each label drawn
    under its frame, and ``title`` above the grid. A tile without a frame (``None``) is a grey
    cell saying ``blank``.

    Frames of any size are scaled to ``tile_width`` pixels wide and letterboxed into one cell
    height (the tallest aspect ratio among them), so portrait and landscape frames mix.

    Args:
        tiles: labels and frames.  # each (H, W, 3) uint8 RGB, or None
        columns: frames per row (default: about a square grid, at most 6; never more than
            there are frames).
        tile_width: the width of each cell's picture.
        title: a line above the grid, broken at its spaces into lines as wide as the grid
            (one tile's width cut off its end).

    Returns:
        The sheet.  # (H, W, 3) uint8 RGB

    Raises:
        ValueError: no tiles.
    """
    if not tiles:
        raise ValueError("a contact sheet needs at least one frame")
    cols = min(columns, len(tiles)) if columns else min(6, math.ceil(math.sqrt(len(tiles))))
    rows = math.ceil(len(tiles) / cols)
    framed = [rgb for _, rgb in tiles if rgb is not None]
    aspect = max((rgb.shape[0] / max(1, rgb.shape[1]) for rgb in framed), default=9 / 16)
    pic_h = max(16, round(tile_width * min(aspect, 2.0)))
    label_h = 22
    cell_w, cell_h = tile_width + _GAP, pic_h + label_h + _GAP
    lines = _wrapped(title, cols * cell_w - _GAP) if title else []
    title_h = 8 + _TITLE_LINE * len(lines) if lines else 0
    sheet = np.full(
        (title_h + rows * cell_h + _GAP, cols * cell_w + _GAP, 3), _BACKGROUND, np.uint8
    )
    for k, line in enumerate(lines):
        _text(sheet, line, (_GAP, 20 + _TITLE_LINE * k), _TITLE_SCALE)
    for i, (label, rgb) in enumerate(tiles):
        r, c = divmod(i, cols)
        x, y = _GAP + c * cell_w, title_h + _GAP + r * cell_h
        if rgb is None:
            pic = np.full((pic_h, tile_width, 3), _BLANK, np.uint8)  # (h, w, 3) uint8
            _text(pic, blank, (8, pic_h // 2 + 5), _LABEL_SCALE)
        else:
            pic = _fit(rgb, tile_width, pic_h)  # (h, w, 3) uint8
        ox, oy = x + (tile_width - pic.shape[1]) // 2, y + (pic_h - pic.shape[0]) // 2
        sheet[oy : oy + pic.shape[0], ox : ox + pic.shape[1]] = pic
        _text(sheet, label, (x + 2, y + pic_h + 16), _LABEL_SCALE)
    return sheet


def _fit(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    h, w = rgb.shape[:2]
    scale = min(width / max(1, w), height / max(1, h))
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(np.ascontiguousarray(rgb), size, interpolation=cv2.INTER_AREA)


def _ascii(text: str) -> str:
    """``text`` as the Hershey font can draw it (module docstring)."""
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
        else:
            bare = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode("ascii")
            out.append(bare or "?")
    return "".join(out)


def _width(text: str, scale: float) -> int:
    return int(cv2.getTextSize(_ascii(text), cv2.FONT_HERSHEY_SIMPLEX, scale, 1)[0][0])


def _wrapped(title: str, width: int) -> list[str]:
    """``title`` in lines at most ``width`` pixels wide, broken at spaces."""
    lines: list[str] = []
    for word in title.split(" "):
        if lines and _width(f"{lines[-1]} {word}", _TITLE_SCALE) <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return [line.strip() for line in lines if line.strip()]


def _text(img: np.ndarray, text: str, at: tuple[int, int], scale: float) -> None:
    cv2.putText(
        img, _ascii(text), at, cv2.FONT_HERSHEY_SIMPLEX, scale, (235, 235, 235), 1, cv2.LINE_AA
    )
