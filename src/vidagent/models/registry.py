"""The one place a spec string becomes an adapter.

A spec is ``provider:model[?key=value&…]``: ``openai:gpt-4o-mini``,
``openai:qwen2.5-vl?base_url=http://localhost:8000/v1``, ``llamacpp:/models/qwen.gguf?n_ctx=8192``,
``faster-whisper:small.en``, ``fake:scripted``. ``none:`` leaves an optional role empty.

Providers are named here by module path and imported only when a spec needs them, so resolving
and reporting (``vidagent info``) never import torch or llama.cpp.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from vidagent.exceptions import ConfigError

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.models.base import Adapter, BackendStatus


@dataclass(frozen=True)
class ProviderEntry:
    target: str  # "module:Class"
    roles: frozenset[str]
    aliases: tuple[str, ...] = ()


PROVIDERS: dict[str, ProviderEntry] = {
    "openai": ProviderEntry(
        "vidagent.models.openai:OpenAIAdapter", frozenset({"llm", "vlm", "embed"})
    ),
    "llamacpp": ProviderEntry(
        "vidagent.models.llamacpp:LlamaCppAdapter", frozenset({"llm"}), ("llama-cpp", "gguf")
    ),
    "sentence-transformers": ProviderEntry(
        "vidagent.models.sentence_transformers:SentenceTransformerAdapter",
        frozenset({"embed"}),
        ("st",),
    ),
    "faster-whisper": ProviderEntry(
        "vidagent.models.whisper:FasterWhisperAdapter", frozenset({"asr"}), ("whisper",)
    ),
    "rapidocr": ProviderEntry("vidagent.models.rapidocr:RapidOCRAdapter", frozenset({"ocr"})),
    "opencv": ProviderEntry("vidagent.models.opencv:OpenCVDetector", frozenset({"detector"})),
    "perception": ProviderEntry(
        "vidagent.models.perception:PerceptionDescriber", frozenset({"vlm"})
    ),
    "fake": ProviderEntry(
        "vidagent.models.fake:FakeAdapter",
        frozenset({"llm", "vlm", "embed", "image_embed", "asr", "ocr", "detector"}),
    ),
}
_ALIASES = {alias: name for name, e in PROVIDERS.items() for alias in e.aliases}


@dataclass(frozen=True)
class Spec:
    provider: str
    model: str
    options: dict[str, str]

    @property
    def disabled(self) -> bool:
        return self.provider == "none"

    def __str__(self) -> str:
        opts = "&".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.provider}:{self.model}" + (f"?{opts}" if opts else "")


def parse_spec(spec: str) -> Spec:
    """Split ``provider:model?k=v`` and canonicalise the provider name."""
    if ":" not in spec:
        raise ConfigError(
            f"model spec {spec!r} must look like provider:model, e.g. openai:gpt-4o-mini; "
            f"providers: {', '.join(sorted(PROVIDERS))}"
        )
    provider, rest = spec.split(":", 1)
    provider = provider.strip().lower()
    provider = _ALIASES.get(provider, provider)
    model, _, query = rest.partition("?")
    if provider == "none":
        return Spec("none", "", {})
    if provider not in PROVIDERS:
        raise ConfigError(
            f"unknown model provider {provider!r} in {spec!r}; "
            f"providers: {', '.join(sorted(PROVIDERS))}, none"
        )
    return Spec(provider, model.strip(), dict(parse_qsl(query, keep_blank_values=True)))


def _entry(spec: Spec, role: str | None) -> ProviderEntry:
    entry = PROVIDERS[spec.provider]
    if role is not None and role not in entry.roles:
        serves = ", ".join(sorted(entry.roles))
        raise ConfigError(
            f"provider {spec.provider!r} cannot fill role {role!r}; it serves: {serves}"
        )
    return entry


def _load_class(target: str) -> type[Adapter]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def create_adapter(spec: str | Spec, settings: Settings, role: str | None = None) -> Adapter:
    """Instantiate the adapter for ``spec`` (weights still load lazily, on first use)."""
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    if parsed.disabled:
        raise ConfigError(f"role {role or '?'} is disabled (spec 'none:'); set a model for it")
    cls = _load_class(_entry(parsed, role).target)
    return cls.from_settings(parsed.model, parsed.options, settings)  # type: ignore[attr-defined]


def backend_status(spec: str, settings: Settings, role: str) -> BackendStatus:
    """Whether the backend for ``spec`` is installed and usable, without importing heavy code."""
    from vidagent.models.base import BackendStatus

    try:
        parsed = parse_spec(spec)
        if parsed.disabled:
            return BackendStatus(spec, False, "disabled (optional role)")
        entry = _entry(parsed, role)
    except ConfigError as e:
        return BackendStatus(spec, False, str(e))
    module = importlib.import_module(entry.target.partition(":")[0])
    status = getattr(module, "status", None)
    if status is None:
        return BackendStatus(str(parsed), True, "built in")
    return status(parsed.model, parsed.options, settings)  # type: ignore[no-any-return]


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
