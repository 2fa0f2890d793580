"""The on-disk index: see :mod:`vidagent.library.store` for the layout."""

from vidagent.library.manifest import SCHEMA_VERSION, Manifest
from vidagent.library.schema import (
    Artifact,
    ArtifactKind,
    ClipHit,
    ClipRow,
    FrameRow,
    ShotRow,
    VideoRecord,
)
from vidagent.library.store import Library, content_id

__all__ = [
    "SCHEMA_VERSION",
    "Artifact",
    "ArtifactKind",
    "ClipHit",
    "ClipRow",
    "FrameRow",
    "Library",
    "Manifest",
    "ShotRow",
    "VideoRecord",
    "content_id",
]
