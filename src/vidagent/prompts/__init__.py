"""Prompts as package data, one text file each, verbatim from the papers where they give one.

| file | source |
|---|---|
| ``dvd_caption_system.txt`` | Deep Video Discovery, Table 9, system prompt |
| ``dvd_caption.txt`` | Deep Video Discovery, Table 9, user prompt (typos kept: "timestampl", "phase") |
| ``videoagent2_summary.txt`` | VideoAgent2, Appendix B, prompt_Summary |

Placeholders stay as the papers wrote them (``[TRANSCRIPTS]``, ``{C}``); the code that uses a
prompt fills them with plain string replacement, so braces in the templates need no escaping.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.resources import files


@cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt``."""
    return files("vidagent.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8")


def prompt_hash(name: str) -> str:
    """First 8 hex digits of the prompt's SHA-256, recorded with what it produced."""
    return hashlib.sha256(load_prompt(name).encode("utf-8")).hexdigest()[:8]
