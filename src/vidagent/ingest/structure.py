"""The structure stage: what a video is made of, before any model looks at it.

One probe, one sequential decode that keeps ``sample_fps`` frames per second as small JPEGs,
shot boundaries, and uniform clips of ``clip_seconds``. Rows are written per table in single
commits and the video row last, so rerunning after a crash simply replaces what was there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.config import Settings
from vidagent.library import ClipRow, FrameRow, Library, ShotRow, VideoRecord, content_id
from vidagent.media import (
    ShotDetector,
    VideoInfo,
    content_score,
    encode_jpeg,
    iter_sampled_frames,
    probe,
    to_hsv,
    uniform_clips,
)

if TYPE_CHECKING:
    from vidagent.ingest.sampling import KeptFrames

STAGE = "structure"


@dataclass(frozen=True)
class StructureReport:
    """What the structure stage found and stored for one video."""

    video: VideoRecord
    clips: int
    shots: int
    frames: int
    thumbnail_bytes: int
    seconds: float
    reused: bool


def sampling_of(settings: Settings) -> dict[str, Any]:
    """The settings a video's cut depends on, as its structure entry records them: a video
    cut under others is cut again."""
    return {
        "clip_seconds": settings.clip_seconds,
        "sample_fps": settings.sample_fps,
        "thumb_size": settings.thumb_size,
    }


def index_structure(
    library: Library, path: str | Path, settings: Settings, keep: KeptFrames | None = None
) -> StructureReport:
    """Probe, sample, cut into shots and clips, and store one video; idempotent.

    A video already indexed with the same sampling settings is not decoded again; if its
    recorded file is gone (moved or renamed), the record takes ``path`` as its source.

    Args:
        keep: where the decode also keeps the frames of a later stage's sampling grid, when
            that grid lies on this one (:meth:`KeptFrames.fits`).
    """
    started = time.perf_counter()
    path = Path(path).expanduser()
    info = probe(path)  # raises a typed MediaError before anything is written
    video_id = content_id(path)
    sampling = sampling_of(settings)
    if library.has_video(video_id):
        video = library.get_video(video_id)
        if video.stages.get(STAGE, {}).get("sampling") == sampling:
            source = str(path.resolve())
            if source != video.source and not Path(video.source).is_file():
                # the file moved or was renamed: frames, cuts and sheets are read from here now
                video = replace(video, source=source, name=path.name)
                library.put_video(video)
            return _report(library, video, started, reused=True)

    # One decode for thumbnails and shots. Shots use PySceneDetect's ContentDetector rule at
    # its own working width (the source divided by width // 256), where its default threshold
    # of 27 holds; the adaptive detector misses the dissolves of animated footage (4 shots
    # instead of 15 on the narrated test clip).
    detector = ShotDetector("content")
    shot_side = max(info.width, info.height) // max(1, info.width // 256)
    frames = [
        FrameRow(video_id, round(t, 3), rgb.shape[1], rgb.shape[0], encode_jpeg(rgb))
        for t, rgb in iter_sampled_frames(
            info,
            fps=settings.sample_fps,
            size=settings.thumb_size,
            on_frame_size=shot_side,
            on_frame_prepare=to_hsv,  # on the decode workers, not this thread
            frame_score=content_score,  # there too, so no frame waits for this thread
            on_score=detector.push_score,
            keep=(keep.fps, keep.size) if keep and keep.fits(settings.sample_fps) else None,
            on_keep=keep.add if keep else None,
        )
    ]
    shots = detector.finish(info.duration)
    clips = uniform_clips(info.duration, settings.clip_seconds)

    library.put_frames(video_id, frames)
    library.put_shots(video_id, [ShotRow(video_id, i, s.t0, s.t1) for i, s in enumerate(shots)])
    # Keep the clip rows (and every stage's output in them) unless the boundaries moved. Under
    # the write lock: another process indexing the same file must not have its stages' output
    # replaced by empty clips between this check and the write.
    with library.write_lock():
        if [(c.t0, c.t1) for c in library.clips(video_id)] != [(c.t0, c.t1) for c in clips]:
            rows = [ClipRow(video_id, i, c.t0, c.t1) for i, c in enumerate(clips)]
            library.put_clips(video_id, rows)
    library.set_sampling(**sampling)
    with library.write_lock():  # the stage map of a concurrent indexer of this file is kept
        video = _video_row(library, path, video_id, info, sampling)
        library.put_video(video)
    return _report(library, video, started, reused=False)


def _video_row(
    library: Library, path: Path, video_id: str, info: VideoInfo, sampling: dict[str, Any]
) -> VideoRecord:
    old = library.get_video(video_id) if library.has_video(video_id) else None
    return VideoRecord(
        video_id=video_id,
        source=str(path.resolve()),
        name=path.name,
        size_bytes=info.size_bytes,
        duration=info.duration,
        fps=info.fps,
        width=info.width,
        height=info.height,
        rotation=info.rotation,
        codec=info.codec,
        has_audio=info.has_audio,
        added_at=old.added_at if old else _now(),
        stages={**(old.stages if old else {}), STAGE: {"sampling": sampling, "at": _now()}},
        # a time the user gave (--started-at) stays; else the container's creation time
        recorded_at=(old.recorded_at if old else "") or info.created_at,
    )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _report(
    library: Library, video: VideoRecord, started: float, *, reused: bool
) -> StructureReport:
    frames = library.frames(video.video_id)
    return StructureReport(
        video=video,
        clips=len(library.clips(video.video_id)),
        shots=len(library.shots(video.video_id)),
        frames=len(frames),
        thumbnail_bytes=sum(len(f.jpeg) for f in frames),
        seconds=time.perf_counter() - started,
        reused=reused,
    )
