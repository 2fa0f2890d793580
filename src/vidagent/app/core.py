"""What every use case of the application layer reads: settings, the Library, the model hubs.

A :class:`SessionCore` owns the settings, the Library (opened lazily; reading never creates one),
the model hub's lifecycle (made on first use and closed with the core, or borrowed and left
open), hubs for other model settings that a use case asks for (the embedder that made a Library's
vectors, a judge), the trace locations and the one embedding-model check. The use-case modules
(:mod:`~vidagent.app.indexing`, :mod:`~vidagent.app.asking`, :mod:`~vidagent.app.videos`,
:mod:`~vidagent.app.benchmarks`, …) are functions over a core; :class:`~vidagent.app.Session` is
the façade that is a core and names those functions as methods. Executor workers hold a bare
core, so nothing below the façade imports it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from vidagent.config import Settings, load_settings
from vidagent.exceptions import NoLibraryError

if TYPE_CHECKING:
    from vidagent.library import Library

    # re-exported (PEP 484) for the front ends, which import the app only
    from vidagent.models.client import Models as Models  # noqa: PLC0414


def long_running() -> None:
    """Ready this process to run for hours: ``vidagent serve``, ``vidagent mcp`` and
    ``vidagent bench run`` call it first, before they start a thread or open the Library.

    It limits glibc's malloc arenas (:func:`~vidagent.models.cpu.limit_malloc_arenas`), each
    of which keeps what its threads freed. glibc gives each new thread that allocates an arena
    of its own until its bound, which it fixes when first needed: a limit set later keeps the
    arenas already made (ingest's own call came after a server's first requests) or, past
    eight, is ignored. See "Memory of a long-running process" in docs/configuration.md.
    """
    from vidagent.models.cpu import limit_malloc_arenas

    limit_malloc_arenas()


class CacheSizes(TypedDict):
    """The Library's LanceDB cache bounds, in MiB (``Library``'s keyword arguments)."""

    index_cache_mib: int
    metadata_cache_mib: int


class SessionCore:
    """Settings, Library, model hubs and trace locations for a run of work.

    Args:
        settings: default :func:`~vidagent.config.load_settings()`.
        library: a Library or URI (default: the configured one), opened on first use.
        models: a hub to borrow (left open); default: one made on first use, closed by
            :meth:`close`.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        library: Library | str | Path | None = None,
        models: Models | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        self._library: Library | None = None
        self._uri = self.settings.library_uri
        if isinstance(library, (str, Path)):
            self._uri = str(library)
        elif library is not None:
            self._library, self._uri = library, library.uri
        self._models, self._own_models = models, models is None
        #: hubs for other model settings (see :meth:`hub_with`), by what differs
        self._hubs: dict[tuple[tuple[str, Any], ...], Models] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> SessionCore:  # noqa: PYI034 - Session overrides it with its own type
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the model hubs this session made."""
        if self._own_models and self._models is not None:
            self._models.close()
            self._models = None
        hubs, self._hubs = list(self._hubs.values()), {}
        for hub in hubs:
            hub.close()

    @property
    def models(self) -> Models:
        if self._models is None:
            from vidagent.models.client import Models

            self._models = Models(self.settings)
        return self._models

    def hub_with(self, **update: Any) -> Models:
        """A hub for these settings with ``update`` (``embed=spec``: the model that made the
        Library's vectors; ``llm=spec``: a judge), made once and closed with the session."""
        key = tuple(sorted(update.items()))
        if key not in self._hubs:
            from vidagent.models.client import Models

            self._hubs[key] = Models(self.settings.model_copy(update=update))
        return self._hubs[key]

    # -- the Library ------------------------------------------------------------------------------

    @property
    def library(self) -> Library:
        """The Library, created when there is none (for commands that write)."""
        if self._library is None:
            from vidagent.library import Library

            self._library = Library(self._uri, **self.cache_sizes)
        return self._library

    def existing_library(self) -> Library:
        """The Library for reading: never created.

        Raises:
            LibraryError: there is none; the message says how to make one.
        """
        if self._library is None:
            from vidagent.library import Library

            try:
                self._library = Library(self._uri, create=False, **self.cache_sizes)
            except NoLibraryError:  # a damaged or newer one says so itself
                missing = f"no Library at {self._uri}; index a video first (vidagent index PATH)"
                raise NoLibraryError(missing) from None
        return self._library

    @property
    def cache_sizes(self) -> CacheSizes:
        """The Library's LanceDB cache bounds from the settings, as ``Library``'s arguments."""
        return {
            "index_cache_mib": self.settings.library_index_cache_mib,
            "metadata_cache_mib": self.settings.library_metadata_cache_mib,
        }

    @property
    def library_uri(self) -> str:
        """Where the Library is (or would be made), whether or not it exists yet."""
        return self._uri

    def library_exists(self) -> bool:
        from vidagent.library.manifest import MANIFEST

        if self._library is not None or "://" in self._uri:
            return True
        root = Path(self._uri).expanduser()
        # tables without their manifest: one to open, so that opening it says what is wrong
        return (root / MANIFEST).is_file() or (root.is_dir() and any(root.glob("*.lance")))

    def check_embedding(self) -> None:
        """The one check that this session's embed model made the Library's vectors.

        Raises:
            EmbeddingMismatchError: another model made them; the message names it.
        """
        from vidagent.library.search import bound_embedding, require_embedding

        if bound_embedding(self.library) is not None:
            require_embedding(self.library, self.models.client("embed").spec)

    # -- traces -----------------------------------------------------------------------------------

    @property
    def traces_folder(self) -> Path:
        """``$VIDAGENT_HOME/traces``: where runs save their traces."""
        return self.settings.home / "traces"

    def trace_path(self, strategy: str) -> Path:
        """``$VIDAGENT_HOME/traces/<time>-<strategy>-<random>.jsonl``."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        return self.traces_folder / f"{stamp}-{strategy}-{uuid.uuid4().hex[:6]}.jsonl"
