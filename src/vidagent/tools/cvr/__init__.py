"""AgentCVR's sub-agents' tools, used by :mod:`vidagent.agents.cvr` alone: :mod:`.frames` (the
visual sub-agent's frames) and :mod:`.audio` (the audio sub-agent's speech)."""
