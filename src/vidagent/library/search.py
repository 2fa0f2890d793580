"""The one check that a query is embedded with the model that made a Library's vectors.

Searching compares a query's vector with stored clip vectors, which only means something when
both come from the same model. The manifest records that model (:func:`bound_embedding`).
``ask`` and the agents' ``clip_search`` call :func:`require_embedding` before embedding a query;
the application layer's ``search`` embeds with the bound model itself, whatever is configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidagent.exceptions import EmbeddingMismatchError, LibraryError

if TYPE_CHECKING:
    from vidagent.library.store import Library


def bound_embedding(library: Library) -> str | None:
    """The spec of the model the Library's clip vectors were made with (None: none yet)."""
    bound = library.manifest.embeddings.get("clip_vectors")
    return str(bound["spec"]) if bound else None


def require_embedding(library: Library, spec: str) -> None:
    """Check that ``spec`` is the model that made the Library's clip vectors.

    Raises:
        LibraryError: the Library has no clip vectors yet.
        EmbeddingMismatchError: they were made by another model; the message says which to use.
    """
    bound = bound_embedding(library)
    if bound is None:
        raise LibraryError(f"{library.uri} has no clip embeddings yet; run `vidagent index` first")
    if bound != spec:
        raise EmbeddingMismatchError(
            f"the Library's clips were embedded with {bound}, not {spec}; use --embed {bound} "
            "(or re-index with the new model, or use another Library with --library)"
        )
