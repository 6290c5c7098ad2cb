"""Browsing: one page of entries by filter, newest first, as JSON-ready rows.

Shared by ``tiervault list`` and the MCP ``list_entries`` tool. Unlike a search,
a listing shows every stored entry, expired and not-yet-valid ones included
(browsing is about what is stored; search is about what applies now).
"""

from __future__ import annotations

from typing import Any, Sequence

from tiervault.vault.entry import parse_timestamp
from tiervault.vault.filters import Filters

__all__ = ["list_page", "LIST_ROW_KEYS"]

#: The keys of one listed row.
LIST_ROW_KEYS = ("id", "title", "type", "domain", "severity", "tags", "tier", "created_at",
                 "updated_at", "valid_until")


def list_page(manager: Any, *, domain: Any = None, type: Any = None,  # noqa: A002
              severity: Any = None, tags: Any = None, tiers: Sequence[str] | None = None,
              since: Any = None, sort: str = "updated", limit: int = 20,
              offset: int = 0) -> dict[str, Any]:
    """``{"total", "offset", "count", "results": [row], "nextOffset"?}`` for one page."""
    filters = Filters.build(type=type, domain=domain, severity=severity, tags=tags,
                            include_expired=True, include_future=True)
    page = manager.list_entries(filters=filters, tiers=tiers, sort=sort,
                                since=parse_timestamp(since, "since"), limit=limit, offset=offset)
    rows = []
    for entry, tier in page.rows:
        data = entry.to_dict()
        data["tier"] = tier
        rows.append({k: data[k] for k in LIST_ROW_KEYS})
    out: dict[str, Any] = {"total": page.total, "offset": offset, "count": len(rows),
                           "results": rows}
    if offset + len(rows) < page.total:
        out["nextOffset"] = offset + len(rows)
    return out
