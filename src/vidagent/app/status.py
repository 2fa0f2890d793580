"""What this installation can do: the version, the home, the Library, and each role's model
backend, found without importing any of them (``vidagent info``)."""

from __future__ import annotations

from vidagent.app.asking import pick_strategy
from vidagent.app.core import SessionCore
from vidagent.app.results import InfoReport, RoleStatus
from vidagent.roles import FOLLOWS, ROLES, capability


def info(core: SessionCore) -> InfoReport:
    """Each role's spec and whether its backend is usable, found without importing it."""
    from vidagent._version import __version__
    from vidagent.models.registry import backend_status

    settings = core.settings
    roles: dict[str, RoleStatus] = {}
    for role in ROLES:
        spec = settings.spec(role)
        if role in FOLLOWS and not getattr(settings, role):
            follows = roles[FOLLOWS[role]]
            roles[role] = RoleStatus(spec, follows.usable, f"unset: the {FOLLOWS[role]}'s")
            continue
        found = backend_status(spec, settings, capability(role))
        roles[role] = RoleStatus(spec, found.usable, found.detail)
    strategy, notice = pick_strategy(settings, None)
    return InfoReport(
        __version__,
        str(settings.home),
        core.library_uri,
        core.library_exists(),
        roles,
        default_strategy=strategy,
        notice=notice,
    )
