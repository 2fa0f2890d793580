"""Text search over clips: embed the query with the model that made the stored vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vidagent.exceptions import LibraryError
from vidagent.library.schema import ClipHit

if TYPE_CHECKING:
    from vidagent.library.store import Library
    from vidagent.models.client import Models


def search(
    library: Library,
    query: str,
    *,
    models: Models | None = None,
    videos: Sequence[str] | None = None,
    t_from: float | None = None,
    t_to: float | None = None,
    top: int = 10,
) -> list[ClipHit]:
    """Clips most similar to ``query`` in meaning, best first.

    Args:
        library: the Library to search.
        query: free text.
        models: the model hub; its embed client must be the model the Library's vectors were
            made with (the manifest records it), else LibraryError says which to use.
            Default: a hub for exactly that model, with the other settings as configured.
        videos: ids, id prefixes or names; default every video.
        t_from, t_to: keep clips overlapping this range (seconds).
        top: how many clips.
    """
    bound = library.manifest.embeddings.get("clip_vectors")
    if bound is None:
        raise LibraryError(f"{library.uri} has no clip embeddings yet; run `vidagent index` first")
    if models is None:
        from vidagent.config import load_settings
        from vidagent.models.client import Models

        with Models(load_settings({"embed": bound["spec"]})) as own:
            return search(
                library, query, models=own, videos=videos, t_from=t_from, t_to=t_to, top=top
            )
    client = models.client("embed")
    if client.spec != bound["spec"]:
        raise LibraryError(
            f"the Library's clips were embedded with {bound['spec']}, not {client.spec}; "
            f"search with --embed {bound['spec']} (or re-index with the new model)"
        )
    ids = [library.resolve(v) for v in videos] if videos else None
    vector = client.embed([query]).vectors[0]  # (D,)
    return library.search_clips(vector, video_ids=ids, t_from=t_from, t_to=t_to, k=top)
