"""Listing and browsing a tier file, part of the SQLite backend.

The contract's listing reads (``list_entries``, ``count_matching``,
``vocabulary``) and browse reads (``light_page``, ``title_rows``,
``facet_counts``; rules shared with PostgreSQL in :mod:`browsing`) run here on
the tier's :class:`~tiervault.vault.sqlite_db.SqliteDb`;
:class:`~tiervault.vault.store.TierStore` exposes them. Filters are compiled by
:func:`~tiervault.vault.filter_compile.to_sqlite` (values always parameters).

Index use: ``newest`` walks the rowid b-tree backwards; ``updated`` walks
``entries_gen`` backwards (an SQLite index holds the rowid, so ``gen DESC,
rowid DESC`` needs no sort); ``title_rows`` is a rowid range scan. The total
of a page and the facet counts come from the tier's search mirror.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import numpy as np

from tiervault.errors import ValidationError
from tiervault.vault.browsing import (MAX_TITLE_ROWS, ORDER_SQL, check_limit, check_page,
                                      mirror_facets)
from tiervault.vault.entry import Entry
from tiervault.vault.entry_rows import SELECT_ENTRY, rows_to_entries
from tiervault.vault.filters import Filters
from tiervault.vault.postings import Postings
from tiervault.vault.rows import FacetCounts, LightPage, LightRow, TitleRow
from tiervault.vault.sqlite_db import SqliteDb
from tiervault.vault.sqlite_sql import SANE_TIMES, SELECT_LIGHT, filter_sql

__all__ = ["TierListing"]


class TierListing:
    """Pages, counts and sweeps of one tier file; ``mirror()`` is its search mirror, caught up."""

    #: Orders :meth:`list_entries` accepts: newest first by update or creation, or insertion.
    LIST_ORDERS = {"updated": "e.updated_at DESC, e.rowid DESC",
                   "created": "e.created_at DESC, e.rowid DESC", "rowid": "e.rowid"}

    def __init__(self, db: SqliteDb, tier: str, mirror: Callable[[], Postings]) -> None:
        self.db = db
        self.tier = tier
        self.mirror = mirror

    @staticmethod
    def _where(filters: Filters | None, since: float | None) -> tuple[str, list[Any]]:
        where, params = filter_sql(filters) if filters else ("", [])
        if since is not None:
            where += " AND e.updated_at >= ?"
            params = [*params, float(since)]
        return where, params

    def list_entries(self, *, offset: int, limit: int, filters: Filters | None, sort: str,
                     since: float | None) -> list[Entry]:
        """A page of entries matching ``filters``, in ``sort`` order (see LIST_ORDERS);
        ``since``: only entries updated at or after that unix time."""
        if sort not in self.LIST_ORDERS:
            raise ValidationError("sort", f"{sort!r} is not one of {', '.join(self.LIST_ORDERS)}")
        where, params = self._where(filters, since)
        rows = self.db.query(f"SELECT {SELECT_ENTRY} FROM entries e WHERE 1 = 1{where} "
                             f"ORDER BY {self.LIST_ORDERS[sort]} LIMIT ? OFFSET ?",
                             [*params, limit, offset])
        return rows_to_entries(rows, self.tier)

    def count_matching(self, filters: Filters | None, since: float | None) -> int:
        """How many entries :meth:`list_entries` would page through."""
        where, params = self._where(filters, since)
        rows = self.db.query(f"SELECT count(*) FROM entries e WHERE 1 = 1{where}", params)
        return rows[0][0] if rows else 0

    def vocabulary(self) -> dict[str, dict[str, int]]:
        """{"domains": {domain: n}, "types": {type: n}, "severities": {..}, "tags": {tag: n}}
        over this tier (tags counted per entry; the caller ranks them)."""
        out: dict[str, dict[str, int]] = {}
        for key, column in (("domains", "domain"), ("types", "type"), ("severities", "severity")):
            out[key] = dict(self.db.query(f"SELECT {column}, count(*) FROM entries "
                                          f"GROUP BY {column} ORDER BY count(*) DESC, {column}"))
        tags: Counter[str] = Counter()
        for (text,) in self.db.query("SELECT tags FROM entries WHERE tags != ''"):
            tags.update(text.split())
        out["tags"] = dict(tags)
        return out

    # -- browse (docs/backend.md, "Browsing") --------------------------------------------
    def light_page(self, *, order: str, filters: Filters | None, offset: int, limit: int,
                   snippet_chars: int) -> LightPage:
        check_page(order, offset, limit, snippet_chars)
        where, params = self._where(filters, None)
        rows = self.db.query(f"SELECT {SELECT_LIGHT} FROM entries e WHERE {SANE_TIMES}{where} "
                             f"ORDER BY {ORDER_SQL[order]} LIMIT ? OFFSET ?",
                             [snippet_chars, *params, limit, offset]) if limit else []
        p = self.mirror()
        total = p.n_alive if filters is None else int(np.count_nonzero(p.mask(filters)))
        return LightPage([LightRow._make(r) for r in rows], total)

    def title_rows(self, after: int, limit: int) -> list[TitleRow]:
        check_limit("after", after, 2**62, -1)
        check_limit("limit", limit, MAX_TITLE_ROWS)
        rows = self.db.query("SELECT rowid, id, title, content_hash FROM entries WHERE rowid > ? "
                             "ORDER BY rowid LIMIT ?", (after, limit))
        return [TitleRow._make(r) for r in rows]

    def facet_counts(self, filters: Filters | None) -> FacetCounts:
        return mirror_facets(self.mirror(), filters)
