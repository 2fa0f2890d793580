"""The Library's rows of videos: the ``videos`` table and each video's clips, frames, shots and
transcript.

A video's rows are written first and its ``videos`` row last; removing it deletes the
``videos`` row first (the commit rules are in :mod:`vidagent.library.store`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from vidagent.exceptions import AmbiguousVideoError, VideoNotFoundError
from vidagent.library.filters import clip_keys, quote, span_filter
from vidagent.library.schema import (
    TABLES,
    ClipRow,
    FrameRow,
    ShotRow,
    TranscriptSegment,
    VideoRecord,
)
from vidagent.library.tables import Tables, read

#: The fewest characters of an id prefix that name a video to remove (as git's shortest
#: abbreviation); a name or an id names it at any length.
REMOVE_PREFIX = 4
_SAMPLE = 1 << 20  # bytes read from each of the head, middle and tail of a file


def _listed(videos: Sequence[VideoRecord], shown: int = 5) -> str:
    """The videos a name could have named, for an error every front end shows as it is (it
    said "see `vidagent list`" to an HTTP or MCP client too)."""
    if not videos:
        return "the Library holds no videos"
    names = ", ".join(repr(v.name) for v in videos[:shown])
    more = f" and {len(videos) - shown} more" if len(videos) > shown else ""
    return f"its videos: {names}{more}"


def content_id(path: str | Path) -> str:
    """A 16-hex-digit id from a file's size and 1 MiB samples of its head, middle and tail.

    Sampling keeps this instant on multi-gigabyte files; size plus three samples separate real
    video files in practice (a re-encode, trim or edit changes them all).
    """
    path = Path(path)
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        for offset in sorted({0, max(0, size // 2 - _SAMPLE // 2), max(0, size - _SAMPLE)}):
            f.seek(offset)
            h.update(f.read(_SAMPLE))
    return h.hexdigest()[:16]


def source_problem(video: VideoRecord) -> str | None:
    """Why ``video``'s source file cannot be read as the video that was indexed: ``"is gone"``,
    or that another file stands under its name (its content id is not the video's: a clip cut
    from it, or a frame, would show the other file); None where it can. A stream's playlist
    (``vidagent watch``) grows, and is not compared."""
    path = Path(video.source)
    if not path.is_file():
        return "is gone"
    if "watch" in video.stages:
        return None
    try:
        same = content_id(path) == video.video_id
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    return None if same else "has changed since it was indexed (another file stands under its name)"


def _names(video: VideoRecord) -> set[str]:
    """What names ``video`` exactly: its id, source path and file name; for a stream
    (``vidagent watch``), also the source it watches and that source's name (as ``vidagent
    list`` shows it, ``w.ts (live)``, without the `` (live)``)."""
    watched = video.stages.get("watch", {}).get("source", "")
    names = {video.video_id, video.source, video.name}
    if watched:
        names |= {str(watched), video.name.removesuffix(" (live)")}
    return names


class Rows:
    """A Library's videos and their rows, read and written through its :class:`Tables`."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    # -- videos ---------------------------------------------------------------------------------

    def put_video(self, record: VideoRecord) -> None:
        """Insert or update a video's row (call after its other rows are written)."""
        self.tables.merge("videos", [record.to_row()])

    def list_videos(self) -> list[VideoRecord]:
        """Every listed video, oldest first."""
        if not self.tables.has("videos"):
            return []
        rows = self.tables.table("videos").to_arrow().to_pylist()
        return sorted(
            (VideoRecord.from_row(r) for r in rows), key=lambda v: (v.added_at, v.video_id)
        )

    def listed_ids(
        self, among: Sequence[str] | None = None, *, version: int | None = None
    ) -> list[str]:
        """Ids of the listed videos (only those in ``among`` when given); reads the id column
        alone, so it stays cheap with thousands of videos. ``version``: the ``videos`` table's
        version where the caller has just read it (one call fewer to LanceDB)."""
        if not self.tables.has("videos") or (among is not None and not among):
            return []
        table = self.tables.table("videos")

        def load() -> list[str]:
            (found,) = read(table.search().select(["video_id"]).limit(None))
            ids: list[str] = found["video_id"].to_pylist()
            return ids

        listed = self.tables.hot.listed(table.version if version is None else version, load)
        if among is None:
            return listed
        known = set(listed)
        return [v for v in dict.fromkeys(among) if v in known]

    def resolve(self, ref: str, *, shortest_prefix: int = 1) -> str:
        """A full video id from an id, a unique id prefix (of at least ``shortest_prefix``
        characters), a file name or a source path (a
        relative one too, from the working directory, as ingest stores it resolved; for a
        stream, the source it watches or that source's name), any file
        holding the same video (:func:`content_id`: a copy, or the file renamed), or a file
        name without its extension (``garden`` for ``garden.mp4``). An empty or blank ``ref``
        names no video (as a prefix it would match them all: ``vidagent remove "$UNSET"``)."""
        videos = self.list_videos()
        if not ref.strip():
            raise VideoNotFoundError(f"an empty video name names no video; {_listed(videos)}")
        try:
            path = str(Path(ref).expanduser().resolve())
        except (OSError, ValueError, RuntimeError):  # a NUL byte, a loop of links, no home
            path = ref
        # A file that is there is that file: its path, else its content, before any name
        # (``base.mp4`` in this folder was "ambiguous" where another folder's base.mp4 was
        # indexed too, though ``ask base.mp4`` took it as the file it is)
        here = Path(path).is_file()
        exact = [v for v in videos if v.source == path] if here else []
        if len(exact) != 1 and here:  # a copy, the file moved or renamed, or rewritten since
            try:
                same = content_id(path)
            except OSError:
                same = ""
            exact = [v for v in videos if v.video_id == same] or exact
        exact = exact or [v for v in videos if ref in _names(v) or path in _names(v)]
        prefixed = [v for v in videos if v.video_id.startswith(ref)]
        matches = exact or (prefixed if len(ref) >= shortest_prefix else [])
        if not matches:
            matches = [v for v in videos if Path(v.name).stem == ref]
        if len(matches) == 1:
            return matches[0].video_id
        if not matches and prefixed:
            raise VideoNotFoundError(
                f"{ref!r} is too short an id prefix here: give at least {shortest_prefix} "
                "characters of the id, or the video's name"
            )
        if not matches:
            raise VideoNotFoundError(f"no video {ref!r} in {self.tables.uri}; {_listed(videos)}")
        ids = ", ".join(v.video_id for v in matches[:5])
        raise AmbiguousVideoError(f"{ref!r} matches several videos ({ids}); give more of the id")

    def get_video(self, ref: str) -> VideoRecord:
        """The video ``ref`` names (see :meth:`resolve`)."""
        video_id = self.resolve(ref)
        return next(v for v in self.list_videos() if v.video_id == video_id)

    def has_video(self, video_id: str) -> bool:
        """Whether the video is listed."""
        where = f"video_id = {quote(video_id)}"
        return self.tables.has("videos") and self.tables.table("videos").count_rows(where) > 0

    def remove_video(self, ref: str) -> str:
        """Delete a video and all its rows (artefacts included); returns its id. An id prefix
        names it by :data:`REMOVE_PREFIX` characters or more (``remove 5`` took whichever
        video's id began with 5)."""
        with self.tables.write_lock():
            video_id = self.resolve(ref, shortest_prefix=REMOVE_PREFIX)
            where = f"video_id = {quote(video_id)}"
            self.tables.table("videos").delete(where)  # first: from here on it is not listed
            for name in self.tables.names():
                if name != "videos":
                    self.tables.table(name).delete(where)
        return video_id

    def set_stage(self, video_id: str, stage: str, info: dict[str, Any]) -> VideoRecord:
        """Record that ``stage`` finished for a video, with what produced it.

        The row is read under the write lock, so stages recorded at the same time by other
        threads or processes are kept.
        """
        with self.tables.write_lock():
            video = self.get_video(video_id)
            stages = {**video.stages, stage: info}
            updated = dataclasses.replace(video, stages=stages)
            self.put_video(updated)
        return updated

    # -- clips, frames, shots, transcript -------------------------------------------------------

    def put_clips(self, video_id: str, clips: Sequence[ClipRow]) -> None:
        """Make ``clips`` the video's clips. Its clip vectors belong to the old clips: dropped."""
        with self.tables.write_lock():
            if self.tables.has("clip_vectors"):
                self.tables.table("clip_vectors").delete(f"video_id = {quote(video_id)}")
            self.tables.merge("clips", [c.__dict__ for c in clips], replace=video_id)

    def update_clips(self, video_id: str, updates: Sequence[dict[str, Any]]) -> None:
        """Set some columns of existing clips, in one atomic commit (a stage's checkpoint).

        Each update holds ``clip_index`` and the columns to set; other columns are kept.
        """
        if not updates:
            return
        schema = TABLES["clips"][0]
        columns = ["video_id", *dict.fromkeys(k for u in updates for k in u)]
        part = pa.schema([schema.field(c) for c in columns])
        data = pa.Table.from_pylist([{"video_id": video_id, **u} for u in updates], schema=part)
        with self.tables.write_lock():
            merge = self.tables.table("clips").merge_insert(["video_id", "clip_index"])
            merge.when_matched_update_all().execute(data)

    def clips(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[ClipRow]:
        """A video's clips (those overlapping ``[t0, t1]`` when given), in clip order."""
        rows = self.tables.scan("clips", span_filter([video_id], t0, t1, "t0", "t1"))
        return sorted((ClipRow.from_row(r) for r in rows), key=lambda c: c.clip_index)

    def clip_rows(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ClipRow]:
        """The clips with these ``(video_id, clip_index)`` keys, read in one query."""
        wanted: dict[str, set[int]] = {}
        for video_id, index in keys:
            wanted.setdefault(video_id, set()).add(int(index))
        if not wanted:
            return {}
        rows = (ClipRow.from_row(r) for r in self.tables.scan("clips", clip_keys(wanted)))
        return {(c.video_id, c.clip_index): c for c in rows}

    def put_frames(self, video_id: str, frames: Sequence[FrameRow]) -> None:
        """Make ``frames`` the video's thumbnails. Its frame vectors belong to the old ones:
        dropped."""
        with self.tables.write_lock():
            if self.tables.has("frame_vectors"):
                self.tables.table("frame_vectors").delete(f"video_id = {quote(video_id)}")
            self.tables.merge("frames", [f.__dict__ for f in frames], replace=video_id)

    def frames(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[FrameRow]:
        """A video's thumbnails (those in ``[t0, t1]`` when given), in time order."""
        rows = self.tables.scan("frames", span_filter([video_id], t0, t1, "t", "t"))
        return sorted((FrameRow.from_row(r) for r in rows), key=lambda f: f.t)

    def put_shots(self, video_id: str, shots: Sequence[ShotRow]) -> None:
        """Make ``shots`` the video's shots."""
        self.tables.merge("shots", [s.__dict__ for s in shots], replace=video_id)

    def shots(self, video_id: str) -> list[ShotRow]:
        """A video's shots, in order."""
        rows = self.tables.scan("shots", f"video_id = {quote(video_id)}")
        return sorted((ShotRow.from_row(r) for r in rows), key=lambda s: s.shot_index)

    def put_transcript(self, video_id: str, segments: Sequence[TranscriptSegment]) -> None:
        """Make ``segments`` the video's transcript."""
        self.tables.merge("transcript", [s.__dict__ for s in segments], replace=video_id)

    def transcript(
        self, video_id: str, t0: float | None = None, t1: float | None = None
    ) -> list[TranscriptSegment]:
        """A video's speech segments (those overlapping ``[t0, t1]`` when given), in order."""
        rows = self.tables.scan("transcript", span_filter([video_id], t0, t1, "t0", "t1"))
        return sorted((TranscriptSegment.from_row(r) for r in rows), key=lambda s: s.segment_index)

    # -- a growing video (vidagent watch) -------------------------------------------------------

    def add_rows(
        self,
        video_id: str,
        *,
        clips: Sequence[ClipRow] = (),
        frames: Sequence[FrameRow] = (),
        shots: Sequence[ShotRow] = (),
        transcript: Sequence[TranscriptSegment] = (),
    ) -> None:
        """Add rows to a video, keeping its others: a live stream's new window. A row whose
        key (clip index, frame time, shot or segment index) the video holds is replaced."""
        for name, rows in (
            ("shots", shots),
            ("frames", frames),
            ("transcript", transcript),
            ("clips", clips),  # last: a window's clips are what says it was indexed
        ):
            if rows:
                self.tables.merge(name, [r.__dict__ for r in rows])

    def drop_span(self, video_id: str, t0: float, t1: float | None = None) -> None:
        """Delete a video's rows that start in ``[t0, t1)`` (``t1`` None: from ``t0`` on), its
        clip and frame vectors too: what a live stream's retention rolls out, or a window cut
        short before its rows were all written."""
        where = f"video_id = {quote(video_id)}"
        for name, start in (
            ("clips", "t0"),
            ("clip_vectors", "t0"),
            ("frames", "t"),
            ("frame_vectors", "t"),
            ("shots", "t0"),
            ("transcript", "t0"),
        ):
            if self.tables.has(name):
                with self.tables.write_lock():
                    before = f" AND {start} < {float(t1)}" if t1 is not None else ""
                    self.tables.table(name).delete(f"{where} AND {start} >= {float(t0)}{before}")
