"""Contact sheets: frames laid out in a grid, each with a label (its time) drawn under it.

Pure image work on arrays the caller decoded (or read from the index's thumbnails): it knows
nothing of where the frames came from. Labels are drawn with OpenCV's Hershey font, which has
ASCII glyphs only; other characters are replaced with ``?``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

_BACKGROUND = 24  # near-black
_BLANK = 72  # a cell without a frame: grey, apart from the background
_GAP = 6
_LABEL_SCALE = 0.45
_TITLE_SCALE = 0.55


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
        title: a line above the grid.

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
    title_h = 28 if title else 0
    sheet = np.full(
        (title_h + rows * cell_h + _GAP, cols * cell_w + _GAP, 3), _BACKGROUND, np.uint8
    )
    if title:
        _text(sheet, title, (_GAP, 20), _TITLE_SCALE)
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


def _text(img: np.ndarray, text: str, at: tuple[int, int], scale: float) -> None:
    ascii_text = text.encode("ascii", "replace").decode("ascii")
    cv2.putText(
        img, ascii_text, at, cv2.FONT_HERSHEY_SIMPLEX, scale, (235, 235, 235), 1, cv2.LINE_AA
    )
