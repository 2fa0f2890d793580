"""AgentCVR (``cvr``): :mod:`.agent` holds the strategy (:class:`.agent.CVRAgent`), :mod:`.protocol`
the master loop the RL simulator shares, :mod:`.parse` the reply parsers, :mod:`.env` the real
sub-agents, :mod:`.inputs` the question's clips; the sub-agents' tools are
:mod:`vidagent.tools.cvr`."""
