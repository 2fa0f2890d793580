"""The one place a spec string becomes an adapter.

A spec is ``provider:model[?key=value&…]``: ``openai:gpt-4o-mini``,
``openai:qwen2.5-vl?base_url=http://localhost:8000/v1``, ``llamacpp:/models/qwen.gguf?n_ctx=8192``,
``faster-whisper:small.en``, ``transformers:~/models/owlv2`` (a local zero-shot detector),
``clip:~/models/clip-vit-base-patch32`` (image and text embeddings), ``fake:scripted``.
A provider may serve different roles with different classes (:data:`ROLE_PROVIDERS`):
``transformers:<dir>`` is a detector in the ``detector`` role and a chat model in ``llm``.
``none:`` leaves an optional role empty.

Specs are parsed and providers named in :mod:`vidagent.specs`, below both config (which checks
every configured spec) and this package; :data:`PROVIDERS` and :func:`parse_spec` are importable
from here too. :data:`PROVIDERS` is a :class:`~vidagent.plugins.Registry` of adapter classes:
the built-ins are named by module path and imported only when a spec needs them, so resolving
and reporting (``vidagent info``) never import torch or llama.cpp; an installed package adds one
with an entry point in the ``vidagent.providers`` group naming an
:class:`~vidagent.models.base.Adapter` subclass. The roles a provider fills are declared once,
on its adapter: ``capabilities.roles``. An adapter may build without loading weights from
``from_settings(model, options, settings)``, or else from ``(model, options)``; its
``provider`` attribute should be the name it is registered under, since specs print with it.
A module-level ``status(model, options, settings) -> BackendStatus`` beside the class, if any,
tells ``vidagent info`` whether the backend is usable.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vidagent.exceptions import ConfigError
from vidagent.models.cpu import cpu_share  # here too: adapters of plugins import it from here
from vidagent.specs import PROVIDERS, Spec, parse_spec

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.models.base import Adapter, BackendStatus, Capabilities

#: (provider, role) -> the adapter class serving that role under that provider's name, where it
#: differs from the class in PROVIDERS.
__all__ = [
    "PROVIDERS",
    "ROLE_PROVIDERS",
    "Spec",
    "adapter_class",
    "backend_status",
    "cpu_share",
    "create_adapter",
    "module_available",
    "package_path",
    "parse_spec",
    "provider_capabilities",
    "provider_roles",
    "without_openvino_telemetry",
]

ROLE_PROVIDERS: dict[tuple[str, str | None], str] = {
    ("transformers", "llm"): "vidagent.models.transformers_llm:TransformersChat"
}


def _parsed(spec: str | Spec) -> Spec:
    return parse_spec(spec) if isinstance(spec, str) else spec


def adapter_class(provider: str, role: str | None = None) -> type[Adapter]:
    """The adapter class registered as ``provider`` (a canonical name) for ``role``, imported now.

    Raises:
        ConfigError: no such provider, its plugin fails to import, or it is no Adapter.
    """
    from vidagent.models.base import Adapter

    if (provider, role) in ROLE_PROVIDERS:
        module, _, name = ROLE_PROVIDERS[provider, role].partition(":")
        cls = getattr(importlib.import_module(module), name)
    else:
        cls = PROVIDERS.load(provider)
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise ConfigError(f"model provider {provider!r} is {cls!r}, not an Adapter subclass")
    return cls


def _check_role(provider: str, roles: frozenset[str], role: str | None) -> None:
    if role is not None and role not in roles:
        serves = ", ".join(sorted(roles)) or "no role"
        raise ConfigError(f"provider {provider!r} cannot fill role {role!r}; it serves: {serves}")


def _instantiate(cls: type[Adapter], spec: Spec, settings: Settings) -> Adapter:
    factory = getattr(cls, "from_settings", None)
    if factory is None:  # Adapter defines none: a plugin that reads no settings may leave it out
        return cls(spec.model, spec.options)
    adapter: Adapter = factory(spec.model, spec.options, settings)
    return adapter


def create_adapter(spec: str | Spec, settings: Settings, role: str | None = None) -> Adapter:
    """Instantiate the adapter for ``spec`` (weights still load lazily, on first use).

    Raises:
        ConfigError: a bad or disabled spec, or a provider that cannot fill ``role``.
    """
    parsed = _parsed(spec)
    if parsed.disabled:
        raise ConfigError(f"role {role or '?'} is disabled (spec 'none:'); set a model for it")
    cls = adapter_class(parsed.provider, role)
    if cls.capabilities.roles:  # reject before building where the class says enough
        _check_role(parsed.provider, cls.capabilities.roles, role)
    adapter = _instantiate(cls, parsed, settings)
    try:
        _check_role(parsed.provider, adapter.capabilities.roles, role)
    except ConfigError:
        adapter.close()
        raise
    return adapter


def provider_roles(spec: str | Spec, settings: Settings) -> frozenset[str]:
    """The roles the adapter of ``spec`` fills: ``capabilities.roles`` of its class.

    An adapter class that leaves its capabilities to the instance (declares no roles) is built
    to ask it; adapters build without loading weights.

    Raises:
        ConfigError: a bad spec, or a provider that cannot be imported or built.
    """
    parsed = _parsed(spec)
    if parsed.disabled:
        return frozenset()
    extra = frozenset(r for p, r in ROLE_PROVIDERS if p == parsed.provider and r is not None)
    cls = adapter_class(parsed.provider)
    if cls.capabilities.roles:
        return cls.capabilities.roles | extra
    adapter = _instantiate(cls, parsed, settings)
    roles = adapter.capabilities.roles
    adapter.close()
    return roles | extra


def provider_capabilities(spec: str | Spec) -> Capabilities:
    """The capabilities a provider's adapters declare, without creating one (for estimates).

    Per-instance refinements (a llama.cpp model's context, an OpenCV detector's labels) need the
    adapter itself: ``Models.client(role).capabilities``.
    """
    parsed = _parsed(spec)
    if parsed.disabled:
        from vidagent.models.base import Capabilities

        return Capabilities(roles=frozenset())
    return adapter_class(parsed.provider).capabilities


def declared_capabilities(spec: str | Spec, role: str | None = None) -> Capabilities:
    """What the adapter of ``spec`` declares for that model (:meth:`Adapter.declares`: whether
    it is a weak reasoner, a test's script), without creating one: for the decisions made from
    the settings before any model is built (the summary's method, ingest's default stages).

    Raises:
        ConfigError: a bad spec, or a provider that cannot be imported.
    """
    parsed = _parsed(spec)
    if parsed.disabled:
        from vidagent.models.base import Capabilities

        return Capabilities(roles=frozenset())
    return adapter_class(parsed.provider, role).declares(parsed.model, parsed.options)


def backend_status(spec: str, settings: Settings, role: str) -> BackendStatus:
    """Whether the backend for ``spec`` is installed and usable, without importing heavy code."""
    from vidagent.models.base import BackendStatus

    try:
        parsed = parse_spec(spec)
        if parsed.disabled:
            return BackendStatus(spec, False, "disabled (optional role)")
        _check_role(parsed.provider, provider_roles(parsed, settings), role)
    except ConfigError as e:
        return BackendStatus(spec, False, str(e))
    module = importlib.import_module(adapter_class(parsed.provider, role).__module__)
    status = getattr(module, "status", None)
    if status is None:  # nothing to check: code in this process, no weights or server
        origin = "built in" if module.__name__.startswith("vidagent.") else module.__name__
        return BackendStatus(str(parsed), True, origin)
    return status(parsed.model, parsed.options, settings)  # type: ignore[no-any-return]


def without_openvino_telemetry() -> None:
    """Keep OpenVINO from sending usage telemetry: with ``openvino_telemetry`` unimportable
    (None in ``sys.modules``), OpenVINO's import takes its bundled no-op stub (its Python
    package otherwise sends a usage event to Google Analytics from a forked process). Call it
    before importing OpenVINO; a process that imported it already keeps its choice."""
    if "openvino" not in sys.modules:
        sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]


def module_available(name: str) -> bool:
    """True when ``name`` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def package_path(package: str, *parts: str) -> Path | None:
    """Path of a file shipped inside an installed package, found without importing it."""
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    path = Path(next(iter(found.submodule_search_locations))).joinpath(*parts)
    return path if path.exists() else None
