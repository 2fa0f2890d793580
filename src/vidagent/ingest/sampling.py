"""Frames of many clips in few decodes, for the stages that look at pixels (OCR, detection).

On the narrated 480x352 clip ``read_text`` and ``detect`` both take the 0.5 fps grid at its own
size, and decoding it costs about 1 CPU second each time. The structure pass, which decodes
every frame anyway, keeps that grid's frames for them (:class:`KeptFrames`); where it could not
(a video indexed before, a budget passed), stages that run side by side and sample the same
frames share one decode (:class:`FrameShare`).
"""

from __future__ import annotations

import os
import tempfile
import threading
import weakref
from collections import deque
from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from vidagent.media import Size, frames_at, iter_sampled_frames, output_size, sample_grid

if TYPE_CHECKING:
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo

#: Pending clips at most this far apart are decoded in one pass rather than reached by a seek:
#: decoding a gap with non-reference frames skipped costs less than a seek and its GOP.
MERGE_GAP_SECONDS = 30.0
_EPS = 1e-6

ClipFrames = list[tuple[float, np.ndarray]]  # (t, (H, W, 3) uint8 RGB) in time order


def sample_clips(
    info: VideoInfo,
    clips: Sequence[ClipRow],
    fps: float,
    size: Size,
    share: FrameTicket | None = None,
    kept: KeptFrames | None = None,
) -> Iterator[tuple[ClipRow, ClipFrames]]:
    """Yield each clip, in time order, with its frames on a grid of ``fps`` from its run's start.

    Clips are grouped into runs whose gaps are under :data:`MERGE_GAP_SECONDS` (or two keyframe
    intervals), and each run is decoded in one sequential pass; frames in the gaps are dropped.
    A clip too short to hold a grid point gets the frame at its middle.

    Args:
        info: the probed video.
        clips: the clips wanted, in any order.
        fps: samples per second.
        size: frame size (see :data:`~vidagent.media.Size`).
        share: this stage's ticket to a :class:`FrameShare`, where another stage running at the
            same time may sample the same frames (same video, clips, grid and output size):
            then one decode serves both.
        kept: frames of this grid kept from an earlier decode: a run they cover is not
            decoded again.
    """
    if share is not None:
        spans = tuple((c.clip_index, c.t0, c.t1) for c in clips)
        key = (str(info.path), spans, fps, output_size(info, size))
        kept = share.kept
        yield from share.iterate(key, lambda: sample_clips(info, clips, fps, size, kept=kept))
        return
    ordered = sorted(clips, key=lambda c: c.t0)
    gap = max(MERGE_GAP_SECONDS, 2.0 * info.keyframe_interval)
    runs: list[list[ClipRow]] = []
    for clip in ordered:
        if runs and clip.t0 - runs[-1][-1].t1 <= gap:
            runs[-1].append(clip)
        else:
            runs.append([clip])
    for run in runs:
        yield from _sample_run(info, run, fps, size, kept)


def _sample_run(
    info: VideoInfo, run: list[ClipRow], fps: float, size: Size, kept: KeptFrames | None
) -> Iterator[tuple[ClipRow, ClipFrames]]:
    k = 0  # the clip of the run being filled
    got: ClipFrames = []
    start, end = run[0].t0, run[-1].t1
    held = kept.take(info, fps, size, start, end) if kept is not None else None
    frames = iter_sampled_frames(info, fps, size, start=start, end=end) if held is None else held
    for t, rgb in frames:
        while k < len(run) and t >= run[k].t1 - _EPS:
            yield run[k], got or _middle(info, run[k], size)
            k, got = k + 1, []
        if k < len(run) and t >= run[k].t0 - _EPS:
            got.append((t, rgb))
    for clip in run[k:]:
        yield clip, got or _middle(info, clip, size)
        got = []


def _middle(info: VideoInfo, clip: ClipRow, size: Size) -> ClipFrames:
    t = (clip.t0 + clip.t1) / 2
    return [(t, frames_at(info, [t], size=size)[0])]


#: Bytes of frames :class:`KeptFrames` writes at most (a 640x360 hour at 0.5 fps is 1.2 GB,
#: three hours 3.7 GB; an hour of 1080p read at 960 px 2.8 GB): past it, none are kept.
KEEP_BUDGET_BYTES = 6 * 2**30


class KeptFrames:
    """The frames of one sampling grid (``fps`` from 0, at ``size``), kept from the structure
    pass for the stages that sample that grid (read_text and detect): its decode reaches every
    frame anyway, and decoding the grid again cost about 1 CPU second on the 3-minute clip.

    The frames go to an unnamed temporary file in ``folder`` (the system's by default), not to
    memory, and are read back one at a time: held in memory, an hour of 640x360 frames was 1.2
    GB, and what a process may hold must not grow with the video's length. The file is gone
    when :meth:`clear` runs or the process ends. All or nothing: past ``budget`` bytes it drops
    what it wrote, and the stages decode.
    """

    def __init__(
        self, fps: float, size: Size, budget: int = KEEP_BUDGET_BYTES, folder: Path | None = None
    ) -> None:
        self.fps = fps
        self.size = size
        self.budget = budget
        self.folder = folder
        self.frames: dict[float, tuple[int, tuple[int, ...]]] = {}  # round(t, 6) -> (at, shape)
        self.held = 0
        self.over = False
        self._file: BinaryIO | None = None

    def fits(self, sample_fps: float) -> bool:
        """Whether every time of this grid is one of ``sample_fps``'s (both from 0)."""
        ratio = sample_fps / self.fps
        return ratio >= 1 - 1e-9 and abs(ratio - round(ratio)) < 1e-9

    def add(self, t: float, rgb: np.ndarray) -> None:
        if self.over:
            return
        if self.held + rgb.nbytes > self.budget:
            self.clear()
            self.over = True
            return
        if self._file is None:
            if self.folder is not None:
                self.folder.mkdir(parents=True, exist_ok=True)
            self._file = tempfile.TemporaryFile(dir=self.folder, prefix="vidagent-frames-")  # noqa: SIM115 (lives as long as the frames)
            weakref.finalize(self, self._file.close)  # dropped unclosed (a run that failed)
        data = np.ascontiguousarray(rgb)
        os.pwrite(
            self._file.fileno(), data.tobytes(), self.held
        )  # no view: numpy lacks Buffer types
        self.frames[round(t, 6)] = (self.held, data.shape)
        self.held += data.nbytes

    def take(
        self, info: VideoInfo, fps: float, size: Size, start: float, end: float
    ) -> Iterator[tuple[float, np.ndarray]] | None:
        """What ``iter_sampled_frames(info, fps, size, start=start, end=end)`` would yield,
        read from the file as it is iterated, or None where some of it is not kept."""
        if fps != self.fps or output_size(info, size) != output_size(info, self.size):
            return None
        grid = sample_grid(info, fps, start, end)
        found = [self.frames.get(round(t, 6)) for t in grid]
        if not grid or self._file is None or any(f is None for f in found):
            return None
        fd = self._file.fileno()
        return ((t, _read_frame(fd, *where)) for t, where in zip(grid, found, strict=True) if where)

    def clear(self) -> None:
        """Forget every frame and delete the file."""
        self.frames.clear()
        self.held = 0
        if self._file is not None:
            self._file.close()
            self._file = None


def _read_frame(fd: int, at: int, shape: tuple[int, ...]) -> np.ndarray:
    """One frame :meth:`KeptFrames.add` wrote at byte ``at``.  # (H, W, 3) uint8"""
    size = int(np.prod(shape))
    data = bytearray(size)
    view = memoryview(data)
    done = 0
    while done < size:  # pread may return less than asked
        got = os.preadv(fd, [view[done:]], at + done)
        if got == 0:
            raise OSError(f"kept frames file ends at byte {at + done}")
        done += got
    return np.frombuffer(data, np.uint8).reshape(shape)


#: Items (a clip and its frames) a consumer of a :class:`FrameShare` may run ahead of the
#: slowest other one, or of a stage still expected to join.
HOLD_ITEMS = 16


class FrameShare:
    """One pass over an iterator for the stages of one overlapped run that ask for the same key
    (:func:`sample_clips` with the same video, clips, grid and size); each stage holds a
    :meth:`ticket`.

    A stage joins a pass while none of its items has been dropped. While some ticket has
    neither sampled nor closed, a pass keeps its first items for it, at most
    :data:`HOLD_ITEMS`, and its consumers wait there (a pass its readers finished stays for
    it too, until it joins or closes); otherwise items are dropped once every
    consumer of the pass has read them, and a consumer never runs more than
    :data:`HOLD_ITEMS` ahead of the slowest other one. So memory stays bounded however far one
    stage outpaces the other, and a stage that samples other frames, or none, holds nobody up
    for longer than it takes to ask or to end. The consumer that needs an item nobody has made
    yet takes it from the iterator, outside the lock. An error from the iterator reaches every
    consumer of the pass.
    """

    def __init__(self, hold: int = HOLD_ITEMS, kept: KeptFrames | None = None) -> None:
        self.hold = hold
        self.kept = kept  # frames a pass takes instead of decoding, where they cover it
        self._cond = threading.Condition()
        self._passes: dict[Hashable, _Pass] = {}
        self._out = 0  # tickets that have neither sampled nor closed

    def ticket(self) -> FrameTicket:
        """A stage's way in; close it when the stage ends (sampled or not)."""
        with self._cond:
            self._out += 1
        return FrameTicket(self)

    def _settle(self, ticket: FrameTicket) -> None:  # holding the lock
        if not ticket.settled:
            ticket.settled = True
            self._out -= 1
            self._cond.notify_all()

    def _iterate(
        self, ticket: FrameTicket, key: Hashable, source: Callable[[], Iterator[Any]]
    ) -> Generator[Any, None, None]:
        with self._cond:
            self._settle(ticket)
            run = self._passes.get(key)
            if run is None or run.base > 0:
                run = self._passes[key] = _Pass(source(), self.hold)
            me = run.join()
        try:
            while True:
                with self._cond:
                    item, make = self._next(run, me)
                if make:
                    try:
                        item = next(run.source)
                    except StopIteration:
                        with self._cond:
                            run.finish(None)
                            self._cond.notify_all()
                        return
                    except BaseException as e:
                        with self._cond:
                            run.finish(e)
                            self._cond.notify_all()
                        raise
                    with self._cond:
                        run.add(me, item, self._out > 0)
                        self._cond.notify_all()
                elif item is _END:
                    return
                yield item
        finally:
            with self._cond:
                run.leave(me, self._out > 0)
                # A pass all its consumers left stays while a stage may still join it (the
                # first items kept for it): one that finished it before the other began
                # sampling made that one decode the whole video again, under load.
                idle = run.idle and not self._out
                if idle and self._passes.get(key) is run:
                    del self._passes[key]
                self._cond.notify_all()
            if idle:
                _close(run)

    def _let_go(self) -> None:
        """Drop the passes nobody reads once no stage may join them any more (the last
        ticket settled), and stop their decoding."""
        with self._cond:
            if self._out:
                return
            idle = [key for key, run in self._passes.items() if run.idle]
            gone = [self._passes.pop(key) for key in idle]
        for run in gone:
            _close(run)

    def _next(self, run: _Pass, me: int) -> tuple[Any, bool]:
        """(item, False) to yield, (None, True) to take the next one from the source, or
        (_END, False); waits while ``me`` is too far ahead. Called holding the lock."""
        while True:
            expecting = self._out > 0
            at = run.positions[me]
            if at < run.made:
                item = run.items[at - run.base]
                run.positions[me] = at + 1
                run.trim(expecting)
                self._cond.notify_all()
                return item, False
            if run.done:
                if run.error is not None:
                    raise run.error
                return _END, False
            if not run.busy and not run.ahead(me, expecting):
                run.busy = True
                return None, True
            self._cond.wait()


class FrameTicket:
    """One stage's use of a :class:`FrameShare`."""

    def __init__(self, share: FrameShare) -> None:
        self.share = share
        self.settled = False  # sampled or closed
        self._open: list[Generator[Any, None, None]] = []  # the passes it iterates

    @property
    def kept(self) -> KeptFrames | None:
        """Frames the structure pass kept for the stages of this share."""
        return self.share.kept

    def iterate(self, key: Hashable, source: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """The items of ``source()``, from the pass of ``key`` where one is open."""
        items = self.share._iterate(self, key, source)
        self._open.append(items)
        return items

    def close(self) -> None:
        """The stage ended: nobody need keep items for it, and it leaves every pass it was
        reading (a stage that raised keeps its iteration alive in its traceback, unclosed, and
        the other stages would wait for it at :data:`HOLD_ITEMS` ahead for good)."""
        for items in self._open:
            items.close()
        self._open.clear()
        with self.share._cond:
            self.share._settle(self)
        self.share._let_go()


_END = object()


def _close(run: _Pass) -> None:
    """Stop the decoding of a pass nobody reads any more, where it was stopped early."""
    close = getattr(run.source, "close", None)
    if not run.done and close is not None:
        close()


class _Pass:
    """The items of one iterator, as far as its consumers have read them. ``expecting``: some
    ticket may still join (then the first items are kept)."""

    def __init__(self, source: Iterator[Any], hold: int) -> None:
        self.source = source
        self.hold = hold
        self.items: deque[Any] = deque()  # items[0] is item number base
        self.base = 0
        self.made = 0  # items taken from the source
        self.positions: dict[int, int] = {}  # consumer -> the next item it reads
        self.joined = 0
        self.busy = False  # a consumer is taking an item from the source
        self.done = False
        self.error: BaseException | None = None

    @property
    def idle(self) -> bool:
        return not self.positions

    def join(self) -> int:
        me = self.joined
        self.joined += 1
        self.positions[me] = 0
        return me

    def leave(self, me: int, expecting: bool) -> None:
        self.positions.pop(me, None)
        self.trim(expecting)

    def ahead(self, me: int, expecting: bool) -> bool:
        floors = [at for c, at in self.positions.items() if c != me]
        if expecting and self.base == 0:
            floors.append(0)  # where a stage yet to join would start
        return bool(floors) and self.made - min(floors) >= self.hold

    def add(self, me: int, item: Any, expecting: bool) -> None:
        self.items.append(item)
        self.made += 1
        self.positions[me] = self.made
        self.busy = False
        self.trim(expecting)

    def finish(self, error: BaseException | None) -> None:
        self.done, self.error, self.busy = True, error, False

    def trim(self, expecting: bool) -> None:
        if expecting and self.base == 0:
            return  # kept for a stage that may still join
        read = min(self.positions.values(), default=self.made)
        while self.base < read:
            self.items.popleft()
            self.base += 1
