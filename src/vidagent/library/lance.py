"""Importing LanceDB without the cost of a client the Library never calls.

LanceDB 0.40 imports ``lance_namespace``, which imports the model classes of
``lance_namespace_urllib3_client``, the REST client of a Lance namespace server; that package's
``__init__`` also imports its nine API modules, whose 366 methods pydantic's ``validate_call``
wraps at import. That was 0.35-0.45 s of CPU in every process that opened a Library (``import
lancedb``: 0.95-1.06 CPU-s against 0.59-0.67 without it, AMD EPYC, 2 cores beside a running test
suite; a CLI command that opens a Library, idle: 1.31 s against 0.82 s), for a client that a
Library on a local path or an object store never calls, and vidagent starts many such processes
(CLI runs, ``--jobs`` and Ray workers, servers).

:func:`import_lancedb` registers that package before LanceDB is imported with its submodules
importable (the models LanceDB uses load as they are asked for) and its own ``__init__`` run
on the first name read from it (PEP 562), so code that does use the REST client gets the
whole package, once.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType

#: The package whose ``__init__`` is deferred (module docstring).
REST_CLIENT = "lance_namespace_urllib3_client"
_lock = threading.RLock()


def defer_init(name: str) -> None:
    """Register package ``name`` with its ``__init__`` deferred to the first name read from it;
    nothing when it is imported already or not installed."""
    with _lock:
        if name in sys.modules:
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return
        module = importlib.util.module_from_spec(spec)
        loader = spec.loader
        runner: list[int] = []  # the thread running ``__init__``, while it runs

        def __getattr__(attr: str) -> object:  # PEP 562
            # Dunders are the import machinery probing; a name read by ``__init__`` itself
            # while it runs is one it has not defined yet. Another thread waits for it.
            if attr.startswith("__") or runner == [threading.get_ident()]:
                raise AttributeError(f"module {name!r} has no attribute {attr!r}")
            with _lock:
                if "__getattr__" in module.__dict__:
                    runner.append(threading.get_ident())
                    try:
                        loader.exec_module(module)
                    finally:
                        runner.clear()
                    del module.__getattr__
            return getattr(module, attr)

        setattr(module, "__getattr__", __getattr__)  # noqa: B010 (mypy: ModuleType has one)
        sys.modules[name] = module


def import_lancedb() -> ModuleType:
    """``lancedb``, imported without its REST client's ``__init__`` (module docstring)."""
    defer_init(REST_CLIENT)
    import lancedb

    return lancedb
