"""Integrity checks and repairs of one SQLite tier (``tiervault check [--repair]``).

Part of the SQLite backend: :class:`Maintenance` runs on the tier's
:class:`~tiervault.vault.sqlite_db.SqliteDb` (like the journal); :class:`TierStore`
exposes it. What it checks:

* SQLite's ``integrity_check`` and FTS5's ``integrity-check`` (with ``rank = 1``,
  which compares the index with its content table, so an index made stale by a
  direct SQL change is found);
* rows whose timestamps the entry model refuses (non-finite, outside years 1-9999),
  written by older versions;
* stored vectors that cannot be a vector (wrong length, NaN or infinite values).

Repairs (all derived data, or values that were invalid anyway): rebuild both FTS
indexes and move every entry to a new generation (every mirror and cache then
rebuilds); set an invalid ``created_at`` / ``updated_at`` to now and clear an
invalid ``valid_from`` / ``valid_until``; delete bad vectors and their embedding
state (``tiervault embed`` makes them again).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
import numpy as np

from tiervault.vault.entry import MAX_TIMESTAMP, MIN_TIMESTAMP
from tiervault.vault.sqlite_db import SqliteDb

__all__ = ["Maintenance", "RepairReport"]

_TIME_COLUMNS = ("created_at", "updated_at", "valid_from", "valid_until")


def _bad(column: str) -> str:
    # NaN is stored as NULL; NULL is valid only for the validity columns.
    valid = f"{column} BETWEEN {MIN_TIMESTAMP!r} AND {MAX_TIMESTAMP!r}"
    if column.startswith("valid_"):
        return f"({column} IS NOT NULL AND NOT ({valid}))"
    return f"({column} IS NULL OR NOT ({valid}))"


@dataclass(slots=True)
class RepairReport:
    """What a repair changed."""

    fts_rebuilt: bool = False
    rows_fixed: list[str] = field(default_factory=list)
    vectors_dropped: int = 0


class Maintenance:
    """Checks and repairs of one tier file; see the module docstring."""

    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    def integrity_problems(self) -> list[str]:
        """Empty when both SQLite's and FTS5's integrity checks pass."""
        conn = self.db.reader()
        if conn is None:
            return []
        try:
            with self.db.lock:
                problems = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()
                            if r[0] != "ok"]
        except sqlite3.DatabaseError as exc:  # so damaged the check itself cannot run
            problems = [f"integrity_check: {exc}"]
        for table in ("entries_fts", "memories_fts"):
            try:
                # rank = 1: also compare the index with its external content table
                # (entries / memories); without it FTS5 only checks the index's own
                # structure and an index missing or holding stale rows passes.
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table}: {exc}")
        return problems

    def damaged_rows(self) -> list[str]:
        """Ids of entries holding a timestamp the model refuses."""
        where = " OR ".join(_bad(c) for c in _TIME_COLUMNS)
        return [r[0] for r in self.db.query(f"SELECT id FROM entries WHERE {where} ORDER BY id")]

    def bad_vectors(self) -> list[tuple[str, str]]:
        """(entry id, model) of stored vectors of the wrong length or with NaN/inf values."""
        bad = [(r[0], r[1]) for r in self.db.query(
            "SELECT entry_id, model FROM entry_vectors WHERE dim < 1 OR length(vector) != dim * 4")]
        last = ("", "")
        while True:
            rows = self.db.query(
                "SELECT entry_id, model, vector FROM entry_vectors WHERE (entry_id, model) > (?, ?) "
                "AND length(vector) = dim * 4 AND dim > 0 ORDER BY entry_id, model LIMIT 2000", last)
            if not rows:
                return bad
            for eid, model, blob in rows:
                if not np.isfinite(np.frombuffer(blob, dtype=np.float32)).all():
                    bad.append((eid, model))
            last = (rows[-1][0], rows[-1][1])

    def repair(self, *, fts: bool, rows: bool, vectors: bool) -> RepairReport:
        """Repair what the flags name, in one write transaction (see the module docstring).
        The caller catches its mirror up afterwards."""
        report = RepairReport()
        damaged = self.damaged_rows() if rows else []
        bad_vectors = self.bad_vectors() if vectors else []
        if not (fts or damaged or bad_vectors):
            return report
        now = round(time.time(), 6)
        with self.db.write("repair") as txn:
            conn, gen = txn.conn, txn.gen
            for column in _TIME_COLUMNS:
                fixed = "NULL" if column.startswith("valid_") else repr(now)
                conn.execute(f"UPDATE entries SET {column} = {fixed}, gen = ? WHERE {_bad(column)}",
                             (gen,))
            report.rows_fixed = damaged
            if fts:
                conn.execute("INSERT INTO entries_fts(entries_fts) VALUES ('rebuild')")
                conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
                # Every row in a new generation: mirrors and caches rebuild from it.
                conn.execute("UPDATE entries SET gen = ?", (gen,))
                report.fts_rebuilt = True
            for eid, model in bad_vectors:
                conn.execute("DELETE FROM entry_vectors WHERE entry_id = ? AND model = ?", (eid, model))
                conn.execute("DELETE FROM embedding_state WHERE entry_id = ? AND model = ?", (eid, model))
            report.vectors_dropped = len(bad_vectors)
        return report
