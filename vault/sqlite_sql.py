"""SQL of the entries table shared by the SQLite backend modules.

The upsert statement, the FTS maintenance statements and the Filters -> WHERE fragment of the SQLite dialect (rows and their
conversion to entries: :mod:`entry_rows`).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from tiervault.vault.entry_rows import ENTRY_COLUMNS, SANE_TIMES
from tiervault.vault.filter_compile import to_sqlite
from tiervault.vault.filters import Filters
from tiervault.vault.rows import LightRow, MirrorRow

__all__ = ["MIRROR_COLUMNS", "READ_GEN", "UPSERT_ENTRY", "INSERT_ENTRY", "FTS_DELETE", "FTS_INSERT", "FTS_AUTOMERGE",
           "FTS_SET_AUTOMERGE", "FTS_SET_HASHSIZE",
           "filter_sql", "SANE_TIMES", "SELECT_LIGHT", "LIGHT_BOUND_IDS", "LIGHT_TEXTS", "LIGHT_N", "TEXTS_OF",
           "light_rows_sql"]

_UPDATABLE = [c for c in ENTRY_COLUMNS if c not in ("id", "created_at")]
UPSERT_ENTRY = (
    f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}, gen) "
    f"VALUES ({', '.join(':' + c for c in ENTRY_COLUMNS)}, :gen) "
    "ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _UPDATABLE)
    + ", created_at = COALESCE(:given_created_at, entries.created_at), gen = excluded.gen"
)
#: A row whose id the table does not hold (checked in the same write transaction):
#: positional, and without the conflict clause of UPSERT_ENTRY (~3 us a row less).
INSERT_ENTRY = (f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}, gen) "
                f"VALUES ({', '.join('?' * (len(ENTRY_COLUMNS) + 1))})")
#: FTS5's incremental merging per write ('automerge', default 4) and the size of its
#: pending-terms hash before a flush ('hashsize', default 1 MiB): read, and set.
FTS_AUTOMERGE = "SELECT k, v FROM entries_fts_config WHERE k IN ('automerge', 'hashsize')"
FTS_SET_AUTOMERGE = "INSERT INTO entries_fts(entries_fts, rank) VALUES ('automerge', ?)"
FTS_SET_HASHSIZE = "INSERT INTO entries_fts(entries_fts, rank) VALUES ('hashsize', ?)"
FTS_DELETE = (
    "INSERT INTO entries_fts(entries_fts, rowid, id, title, description, context, tags) "
    "SELECT 'delete', rowid, id, title, description, context, tags FROM entries "
    "WHERE id IN (SELECT value FROM json_each(?))")
FTS_INSERT = (
    "INSERT INTO entries_fts(rowid, id, title, description, context, tags) "
    "SELECT rowid, id, title, description, context, tags FROM entries WHERE gen = ?")

#: A LightRow's columns (first parameter: the snippet's length), from ``entries e``.
SELECT_LIGHT = (
    "e.id, e.type, e.domain, e.severity, e.title, substr(e.description, 1, ?), "
    "e.tags, e.created_at, e.updated_at, e.valid_from, e.valid_until, e.content_hash, "
    "length(e.title) + length(e.description) + length(e.context) + length(e.example) "
    "+ length(e.counter_example) + length(e.why), e.origin")

#: Up to this many ids a light-row statement binds each id (``e.id IN (?, ?, ...)``);
#: more go through one JSON array (``json_each``), whose parse and subquery cost ~5-18 us
#: a statement more for the scan's ~13 ids (issue 16, session 13). Bounded so that a
#: connection's statement cache holds at most this many light-row statements.
LIGHT_BOUND_IDS = 48

#: What a light-row statement with the texts selects after ``SELECT_LIGHT``: the rest of
#: an entry's :class:`~tiervault.vault.rows.FieldTexts` (id, title and tags are light columns).
LIGHT_TEXTS = ", e.description, e.context"
#: A light-row statement's columns before ``LIGHT_TEXTS``: :class:`LightRow`'s fields, in order.
LIGHT_N = len(LightRow._fields)
#: A row read with ``LIGHT_TEXTS`` -> its ``FieldTexts`` fields (id, title, description, context, tags).
TEXTS_OF = itemgetter(LightRow._fields.index("id"), LightRow._fields.index("title"), LIGHT_N, LIGHT_N + 1,
                      LightRow._fields.index("tags"))

_LIGHT_SQL: dict[tuple[int, bool], str] = {}

#: The columns of a :class:`MirrorRow`, in its order (``key``: the rowid): the mirror's feed
#: (``TierStore.changes_since``, ``light_feed.rows_with_records``).
MIRROR_COLUMNS = ", ".join("rowid" if f == "key" else f for f in MirrorRow._fields)
#: The tier's generation (``meta.gen``), read inside a feed's snapshot.
READ_GEN = "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'"


def light_rows_sql(n: int, texts: bool = False) -> str:
    """The light-row statement of ``n`` ids (parameters: the snippet's length, then the
    ids one by one when ``n <= LIGHT_BOUND_IDS``, else their JSON array), rows passing
    ``SANE_TIMES``; with ``texts`` the ``LIGHT_TEXTS`` columns follow. The texts are
    kept: the same string each time for the same ``n`` (the driver's statement cache is
    keyed by it)."""
    key = (n if n <= LIGHT_BOUND_IDS else 0, texts)
    sql = _LIGHT_SQL.get(key)
    if sql is None:
        ids = ", ".join("?" * key[0]) if key[0] else "SELECT value FROM json_each(?)"
        sql = _LIGHT_SQL[key] = (f"SELECT {SELECT_LIGHT}{LIGHT_TEXTS if texts else ''} FROM entries e "
                                 f"WHERE e.id IN ({ids}) AND {SANE_TIMES}")
    return sql


#: The FTS5 fields of an entry (vault/rows.FieldTexts), for ``TierStore.field_texts``.
SELECT_FIELD_TEXTS = "e.id, e.title, e.description, e.context, e.tags"


def filter_sql(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """Filters -> (" AND ..." SQL fragment, parameters); compiled by
    :func:`~tiervault.vault.filter_compile.to_sqlite` (values always parameters)."""
    return to_sqlite(filters, alias)
