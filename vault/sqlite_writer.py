"""Writing batches of entries into an SQLite tier: one transaction per batch, FTS5 in step.

A batch is all-or-nothing: its rows, their FTS5 index rows and the generation move
together in one transaction (:meth:`SqliteDb.write`), so after a crash every
acknowledged batch is present and the interrupted one is absent. Unchanged entries
(same content hash and lifecycle fields) are not rewritten. The pipelining of parsing
and writing is :mod:`write_pipeline`'s; a bulk load's connection settings are
:mod:`sqlite_bulk`'s; :class:`~tiervault.vault.store.TierStore` owns the mirror that
must catch up afterwards.
"""

from __future__ import annotations

import json
import time
from itertools import repeat
from operator import attrgetter
from typing import Any, Callable

from tiervault.vault.entry import Entry
from tiervault.vault.entry_rows import entry_params, insert_row, unchanged
from tiervault.vault.sqlite_bulk import BulkSettings
from tiervault.vault.sqlite_db import SqliteDb
from tiervault.vault.sqlite_sql import (FTS_AUTOMERGE, FTS_DELETE, FTS_INSERT, FTS_SET_AUTOMERGE,
                                        FTS_SET_HASHSIZE, INSERT_ENTRY, UPSERT_ENTRY)

__all__ = ["BULK_ROWS", "FTS5_DEFAULT_AUTOMERGE", "FTS5_DEFAULT_HASHSIZE", "FTS5_BULK_HASHSIZE",
           "EntryWriter"]

_ID = attrgetter("id")

#: A write of at least this many changed rows is a bulk one (see :func:`index_fts`).
BULK_ROWS = 1_000
FTS5_DEFAULT_AUTOMERGE = 4
FTS5_DEFAULT_HASHSIZE = 1 << 20
#: A bulk batch's pending-terms budget: its whole FTS5 segment built in memory (a 5,000-row
#: batch of the bench corpus holds ~4-8 MB of pending terms), bounded for huge batches.
FTS5_BULK_HASHSIZE = 64 << 20


class EntryWriter:
    """Upserts batches of entries into the tier behind ``db``."""

    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    def write_batch(self, batch: list[Entry], inserted: Callable[[], None],
                    bulk: BulkSettings | None = None) -> int:
        """Upsert one batch in one transaction; returns how many entries changed.

        The FTS index is maintained set-wise: old index rows of changed entries
        are deleted first, then every row this transaction wrote (``gen``) is
        indexed with one INSERT ... SELECT. Unchanged entries are not rewritten.
        A batch of BULK_ROWS or more switches the connection to ``bulk``'s settings
        for the rest of the load (:mod:`sqlite_bulk`).
        ``inserted()`` once the rows are in: what is left (FTS5 indexing, commit) runs
        with the GIL released (:mod:`write_pipeline` reads the next batch meanwhile).
        """
        now = round(time.time(), 6)  # microseconds: what the ISO form writes back
        by_id = dict(zip(map(_ID, batch), batch))  # a repeated id: the last one wins
        latest = list(by_id.values())
        with self.db.write("write entries") as txn:
            conn, gen = txn.conn, txn.gen
            if bulk is not None and len(batch) >= BULK_ROWS:
                bulk.apply(conn)
            stored = {r[0]: r[1:] for r in conn.execute(
                "SELECT id, content_hash, origin, valid_from, valid_until, created_at, "
                "updated_at FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(by_id)),))}
            if stored:
                todo = [e for e in latest if e.id not in stored or not unchanged(e, stored[e.id])]
                changed = [e for e in todo if e.id in stored]
                new = [e for e in todo if e.id not in stored]
            else:  # every id is new (a bulk load's usual batch): no per-entry tests
                todo = new = latest
                changed = []
            if changed:
                conn.execute(FTS_DELETE, (json.dumps([e.id for e in changed]),))
            # New ids (this transaction holds the write lock: none can appear meanwhile)
            # by plain INSERT, in batch order, so they get the rowids an UPSERT would give.
            conn.executemany(INSERT_ENTRY, list(map(insert_row, new, repeat(gen), repeat(now))))
            if changed:
                conn.executemany(UPSERT_ENTRY, [entry_params(e, gen, now) for e in changed])
            if todo:
                index_fts(conn, gen, bulk=len(todo) >= BULK_ROWS, inserted=inserted)
        return len(todo)


def index_fts(conn: Any, gen: int, *, bulk: bool, inserted: Callable[[], None]) -> None:
    """Index the rows of generation ``gen`` in FTS5. A bulk batch changes two FTS5 settings
    for its own statement, restored in the same transaction (so no crash can leave them):

    - incremental merging off ('automerge' 0): a bulk import then merges only when 16
      segments pile up on a level (FTS5's 'crisismerge') instead of after every batch,
      ~10% of the import's CPU at 100,000 rows (bench/README.md);
    - the pending-terms hash raised from 1 MiB to :data:`FTS5_BULK_HASHSIZE` ('hashsize'):
      FTS5 flushes its hash to a new level-0 segment whenever it outgrows that size, so a
      5,000-row batch made ~4 segments, which the crisis merges then read and wrote again
      (a third of them once more at the next level); the whole batch is now one segment,
      flushed at the next statement (FTS5 flushes at every statement savepoint). The same
      terms, positions and document sizes (the index answers every query alike); the
      FTS5 statements and commits of a 49,191-row load take ~33,000 fewer instructions a
      row (bench/README.md, "Issue 16, session 22")."""
    if not bulk:
        inserted()
        conn.execute(FTS_INSERT, (gen,))
        return
    saved = dict(conn.execute(FTS_AUTOMERGE).fetchall())
    conn.execute(FTS_SET_AUTOMERGE, (0,))
    conn.execute(FTS_SET_HASHSIZE, (FTS5_BULK_HASHSIZE,))
    inserted()
    conn.execute(FTS_INSERT, (gen,))
    conn.execute(FTS_SET_AUTOMERGE, (int(saved.get("automerge", FTS5_DEFAULT_AUTOMERGE)),))
    conn.execute(FTS_SET_HASHSIZE, (int(saved.get("hashsize", FTS5_DEFAULT_HASHSIZE)),))
