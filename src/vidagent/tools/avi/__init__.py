"""AVI's phase tools, used by :mod:`vidagent.agents.avi` alone: :mod:`.retrieve` (text and graph)
and :mod:`.perceive` (pixels)."""
