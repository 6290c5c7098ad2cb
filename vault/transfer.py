"""What ``tiervault migrate`` needs of a tier beyond the storage contract.

The contract (:class:`~tiervault.vault.backend.TierBackend`) serves search and
writes; moving a whole tier also needs every memory, every feedback row, links
with their original timestamps and the list of embedding models. Each backend
provides these through :func:`transfer_for` (SQLite: :mod:`sqlite_transfer`;
PostgreSQL: :mod:`tiervault.vault.postgres.transfer`). Every ``put_*`` is
idempotent, so a copy interrupted at any point is finished by running it again.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple, Protocol, Sequence

from tiervault.vault.rows import Link

__all__ = ["MemoryRecord", "FeedbackRecord", "TierTransfer", "SqlTransfer", "Statements", "transfer_for"]


class MemoryRecord(NamedTuple):
    """A stored session memory, as copied between tiers (``key``: source order)."""

    key: int
    id: str
    summary: str
    context: str
    topics: str
    project: str
    created_at: float


class FeedbackRecord(NamedTuple):
    """A recorded feedback action (``key``: source order)."""

    key: int
    entry_id: str
    query: str
    action: str
    created_at: float


class TierTransfer(Protocol):
    """Bulk reads and idempotent writes of one tier, for copying it elsewhere."""

    def memories_after(self, after: int, limit: int) -> list[MemoryRecord]: ...

    def put_memories(self, rows: Sequence[MemoryRecord]) -> int:
        """Insert memories whose id is not held yet; returns how many were added."""
        ...

    def feedback_after(self, after: int, limit: int) -> list[FeedbackRecord]: ...

    def put_feedback(self, rows: Sequence[FeedbackRecord]) -> int:
        """Insert rows not held yet (same entry, query, action and time); counters follow."""
        ...

    def put_links(self, links: Sequence[Link]) -> int:
        """Upsert links keeping their note and creation time (sources must be held here)."""
        ...

    def vector_models(self) -> list[str]: ...

    def deferred_vector_indexes(self) -> AbstractContextManager[None]:
        """Inside: vectors are stored without building new ANN indexes (a bulk copy)."""
        ...

    def build_vector_indexes(self) -> list[str]:
        """Build the ANN indexes the stored vectors call for; the names of those built."""
        ...

    def vector_count(self, model: str) -> int: ...

    def feedback_count(self) -> int: ...


class Statements(Protocol):
    """One open write transaction of a backend: statements in its SQL dialect."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run one statement per row; returns the number of rows changed in all."""
        ...


class SqlTransfer:
    """The part of a transfer both SQL backends share; SQL written with ``?`` placeholders.

    A backend supplies :meth:`read` (one statement's rows), :meth:`transaction`
    (a :class:`Statements` inside one write transaction) and ``put_memories``
    (the PostgreSQL tier computes search terms for each memory, SQLite's FTS
    table does it by itself).
    """

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        raise NotImplementedError

    def transaction(self, action: str) -> AbstractContextManager[Statements]:
        raise NotImplementedError

    def memories_after(self, after: int, limit: int) -> list[MemoryRecord]:
        return [MemoryRecord(*r) for r in self.read(
            "SELECT rowid, id, summary, context, topics, project, created_at FROM memories "
            "WHERE rowid > ? ORDER BY rowid LIMIT ?", (after, limit))]

    def feedback_after(self, after: int, limit: int) -> list[FeedbackRecord]:
        return [FeedbackRecord(*r) for r in self.read(
            "SELECT seq, entry_id, query, action, created_at FROM feedback WHERE seq > ? "
            "ORDER BY seq LIMIT ?", (after, limit))]

    def put_feedback(self, rows: Sequence[FeedbackRecord]) -> int:
        """Insert the rows not held yet; one statement run per action, then its counter."""
        if not rows:
            return 0
        by_action: dict[str, list[tuple]] = {}
        for r in rows:
            by_action.setdefault(r.action, []).append(
                (r.query, r.entry_id, r.action, r.created_at, r.entry_id, r.query, r.action, r.created_at))
        added = 0
        with self.transaction("copy feedback") as txn:
            for action, params in by_action.items():
                n = txn.executemany(
                    "INSERT INTO feedback (query, entry_id, action, created_at) SELECT ?, ?, ?, ? "
                    "WHERE NOT EXISTS (SELECT 1 FROM feedback WHERE entry_id = ? AND query = ? "
                    "AND action = ? AND created_at = ?)", params)
                if n:
                    txn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                                "SET value = CAST(CAST(meta.value AS BIGINT) + ? AS TEXT)",
                                (f"feedback:{action}", str(n), n))
                added += n
        return added

    def put_links(self, links: Sequence[Link]) -> int:
        if not links:
            return 0
        with self.transaction("copy links") as txn:
            txn.executemany(
                "INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM entries WHERE id = ?) "
                "ON CONFLICT (source_id, target_id, link_type) DO UPDATE SET note = excluded.note, "
                "created_at = excluded.created_at",
                [(l.source_id, l.target_id, l.link_type, l.note, l.created_at, l.source_id)
                 for l in links])
        return len(links)

    def deferred_vector_indexes(self) -> AbstractContextManager[None]:
        """SQLite tiers keep no ANN index on disk (the vector recall is exact): nothing to defer."""
        return nullcontext()

    def build_vector_indexes(self) -> list[str]:
        return []

    def vector_models(self) -> list[str]:
        return [r[0] for r in self.read("SELECT DISTINCT model FROM entry_vectors ORDER BY model")]

    def vector_count(self, model: str) -> int:
        rows = self.read("SELECT count(*) FROM entry_vectors WHERE model = ?", (model,))
        return rows[0][0] if rows else 0

    def feedback_count(self) -> int:
        rows = self.read("SELECT count(*) FROM feedback")
        return rows[0][0] if rows else 0


def transfer_for(store: Any) -> TierTransfer:
    """The transfer side of a backend (SQLite or PostgreSQL)."""
    if getattr(store, "backend", None) == "postgres":
        from tiervault.vault.postgres.transfer import PgTransfer

        return PgTransfer(store)
    from tiervault.vault.sqlite_transfer import SqliteTransfer

    return SqliteTransfer(store)
