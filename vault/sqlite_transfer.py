"""The SQLite side of :mod:`tiervault.vault.transfer` (part of the SQLite backend).

Speaks SQL through the store's :class:`~tiervault.vault.sqlite_db.SqliteDb`
(``store.db``): reads with ``query``, writes in one ``write`` transaction; the
statements themselves are shared with PostgreSQL (:class:`SqlTransfer`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from tiervault.vault.transfer import MemoryRecord, SqlTransfer

__all__ = ["SqliteTransfer"]


class _SqliteStatements:
    """Statements inside one SQLite write transaction.

    Rows changed come from the cursor's ``rowcount`` (``sqlite3_changes``): rows the
    statement itself changed, not those its triggers changed (the FTS index of
    memories), which ``total_changes`` would add.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return max(self.conn.execute(sql, params).rowcount, 0)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        return max(self.conn.executemany(sql, rows).rowcount, 0)


class SqliteTransfer(SqlTransfer):
    """Bulk reads and idempotent writes of an SQLite tier."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.db = store.db

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.db.query(sql, params, action="copy the tier")

    @contextmanager
    def transaction(self, action: str) -> Iterator[_SqliteStatements]:
        with self.db.write(action) as txn:
            yield _SqliteStatements(txn.conn)

    def put_memories(self, rows: Sequence[MemoryRecord]) -> int:
        if not rows:
            return 0
        with self.transaction("copy memories") as txn:
            return txn.executemany(
                "INSERT INTO memories (id, summary, context, topics, project, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                [(r.id, r.summary, r.context, r.topics, r.project, r.created_at) for r in rows])
