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

__all__ = ["Evidence", "Observation", "Seconds", "Tool", "ToolContext", "Toolbox", "tool"]
