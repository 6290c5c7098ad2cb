"""Memories and feedback of a PostgreSQL tier (mixed into :class:`PgTierStore`).

Memories are searched like the SQLite tier's ``memories_fts``: FTS5 ``bm25()``
with every column weighted 1, over the same stems, candidates read through
the GIN index on ``memories.terms``.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from tiervault.vault.entry import check_text
from tiervault.vault.journal_input import check_feedback_input, feedback_counts_from, new_memory
from tiervault.vault.rows import (FeedbackCounts, FeedbackEvent, FeedbackRow, Memory, MemoryHit,
                                  WeightRecord)
from tiervault.vault.postgres.lexical import bm25_rows, query_stems, row_terms, statistics_sql, tsquery_of

__all__ = ["PgJournal"]

_MEMORY_COLUMNS = "id, summary, context, topics, project, created_at"


class PgJournal:
    """Uses the host store's ``write()``, ``query()`` and ``snapshot()``."""

    write: Any
    query: Any
    snapshot: Any

    def add_memory(self, summary: str, *, context: str = "", topics: Sequence[str] | str = (),
                   project: str = "", created_at: float | None = None) -> str:
        """Store one session memory; returns its generated id."""
        m = new_memory(summary, context, topics, project)
        stems, doclen = row_terms((m.summary, m.context, m.topics, m.project))
        with self.write("store a memory") as (conn, _gen):
            conn.execute(
                "INSERT INTO memories (id, summary, context, topics, project, created_at, doclen, terms) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, array_to_tsvector(%s::text[]))",
                (m.id, m.summary, m.context, m.topics, m.project, created_at or time.time(),
                 doclen, [s for s in stems if len(s.encode()) <= 2_000]))
        return m.id

    def search_memories(self, terms: Sequence[str], limit: int) -> list[MemoryHit]:
        stems = query_stems(terms)
        if not stems or limit <= 0:
            return []
        with self.snapshot() as conn:
            n_rows, total, df = conn.execute(statistics_sql("memories"), (stems,)).fetchone()
            rows = conn.execute("SELECT id, summary, context, topics, project, created_at FROM memories "
                                "WHERE terms @@ %s::tsquery ORDER BY rowid", (tsquery_of(stems),)).fetchall()
        if not rows:
            return []
        scores = bm25_rows([r[1:5] for r in rows], (1.0, 1.0, 1.0, 1.0), stems, n_rows, df,
                           total / n_rows if n_rows else 1.0)
        order = np.lexsort((np.arange(len(rows)), -scores))[:limit]
        return [MemoryHit(*rows[i], float(scores[i])) for i in order]

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        rows = self.query(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s)",
                           (list(ids),))
        return {r[0]: Memory(*r) for r in rows}

    def list_memories(self, *, limit: int = 20, offset: int = 0,
                      project: str | None = None) -> list[Memory]:
        rows = self.query(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE (%s::text IS NULL OR "
                           "project = %s) ORDER BY created_at DESC, rowid DESC LIMIT %s OFFSET %s",
                           (project, project, limit, offset))
        return [Memory(*r) for r in rows]

    def memory_count(self) -> int:
        return self.query("SELECT count(*) FROM memories")[0][0]

    def add_feedback(self, query: str, entry_id: str, action: str, *, agent: str = "",
                     context: str = "") -> None:
        """Record one accept/modify/dismiss/fail (with who gave it and the Brain's JSON
        context); counters update in the same transaction."""
        check_feedback_input(query, entry_id, action, agent, context)
        with self.write("record feedback") as (conn, _gen):
            conn.execute("INSERT INTO feedback (query, entry_id, action, created_at, agent, context) "
                         "VALUES (%s, %s, %s, %s, %s, %s)",
                         (query, entry_id, action, time.time(), agent, context))
            conn.execute("INSERT INTO meta (key, value) VALUES (%s, '1') ON CONFLICT (key) DO UPDATE "
                         "SET value = (meta.value::bigint + 1)::text", (f"feedback:{action}",))

    def feedback_counts(self) -> FeedbackCounts:
        rows = self.query("SELECT key, value FROM meta WHERE key LIKE 'feedback:%%'")
        return feedback_counts_from(rows)

    def feedback_for(self, entry_ids: Sequence[str]) -> list[FeedbackRow]:
        if not entry_ids:
            return []
        return [FeedbackRow(*r) for r in self.query("SELECT entry_id, query, action, created_at FROM feedback "
                           "WHERE entry_id = ANY(%s) ORDER BY seq", (list(entry_ids),))]

    _EVENT_COLUMNS = "seq, query, entry_id, action, created_at, agent, context"

    def feedback_events(self, limit: int) -> list[FeedbackEvent]:
        """The newest ``limit`` feedback actions, oldest first."""
        rows = self.query(f"SELECT {self._EVENT_COLUMNS} FROM feedback ORDER BY seq DESC LIMIT %s",
                           (int(limit),))
        return [FeedbackEvent(*r) for r in reversed(rows)]

    def feedback_events_for(self, entry_ids: Sequence[str], limit: int) -> list[FeedbackEvent]:
        """The newest ``limit`` feedback actions on these entries, oldest first."""
        if not entry_ids:
            return []
        rows = self.query(f"SELECT {self._EVENT_COLUMNS} FROM feedback WHERE entry_id = ANY(%s) "
                           "ORDER BY seq DESC LIMIT %s", (list(entry_ids), int(limit)))
        return [FeedbackEvent(*r) for r in reversed(rows)]

    def add_weight_record(self, events: int, pairs: int, weights: str,
                          created_at: float | None = None) -> None:
        """Append one refit to weight_history, keeping the newest 200 rows."""
        from tiervault.vault.journal import MAX_WEIGHT_RECORDS

        check_text("weights", weights)
        with self.write("record learned weights") as (conn, _gen):
            conn.execute("INSERT INTO weight_history (created_at, events, pairs, weights) "
                         "VALUES (%s, %s, %s, %s)",
                         (created_at or time.time(), int(events), int(pairs), weights))
            conn.execute("DELETE FROM weight_history WHERE seq <= "
                         "(SELECT max(seq) FROM weight_history) - %s", (MAX_WEIGHT_RECORDS,))

    def weight_history(self, limit: int = 20) -> list[WeightRecord]:
        """The newest ``limit`` refits, oldest first."""
        rows = self.query("SELECT seq, created_at, events, pairs, weights FROM weight_history "
                           "ORDER BY seq DESC LIMIT %s", (int(limit),))
        return [WeightRecord(*r) for r in reversed(rows)]
