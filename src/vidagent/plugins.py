"""Named, lazily imported implementations that other installed packages can add to.

Each extension point is a :class:`Registry` with built-ins named by ``"module:attr"`` strings
and imported on first use (importing vidagent or ``vidagent --help`` never imports torch,
llama.cpp or LanceDB), plugins read from installed distributions' entry points on the first
lookup of a name that is not built in, and in-process additions (:meth:`Registry.register`).
A package declares a plugin in its ``pyproject.toml``::

    [project.entry-points."vidagent.providers"]
    mymodel = "mypkg.adapter:MyAdapter"

Groups: ``vidagent.providers`` (an :class:`~vidagent.models.base.Adapter` subclass; its
``capabilities.roles`` are the roles it fills), ``vidagent.strategies`` (an agent class),
``vidagent.benchmarks`` (a benchmark module), ``vidagent.stages`` (a zero-argument factory of an
ingest stage, usually its class), ``vidagent.detectors`` (``(ctx) -> ObjectDetector``) and
``vidagent.trackers`` (``() -> ObjectTracker``).

Names are exact: callers that accept aliases map them first. A plugin cannot take a built-in's
name, since installing a package must not silently change what a documented name does, while
refusing outright would let one bad package break every command: such a plugin is ignored with
a :class:`RuntimeWarning`, as is the second of two plugins with one name.
:meth:`Registry.register` replaces a name only when asked to (``replace=True``).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar, cast

from vidagent.exceptions import ConfigError

T = TypeVar("T")

_EVERY: weakref.WeakSet[Registry[object]] = weakref.WeakSet()


class Registry(Generic[T]):
    """Implementations of one kind by name: built-ins, entry-point plugins, in-process additions.

    Args:
        group: The entry-point group plugins declare themselves in, e.g. ``"vidagent.stages"``.
        noun: What one is called in messages, e.g. ``"stage"``.
        builtins: ``{name: "module:attr"}`` (or ``"module"``), in the order :meth:`names` lists.
    """

    def __init__(self, group: str, noun: str, builtins: Mapping[str, str] | None = None) -> None:
        self.group = group
        self.noun = noun
        self._builtins = {n: EntryPoint(n, t, group) for n, t in (builtins or {}).items()}
        self._added: dict[str, EntryPoint | T] = {}
        self._plugins: dict[str, EntryPoint] | None = None  # None until discovered
        self._loaded: dict[str, T] = {}
        self._lock = threading.Lock()
        _EVERY.add(cast("Registry[object]", self))

    def names(self) -> tuple[str, ...]:
        """Every name: built-ins in their order, then in-process additions, then plugins by name."""
        return tuple(dict.fromkeys([*self._builtins, *self._added, *self._discovered()]))

    def __contains__(self, name: object) -> bool:
        # Built-ins answer without reading any package metadata.
        return name in self._builtins or name in self._added or name in self._discovered()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def register(self, name: str, obj: T | str, *, replace: bool = False) -> None:
        """Add ``obj`` under ``name`` in this process; a ``str`` is a ``"module:attr"`` target.

        Raises:
            ValueError: ``name`` is taken and ``replace`` is False.
        """
        if name in self and not replace:
            raise ValueError(f"a {self.noun} named {name!r} is registered already")
        self._added[name] = EntryPoint(name, obj, self.group) if isinstance(obj, str) else obj
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        """Remove an in-process addition (what it replaced, if anything, comes back).

        Raises:
            KeyError: ``name`` was not added by :meth:`register`.
        """
        del self._added[name]
        self._loaded.pop(name, None)

    def load(self, name: str) -> T:
        """The object called ``name``, imported on first use.

        Raises:
            ConfigError: no such name (the message lists the known ones), or a plugin's entry
                point fails to import (the message names its distribution).
        """
        if name in self._loaded:
            return self._loaded[name]
        source = self._source(name)
        if source is None:
            known = ", ".join(self.names()) or "none"
            raise ConfigError(f"unknown {self.noun} {name!r}; choose one of: {known}")
        obj = self._import(source) if isinstance(source, EntryPoint) else source
        self._loaded[name] = obj
        return obj

    def forget(self) -> None:
        """Drop discovered entry points and loaded objects, so the next lookup reads them again.

        For tests that install a distribution in the middle of a process.
        """
        with self._lock:
            self._plugins = None
            self._loaded.clear()

    # -- internals --------------------------------------------------------------------------------

    def _source(self, name: str) -> EntryPoint | T | None:
        if name in self._added:
            return self._added[name]
        if name in self._builtins:
            return self._builtins[name]
        return self._discovered().get(name)

    def _import(self, ep: EntryPoint) -> T:
        if self._builtins.get(ep.name) is ep:
            return cast(T, ep.load())  # our own module: a failure is our bug and propagates
        try:
            return cast(T, ep.load())
        except Exception as e:  # whatever a third-party import raises, it is that package's
            reason = (str(e).splitlines() or [""])[0]
            raise ConfigError(
                f"the {self.noun} {ep.name!r} from {_origin(ep)} failed to import "
                f"({ep.value}): {type(e).__name__}: {reason}"
            ) from e

    def _discovered(self) -> dict[str, EntryPoint]:
        plugins = self._plugins
        if plugins is None:
            with self._lock:
                if self._plugins is None:
                    self._plugins = self._discover()
                plugins = self._plugins
        return plugins

    def _discover(self) -> dict[str, EntryPoint]:
        found: dict[str, EntryPoint] = {}
        # Stable sort: of two plugins with one name, the one earlier on sys.path is kept.
        for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
            taken = self._builtins.get(ep.name) or found.get(ep.name)
            if taken is None:
                found[ep.name] = ep
            elif taken.value != ep.value:  # the same target twice (one package seen twice) is fine
                what = "built-in" if ep.name in self._builtins else f"one from {_origin(taken)}"
                warnings.warn(
                    f"{_origin(ep)} declares a {self.noun} {ep.name!r} ({ep.value}), the name of "
                    f"a {what}; it is ignored",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return found


def forget_discovered() -> None:
    """:meth:`Registry.forget` on every registry made so far (for tests)."""
    for registry in list(_EVERY):
        registry.forget()


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"package {dist.name} {dist.version}" if dist is not None else "register()"
