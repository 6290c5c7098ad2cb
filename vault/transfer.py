"""What ``tiervault migrate`` needs of a tier beyond the storage contract.

The contract (:class:`~tiervault.vault.backend.TierBackend`) serves search and
writes; moving a whole tier also needs every memory, every feedback row, links
with their original timestamps and the list of embedding models. Each backend
provides these through :func:`transfer_for` (SQLite: :mod:`sqlite_transfer`;
PostgreSQL: :mod:`tiervault.vault.postgres.transfer`). Every ``put_*`` is
idempotent, so a copy interrupted at any point is finished by running it again.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, Sequence

from tiervault.vault.rows import Link

__all__ = ["MemoryRecord", "FeedbackRecord", "TierTransfer", "transfer_for"]


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

    def vector_count(self, model: str) -> int: ...

    def feedback_count(self) -> int: ...


def transfer_for(store: Any) -> TierTransfer:
    """The transfer side of a backend (SQLite or PostgreSQL)."""
    if getattr(store, "backend", None) == "postgres":
        from tiervault.vault.postgres.transfer import PgTransfer

        return PgTransfer(store)
    from tiervault.vault.sqlite_transfer import SqliteTransfer

    return SqliteTransfer(store)
