"""Model spec strings: ``provider:model[?key=value&…]`` parsed, and the providers' names.

A spec names the provider that fills a role and how: ``openai:gpt-4o-mini``,
``llamacpp:/models/qwen.gguf?n_ctx=8192``, ``none:`` (an optional role left empty). This module
parses one and checks its provider is known; :mod:`vidagent.models.registry` turns a parsed
spec into an adapter.

It sits below both :mod:`vidagent.config`, which checks every configured spec when settings are
made, and :mod:`vidagent.models`, so the two need not import each other. :data:`PROVIDERS` names
each built-in adapter by its module path: nothing under :mod:`vidagent.models` is imported until
``models.registry`` loads one.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

from vidagent.exceptions import ConfigError
from vidagent.plugins import Registry

#: Provider name -> adapter class, built-ins first (imported on first use), then plugins. Typed
#: ``type`` here: the models layer checks that what it loads is an ``Adapter`` subclass.
PROVIDERS: Registry[type] = Registry(
    "vidagent.providers",
    "model provider",
    {
        "openai": "vidagent.models.openai:OpenAIAdapter",
        "llamacpp": "vidagent.models.llamacpp:LlamaCppAdapter",
        "sentence-transformers": "vidagent.models.sentence_transformers:SentenceTransformerAdapter",
        "faster-whisper": "vidagent.models.whisper:FasterWhisperAdapter",
        "rapidocr": "vidagent.models.rapidocr:RapidOCRAdapter",
        "opencv": "vidagent.models.opencv:OpenCVDetector",
        "transformers": "vidagent.models.transformers_detect:TransformersDetector",
        "clip": "vidagent.models.clip:ClipEmbedder",
        "perception": "vidagent.models.perception:PerceptionDescriber",
        "fake": "vidagent.models.fake:FakeAdapter",
    },
)
#: Other spellings of the built-in providers' names.
ALIASES = {
    "llama-cpp": "llamacpp",
    "gguf": "llamacpp",
    "st": "sentence-transformers",
    "whisper": "faster-whisper",
}


@dataclass(frozen=True)
class Spec:
    """A parsed spec string: canonical provider name, model and options."""

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
    """Split ``provider:model?k=v`` and canonicalise the provider name.

    Raises:
        ConfigError: not ``provider:model``, or no such provider (the message lists them).
    """
    if ":" not in spec:
        raise ConfigError(
            f"model spec {spec!r} must look like provider:model, e.g. openai:gpt-4o-mini; "
            f"providers: {', '.join(sorted(PROVIDERS))}"
        )
    provider, rest = spec.split(":", 1)
    provider = provider.strip().lower()
    provider = ALIASES.get(provider, provider)
    model, _, query = rest.partition("?")
    if provider == "none":
        return Spec("none", "", {})
    if provider not in PROVIDERS:
        raise ConfigError(
            f"unknown model provider {provider!r} in {spec!r}; "
            f"providers: {', '.join(sorted(PROVIDERS))}, none"
        )
    return Spec(provider, model.strip(), dict(parse_qsl(query, keep_blank_values=True)))


__all__ = ["ALIASES", "PROVIDERS", "Spec", "parse_spec"]
