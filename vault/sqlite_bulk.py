"""A bulk load's connection settings: a larger page cache and fewer WAL checkpoints,
for the duration of one :meth:`TierStore.capture_many`, restored afterwards.

Why (bench/README.md, "Issue 16, write side round 3"): a tier's ``entries`` table has
two indexes on random keys (``id`` and ``content_hash``). Once a tier holds more leaf
pages of those indexes than a batch has rows (~5,000 rows: ~100,000 stored rows for
the hash index), every row of a batch dirties its own leaf page of each, and the
commit writes each dirtied page twice: into the WAL, then (SQLite checkpoints every
1,000 WAL pages by default, i.e. after every such commit) into the database file.
Measured on the team tier of the 1,000,000-entry bench corpus (493,612 rows, 5,000-row
batches): the commit wrote 3.7 KB a row over the first 45,000 rows and 14.7 KB a row
over the last 45,000, and its CPU grew from 3.8 to 16.6 us a row -- the import's cost
grew faster than linearly because of it. Two settings cut it without changing what is
stored or when it is durable:

- ``wal_autocheckpoint`` = :data:`BULK_WAL_PAGES` (128 MiB of 4 KiB pages): a page
  written by several commits is copied into the database once per checkpoint instead
  of once per commit. The WAL guarantees are the same (each commit is durable in the
  WAL as before; recovery replays it); the WAL file grows up to that size meanwhile,
  and the connection's close (or the next small write, back at the default threshold)
  checkpoints it.
- ``cache_size`` = :data:`BULK_CACHE_KIB` (256 MiB): the dirty pages of a batch and
  the random-key index pages stay in SQLite's cache instead of spilling or being
  read back from the OS.

The settings are per connection and never persistent: nothing is left in the file.

A load whose first bulk batch finds the tier empty also defers the secondary indexes
:data:`~tiervault.vault.schema.DEFERRABLE_INDEXES` (``domain``, ``content_hash``): that
batch's transaction drops them, :meth:`BulkSettings.restore` builds them once at the
end (a sort instead of a B-tree insert per row; bench/README.md, "session 9"). The drop
commits with the first batch's rows or not at all; a load killed before its end leaves a
tier without them, which answers every query the same (only look-ups by domain or hash
are slower) and gets them back at its next writable open (``connection.py``). The
``id`` index (UNIQUE: it enforces the ids) and the ``gen`` index (each batch's FTS5
insert and the mirrors' catch-up read through it) are never deferred.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from tiervault.vault.schema import DEFERRABLE_INDEXES, build_deferred_indexes

__all__ = ["BulkSettings", "BULK_WAL_PAGES", "BULK_CACHE_KIB"]

log = logging.getLogger(__name__)

#: WAL pages between automatic checkpoints during a bulk load (SQLite's default: 1,000).
BULK_WAL_PAGES = 32_768
#: Page cache during a bulk load, in KiB (a tier connection's: connection.TIER_CACHE_KIB).
BULK_CACHE_KIB = 262_144


class BulkSettings:
    """Applied once by the first bulk batch (in the writer's thread, inside its
    transaction), restored by :meth:`restore` when the load ends, whatever the outcome."""

    def __init__(self, lock: threading.RLock, tier: str = "") -> None:
        self._lock = lock
        self._tier = tier
        self._conn: sqlite3.Connection | None = None
        self._saved: tuple[int, int] = (0, 0)
        self._deferred = False

    def apply(self, conn: sqlite3.Connection) -> None:
        """Switch ``conn`` to the bulk settings (once; later calls do nothing)."""
        if self._conn is not None:
            return
        cache = conn.execute("PRAGMA cache_size").fetchone()[0]
        pages = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        self._saved = (int(cache), int(pages))
        self._conn = conn
        conn.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {BULK_WAL_PAGES}")
        # Inside the first batch's transaction: the tier is still empty when it commits.
        if conn.execute("SELECT NOT EXISTS (SELECT 1 FROM entries)").fetchone()[0]:
            for name in DEFERRABLE_INDEXES:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
            self._deferred = True

    def restore(self) -> None:
        """Build the deferred indexes (with the bulk cache still set), then put back the
        connection's own settings (if :meth:`apply` ran). A build that fails (the tier
        locked by another writer past the busy timeout, a full disk) is logged, not
        raised: the load's rows are committed, nothing needs the indexes to be right,
        the next writable open builds them, and an error of the load itself (this runs
        in its ``finally``) is not masked."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        deferred, self._deferred = self._deferred, False
        cache, pages = self._saved
        with self._lock:
            try:
                if deferred:
                    build_deferred_indexes(conn)
            except sqlite3.Error as exc:
                log.warning("tier %r: the indexes a bulk load deferred were not built (%s); "
                            "its next writable open builds them", self._tier, exc)
            finally:
                conn.execute(f"PRAGMA cache_size = {cache}")
                conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
