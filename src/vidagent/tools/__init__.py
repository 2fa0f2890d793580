"""Tools agents call: typed functions with a context, returning observations."""

from vidagent.tools.base import (
    Evidence,
    Observation,
    Seconds,
    Tool,
    Toolbox,
    ToolContext,
    tool,
)
from vidagent.tools.options import FrameOptions, PerceptionOptions, RetrievalOptions, ToolOptions

__all__ = [
    "Evidence",
    "FrameOptions",
    "Observation",
    "PerceptionOptions",
    "RetrievalOptions",
    "Seconds",
    "Tool",
    "ToolContext",
    "ToolOptions",
    "Toolbox",
    "tool",
]
