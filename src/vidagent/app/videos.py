"""Reading and tending the Library: its videos, a video's clips and graph, search, frames."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from vidagent.app.core import SessionCore
from vidagent.app.results import GraphDetail, SearchHit, VideoDetail
from vidagent.exceptions import ConfigError, LibraryError
from vidagent.timecode import clock, parse_time

if TYPE_CHECKING:
    from vidagent.app.window import TimeWindow
    from vidagent.library import Library


def videos(core: SessionCore) -> list[Any]:
    """The videos in the Library (none when there is no Library yet)."""
    return core.existing_library().list_videos() if core.library_exists() else []


def in_order(subjects: dict[str, Any]) -> dict[str, Any]:
    """A subject registry in the order its subjects were first seen, numbered ones by number
    (the Library stores it as JSON with its keys sorted as text: ``subject_10`` before
    ``subject_2``)."""

    def seconds(subject: Any) -> float:  # HH:MM:SS, seconds (AVI's captions), or last
        seen = subject.get("first_seen") if isinstance(subject, dict) else None
        if isinstance(seen, (int, float)) and not isinstance(seen, bool):
            return float(seen)
        try:
            return parse_time(str(seen).strip())
        except ValueError:
            return math.inf

    def key(item: tuple[str, Any]) -> tuple[float, int, str]:
        sid, subject = item
        number = re.search(r"\d+$", sid)
        return seconds(subject), int(number.group()) if number else -1, sid

    return dict(sorted(subjects.items(), key=key))


def show(core: SessionCore, ref: str) -> VideoDetail:
    """A video with its summary, subject registry and clips.

    Raises:
        VideoNotFoundError: no such video.
    """
    from vidagent.app.speakers import names
    from vidagent.app.watching import STAGE, watch_state

    lib = core.existing_library()
    video = lib.get_video(ref)
    watch = video.stages.get(STAGE)
    if watch:  # "watching" by a watcher that was killed: say so
        state = watch_state(core.settings.home, video.video_id, str(watch.get("state", "")))
        stages = {**video.stages, STAGE: {**watch, "state": state}}
        video = dataclasses.replace(video, stages=stages)
    summary = lib.artifact(video.video_id, "summary", "global")
    registry = lib.artifact(video.video_id, "registry")
    return VideoDetail(
        video,
        summary.text if summary else "",
        in_order(registry.data) if registry else {},
        lib.clips(video.video_id),
        lib.transcript(video.video_id),
        names(lib, video.video_id),
    )


def graph(core: SessionCore, ref: str) -> GraphDetail:
    """A video's entity graph (AVI; ``None`` inside when its graph stage never ran).

    Raises:
        VideoNotFoundError: no such video.
    """
    lib = core.existing_library()
    video = lib.get_video(ref)
    return GraphDetail(video, lib.entity_graph(video.video_id))


def remove(core: SessionCore, ref: str) -> str:
    """Remove a video and everything indexed of it; its id."""
    return core.existing_library().remove_video(ref)


def compact(
    core: SessionCore, *, older_than_s: float = 3600, retrain: bool = False, **policy: Any
) -> Any:
    """``vidagent library compact``: record index ``policy`` settings, then Library.compact."""
    lib = core.existing_library()
    if policy:
        lib.set_index_policy(**policy)
    return lib.compact(older_than=timedelta(seconds=older_than_s), retrain=retrain)


def search(
    core: SessionCore,
    text: str,
    *,
    videos: str | Sequence[str] | None = None,
    t_from: float | None = None,
    t_to: float | None = None,
    top: int = 10,
    speaker: str | None = None,
    window: TimeWindow | None = None,
) -> list[SearchHit]:
    """Clips most similar to ``text`` in meaning, best first, embedded with the model that
    made the Library's vectors (whatever the session's embed role says). Each hit says who
    speaks in it.

    With ``speaker`` (a label such as ``S1`` or a name given with ``speakers rename``), only
    clips where that speaker talks: the nearest ``max(10 * top, 100)`` clips are filtered, so
    a speaker with few clips far from the text may be missed in a long Library; a speaker no
    searched video has is a ConfigError.

    With ``window`` only clips in each searched video's window (:mod:`vidagent.app.window`,
    resolved on the live edges now); a window that holds nothing of a video, or needs a
    recording start time it has not, is a ConfigError naming it.
    """
    from vidagent.app.speakers import check_known, names, spans_of, who_speaks
    from vidagent.library.search import bound_embedding
    from vidagent.tools.index import search_text

    if not text.strip():
        raise ConfigError("nothing to search for: the search text is empty")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError(f"top must be a whole number of hits, 1 or more (not {top!r})")
    if isinstance(videos, str):  # one video, not its name's letters
        videos = [videos]
    if t_from is not None and t_to is not None and t_to <= t_from:
        raise ConfigError(
            f"the span {clock(t_from)}-{clock(t_to)} is empty: --to must be after --from"
        )
    lib = core.existing_library()
    bound = bound_embedding(lib)
    if bound is None:
        raise LibraryError(f"{lib.uri} has no clip embeddings yet; run `vidagent index` first")
    client = core.models.client("embed")
    if client.spec != bound:
        client = core.hub_with(embed=bound).client("embed")
    ids = [lib.resolve(v) for v in videos] if videos else None
    if window is not None:
        from vidagent.app.window import windowed

        lib = windowed(lib, ids if ids is not None else lib.listed_ids(), window)
    k = max(10 * top, 100) if speaker else top
    hits = search_text(lib, client, text, ids, k=k, t_from=t_from, t_to=t_to)
    if speaker:
        spans = spans_of(lib, sorted({h.clip.video_id for h in hits}), speaker)
        hits = [
            h
            for h in hits
            if any(a < h.clip.t1 and b > h.clip.t0 for a, b in spans[h.clip.video_id])
        ][:top]
        if not hits:  # nothing, or nobody by that name: say which
            check_known(lib, ids if ids is not None else lib.listed_ids(), speaker)
    if not hits and ids:
        _why_nothing(core.existing_library(), ids, t_from, t_to)
    listed = {v.video_id: v for v in lib.list_videos()} if hits else {}
    out = []
    for h in hits:
        c = h.clip
        segments = lib.transcript(c.video_id, c.t0, c.t1)
        who = tuple(who_speaks(segments, names(lib, c.video_id), c.t0, c.t1))
        video = listed.get(c.video_id)
        recorded, name = (video.recorded_at, video.name) if video else ("", "")
        out.append(SearchHit(h, recorded, who, name))
    return out


def _why_nothing(
    lib: Library, ids: Sequence[str], t_from: float | None, t_to: float | None
) -> None:
    """Say why a search of named videos found nothing, where the reason is not the text: a
    video none of whose clips is embedded (its indexing stopped before the embed stage), or a
    span that lies outside every named video.

    Raises:
        LibraryError: a video with no clip embedded.
        ConfigError: the span lies outside each video.
    """
    records = [lib.get_video(v) for v in ids]
    for video in records:
        if not lib.clip_vector_hashes(video.video_id):
            raise LibraryError(
                f"{video.name} has no clip embedded yet (its indexing stopped before the embed "
                "stage): index it again to search it"
            )
    start, end = t_from or 0.0, math.inf if t_to is None else t_to
    if all(start >= v.duration or end <= 0 for v in records):
        span = f"{clock(start)}-{clock(end)}" if t_to is not None else f"from {clock(start)} on"
        lengths = ", ".join(f"{v.name} (0-{v.duration:.1f} s)" for v in records)
        raise ConfigError(f"the span {span} lies outside {lengths}")


def set_recorded_at(core: SessionCore, ref: str, when: str) -> Any:
    """Record when a video's recording started (ISO-8601), so its times also read as wall-clock
    times; ``""`` forgets it. Returns the updated record.

    Raises:
        ConfigError: ``when`` is not an ISO-8601 date and time.
        VideoNotFoundError: no such video.
    """
    import dataclasses

    from vidagent.timecode import parse_wall_clock

    try:
        canonical = parse_wall_clock(when) if when else ""
    except ValueError as e:
        raise ConfigError(str(e)) from None
    lib = core.existing_library()
    record = dataclasses.replace(lib.get_video(ref), recorded_at=canonical)
    lib.put_video(record)
    return record


def frames(core: SessionCore, ref: str, times: Sequence[float], *, size: int) -> list[bytes]:
    """The frames of a video nearest ``times``, as JPEG bytes at most ``size`` pixels on
    their long side.

    Raises:
        ConfigError: a size under 1, or a time that is not a finite number or lies outside the
            video (the last frame was returned for a time past its end, as if there).
    """
    from vidagent.models.vision import frame_images

    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"size must be a whole number of pixels, 1 or more (not {size!r})")
    try:
        finite = all(math.isfinite(float(t)) for t in times)
    except (TypeError, ValueError):
        finite = False
    if not finite:
        raise ConfigError(f"times must be finite seconds (not {list(times)[:5]!r})")
    record = show(core, ref).video
    late = [float(t) for t in times if not 0 <= float(t) <= record.duration]
    if late:
        raise ConfigError(
            f"{', '.join(f'{t:g}' for t in late)} s: outside {record.name} "
            f"(0-{record.duration:.2f} s)"
        )
    return [part.data for part in frame_images(record.source, times, size=size)]
