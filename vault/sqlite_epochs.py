"""A tier file's identity over time, part of the SQLite backend: its uid, its
generation counter, and the random epoch recorded for each recent generation.

Caches (the search mirror, vector indexes) are named by the uid and checked
against the epoch of the generation they were saved at: a file replaced by
another (a restored backup, a copy from another machine) has other epochs, so a
cache of the old file is never served for it.
"""

from __future__ import annotations

from pathlib import Path

from tiervault.vault.connection import epoch_key
from tiervault.vault.read_scope import current_scope
from tiervault.vault.schema import GEN_AND_LINK_CHANGES
from tiervault.vault.sqlite_db import SqliteDb

__all__ = ["TierEpochs"]

#: meta key prefix of a pinned epoch; under "epoch." so that whatever clears the
#: epochs clears the pins too.
_PIN = "epoch.pin."
#: how many pins are kept (the newest).
PINS_KEPT = 8
#: Moves when another connection (of any process) commits to the file, not with this
#: connection's own commits (``SqliteDb.writes`` counts those).
_DATA_VERSION = "PRAGMA data_version"


class TierEpochs:
    """The uid, generation and epochs of one tier file."""

    def __init__(self, db: SqliteDb, path: Path) -> None:
        self.db = db
        self.path = path
        # (scope, db.writes, gen, links.changes)
        self._gen_memo: tuple[object, int, int, int] | None = None
        # (connection, db.writes, its data_version, gen, links.changes): versions()
        self._dv_memo: tuple[object, int, int, int, int] | None = None

    def uid(self) -> str:
        """A random id the tier file gets with its first write (names its caches).

        Never writes: a tier without one yet (never written by this version, or on
        read-only media) is named by its path, and its caches by the epochs.
        """
        rows = self.db.query("SELECT value FROM meta WHERE key = 'uid'")
        return rows[0][0] if rows else f"path:{self.path.absolute()}"

    def generation(self) -> int:
        """``meta.gen``, read once per :func:`~tiervault.vault.read_scope.read_scope` (one
        search: ~20 reads a query before, issue 16) until this connection writes; another
        process's write is seen by the next scope, as on PostgreSQL."""
        scope = current_scope()
        memo = self._gen_memo  # the memo's test inlined: a search asks ~20 times
        if scope is not None and memo is not None and memo[0] is scope and memo[1] == self.db.writes:
            return memo[2]
        return self.versions()[0]

    def versions(self) -> tuple[int, int]:
        """(:meth:`generation`, ``meta['links.changes']``) in one statement, one snapshot,
        kept in the same memo. The count (schema v6) is moved by a trigger at every link
        row written or removed, whoever writes it: the link graph's check
        (vault/link_graph.py) costs a search ~1 us a tier, not a statement of its own."""
        scope = current_scope()
        memo = self._gen_memo
        if scope is not None and memo is not None and memo[0] is scope and memo[1] == self.db.writes:
            return memo[2], memo[3]
        # PRAGMA data_version first: when no other connection committed since the last
        # read, and this one did not write, the values read then stand (~17 -> ~10 us a
        # tier a search in situ, issue 16 session 17). Inside a transaction of this
        # connection (a write that may roll back) the values are read, never kept.
        with self.db.lock:  # no write of this connection (another thread's) between the reads
            writes, conn = self.db.writes, self.db.conn
            moved = self.db.query(_DATA_VERSION) if conn is not None and not conn.in_transaction else []
            last = self._dv_memo
            if moved and last is not None and last[0] is conn and last[1] == writes and last[2] == moved[0][0]:
                gen, links = last[3], last[4]  # no other connection committed since they were read
            else:
                rows = self.db.query(GEN_AND_LINK_CHANGES)
                gen, links = (int(rows[0][0] or 0), int(rows[0][1] or 0)) if rows else (0, 0)
                self._dv_memo = (conn, writes, moved[0][0], gen, links) if moved else None
        self._gen_memo = (scope, writes, gen, links) if scope is not None else None
        return gen, links

    def epoch_at(self, gen: int) -> str | None:
        """The random epoch recorded for generation ``gen`` (None: not recorded, e.g.
        written by an older version, or older than the window kept and not pinned)."""
        rows = self.db.query("SELECT key, value FROM meta WHERE key IN (?, ?)",
                             (epoch_key(gen), _PIN + str(int(gen))))
        found = dict(rows)
        return found.get(epoch_key(gen), found.get(_PIN + str(int(gen))))

    def pin(self, gen: int) -> None:
        """Keep the epoch of ``gen`` beyond the window (a cache file was saved at ``gen``).

        Epochs older than EPOCH_WINDOW generations are dropped, and a cache whose
        generation lost its epoch is rebuilt: at 1,000,000 entries, a minute at the
        next open after any 4,096 writes (embedding a vault is thousands). The
        newest :data:`PINS_KEPT` pins are kept. One write transaction."""
        with self.db.write("pin cache epoch") as txn:
            conn = txn.conn
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (epoch_key(gen),)).fetchone()
            if row is None:
                return
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         (_PIN + str(int(gen)), row[0]))
            conn.execute(
                "DELETE FROM meta WHERE key LIKE ? AND key NOT IN (SELECT key FROM meta "
                "WHERE key LIKE ? ORDER BY CAST(substr(key, ?) AS INTEGER) DESC LIMIT ?)",
                (_PIN + "%", _PIN + "%", len(_PIN) + 1, PINS_KEPT))
