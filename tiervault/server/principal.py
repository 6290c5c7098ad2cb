"""Who is calling: the identity and tier rights a request carries.

A :class:`Principal` is what authentication yields (a token checked by the
server, or the per-run token of ``tiervault ui``); every adapter (JSON API,
MCP over HTTP, web page) asks it before touching a tier. ``rights`` maps a tier
name to ``"r"`` (read) or ``"rw"`` (read and write); a tier it does not name
is out of reach. The agent tier is always this principal's own agent tier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

__all__ = ["Principal", "RIGHTS"]

RIGHTS = ("r", "rw")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: ``agent_id`` and its per-tier rights."""

    agent_id: str
    rights: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for tier, right in self.rights.items():
            if right not in RIGHTS:
                raise ValueError(f"right {right!r} for tier {tier!r} is not one of {', '.join(RIGHTS)}")
        object.__setattr__(self, "rights", MappingProxyType(dict(self.rights)))

    def can_read(self, tier: str) -> bool:
        return tier in self.rights

    def can_write(self, tier: str) -> bool:
        return self.rights.get(tier) == "rw"

    def readable(self) -> list[str]:
        return [t for t in self.rights]

    def writable(self) -> list[str]:
        return [t for t, r in self.rights.items() if r == "rw"]
