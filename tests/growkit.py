"""A video that grows as a watcher extends it: clips past its end, their vectors, its length."""

from __future__ import annotations

import dataclasses

from factories import INDEX_SPECS

from vidagent.config import load_settings
from vidagent.library import Library
from vidagent.library.schema import ClipRow
from vidagent.models.client import Models


def grow(library: Library, video_id: str, until: float, step: float = 5.0) -> list[ClipRow]:
    """Extend the video to ``until`` seconds with ``step``-second clips captioned ``late clip
    N``, embedded with the fake index models' embedder, then its record's duration last (as a
    watcher commits a window: the live edge moves once the window's rows are in); the new
    clips."""
    record = library.get_video(video_id)
    clips = library.clips(video_id)
    old, t = len(clips), record.duration
    while t < until - 1e-9:
        end = min(until, t + step)
        clips.append(ClipRow(video_id, len(clips), t, end, caption=f"late clip {len(clips)}"))
        t = end
    library.put_clips(video_id, clips)  # the clip vectors go with the old clips: all again
    client = Models(load_settings(INDEX_SPECS)).client("embed")
    vectors = client.embed([c.caption or "clip" for c in clips]).vectors  # (N, D)
    library.put_clip_vectors(video_id, client.spec, clips, vectors)
    library.put_video(dataclasses.replace(record, duration=until))
    return clips[old:]
