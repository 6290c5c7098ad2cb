"""Browsing: one page of entries by filter, newest first, as JSON-ready rows.

Shared by ``tiervault list`` and the MCP ``list_entries`` tool. Unlike a search,
a listing shows every stored entry, expired and not-yet-valid ones included
(browsing is about what is stored; search is about what applies now).
"""

from __future__ import annotations

from typing import Any, Sequence

from tiervault.errors import QueryError
from tiervault.vault.entry import parse_timestamp
from tiervault.vault.filters import Filters

__all__ = ["list_page", "LIST_ROW_KEYS"]

#: The keys of one listed row.
LIST_ROW_KEYS = ("id", "title", "type", "domain", "severity", "tags", "tier", "created_at",
                 "updated_at", "valid_until")


def list_page(manager: Any, *, domain: Any = None, type: Any = None,  # noqa: A002
              severity: Any = None, tags: Any = None, tiers: Sequence[str] | None = None,
              since: Any = None, sort: str = "updated", limit: int = 20,
              offset: int = 0, not_domain: Any = None, not_type: Any = None,
              not_tags: Any = None, exclude_ids: Any = None, updated_after: Any = None,
              updated_before: Any = None) -> dict[str, Any]:
    """``{"total", "offset", "count", "results": [row], "filters", "nextOffset"?}`` for
    one page. The filters are those of a search (:meth:`Filters.build`); ``since`` is
    the older name of ``updated_after``. ``filters`` echoes the ones in force."""
    if since is not None and updated_after is not None:
        raise QueryError("since", "give since or updated_after, not both (they are the same "
                                  "filter)")
    if since is not None:  # parsed here so that an error names the argument given
        updated_after = parse_timestamp(since, "since")
    filters = Filters.build(type=type, domain=domain, severity=severity, tags=tags,
                            include_expired=True, include_future=True, not_type=not_type,
                            not_domain=not_domain, not_tags=not_tags, exclude_ids=exclude_ids,
                            updated_after=updated_after, updated_before=updated_before)
    page = manager.list_entries(filters=filters, tiers=tiers, sort=sort, limit=limit,
                                offset=offset)
    rows = []
    for entry, tier in page.rows:
        data = entry.to_dict()
        data["tier"] = tier
        rows.append({k: data[k] for k in LIST_ROW_KEYS})
    echo = filters.describe()
    for key in ("include_expired", "include_future"):  # a listing always shows them
        echo.pop(key, None)
    out: dict[str, Any] = {"total": page.total, "offset": offset, "count": len(rows),
                           "results": rows, "filters": echo}
    if offset + len(rows) < page.total:
        out["nextOffset"] = offset + len(rows)
    return out
