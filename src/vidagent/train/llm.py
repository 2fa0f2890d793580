"""A chat function (messages -> reply text) over any ``llm`` spec, with the client's retries.

Script synthesis and the simulator's visual agent both talk to "some LLM"; this is the one place
they get it from: the same registry and :class:`~vidagent.models.client.Client` (retries by error
type, response cache, usage ledger) the agents use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vidagent.config import Settings

Chat = Callable[[list[dict[str, str]]], str]


def llm_chat(
    spec: str, settings: Settings, *, temperature: float = 0.0, max_tokens: int | None = None
) -> Chat:
    """Messages -> reply text of the ``llm`` model ``spec`` (an adapter built now, loaded lazily).

    Raises:
        ConfigError: a bad spec or a provider that cannot fill the ``llm`` role.
    """
    from vidagent.models.base import ChatRequest, Message
    from vidagent.models.client import Client
    from vidagent.models.registry import create_adapter

    client = Client(create_adapter(spec, settings, "llm"), settings=settings, role="llm")

    def chat(messages: list[dict[str, str]]) -> str:
        request = ChatRequest(
            messages=tuple(Message(role=m["role"], content=m["content"]) for m in messages),  # type: ignore[arg-type]
            temperature=temperature,
            max_tokens=max_tokens,
        )
        return client.chat(request).text

    return chat
