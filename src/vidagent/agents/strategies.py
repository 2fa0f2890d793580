"""The strategies registry: a name to an :class:`~vidagent.agents.base.Agent` class.

Built-ins are imported on first use; an installed package adds one under the ``vidagent.strategies``
entry-point group (see :mod:`vidagent.plugins`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidagent.plugins import Registry

if TYPE_CHECKING:
    from vidagent.agents.base import Agent

STRATEGIES: Registry[type[Agent]] = Registry(
    "vidagent.strategies",
    "strategy",
    {
        "dvd": "vidagent.agents.dvd.agent:DVDAgent",
        "videoagent2": "vidagent.agents.videoagent2.agent:VideoAgent2Agent",
        "eea": "vidagent.agents.eea.agent:EEAAgent",
        "avi": "vidagent.agents.avi.agent:AVIAgent",
        "retrieval": "vidagent.agents.retrieval.agent:RetrievalAgent",
        "cvr": "vidagent.agents.cvr.agent:CVRAgent",
    },
)


def strategy_class(name: str) -> type[Agent]:
    """The agent class of a strategy name.

    Raises:
        ConfigError: no such strategy (the message lists them).
    """
    return STRATEGIES.load(name)
