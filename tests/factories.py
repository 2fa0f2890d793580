"""Small builders of Library rows shared by tests (tests/ is on sys.path via its conftest)."""

from __future__ import annotations

from vidagent.library import VideoRecord


def video_record(video_id: str, duration: float = 15.0, name: str | None = None) -> VideoRecord:
    """A plausible 640x360 25 fps video row; only id, duration and name vary."""
    name = name or f"{video_id}.mp4"
    return VideoRecord(
        video_id,
        f"/videos/{name}",
        name,
        1000,
        duration,
        25.0,
        640,
        360,
        0,
        "h264",
        True,
        "2026-01-01T00:00:00",
        {},
    )
