"""Contact sheets of a video or a span (``vidagent sheet``), and the frames they are made of.

Frames come from the index's stored thumbnails (the ``frames`` table) where they cover the
span: every point the sheet shows has a thumbnail within half a spacing of it. Points without
one are decoded from the source file; when the source is gone, the thumbnails there are
used as they are, and a span with none is an error that says so. A point of a stream
(``vidagent watch``) where it holds no picture (an outage's lost seconds, a span retention
rolled out) is a blank tile saying so: decoded, it would show the neighbouring window's picture
under the asked time.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.app.core import SessionCore
from vidagent.exceptions import ConfigError, MediaNotFoundError, output_error
from vidagent.library.rows import source_problem
from vidagent.timecode import clock, hhmmss, hms, wall_clock

if TYPE_CHECKING:
    from vidagent.library import Library, VideoRecord

#: Frames on a sheet when none is asked for.
DEFAULT_COUNT = 12
#: The most frames one sheet shows: 67 rows of 6 at the default width, already past what a
#: person scans; a closer look is a sheet of a shorter span (``--from``/``--to``). Each frame
#: is decoded at 480 px, so a count with no bound ran out of memory (100,000: 48 GiB).
MAX_COUNT = 400
#: a point a stream holds no picture of (:func:`unrecorded`), among the chosen frames
_NO_PICTURE = object()
#: the longest side a JPEG holds (libjpeg's limit)
JPEG_MAX_SIDE = 65_500


@dataclass(frozen=True)
class SheetResult:
    """``sheet``: the contact sheet written, the span it shows and where its frames came from.

    Attributes:
        video_id: the video.
        path: the image file (PNG or JPEG, by its suffix).
        t0, t1: the span shown (seconds).
        times: each frame's time, in reading order.
        thumbnails: how many of them are the index's stored thumbnails.
        recorded_at: when the video was recorded (ISO-8601), ``""`` unknown.
        not_recorded: how many are blank: a stream's moments it holds no picture of (the rest
            were decoded).
        note: why it shows fewer frames than asked (the video's file is gone: only the
            index's thumbnails in the span), ``""`` where it shows them all.
    """

    video_id: str
    path: Path
    t0: float
    t1: float
    times: list[float] = field(default_factory=list)
    thumbnails: int = 0
    recorded_at: str = ""
    not_recorded: int = 0
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "video_id": self.video_id,
            "path": str(self.path),
            "t0": self.t0,
            "t1": self.t1,
            "start": clock(self.t0),  # 00:01:19.4: a span shorter than a second shows
            "end": clock(self.t1),
            "wall_t0": wall_clock(self.recorded_at, self.t0) or None,
            "wall_t1": wall_clock(self.recorded_at, self.t1) or None,
            "times": self.times,
            "thumbnails": self.thumbnails,
            "decoded": len(self.times) - self.thumbnails - self.not_recorded,
            "not_recorded": self.not_recorded,
            "note": self.note,
        }


def span_of(video: VideoRecord, t_from: float | None, t_to: float | None) -> tuple[float, float]:
    """``[t_from, t_to]`` clamped to the video (whole video by default).

    Raises:
        ConfigError: the span is empty or outside the video.
    """
    for name, t in (("--from", t_from), ("--to", t_to)):
        if t is not None and not (math.isfinite(t) and 0 <= t < 1e9):
            raise ConfigError(f"{name} {t:.6g} is not a time in the video")
    t0 = 0.0 if t_from is None else float(t_from)
    t1 = video.duration if t_to is None else min(float(t_to), video.duration)
    if t0 >= video.duration:
        raise ConfigError(
            f"--from {hms(t0)} is past the end of {video.name} ({hms(video.duration)})"
        )
    if t1 <= t0:
        raise ConfigError(f"the span {clock(t0)}-{clock(t1)} is empty: --to must be after --from")
    return t0, t1


def points(t0: float, t1: float, count: int, fps: float = 0.0) -> list[float]:
    """``count`` times spread evenly over ``[t0, t1]``, each in the middle of its share; at a
    frame rate ``fps``, the time of the frame shown there (the first in the span where the
    span starts between two), so a tile is labelled with its frame's own time, and ``count``
    points at most one a frame are as many frames: a middle that fell midway between two frames
    drew one of them twice and the other never (10 tiles of a second at 10 fps showed 8).
    The frames are taken on a constant-rate grid from the first frame: where a video's frames
    lie off it (a variable frame rate; a watched stream's window starting between two), the
    decoder gives the nearest frame, and the label is within a frame of its time."""
    step = (t1 - t0) / count
    times = [t0 + (i + 0.5) * step for i in range(count)]
    if fps <= 0:
        return times
    first = math.ceil(t0 * fps - 1e-6)
    return [max(math.floor(t * fps + 1e-6), first) / fps for t in times]


def unrecorded(lib: Library, video: VideoRecord, times: list[float]) -> set[float]:
    """Of ``times`` (sorted), those a stream (``vidagent watch``) holds no picture of: where no
    clip lies (an outage's lost seconds, a span retention rolled out). A video indexed whole
    has clips end to end: none."""
    if "watch" not in video.stages or not times:
        return set()
    spans = [(c.t0, c.t1) for c in lib.clips(video.video_id, times[0], times[-1])]
    return {t for t in times if not any(t0 <= t <= t1 for t0, t1 in spans)}


def span_frames(
    lib: Library, video: VideoRecord, times: list[float], *, size: int = 480
) -> tuple[list[tuple[float, np.ndarray | None]], int]:
    """A frame for each of ``times`` (sorted): the stored thumbnail nearest it when one lies
    within half a spacing, else one decoded from the source, or ``None`` where a stream holds
    no picture (:func:`unrecorded`). Returns ``(t, rgb)`` pairs (the frame's own time) and how
    many came from thumbnails.

    Raises:
        MediaNotFoundError: some point has no thumbnail and the source file is gone, and no
            thumbnail at all lies in the span.
    """
    import cv2

    from vidagent.media import frames_at

    # a quarter of the spacing: the tiles' times stay between half and one and a half spacings
    # apart (half of it let two neighbours show moments almost a spacing apart, or one apart)
    # (one point: only its own moment; half a second reached outside a short span)
    reach = (times[-1] - times[0]) / (len(times) - 1) / 4 if len(times) > 1 else 0.0
    reach = max(reach, 1e-3)
    stored = lib.frames(video.video_id, times[0] - reach, times[-1] + reach)
    blank = unrecorded(lib, video, times)
    chosen: list[tuple[float, Any]] = []
    shown: set[float] = set()
    for t in times:
        if t in blank:
            chosen.append((t, _NO_PICTURE))
            continue
        near = min(stored, key=lambda f: abs(f.t - t), default=None)
        if near is not None and (abs(near.t - t) > reach or near.t in shown):
            near = None  # a thumbnail midway between two points is shown once, the other decoded
        chosen.append((t, near))
        shown.update([near.t] if near is not None else [])
    missing = [t for t, f in chosen if f is None]
    decoded: dict[float, np.ndarray] = {}
    if missing:
        problem = source_problem(video)
        if problem is not None:
            if not stored:
                raise MediaNotFoundError(
                    video.source, f"{problem} and the index holds no thumbnails in this span"
                )
            chosen = [(f.t, f) for f in stored]  # what the index has, as it is
            missing = []
        else:
            rgb = frames_at(video.source, missing, size=size)  # (N, H, W, 3) uint8
            decoded = dict(zip(missing, rgb, strict=True))
    out: list[tuple[float, np.ndarray | None]] = []
    for t, f in chosen:
        if f is _NO_PICTURE:
            out.append((t, None))
        elif f is None:
            out.append((t, decoded[t]))
        else:
            bgr = cv2.imdecode(np.frombuffer(f.jpeg, np.uint8), cv2.IMREAD_COLOR)  # (H, W, 3)
            if bgr is None:  # a damaged thumbnail: decode the moment instead
                bgr = cv2.cvtColor(frames_at(video.source, [f.t], size=size)[0], cv2.COLOR_RGB2BGR)
            out.append((float(f.t), cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))
    return out, len(out) - len(decoded) - len(blank)


def tile_labels(times: list[float]) -> list[str]:
    """Each tile's time as :func:`~vidagent.timecode.clock` writes it, or to the millisecond
    where two would read the same (frames less than a tenth of a second apart: three tiles of
    25 fps read "00:00:03.6")."""
    labels = [clock(t) for t in times]
    if len(set(labels)) == len(set(times)):
        return labels
    return [f"{hhmmss(ms // 1000)}.{ms % 1000:03d}" for ms in (round(t * 1000) for t in times)]


def draw_sheet(
    video: VideoRecord,
    frames: list[tuple[float, np.ndarray | None]],
    t0: float,
    t1: float,
    *,
    columns: int | None = None,
) -> np.ndarray:
    """The sheet image: each frame labelled with its time (and wall-clock time where the video
    knows when it was recorded), titled with the video and the span; a moment with no picture
    (``None``) is a grey tile saying "not recorded"."""
    from vidagent.media.sheet import contact_sheet

    recorded = getattr(video, "recorded_at", "")
    tiles = []
    for label, (t, rgb) in zip(tile_labels([t for t, _ in frames]), frames, strict=True):
        wall = wall_clock(recorded, t)
        tiles.append((f"{label}  {wall}" if wall else label, rgb))
    title = f"{video.name}  {clock(t0)}-{clock(t1)}  ({video.video_id[:8]})"
    if recorded:
        title += f"  recorded {wall_clock(recorded, 0.0)}"
    return contact_sheet(tiles, columns=columns, title=title, blank="not recorded")


def write_image(rgb: np.ndarray, path: Path) -> None:
    """Write an RGB image; the suffix chooses PNG or JPEG.

    Raises:
        ConfigError: a suffix that is neither, or a sheet too large for its format (a JPEG
            side holds at most 65,500 pixels: 400 frames in one column are 83,000 tall, in one row 128,000 wide).
    """
    import cv2

    suffix = path.suffix.lower()
    if suffix not in (".png", ".jpg", ".jpeg"):
        if path.name.lower() in (".png", ".jpg", ".jpeg"):  # a suffix alone is a hidden name
            raise ConfigError(f"{path}: give the sheet a name before its suffix (sheet.png)")
        raise ConfigError(f"{path}: a contact sheet is written as .png or .jpg")
    height, width = rgb.shape[:2]
    too_large = ConfigError(
        f"a contact sheet of {width}x{height} pixels is too large for {suffix}; "
        "draw fewer frames (--count) or change --columns"
    )
    if suffix != ".png" and max(width, height) > JPEG_MAX_SIDE:  # before OpenCV logs it
        raise too_large
    ok, buf = cv2.imencode(suffix, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    if not ok:
        raise too_large
    part = path.with_name(f".{path.name}.part")  # a full disk leaves the old image, not half one
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(buf.tobytes())
        os.replace(part, path)
    except OSError as e:
        raise output_error(e, path) from None
    finally:
        # on a read-only filesystem removing the absent part fails too (EROFS), and that error
        # replaced the one above, whose advice named the -o
        with contextlib.suppress(OSError):
            part.unlink(missing_ok=True)


def sheet(
    core: SessionCore,
    ref: str,
    *,
    t_from: float | None = None,
    t_to: float | None = None,
    count: int = DEFAULT_COUNT,
    out: str | Path | None = None,
    columns: int | None = None,
) -> SheetResult:
    """A contact sheet of a video (or ``[t_from, t_to]`` of it) with ``count`` frames, written
    to ``out`` (default ``<video name>-sheet.png`` in the working folder).

    Raises:
        VideoNotFoundError: no such video.
        ConfigError: an empty span, a count below 1 or above :data:`MAX_COUNT`, columns below
            1, or an image suffix other than PNG/JPEG.
        MediaNotFoundError: see :func:`span_frames`.
    """
    if columns is not None and columns < 1:
        raise ConfigError(f"a contact sheet has at least one column, not {columns} (--columns)")
    if count < 1:
        raise ConfigError("a contact sheet needs at least one frame (--count)")
    if count > MAX_COUNT:
        raise ConfigError(
            f"a contact sheet shows at most {MAX_COUNT} frames, not {count} (--count); "
            "for a closer look draw a shorter span (--from, --to)"
        )
    lib = core.existing_library()
    video = lib.get_video(ref)
    t0, t1 = span_of(video, t_from, t_to)
    path = Path(out) if out else Path(f"{Path(video.name).stem or video.video_id[:8]}-sheet.png")
    note = ""
    there = max(1, math.floor((t1 - t0) * video.fps)) if video.fps > 0 else count
    if count > there:  # more tiles than the span has frames: the same frame drawn again
        note = f"the span holds {there} frame{'s' * (there != 1)}: {there} drawn, not {count}"
        count = there
    frames, thumbs = span_frames(lib, video, points(t0, t1, count, video.fps))
    write_image(draw_sheet(video, frames, t0, t1, columns=columns), path)
    if len(frames) != count:  # the file is gone: what the index holds of the span, as it is
        note = (
            f"{video.name}'s file {source_problem(video) or 'cannot be read'}: "
            f"{len(frames)} of the {count} frames asked, the index's thumbnails in the span"
        )
    return SheetResult(
        video.video_id,
        path,
        t0,
        t1,
        [round(t, 3) for t, _ in frames],
        thumbs,
        getattr(video, "recorded_at", ""),
        sum(rgb is None for _, rgb in frames),
        note,
    )
