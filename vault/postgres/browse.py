"""Browsing a PostgreSQL tier: the contract's curator reads (docs/backend.md, "Browsing").

``light_page``, ``title_rows``, ``links_of_type`` and ``facet_counts`` with the
rules shared with the SQLite tier (:mod:`tiervault.vault.browsing`). Index use:
``newest`` scans the ``rowid`` primary key backwards; ``updated`` the
``entries_gen`` index on (gen, rowid) backwards (schema v3; on v2's (gen) an
incremental sort ordered a whole generation: 6.7 -> 0.04 ms at 100K);
``links_of_type`` reads ``links_type`` (link_type, created_at DESC, source_id,
target_id in byte order) in order (v3; was a scan of every link: 8.1 -> 0.06 ms,
``bench/results/postgres-browse-indexes-100k.json``); ``title_rows`` is a
primary-key range scan. Filters are compiled
by :func:`~tiervault.vault.filter_compile.to_postgres` (values always
parameters). Page totals, facet counts and (once the mirror is in memory)
``vocabulary()`` come from the tier's search mirror
(the one lexical search keeps, :mod:`tiervault.vault.postgres.search`).
Ties between links are broken in byte order (``COLLATE "C"``), as SQLite compares text.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tiervault.vault.browsing import (MAX_TITLE_ROWS, ORDER_SQL, check_limit, check_link_type,
                                      check_page, facet_vocabulary, mirror_facets)
from tiervault.vault.filter_compile import to_postgres
from tiervault.vault.filters import Filters
from tiervault.vault.rows import FacetCounts, LightPage, LightRow, Link, TitleRow

__all__ = ["PgBrowse", "SELECT_LIGHT"]

#: A LightRow's columns (first parameter: the snippet's length), from ``entries e``.
SELECT_LIGHT = (
    "e.id, e.type, e.domain, e.severity, e.title, substr(e.description, 1, %s), "
    "e.tags, e.created_at, e.updated_at, e.valid_from, e.valid_until, e.content_hash, "
    "char_length(e.title) + char_length(e.description) + char_length(e.context) "
    "+ char_length(e.example) + char_length(e.counter_example) + char_length(e.why), e.origin")


class PgBrowse:
    """Contract methods for browsing; mixed into the PostgreSQL tier."""

    name: str
    query: Any
    postings: Any
    _postings: Any

    def light_page(self, *, order: str = "newest", filters: Filters | None = None, offset: int = 0,
                   limit: int = 25, snippet_chars: int = 120) -> LightPage:
        check_page(order, offset, limit, snippet_chars)
        where, params = to_postgres(filters) if filters is not None else ("", [])
        rows: Sequence[Any] = self.query(
            f"SELECT {SELECT_LIGHT} FROM entries e WHERE true{where} "
            f"ORDER BY {ORDER_SQL[order]} LIMIT %s OFFSET %s",
            [snippet_chars, *params, limit, offset], "read a page of the tier") if limit else []
        p = self.postings()
        total = p.n_alive if filters is None else int(np.count_nonzero(p.mask(filters)))
        return LightPage([LightRow._make(r) for r in rows], total)

    def title_rows(self, after: int = 0, limit: int = 5_000) -> list[TitleRow]:
        check_limit("after", after, 2**62, -1)
        check_limit("limit", limit, MAX_TITLE_ROWS)
        rows = self.query("SELECT rowid, id, title, content_hash FROM entries WHERE rowid > %s "
                          "ORDER BY rowid LIMIT %s", (after, limit), "read the tier's titles")
        return [TitleRow._make(r) for r in rows]

    def links_of_type(self, link_type: str, limit: int = 200) -> list[Link]:
        check_link_type(link_type)
        check_limit("limit", limit, 10_000)
        rows = self.query("SELECT source_id, target_id, link_type, note, created_at FROM links "
                          'WHERE link_type = %s ORDER BY created_at DESC, source_id COLLATE "C", '
                          'target_id COLLATE "C" LIMIT %s', (link_type, limit), "list links")
        return [Link(*r, self.name) for r in rows]

    def facet_counts(self, filters: Filters | None = None) -> FacetCounts:
        return mirror_facets(self.postings(), filters)

    def vocabulary(self) -> dict[str, dict[str, int]]:
        """From the search mirror when it is in memory (no table scan), else GROUP BY."""
        if self._postings is not None:
            return facet_vocabulary(self.facet_counts(None))
        return super().vocabulary()  # type: ignore[misc]
