"""Models: roles filled by ``provider:model`` spec strings, called through one client layer.

See :mod:`vidagent.models.registry` for spec strings and providers, :mod:`vidagent.models.base`
for the typed requests and responses, :mod:`vidagent.models.client` for retries, concurrency
limits, accounting and the response cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidagent.exceptions import ConfigError
from vidagent.roles import ROLES

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.models.client import Client


def load_model(role_or_spec: str, settings: Settings | None = None) -> Client:
    """A client for a role (``"llm"``) or a spec string (``"openai:gpt-4o-mini"``).

    A spec fills the first role in :data:`~vidagent.roles.ROLES` its provider serves.

    Example:
        >>> llm = load_model("llm")
        >>> llm.chat(ChatRequest(messages=(Message("user", "Hi"),))).text

    Raises:
        ConfigError: an unknown role, a bad spec, or a provider that fills no role.
    """
    from vidagent.config import load_settings
    from vidagent.models.client import Models

    settings = settings or load_settings()
    if role_or_spec not in ROLES:
        from vidagent.models.registry import parse_spec, provider_roles

        spec = parse_spec(role_or_spec)
        serves = provider_roles(spec, settings)
        role = next((r for r in ROLES if r in serves), None)
        if role is None:
            raise ConfigError(f"{role_or_spec!r} fills no model role; roles: {', '.join(ROLES)}")
        settings = settings.model_copy(update={role: role_or_spec})
        return Models(settings).client(role)
    return Models(settings).client(role_or_spec)
