"""The model roles: the one place they are declared.

A role is a job a model does for vidagent; each is filled by a spec string (see
:mod:`vidagent.models.registry`). Settings fields, the CLI's ``--<role>`` flags, ``vidagent info``
and the type checker all read this module, and an adapter names the roles it serves in its
``capabilities.roles``.

* ``llm``: reasoning and orchestration.
* ``vlm``: captioning, frame inspection, EEA's reward.
* ``embed``: text embeddings; ``image_embed``: image embeddings (optional).
* ``asr``: speech to text; ``ocr``: text in frames; ``detector``: objects in frames.
"""

from __future__ import annotations

from typing import Literal, get_args

Role = Literal["llm", "vlm", "embed", "image_embed", "asr", "ocr", "detector"]

#: Every role, in the order settings and reports list them.
ROLES: tuple[Role, ...] = get_args(Role)

__all__ = ["ROLES", "Role"]
