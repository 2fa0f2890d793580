"""VideoAgent2 (``videoagent2``): :mod:`.agent` holds the plan-adjust loop
(:class:`.agent.VideoAgent2Agent`), :mod:`.memory` the memory bank and the reply parsers."""
