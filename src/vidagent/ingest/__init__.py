"""Ingest: turn videos into the multi-granular index, once, resumably.

See :mod:`vidagent.ingest.pipeline` for the stage order and :mod:`vidagent.ingest.base` for
how stages checkpoint and decide what is left to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vidagent.config import Settings, load_settings
from vidagent.ingest.pipeline import (
    STAGES,
    IndexEstimate,
    IndexResult,
    default_stages,
    estimate_path,
    index_path,
)
from vidagent.ingest.structure import StructureReport, index_structure
from vidagent.library import Library

if TYPE_CHECKING:
    from vidagent.models.client import Models

__all__ = [
    "STAGES",
    "IndexEstimate",
    "IndexResult",
    "StructureReport",
    "default_stages",
    "estimate_path",
    "index_path",
    "index_structure",
    "index_video",
]


def index_video(
    path: str | Path,
    *,
    library: Library | str | None = None,
    settings: Settings | None = None,
    models: Models | None = None,
    stages: Sequence[str] | None = None,
    progress: bool = False,
) -> IndexResult:
    """Index one video into a Library (default: the configured one) through every stage.

    Args:
        path: the video file.
        library: a :class:`~vidagent.library.Library` or a URI; default ``settings.library_uri``.
        settings: default :func:`~vidagent.config.load_settings()`.
        models: the model hub to call (default: one built from ``settings``).
        stages: stage names after ``structure``, in order (default:
            :func:`default_stages`: :data:`STAGES`, all but the optional ``embed_frames`` and
            ``graph``, plus ``graph`` when the llm role is not the embedded smoke-test model).
        progress: show a progress bar per stage on stderr.

    Raises:
        MediaError: the file cannot be used as a video (nothing is written).
    """
    from vidagent.models.client import Models

    settings = settings or load_settings()
    if not isinstance(library, Library):
        library = Library(
            library or settings.library_uri,
            index_cache_mib=settings.library_index_cache_mib,
            metadata_cache_mib=settings.library_metadata_cache_mib,
        )
    hub = models or Models(settings)
    try:
        result = index_path(
            path,
            library=library,
            settings=settings,
            models=hub,
            stages=default_stages(settings) if stages is None else stages,
            progress=progress,
        )
    finally:
        if models is None:
            hub.close()
    if result.error is not None:
        raise result.error
    return result
