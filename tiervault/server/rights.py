"""Per-token rights, checked the same way by the JSON API and the remote-tier protocol.

A refusal is a 403 that names the tier and lists what the token may do instead,
so the caller can fix its request (or ask for a token with more rights).
"""

from __future__ import annotations

from typing import Any, Iterable

from tiervault.server.errors import ApiError

__all__ = ["require_read", "require_write"]


def require_read(principal: Any, tiers: Iterable[str] | None, field: str = "tiers") -> None:
    """403 unless ``principal`` may read every tier of ``tiers``."""
    for tier in tiers or ():
        if not principal.can_read(tier):
            raise ApiError(403, f"this token may not read tier {tier!r}; it may read: "
                                f"{', '.join(principal.readable()) or 'nothing'}", field=field)


def require_write(principal: Any, tier: str, field: str = "tier") -> None:
    """403 unless ``principal`` may write ``tier``."""
    if not principal.can_write(tier):
        raise ApiError(403, f"this token may not write tier {tier!r}; it may write: "
                            f"{', '.join(principal.writable()) or 'nothing'}", field=field)
