"""Ingest stages: each turns a video into rows of the Library, idempotently."""

from __future__ import annotations

from pathlib import Path

from vidagent.config import Settings, load_settings
from vidagent.ingest.structure import StructureReport, index_structure
from vidagent.library import Library

__all__ = ["StructureReport", "index_structure", "index_video"]


def index_video(
    path: str | Path, *, library: Library | str | None = None, settings: Settings | None = None
) -> StructureReport:
    """Index one video into a Library (default: the configured one); see :func:`index_structure`.

    Args:
        path: the video file.
        library: a :class:`~vidagent.library.Library` or a URI; default ``settings.library_uri``.
        settings: default :func:`~vidagent.config.load_settings()`.
    """
    settings = settings or load_settings()
    if not isinstance(library, Library):
        library = Library(library or settings.library_uri)
    return index_structure(library, path, settings)
