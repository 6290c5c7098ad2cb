"""SQL of the entries table shared by the SQLite backend modules.

The upsert statement, the FTS maintenance statements and the Filters -> WHERE compiler of the SQLite dialect (rows and their
conversion to entries: :mod:`entry_rows`).
"""

from __future__ import annotations

from typing import Any

from tiervault.vault.entry_rows import ENTRY_COLUMNS, SANE_TIMES
from tiervault.vault.filters import Filters

__all__ = ["UPSERT_ENTRY", "FTS_DELETE", "FTS_INSERT", "filter_sql", "SANE_TIMES"]

_UPDATABLE = [c for c in ENTRY_COLUMNS if c not in ("id", "created_at")]
UPSERT_ENTRY = (
    f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}, gen) "
    f"VALUES ({', '.join(':' + c for c in ENTRY_COLUMNS)}, :gen) "
    "ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _UPDATABLE)
    + ", created_at = COALESCE(:given_created_at, entries.created_at), gen = excluded.gen"
)
FTS_DELETE = (
    "INSERT INTO entries_fts(entries_fts, rowid, id, title, description, context, tags) "
    "SELECT 'delete', rowid, id, title, description, context, tags FROM entries "
    "WHERE id IN (SELECT value FROM json_each(?))")
FTS_INSERT = (
    "INSERT INTO entries_fts(rowid, id, title, description, context, tags) "
    "SELECT rowid, id, title, description, context, tags FROM entries WHERE gen = ?")


def filter_sql(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """Filters -> (" AND ..." SQL fragment, parameters). Values are always parameters."""
    parts: list[str] = []
    params: list[Any] = []
    for column, values in (("type", filters.types), ("domain", filters.domains),
                           ("severity", filters.severities), ("origin", filters.origins)):
        if values:
            parts.append(f"{alias}.{column} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    if filters.tags:
        parts.append("(" + " OR ".join(
            f"instr(' ' || {alias}.tags || ' ', ' ' || ? || ' ') > 0" for _ in filters.tags) + ")")
        params.extend(filters.tags)
    now = filters.moment
    if not filters.include_expired:
        parts.append(f"({alias}.valid_until IS NULL OR {alias}.valid_until > ?)")
        params.append(now)
    if not filters.include_future:
        parts.append(f"({alias}.valid_from IS NULL OR {alias}.valid_from <= ?)")
        params.append(now)
    return "".join(" AND " + p for p in parts), params
