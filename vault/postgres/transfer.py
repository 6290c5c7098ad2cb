"""The PostgreSQL side of :mod:`tiervault.vault.transfer` (bulk copy in and out).

The statements are shared with SQLite (:class:`SqlTransfer`, written with ``?``
placeholders, turned into psycopg's ``%s`` here); memories also get their
search terms (the ``terms`` tsvector and ``doclen``), as :meth:`add_memory` does.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from tiervault.vault.postgres.lexical import row_terms, tsvector_text
from tiervault.vault.transfer import MemoryRecord, SqlTransfer

__all__ = ["PgTransfer"]


def _pg(sql: str) -> str:
    """``?`` placeholders -> psycopg's ``%s`` (the shared statements hold no literal ``?`` or ``%``)."""
    return sql.replace("?", "%s")


class _PgStatements:
    """Statements inside one PostgreSQL write transaction."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.conn.execute(_pg(sql), params).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        with self.conn.cursor() as cur:
            cur.executemany(_pg(sql), rows)
            return max(cur.rowcount, 0)


class PgTransfer(SqlTransfer):
    """Bulk reads and idempotent writes of a PostgreSQL tier."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.store.query(_pg(sql), params, "copy the tier")

    @contextmanager
    def transaction(self, action: str) -> Iterator[_PgStatements]:
        with self.store.write(action) as (conn, _gen):
            yield _PgStatements(conn)

    @contextmanager
    def deferred_vector_indexes(self) -> Iterator[None]:
        """Vectors written inside are not indexed on the way: no HNSW index is created
        when a (model, dim) crosses ``HNSW_MIN_ROWS`` (pgvector would then insert every
        later row into the graph one by one). An index that already exists is kept and
        maintained as usual. Until :meth:`build_vector_indexes` runs (or, after a kill,
        the next ``put_vectors`` of any process or the resumed copy) searches are
        exact: slower, never wrong."""
        with self.store.deferring_vector_indexes():
            yield

    def build_vector_indexes(self) -> list[str]:
        """The HNSW indexes every (model, dim) over the threshold lacks; names of those built."""
        from tiervault.vault.postgres.vectors import PgVectors

        return PgVectors(self.store).ensure_indexes()

    def put_memories(self, rows: Sequence[MemoryRecord]) -> int:
        if not rows:
            return 0
        payload = []
        for r in rows:
            stems, doclen = row_terms((r.summary, r.context, r.topics, r.project))
            payload.append((r.id, r.summary, r.context, r.topics, r.project, r.created_at, doclen,
                            tsvector_text(stems)))
        with self.transaction("copy memories") as txn:
            return txn.executemany(
                "INSERT INTO memories (id, summary, context, topics, project, created_at, doclen, terms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, CAST(? AS tsvector)) ON CONFLICT (id) DO NOTHING", payload)
