"""A tier's links, part of the SQLite backend.

A link is stored in the tier holding its source; its target may live in any
tier (the manager checks that it exists somewhere). :class:`TierLinks` runs its
SQL on the tier's :class:`~tiervault.vault.sqlite_db.SqliteDb`;
:class:`~tiervault.vault.store.TierStore` exposes it through the contract.
"""

from __future__ import annotations

import json
import time
from typing import NamedTuple, Sequence

from tiervault.errors import EntryNotFound
from tiervault.vault.connection import epoch_key
from tiervault.vault.entry import check_link
from tiervault.vault.rows import Link
from tiervault.vault.schema import GEN_AND_LINK_CHANGES
from tiervault.vault.sqlite_db import SqliteDb

__all__ = ["TierLinks", "LinkState", "LinkChanges", "COUNTED_FROM"]

#: First schema whose triggers count every link row change in ``meta['links.changes']``
#: (:mod:`schema`'s v6), whoever makes it, so that a link graph built at one value
#: (:mod:`link_graph`) knows whether links changed since. Below it (a v5 file opened
#: read-only, never migrated) only tiervault's own link writes moved it.
COUNTED_FROM = 6


class LinkState(NamedTuple):
    """Every link of a tier as (source, target, type) rows, read in one snapshot with
    the generation and the links' change count of that snapshot."""

    gen: int
    changes: int
    rows: list[tuple[str, str, str]]


class LinkChanges(NamedTuple):
    """The generation and the links' change count now, read in one snapshot."""

    gen: int
    changes: int


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
        with self.db.write("unlink") as txn:  # the schema's triggers count the rows removed
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

    def state(self) -> LinkState | None:
        """Every link's ends and type with the generation and change count of the same
        snapshot (None while the file does not exist)."""
        with self.db.snapshot("read links") as conn:
            if conn is None:
                return None
            gen, changes = conn.execute(GEN_AND_LINK_CHANGES).fetchone()
            rows = conn.execute("SELECT source_id, target_id, link_type FROM links").fetchall()
        return LinkState(int(gen or 0), int(changes or 0), rows)

    def changes_since(self) -> LinkChanges | None:
        """The generation and links' change count now, in one snapshot (None: no file).
        An entry delete's cascade moves the count too (a trigger per link row)."""
        with self.db.snapshot("read link changes") as conn:
            if conn is None:
                return None
            now, changes = conn.execute(GEN_AND_LINK_CHANGES).fetchone()
        return LinkChanges(int(now or 0), int(changes or 0))

    def counted(self) -> bool:
        """Whether the file's schema counts every link change (:data:`COUNTED_FROM`)."""
        rows = self.db.query("PRAGMA user_version")
        return bool(rows) and rows[0][0] >= COUNTED_FROM

    def pin(self, gen: int) -> None:
        """Keep the epoch of ``gen`` (a link graph file was saved at ``gen``) past the
        epoch window, in one key of its own (``links.pin``): the mirror's pins
        (:mod:`sqlite_epochs`) are not pushed out by link graphs saved after each link
        change. One write transaction (a new generation)."""
        with self.db.write("pin link graph epoch") as txn:
            row = txn.conn.execute("SELECT value FROM meta WHERE key = ?", (epoch_key(gen),)).fetchone()
            if row is not None:
                txn.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('links.pin', ?)",
                                 (f"{int(gen)} {row[0]}",))

    def pinned_epoch(self, gen: int) -> str | None:
        """The epoch :meth:`pin` kept for ``gen`` (None: another generation or none)."""
        rows = self.db.query("SELECT value FROM meta WHERE key = 'links.pin'")
        parts = rows[0][0].split(" ") if rows else []
        return parts[1] if len(parts) == 2 and parts[0] == str(int(gen)) else None

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
