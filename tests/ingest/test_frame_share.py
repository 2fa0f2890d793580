"""Stages running at once that sample the same frames share one decode (FrameShare): each gets
every item, in order, however their starts are spread; memory stays bounded when one outpaces
the other; a stage that samples other frames or none, stops early or meets an error neither
loses items nor hangs the other. Frames kept from the structure pass (KeptFrames) are the very
frames a decode would give, and only where they cover the request."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vidagent.ingest.sampling import FrameShare, FrameTicket, KeptFrames, sample_clips
from vidagent.library.schema import ClipRow
from vidagent.media import probe


class Source:
    """Counts the passes made over it and the items each produced."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n = n
        self.fail_at = fail_at
        self.passes = 0
        self.made = 0
        self.closed = 0

    def __call__(self) -> Iterator[int]:
        self.passes += 1
        try:
            for i in range(self.n):
                if i == self.fail_at:
                    raise OSError("disk went away")
                self.made += 1
                yield i
        except GeneratorExit:
            self.closed += 1
            raise


def settles_at(source: Source, made: int) -> None:
    """Wait (on a loaded machine, as long as it takes) until ``made`` items were made, then
    check that no more come."""
    deadline = time.monotonic() + 30
    while source.made < made and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert source.made == made


def in_thread(
    ticket: FrameTicket, source: Source, key: str = "k"
) -> tuple[threading.Thread, list[int]]:
    out: list[int] = []

    def consume() -> None:
        try:
            out.extend(ticket.iterate(key, source))
        finally:
            ticket.close()  # as the pipeline does when a stage ends

    thread = threading.Thread(target=consume)
    thread.start()
    return thread, out


def test_two_stages_get_every_item_from_one_pass() -> None:
    share, source = FrameShare(), Source(200)
    a, b = share.ticket(), share.ticket()
    (ta, got_a), (tb, got_b) = in_thread(a, source), in_thread(b, source)
    ta.join(30), tb.join(30)
    assert got_a == got_b == list(range(200))
    assert (source.passes, source.made) == (1, 200)


def test_a_stage_that_asks_late_still_shares_the_pass() -> None:
    share, source = FrameShare(hold=4), Source(50)
    early, late = share.ticket(), share.ticket()
    thread, got = in_thread(early, source)
    settles_at(source, 4)  # the first items kept for the late one, and no more
    assert thread.is_alive()
    assert list(late.iterate("k", source)) == list(range(50))
    thread.join(30)
    assert got == list(range(50))
    assert source.passes == 1


def test_a_stage_that_asks_after_the_other_ended_still_shares_the_pass() -> None:
    # The pass was dropped when its one reader finished it, so the stage that began sampling
    # later decoded the whole video again (a stage slow to start on a loaded machine).
    share, source = FrameShare(hold=4), Source(3)
    early, late = share.ticket(), share.ticket()
    assert list(early.iterate("k", source)) == [0, 1, 2]
    early.close()
    assert list(late.iterate("k", source)) == [0, 1, 2]
    late.close()
    assert source.passes == 1
    assert not share._passes  # let go once no stage may join


def test_a_fast_stage_waits_for_a_slow_one_within_the_hold() -> None:
    share, source = FrameShare(hold=4), Source(50)
    slow_ticket, fast_ticket = share.ticket(), share.ticket()
    slow = slow_ticket.iterate("k", source)
    assert next(slow) == 0
    thread, got = in_thread(fast_ticket, source)
    settles_at(source, 1 + 4)  # four items ahead of the slow stage, and no more
    assert thread.is_alive()
    assert list(slow) == list(range(1, 50))
    thread.join(30)
    assert got == list(range(50))
    assert source.passes == 1


def test_a_stage_that_samples_nothing_holds_nobody_up() -> None:
    share, source = FrameShare(hold=2), Source(30)
    sampler, idle = share.ticket(), share.ticket()
    thread, got = in_thread(sampler, source)
    thread.join(0.3)
    assert thread.is_alive()  # waiting for the other stage, which might sample the same
    idle.close()  # it ended without sampling
    thread.join(30)
    assert got == list(range(30))
    assert not share._passes  # nothing kept once no stage may join


def test_other_keys_are_other_passes() -> None:
    share, source = FrameShare(hold=2), Source(20)
    a, b = share.ticket(), share.ticket()
    (ta, got_a), (tb, got_b) = in_thread(a, source, "a"), in_thread(b, source, "b")
    ta.join(30), tb.join(30)
    assert got_a == got_b == list(range(20))
    assert source.passes == 2


def test_a_stage_joining_after_items_were_dropped_makes_its_own_pass() -> None:
    share, source = FrameShare(hold=3), Source(10)
    first = share.ticket()
    assert list(first.iterate("k", source)) == list(range(10))  # alone: nobody else expected
    assert list(first.iterate("k", source)) == list(range(10))
    assert source.passes == 2


def test_a_stage_that_stops_early_does_not_hold_back_the_other() -> None:
    share, source = FrameShare(hold=2), Source(30)
    quitter = share.ticket().iterate("k", source)
    stayer = share.ticket().iterate("k", source)
    assert next(quitter) == 0
    assert next(stayer) == 0
    quitter.close()
    assert list(stayer) == list(range(1, 30))
    assert source.passes == 1


def test_a_stage_that_fails_mid_pass_does_not_hold_back_the_other() -> None:
    # A stage that raises leaves its iteration open (its traceback keeps the generator alive,
    # unclosed); the pipeline then closes its ticket, and the other stage reads on.
    share, source = FrameShare(hold=2), Source(30)
    failed_ticket, stayer = share.ticket(), share.ticket()
    failed = failed_ticket.iterate("k", source)
    assert next(failed) == 0
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.extend(stayer.iterate("k", source)), daemon=True)
    thread.start()
    settles_at(source, 1 + 2)  # held within two items of the failed stage
    failed_ticket.close()
    thread.join(30)
    assert got == list(range(30)) and not thread.is_alive()
    assert failed is not None  # still referenced, as the failed stage's traceback keeps it


def test_every_stage_stopping_early_stops_the_source() -> None:
    share, source = FrameShare(), Source(30)
    a, b = share.ticket().iterate("k", source), share.ticket().iterate("k", source)
    next(a), next(b)
    a.close()
    b.close()
    assert source.closed == 1


def test_an_error_reaches_every_stage_of_the_pass() -> None:
    share, source = FrameShare(), Source(10, fail_at=4)
    a, b = share.ticket().iterate("k", source), share.ticket().iterate("k", source)
    assert next(a) == 0 and next(b) == 0
    with pytest.raises(OSError, match="disk went away"):
        list(a)
    with pytest.raises(OSError, match="disk went away"):
        list(b)
    assert source.passes == 1


def test_sample_clips_through_a_share_gives_the_frames_of_its_own_decode(
    small_video: Path,
) -> None:
    info = probe(small_video)
    clips = [
        ClipRow(video_id="v", clip_index=i, t0=float(t0), t1=min(t0 + 4.0, info.duration))
        for i, t0 in enumerate(range(0, int(info.duration), 4))
    ]
    alone = list(sample_clips(info, clips, 0.5, 320))
    share = FrameShare()
    tickets = [share.ticket(), share.ticket()]
    outs: list[list[tuple[ClipRow, list[tuple[float, object]]]]] = [[], []]
    threads = [
        threading.Thread(target=lambda o=o, t=t: o.extend(sample_clips(info, clips, 0.5, 320, t)))
        for o, t in zip(outs, tickets, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for out in outs:
        assert [c.clip_index for c, _ in out] == [c.clip_index for c, _ in alone]
        for (_, frames), (_, reference) in zip(out, alone, strict=True):
            assert [t for t, _ in frames] == [t for t, _ in reference]
            assert all((a == b).all() for (_, a), (_, b) in zip(frames, reference, strict=True))


def test_kept_frames_are_the_decoded_ones_and_only_where_they_cover_the_request(
    small_video: Path,
) -> None:
    from vidagent.media import iter_sampled_frames

    info = probe(small_video)
    kept = KeptFrames(0.5, 320)
    assert kept.fits(1.0) and kept.fits(2.0) and not kept.fits(0.75) and not kept.fits(0.25)
    thumbs = list(iter_sampled_frames(info, 1.0, 64, keep=(0.5, 320), on_keep=kept.add))
    assert len(thumbs) == 12 and sorted(kept.frames) == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    decoded = list(iter_sampled_frames(info, 0.5, 320, start=4.0, end=10.0))
    lazy = kept.take(info, 0.5, 320, 4.0, 10.0)
    assert lazy is not None
    taken = list(lazy)
    assert [t for t, _ in taken] == [t for t, _ in decoded] == [4.0, 6.0, 8.0]
    assert all((a == b).all() for (_, a), (_, b) in zip(taken, decoded, strict=True))
    assert kept.take(info, 0.5, 200, 4.0, 10.0) is None  # another size
    assert kept.take(info, 1.0, 320, 4.0, 10.0) is None  # another grid
    assert kept.take(info, 0.5, 320, 3.0, 10.0) is None  # times it does not hold
    small = KeptFrames(0.5, 320, budget=3 * 320 * 180 * 3)  # room for three frames of six
    list(iter_sampled_frames(info, 1.0, 64, keep=(0.5, 320), on_keep=small.add))
    assert small.over and not small.frames  # all or nothing
    assert small.take(info, 0.5, 320, 0.0, 4.0) is None


def test_kept_frames_wait_on_disk_not_in_memory(tmp_path: Path, small_video: Path) -> None:
    """An hour of kept 640x360 frames was 1.2 GB in memory: they go to a file and come back
    one at a time, exactly, and the file goes when they are cleared."""
    import tracemalloc

    import numpy as np

    kept = KeptFrames(0.5, 320, folder=tmp_path)
    frames = {2.0 * i: np.full((180, 320, 3), i * 40, np.uint8) for i in range(6)}
    frames[4.0][10:20, 30:40] = (1, 2, 3)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for t, rgb in frames.items():
            kept.add(t, rgb.copy())  # the copy is freed once added
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 320 * 180 * 3  # not even one frame stays in memory
    assert kept.held == 6 * 320 * 180 * 3
    info = probe(small_video)  # 12 s at 320x180
    lazy = kept.take(info, 0.5, 320, 0.0, 12.0)
    assert lazy is not None
    back = list(lazy)
    assert [t for t, _ in back] == sorted(frames)
    assert all((rgb == frames[t]).all() for t, rgb in back)
    kept.clear()
    assert kept.take(info, 0.5, 320, 0.0, 12.0) is None and kept.held == 0
