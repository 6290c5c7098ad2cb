"""A tier's links, part of the SQLite backend.

A link is stored in the tier holding its source; its target may live in any
tier (the manager checks that it exists somewhere). :class:`TierLinks` runs its
SQL on the tier's :class:`~tiervault.vault.sqlite_db.SqliteDb`;
:class:`~tiervault.vault.store.TierStore` exposes it through the contract.
"""

from __future__ import annotations

import json
import time
from typing import Sequence

from tiervault.errors import EntryNotFound
from tiervault.vault.entry import check_link
from tiervault.vault.rows import Link
from tiervault.vault.sqlite_db import SqliteDb

__all__ = ["TierLinks"]


class TierLinks:
    """The links stored in one tier file."""

    def __init__(self, db: SqliteDb, tier: str) -> None:
        self.db = db
        self.tier = tier

    def link(self, source_id: str, target_id: str, link_type: str, note: str = "") -> Link:
        """Link ``source_id`` (held here) to ``target_id`` (any tier); a second link of
        the same type between the same entries replaces the note."""
        check_link(source_id, target_id, link_type, note)
        now = time.time()
        with self.db.write("link") as txn:
            conn = txn.conn
            if conn.execute("SELECT 1 FROM entries WHERE id = ?", (source_id,)).fetchone() is None:
                raise EntryNotFound(source_id)
            conn.execute("INSERT INTO links(source_id, target_id, link_type, note, created_at) "
                         "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET note = excluded.note",
                         (source_id, target_id, link_type, note, now))
        return Link(source_id, target_id, link_type, note, now, self.tier)

    def unlink(self, source_id: str, target_id: str, link_type: str | None = None) -> int:
        """Remove the links from ``source_id`` to ``target_id`` (of ``link_type``, or
        of any type); the number removed."""
        with self.db.write("unlink") as txn:
            cur = txn.conn.execute(
                "DELETE FROM links WHERE source_id = ? AND target_id = ? "
                "AND (? IS NULL OR link_type = ?)", (source_id, target_id, link_type, link_type))
        return cur.rowcount

    def touching(self, ids: Sequence[str]) -> list[Link]:
        """Every link stored here whose source or target is one of ``ids``."""
        if not ids:
            return []
        rows = self.db.query(
            "SELECT source_id, target_id, link_type, note, created_at FROM links "
            "WHERE source_id IN (SELECT value FROM json_each(?1)) "
            "OR target_id IN (SELECT value FROM json_each(?1))", (json.dumps(list(ids)),))
        return [Link(s, t, lt, note, at, self.tier) for s, t, lt, note, at in rows]

    def of_type(self, link_type: str, limit: int) -> list[Link]:
        """The newest ``limit`` links of ``link_type`` (ties: source id, then target id)."""
        rows = self.db.query(
            "SELECT source_id, target_id, link_type, note, created_at FROM links "
            "WHERE link_type = ? ORDER BY created_at DESC, source_id, target_id LIMIT ?",
            (link_type, limit))
        return [Link(s, t, lt, note, at, self.tier) for s, t, lt, note, at in rows]

    def count(self) -> int:
        rows = self.db.query("SELECT count(*) FROM links")
        return rows[0][0] if rows else 0
