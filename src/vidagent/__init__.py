"""vidagent: answer questions about long videos with agents over a multi-granular index.

The public surface is small; everything else is internal. Names load lazily so that importing
vidagent (and running ``vidagent --help``) stays fast and never imports torch or LanceDB.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "ask": "vidagent.app",
    "Session": "vidagent.app",
    "Answer": "vidagent.agents.base",
    "Agent": "vidagent.agents.base",
    "Budget": "vidagent.budget",
    "Trace": "vidagent.trace",
    "tool": "vidagent.tools.base",
    "Settings": "vidagent.config",
    "load_settings": "vidagent.config",
    "Library": "vidagent.library",
    "index_video": "vidagent.ingest",
    "search": "vidagent.app",
    "Models": "vidagent.models.client",
    "load_model": "vidagent.models",
    "probe": "vidagent.media",
    "frames_at": "vidagent.media",
}

__all__ = [
    "Agent",
    "Answer",
    "Budget",
    "Library",
    "Models",
    "Session",
    "Settings",
    "Trace",
    "__version__",
    "ask",
    "frames_at",
    "index_video",
    "load_model",
    "load_settings",
    "probe",
    "search",
    "tool",
]

if TYPE_CHECKING:
    from vidagent.agents.base import Agent, Answer
    from vidagent.app import Session, ask, search
    from vidagent.budget import Budget
    from vidagent.config import Settings, load_settings
    from vidagent.ingest import index_video
    from vidagent.library import Library
    from vidagent.media import frames_at, probe
    from vidagent.models import load_model
    from vidagent.models.client import Models
    from vidagent.tools.base import tool
    from vidagent.trace import Trace


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'vidagent' has no attribute {name!r}")
