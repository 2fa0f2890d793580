"""The model roles: the one place they are declared.

A role is a job a model does for vidagent; each is filled by a spec string (see
:mod:`vidagent.models.registry`). Settings fields, the CLI's ``--<role>`` flags, ``vidagent info``
and the type checker all read this module, and an adapter names the roles it serves in its
``capabilities.roles``.

* ``llm``: reasoning and orchestration.
* ``vlm``: the vision-language model; fills the two roles below unless they are set.
* ``captioner``: the database captioner of ingest (DVD's GPT-4.1; VideoAgent2's segment captions).
* ``tool_vlm``: the model the search and perception tools ask about frames (DVD's o3 in
  frame_inspect and global_browse; VideoAgent2's zoom-in captions; EEA's reward).
* ``embed``: text embeddings; ``image_embed``: image embeddings (optional).
* ``asr``: speech to text; ``ocr``: text in frames; ``detector``: objects in frames.

The papers use one model to build the index and another to search it, so the two jobs are
separate roles: ``index`` with one captioner and ``ask`` with another tool model never
re-captions. An unset ``captioner`` or ``tool_vlm`` follows ``vlm``, and an adapter serves them
when it serves ``vlm`` (:func:`capability`).
"""

from __future__ import annotations

from typing import Literal, get_args

Role = Literal[
    "llm", "vlm", "captioner", "tool_vlm", "embed", "image_embed", "asr", "ocr", "detector"
]

#: Every role, in the order settings and reports list them.
ROLES: tuple[Role, ...] = get_args(Role)

#: Roles that follow another when unset, and are served by whatever serves that one.
FOLLOWS: dict[str, Role] = {"captioner": "vlm", "tool_vlm": "vlm"}


def capability(role: str) -> str:
    """The role an adapter must declare in ``capabilities.roles`` to fill ``role``."""
    return FOLLOWS.get(role, role)


__all__ = ["FOLLOWS", "ROLES", "Role", "capability"]
