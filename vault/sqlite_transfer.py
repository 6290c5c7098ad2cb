"""The SQLite side of :mod:`tiervault.vault.transfer` (part of the SQLite backend).

Speaks SQL through the store's :class:`~tiervault.vault.sqlite_db.SqliteDb`
(``store.db``): reads with ``query``, writes in one ``write`` transaction.
"""

from __future__ import annotations

from typing import Any, Sequence

from tiervault.vault.rows import Link
from tiervault.vault.transfer import FeedbackRecord, MemoryRecord

__all__ = ["SqliteTransfer"]


class SqliteTransfer:
    """Bulk reads and idempotent writes of an SQLite tier."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.db = store.db

    def memories_after(self, after: int, limit: int) -> list[MemoryRecord]:
        rows = self.db.query("SELECT rowid, id, summary, context, topics, project, created_at "
                             "FROM memories WHERE rowid > ? ORDER BY rowid LIMIT ?", (after, limit),
                             action="read memories")
        return [MemoryRecord(*r) for r in rows]

    def put_memories(self, rows: Sequence[MemoryRecord]) -> int:
        if not rows:
            return 0
        with self.db.write("copy memories") as txn:
            before = txn.conn.total_changes
            txn.conn.executemany(
                "INSERT INTO memories (id, summary, context, topics, project, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                [(r.id, r.summary, r.context, r.topics, r.project, r.created_at) for r in rows])
            return txn.conn.total_changes - before

    def feedback_after(self, after: int, limit: int) -> list[FeedbackRecord]:
        rows = self.db.query("SELECT seq, entry_id, query, action, created_at FROM feedback "
                             "WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit), action="read feedback")
        return [FeedbackRecord(*r) for r in rows]

    def put_feedback(self, rows: Sequence[FeedbackRecord]) -> int:
        if not rows:
            return 0
        added = 0
        with self.db.write("copy feedback") as txn:
            conn = txn.conn
            for r in rows:
                if conn.execute("SELECT 1 FROM feedback WHERE entry_id = ? AND query = ? AND action = ? "
                                "AND created_at = ?", (r.entry_id, r.query, r.action, r.created_at)
                                ).fetchone():
                    continue
                conn.execute("INSERT INTO feedback (query, entry_id, action, created_at) "
                             "VALUES (?, ?, ?, ?)", (r.query, r.entry_id, r.action, r.created_at))
                conn.execute("INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE "
                             "SET value = CAST(value AS INTEGER) + 1", (f"feedback:{r.action}",))
                added += 1
        return added

    def put_links(self, links: Sequence[Link]) -> int:
        if not links:
            return 0
        with self.db.write("copy links") as txn:
            txn.conn.executemany(
                "INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM entries WHERE id = ?) "
                "ON CONFLICT DO UPDATE SET note = excluded.note, created_at = excluded.created_at",
                [(l.source_id, l.target_id, l.link_type, l.note, l.created_at, l.source_id)
                 for l in links])
        return len(links)

    def vector_models(self) -> list[str]:
        return [r[0] for r in self.db.query("SELECT DISTINCT model FROM entry_vectors ORDER BY model")]

    def vector_count(self, model: str) -> int:
        rows = self.db.query("SELECT count(*) FROM entry_vectors WHERE model = ?", (model,))
        return rows[0][0] if rows else 0

    def feedback_count(self) -> int:
        rows = self.db.query("SELECT count(*) FROM feedback")
        return rows[0][0] if rows else 0
