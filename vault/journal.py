"""A tier's journal: session memories (with their own FTS5 index) and feedback.

Part of the SQLite backend: :class:`Journal` runs its SQL on the tier's
:class:`~tiervault.vault.sqlite_db.SqliteDb`; :class:`TierStore` exposes it
through the :class:`~tiervault.vault.backend.TierBackend` methods.
"""

from __future__ import annotations

import json
import time
from typing import Sequence

from tiervault.vault.journal_input import check_feedback_input, feedback_counts_from, new_memory
from tiervault.vault.query import match_expression
from tiervault.vault.rows import FeedbackCounts, FeedbackEvent, FeedbackRow, Memory, MemoryHit, WeightRecord
from tiervault.vault.sqlite_db import SqliteDb

__all__ = ["Journal", "MAX_WEIGHT_RECORDS"]

#: weight_history keeps this many newest rows (older refits are dropped on write).
MAX_WEIGHT_RECORDS = 200

_MEMORY_COLUMNS = "id, summary, context, topics, project, created_at"


class Journal:
    """Memories and feedback of one tier file."""

    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    # -- memories -------------------------------------------------------------------
    def add_memory(self, summary: str, *, context: str = "", topics: Sequence[str] | str = (),
                   project: str = "", created_at: float | None = None) -> str:
        """Store one session memory; returns its generated id."""
        m = new_memory(summary, context, topics, project)
        with self.db.write("add_memory") as txn:
            txn.conn.execute(
                "INSERT INTO memories(id, summary, context, topics, project, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (m.id, m.summary, m.context, m.topics, m.project, created_at or time.time()))
        return m.id

    def search_memories(self, terms: Sequence[str], limit: int) -> list[MemoryHit]:
        if not terms or limit <= 0 or self.db.reader() is None:
            return []
        rows = self.db.query(
            "SELECT m.id, m.summary, m.context, m.topics, m.project, m.created_at, "
            "-bm25(memories_fts) AS s FROM memories_fts JOIN memories m "
            "ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ? ORDER BY s DESC LIMIT ?",
            (match_expression(list(terms)), limit))
        return [MemoryHit(id=r[0], summary=r[1], context=r[2], topics=r[3], project=r[4],
                          created_at=r[5], score=r[6]) for r in rows]

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        """Memories by id (unknown ids are absent)."""
        if not ids:
            return {}
        rows = self.db.query(f"SELECT {_MEMORY_COLUMNS} FROM memories "
                             "WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)),))
        return {r[0]: Memory(*r) for r in rows}

    def list_memories(self, *, limit: int = 20, offset: int = 0,
                      project: str | None = None) -> list[Memory]:
        """Newest first; ``project`` keeps only that project's memories."""
        rows = self.db.query(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE (?1 IS NULL OR "
                             "project = ?1) ORDER BY created_at DESC, rowid DESC LIMIT ?2 OFFSET ?3",
                             (project, limit, offset))
        return [Memory(*r) for r in rows]

    def memory_count(self) -> int:
        rows = self.db.query("SELECT count(*) FROM memories")
        return rows[0][0] if rows else 0

    # -- feedback -------------------------------------------------------------------
    def add_feedback(self, query: str, entry_id: str, action: str, *, agent: str = "",
                     context: str = "") -> None:
        """Record one accept/modify/dismiss/fail; counters update in the same transaction.

        ``agent`` names who gave it (pooled team feedback); ``context`` is a JSON
        text the Brain attaches (what the ranking looked like)."""
        check_feedback_input(query, entry_id, action, agent, context)
        with self.db.write("add_feedback") as txn:
            conn = txn.conn
            conn.execute("INSERT INTO feedback(query, entry_id, action, created_at, agent, context) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (query, entry_id, action, time.time(), agent, context))
            conn.execute("INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE "
                         "SET value = CAST(value AS INTEGER) + 1", (f"feedback:{action}",))

    def feedback_counts(self) -> FeedbackCounts:
        """{action: count} from running counters (O(1), no table scan)."""
        rows = self.db.query("SELECT key, value FROM meta WHERE key LIKE 'feedback:%'")
        return feedback_counts_from(rows)

    def feedback_for(self, entry_ids: Sequence[str]) -> list[FeedbackRow]:
        """Every feedback row recorded for these entries."""
        if not entry_ids:
            return []
        return [FeedbackRow(*r) for r in self.db.query(
            "SELECT entry_id, query, action, created_at FROM feedback "
            "WHERE entry_id IN (SELECT value FROM json_each(?))", (json.dumps(list(entry_ids)),))]

    def _event_columns(self) -> str:
        """The FeedbackEvent columns; a read-only tier older than schema v4 (readable
        without migrating) has no agent/context yet: they read as ''."""
        if self._feedback_context_version():
            return "seq, query, entry_id, action, created_at, agent, context"
        return "seq, query, entry_id, action, created_at, '', ''"

    def _feedback_context_version(self) -> bool:
        from tiervault.vault.schema import FEEDBACK_CONTEXT_FROM

        rows = self.db.query("PRAGMA user_version")
        return bool(rows) and rows[0][0] >= FEEDBACK_CONTEXT_FROM

    def feedback_events(self, limit: int) -> list[FeedbackEvent]:
        """The newest ``limit`` feedback actions, oldest first (a bounded read)."""
        rows = self.db.query(f"SELECT {self._event_columns()} FROM feedback ORDER BY seq DESC LIMIT ?",
                             (int(limit),))
        return [FeedbackEvent(*r) for r in reversed(rows)]

    def feedback_events_for(self, entry_ids: Sequence[str], limit: int) -> list[FeedbackEvent]:
        """The newest ``limit`` feedback actions on these entries, oldest first."""
        if not entry_ids:
            return []
        rows = self.db.query(
            f"SELECT {self._event_columns()} FROM feedback WHERE entry_id IN "
            "(SELECT value FROM json_each(?)) ORDER BY seq DESC LIMIT ?",
            (json.dumps(list(entry_ids)), int(limit)))
        return [FeedbackEvent(*r) for r in reversed(rows)]

    def add_weight_record(self, events: int, pairs: int, weights: str,
                          created_at: float | None = None) -> None:
        """Append one refit to weight_history, keeping the newest MAX_WEIGHT_RECORDS rows."""
        with self.db.write("add_weight_record") as txn:
            txn.conn.execute("INSERT INTO weight_history(created_at, events, pairs, weights) "
                             "VALUES (?, ?, ?, ?)",
                             (created_at or time.time(), int(events), int(pairs), weights))
            txn.conn.execute("DELETE FROM weight_history WHERE seq <= "
                             "(SELECT max(seq) FROM weight_history) - ?", (MAX_WEIGHT_RECORDS,))

    def weight_history(self, limit: int = 20) -> list[WeightRecord]:
        """The newest ``limit`` refits, oldest first (none on a tier older than v4)."""
        if not self._feedback_context_version():
            return []
        rows = self.db.query("SELECT seq, created_at, events, pairs, weights FROM weight_history "
                             "ORDER BY seq DESC LIMIT ?", (int(limit),))
        return [WeightRecord(*r) for r in reversed(rows)]
