"""AVI (``avi``): :mod:`.agent` holds the Retrieve → Perceive → Review loop
(:class:`.agent.AVIAgent`); its phase tools are :mod:`vidagent.tools.avi`."""
