"""Models: roles filled by ``provider:model`` spec strings, called through one client layer.

See :mod:`vidagent.models.registry` for spec strings and providers, :mod:`vidagent.models.base`
for the typed requests and responses, :mod:`vidagent.models.client` for retries, concurrency
limits, accounting and the response cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidagent.config import ROLES

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.models.client import Client


def load_model(role_or_spec: str, settings: Settings | None = None) -> Client:
    """A client for a role (``"llm"``) or a spec string (``"openai:gpt-4o-mini"``).

    Example:
        >>> llm = load_model("llm")
        >>> llm.chat(ChatRequest(messages=(Message("user", "Hi"),))).text
    """
    from vidagent.config import load_settings
    from vidagent.models.client import Models

    settings = settings or load_settings()
    if role_or_spec not in ROLES:
        from vidagent.models.registry import parse_spec

        spec = parse_spec(role_or_spec)
        role = next(r for r in ROLES if r in _roles_of(spec.provider))
        settings = settings.model_copy(update={role: role_or_spec})
        return Models(settings).client(role)
    return Models(settings).client(role_or_spec)


def _roles_of(provider: str) -> frozenset[str]:
    from vidagent.models.registry import PROVIDERS

    return PROVIDERS[provider].roles
