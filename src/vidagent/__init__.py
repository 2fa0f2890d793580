"""vidagent: answer questions about long videos with agents over a multi-granular index.

The public surface is small; everything else is internal. Names load lazily so that importing
vidagent (and running ``vidagent --help``) stays fast and never imports torch or LanceDB.

The package, lowest part first; a part imports only parts above it in this list
(``tests/test_layers.py`` holds the rank table)::

    exceptions timecode roles    errors, times, role names; _version: __version__, re-exported
    budget trace plugins prompts budgets, trace events, registries, prompts (package data)
    specs config                 model spec strings; settings and VIDAGENT_HOME
    media/                       probe, decode, segment, audio
    models/                      the client layer and one adapter per provider
    library/                     the on-disk index: one table owner and the parts over it
    ingest/                      one module per stage; pipeline.py runs them
    tools/                       @tool, ToolContext, the shared tools, IndexView; avi/ cvr/
    agents/                      the runtime; dvd/ videoagent2/ eea/ avi/ cvr/ retrieval/
    bench/ train/                the harness and tasks/ (one per benchmark); AgentCVR's RL
    app/                         the Session façade, its use cases, the executors
    server/ cli/                 the front ends, over app/ only
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from vidagent._version import __version__

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
