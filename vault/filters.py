"""Search filters: a validated value both the SQL path and the in-memory path apply.

Filters are always applied BEFORE the result limit (in SQL ``WHERE`` or as a
row mask), so a filtered search never comes back empty while matching entries
exist further down the unfiltered ranking.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Iterable

from tiervault.errors import QueryError
from tiervault.vault.entry import ENTRY_TYPES, ORIGINS, SEVERITIES

__all__ = ["Filters"]

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _as_tuple(name: str, value: Any, allowed: tuple[str, ...] | None) -> tuple[str, ...]:
    if value is None or value == "" or value == []:
        return ()
    if isinstance(value, str):
        items: Iterable[Any] = [v for v in value.split(",")]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        raise QueryError(name, f"expected a string or a list of strings, got {type(value).__name__}")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise QueryError(name, f"expected strings, got {item!r}")
        item = item.strip().lower()
        if not item:
            continue
        # A lone surrogate (from JSON "\ud800") cannot be bound as UTF-8 by the SQL path.
        if len(item) > 128 or "\x00" in item or _SURROGATE.search(item):
            raise QueryError(name, f"{item[:40]!r} is not a valid {name} value")
        if allowed is not None and item not in allowed:
            raise QueryError(name, f"{item!r} is not one of {', '.join(allowed)}")
        if item not in out:
            out.append(item)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Filters:
    """Which entries a search may return. Empty tuples mean "any"."""

    types: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    severities: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # any-of
    include_expired: bool = False
    include_future: bool = False
    now: float | None = None

    @classmethod
    def build(
        cls,
        *,
        type: Any = None,  # noqa: A002 - mirrors the public search argument
        domain: Any = None,
        severity: Any = None,
        origin: Any = None,
        tags: Any = None,
        include_expired: bool = False,
        include_future: bool = False,
        now: float | None = None,
    ) -> "Filters":
        """Validate user-facing filter arguments (strings, comma lists or lists)."""
        return cls(
            types=_as_tuple("type", type, ENTRY_TYPES),
            domains=_as_tuple("domain", domain, None),
            severities=_as_tuple("severity", severity, SEVERITIES),
            origins=_as_tuple("origin", origin, ORIGINS),
            tags=_as_tuple("tags", tags, None),
            include_expired=bool(include_expired),
            include_future=bool(include_future),
            now=now,
        )

    @property
    def moment(self) -> float:
        """The instant validity is judged at (``now`` or the wall clock)."""
        return self.now if self.now is not None else time.time()

    @property
    def checks_validity(self) -> bool:
        return not (self.include_expired and self.include_future)
