"""Tier schema and forward migrations, versioned with ``PRAGMA user_version``.

Each migration is a list of statements applied in one transaction. A tier at
version k opens by running migrations k+1..latest; a tier whose version is
higher than :data:`SCHEMA_VERSION` was written by a newer tiervault and is
refused (opening it could silently drop data we do not understand).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator

from tiervault.vault.scoring import FTS_COLUMNS, FTS_WEIGHTS

__all__ = ["DEFERRABLE_INDEXES", "COUNT_DEFERRABLE", "build_deferred_indexes", "SCHEMA_VERSION", "READABLE_FROM", "FEEDBACK_CONTEXT_FROM", "APPLICATION_ID", "MIGRATIONS", "migrate", "FTS_COLUMNS", "FTS_WEIGHTS"]

#: Written to ``PRAGMA application_id`` so a random SQLite file is not taken for a tier.
APPLICATION_ID = 0x54565431  # "TVT1"

#: FTS5 column order. bm25() takes its weights in this order.

_V1 = [
    """CREATE TABLE entries (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        domain TEXT NOT NULL,
        title TEXT NOT NULL,
        description TEXT NOT NULL,
        context TEXT NOT NULL DEFAULT '',
        example TEXT NOT NULL DEFAULT '',
        counter_example TEXT NOT NULL DEFAULT '',
        why TEXT NOT NULL DEFAULT '',
        tags TEXT NOT NULL DEFAULT '',
        applies_to TEXT NOT NULL DEFAULT '[]',
        severity TEXT NOT NULL,
        origin TEXT NOT NULL,
        valid_from REAL,
        valid_until REAL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        content_hash TEXT NOT NULL
    )""",
    "CREATE INDEX entries_domain ON entries(domain)",
    "CREATE INDEX entries_hash ON entries(content_hash)",
    """CREATE VIRTUAL TABLE entries_fts USING fts5(
        id, title, description, context, tags,
        content='entries', content_rowid='rowid', tokenize='porter unicode61')""",
    """CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN
        INSERT INTO entries_fts(rowid, id, title, description, context, tags)
        VALUES (new.rowid, new.id, new.title, new.description, new.context, new.tags);
    END""",
    """CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN
        INSERT INTO entries_fts(entries_fts, rowid, id, title, description, context, tags)
        VALUES ('delete', old.rowid, old.id, old.title, old.description, old.context, old.tags);
    END""",
    """CREATE TRIGGER entries_au AFTER UPDATE ON entries BEGIN
        INSERT INTO entries_fts(entries_fts, rowid, id, title, description, context, tags)
        VALUES ('delete', old.rowid, old.id, old.title, old.description, old.context, old.tags);
        INSERT INTO entries_fts(rowid, id, title, description, context, tags)
        VALUES (new.rowid, new.id, new.title, new.description, new.context, new.tags);
    END""",
    """CREATE TABLE links (
        source_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
        target_id TEXT NOT NULL,
        link_type TEXT NOT NULL
            CHECK (link_type IN ('supports', 'contradicts', 'extends', 'sequences')),
        note TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        PRIMARY KEY (source_id, target_id, link_type)
    )""",
    "CREATE INDEX links_target ON links(target_id)",
    # A link's target may live in another tier, so only a same-tier target cascades.
    """CREATE TRIGGER entries_links_ad AFTER DELETE ON entries BEGIN
        DELETE FROM links WHERE target_id = old.id;
    END""",
    """CREATE TABLE feedback (
        seq INTEGER PRIMARY KEY,
        query TEXT NOT NULL,
        entry_id TEXT NOT NULL,
        action TEXT NOT NULL CHECK (action IN ('accepted', 'modified', 'dismissed', 'failed')),
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX feedback_entry ON feedback(entry_id)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
]

_V2 = [
    """CREATE TABLE memories (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        summary TEXT NOT NULL,
        context TEXT NOT NULL DEFAULT '',
        topics TEXT NOT NULL DEFAULT '',
        project TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    )""",
    """CREATE VIRTUAL TABLE memories_fts USING fts5(
        summary, context, topics, project,
        content='memories', content_rowid='rowid', tokenize='porter unicode61')""",
    """CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, summary, context, topics, project)
        VALUES (new.rowid, new.summary, new.context, new.topics, new.project);
    END""",
    """CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, summary, context, topics, project)
        VALUES ('delete', old.rowid, old.summary, old.context, old.topics, old.project);
    END""",
    """CREATE TABLE entry_vectors (
        entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        input_hash TEXT NOT NULL,
        vector BLOB NOT NULL,
        updated_at REAL NOT NULL,
        gen INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (entry_id, model)
    )""",
    "CREATE INDEX entry_vectors_gen ON entry_vectors(model, gen)",
    """CREATE TABLE embedding_state (
        entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'ok', 'error')),
        input_hash TEXT NOT NULL DEFAULT '',
        error TEXT NOT NULL DEFAULT '',
        retries INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL,
        PRIMARY KEY (entry_id, model)
    )""",
    "CREATE INDEX embedding_state_todo ON embedding_state(model, state)",
    # Change tracking for in-memory mirrors: every write transaction takes the next
    # generation number; rows carry the generation that last wrote them and deletes
    # leave a tombstone, so a mirror at generation g catches up with `> g` reads.
    "ALTER TABLE entries ADD COLUMN gen INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX entries_gen ON entries(gen)",
    "CREATE TABLE tombstones (row INTEGER NOT NULL, gen INTEGER NOT NULL, entry_id TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX tombstones_gen ON tombstones(gen)",
    """CREATE TRIGGER entries_tomb_ad AFTER DELETE ON entries BEGIN
        INSERT INTO tombstones(row, gen, entry_id)
        VALUES (old.rowid, (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'), old.id);
    END""",
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('gen', '0')",
    # Row-by-row FTS triggers cost ~100 us per insert; v2 stores maintain the FTS
    # index with one set-based statement per write transaction (TierStore._write_batch).
    # Deletes keep their trigger: they are rare and single-row.
    "DROP TRIGGER entries_ai",
    "DROP TRIGGER entries_au",
]

_V3 = [
    # The FTS update trigger again, for UPDATEs made outside tiervault (a direct SQL
    # fix): v2 dropped it because the store maintains FTS set-wise. Every store write
    # moves the row to the new generation (gen = excluded.gen), so "gen unchanged"
    # singles out outside updates: their FTS rows are replaced and the row moves to
    # a new generation, so in-memory mirrors and caches see the change.
    """CREATE TRIGGER entries_au AFTER UPDATE ON entries WHEN new.gen = old.gen BEGIN
        INSERT INTO entries_fts(entries_fts, rowid, id, title, description, context, tags)
        VALUES ('delete', old.rowid, old.id, old.title, old.description, old.context, old.tags);
        INSERT INTO entries_fts(rowid, id, title, description, context, tags)
        VALUES (new.rowid, new.id, new.title, new.description, new.context, new.tags);
        UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'gen';
        UPDATE entries SET gen = (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen')
        WHERE rowid = new.rowid;
    END""",
]

_V4 = [
    # Feedback that teaches (tiervault.brain.learning): who gave it (pooled team
    # feedback), and what the ranking looked like for that query when it was given
    # (JSON: the entry's seven signal values and the query's relevance profile).
    "ALTER TABLE feedback ADD COLUMN agent TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE feedback ADD COLUMN context TEXT NOT NULL DEFAULT ''",
    # The learned weights after each refit: the weights in force are the last row.
    """CREATE TABLE weight_history (
        seq INTEGER PRIMARY KEY,
        created_at REAL NOT NULL,
        events INTEGER NOT NULL,
        pairs INTEGER NOT NULL,
        weights TEXT NOT NULL
    )""",
]

_V5 = [
    # The links' change count (vault/sqlite_links.py: every link, unlink and link copy
    # bumps it in its transaction) keeps a tier's memory-mapped link graph exact
    # (vault/link_graph.py). A tiervault of schema 4 writes links without bumping it,
    # so the version moves: an older tiervault refuses this tier instead of leaving
    # the graph serving links it removed.
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('links.changes', '0')",
]

#: The meta key tiervault's own entry deletes hold inside their transaction (inserted
#: before the DELETE, removed after it, so never committed): entries_tomb_ad moves the
#: generation only for deletes made without it, i.e. by outside SQL.
OWN_DELETE = "txn.own_delete"

#: The generation and the links' change count in one statement (one snapshot): read by
#: the tier's epochs (a search's generation) and by its links (the link graph's check).
GEN_AND_LINK_CHANGES = ("SELECT (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'), "
                        "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'links.changes')")

#: One link row written, removed or re-pointed: the links' change count moves in the same
#: statement (an upsert: a count deleted by outside SQL starts again rather than stalling).
_COUNT_LINK = ("INSERT INTO meta (key, value) VALUES ('links.changes', '1') ON CONFLICT (key) "
               "DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")

_V6 = [
    # The links' change count kept by the file itself, whoever writes the links: the
    # sqlite3 shell, another program, a cascade of an entry delete (foreign key or
    # entries_links_ad), tiervault. v5 counted only tiervault's own link writes, so a
    # link graph claiming to be exact missed links written by outside SQL. Per row, so
    # the count is also how many link rows changed (the graph's rebuild threshold). An
    # update of the note alone does not move it (the graph holds no notes): tiervault's
    # re-link of an existing link is such an update. A schema-5 tiervault refuses v6.
    f"CREATE TRIGGER links_count_ai AFTER INSERT ON links BEGIN {_COUNT_LINK}; END",
    f"CREATE TRIGGER links_count_ad AFTER DELETE ON links BEGIN {_COUNT_LINK}; END",
    "CREATE TRIGGER links_count_au AFTER UPDATE OF source_id, target_id, link_type ON links "
    f"BEGIN {_COUNT_LINK}; END",
    # An entry deleted by outside SQL moves the generation, as an outside update does
    # (v3's entries_au): its tombstone then lies past every mirror's generation, so the
    # next search of any process drops it. v2-v5 wrote it at the current generation,
    # which a mirror already at that generation never reads: the search mirror kept
    # answering the deleted entry until the tier's next tiervault write. tiervault's own
    # deletes hold OWN_DELETE in meta for their statement (never committed), so they
    # keep their transaction's one generation.
    "DROP TRIGGER entries_tomb_ad",
    f"""CREATE TRIGGER entries_tomb_ad AFTER DELETE ON entries BEGIN
        UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'gen'
            AND NOT EXISTS (SELECT 1 FROM meta WHERE key = '{OWN_DELETE}');
        INSERT INTO tombstones(row, gen, entry_id)
        VALUES (old.rowid, (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'gen'), old.id);
    END""",
]

#: MIGRATIONS[k] brings a tier from version k to k+1.
MIGRATIONS: list[list[str]] = [_V1, _V2, _V3, _V4, _V5, _V6]
SCHEMA_VERSION = len(MIGRATIONS)
#: Oldest schema a read-only connection can read as is (v3 only added a trigger,
#: which matters to writers; v4 added feedback columns and weight_history, which
#: the journal reads as empty on an older tier): read-only media holding a v2 tier
#: stay readable.
READABLE_FROM = 2
#: First version whose feedback rows carry agent/context and that has weight_history.
FEEDBACK_CONTEXT_FROM = 4


#: Secondary indexes of ``entries`` that a bulk load into an empty tier drops in its first
#: batch's transaction and builds once, sorted, at its end (:mod:`sqlite_bulk`: a B-tree
#: insert per row and index costs more than one build). Nothing needs them to be right
#: (they only speed up look-ups by domain and by content hash): a tier that lacks one
#: because a load was killed before its end answers the same, and gets it back at its
#: next writable open (:func:`build_deferred_indexes`). Name -> statement.
DEFERRABLE_INDEXES = {
    "entries_domain": "CREATE INDEX IF NOT EXISTS entries_domain ON entries(domain)",
    "entries_hash": "CREATE INDEX IF NOT EXISTS entries_hash ON entries(content_hash)",
}
#: How many of DEFERRABLE_INDEXES a tier holds (a tier of schema v1+ should hold all).
COUNT_DEFERRABLE = ("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ("
                    + ", ".join(f"'{n}'" for n in DEFERRABLE_INDEXES) + ")")


@contextmanager
def own_deletes(conn: sqlite3.Connection) -> Iterator[None]:
    """Inside a write transaction: the entry deletes made in the block are tiervault's
    own, so ``entries_tomb_ad`` leaves the generation at the transaction's one. The
    marker is removed before the commit; on an error the transaction's rollback drops it."""
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (OWN_DELETE,))
    yield
    conn.execute("DELETE FROM meta WHERE key = ?", (OWN_DELETE,))


def build_deferred_indexes(conn: sqlite3.Connection) -> None:
    """Build the DEFERRABLE_INDEXES a tier lacks, in one transaction of their own."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in DEFERRABLE_INDEXES.values():
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply pending migrations up to ``target`` in one transaction; return the old version.

    The caller has checked that the file is a tier (or empty) and not newer.
    """
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current >= target:
        return current
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read inside the write lock: another process may have migrated meanwhile.
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        for version in range(current, target):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {int(target)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return current
