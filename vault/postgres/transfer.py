"""The PostgreSQL side of :mod:`tiervault.vault.transfer` (bulk copy in and out)."""

from __future__ import annotations

from typing import Any, Sequence

from tiervault.vault.postgres.lexical import row_terms
from tiervault.vault.rows import Link
from tiervault.vault.transfer import FeedbackRecord, MemoryRecord

__all__ = ["PgTransfer"]


class PgTransfer:
    """Bulk reads and idempotent writes of a PostgreSQL tier."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.store.query(sql, params, "copy the tier")

    def memories_after(self, after: int, limit: int) -> list[MemoryRecord]:
        return [MemoryRecord(*r) for r in self._query(
            "SELECT rowid, id, summary, context, topics, project, created_at FROM memories "
            "WHERE rowid > %s ORDER BY rowid LIMIT %s", (after, limit))]

    def put_memories(self, rows: Sequence[MemoryRecord]) -> int:
        if not rows:
            return 0
        payload = []
        for r in rows:
            stems, doclen = row_terms((r.summary, r.context, r.topics, r.project))
            payload.append((r.id, r.summary, r.context, r.topics, r.project, r.created_at, doclen,
                            [s for s in stems if len(s.encode()) <= 2_000]))
        with self.store.write("copy memories") as (conn, _gen):
            before = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memories (id, summary, context, topics, project, created_at, doclen, terms) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, array_to_tsvector(%s::text[])) "
                    "ON CONFLICT (id) DO NOTHING", payload)
            return conn.execute("SELECT count(*) FROM memories").fetchone()[0] - before

    def feedback_after(self, after: int, limit: int) -> list[FeedbackRecord]:
        return [FeedbackRecord(*r) for r in self._query(
            "SELECT seq, entry_id, query, action, created_at FROM feedback WHERE seq > %s "
            "ORDER BY seq LIMIT %s", (after, limit))]

    def put_feedback(self, rows: Sequence[FeedbackRecord]) -> int:
        added = 0
        if not rows:
            return 0
        with self.store.write("copy feedback") as (conn, _gen):
            for r in rows:
                if conn.execute("SELECT 1 FROM feedback WHERE entry_id = %s AND query = %s AND "
                                "action = %s AND created_at = %s",
                                (r.entry_id, r.query, r.action, r.created_at)).fetchone():
                    continue
                conn.execute("INSERT INTO feedback (query, entry_id, action, created_at) "
                             "VALUES (%s, %s, %s, %s)", (r.query, r.entry_id, r.action, r.created_at))
                conn.execute("INSERT INTO meta (key, value) VALUES (%s, '1') ON CONFLICT (key) DO UPDATE "
                             "SET value = (meta.value::bigint + 1)::text", (f"feedback:{r.action}",))
                added += 1
        return added

    def put_links(self, links: Sequence[Link]) -> int:
        if not links:
            return 0
        with self.store.write("copy links") as (conn, _gen):
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                    "SELECT %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM entries WHERE id = %s) "
                    "ON CONFLICT (source_id, target_id, link_type) DO UPDATE SET note = excluded.note, "
                    "created_at = excluded.created_at",
                    [(l.source_id, l.target_id, l.link_type, l.note, l.created_at, l.source_id)
                     for l in links])
        return len(links)

    def vector_models(self) -> list[str]:
        return [r[0] for r in self._query("SELECT DISTINCT model FROM entry_vectors ORDER BY model")]

    def vector_count(self, model: str) -> int:
        return self._query("SELECT count(*) FROM entry_vectors WHERE model = %s", (model,))[0][0]

    def feedback_count(self) -> int:
        return self._query("SELECT count(*) FROM feedback")[0][0]
