"""vault/sqlite_bulk.py: a bulk load runs with a bigger page cache and fewer WAL
checkpoints, and the connection's own settings are back after it, whatever the outcome.
Outside a bulk load a tier connection's page cache stays small (connection.TIER_CACHE_KIB)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tiervault.vault import connection
from tiervault.vault.connection import TIER_CACHE_KIB
from tiervault.vault.entry import Entry
from tiervault.vault.sqlite_bulk import BULK_CACHE_KIB, BULK_WAL_PAGES
from tiervault.vault.store import BULK_ROWS, TierStore


def entries(n: int, start: int = 0) -> list[Entry]:
    return [Entry.from_dict({"id": f"bulk-{i:05d}", "title": f"bulk entry {i}",
                             "description": f"Entry {i} of a bulk load, word {i % 9}."})
            for i in range(start, start + n)]


def failing_input():
    """Two bulk batches and a few rows, then the input breaks (an OSError mid-load)."""
    yield from entries(2 * BULK_ROWS + 10)
    raise OSError("the input broke")


def settings(store: TierStore) -> tuple[int, int]:
    conn = store.db.conn
    assert conn is not None
    return (conn.execute("PRAGMA cache_size").fetchone()[0],
            conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_a_bulk_load_runs_with_the_bulk_settings_and_restores_the_connections(tmp_path):
    during = []
    with TierStore(tmp_path / "t.db", name="agent") as store:
        store.capture_many(entries(10))  # a small write: the tier exists, settings untouched
        own = settings(store)
        assert own == (-TIER_CACHE_KIB, 1_000)
        store.capture_many(entries(3 * BULK_ROWS, start=100), batch_size=BULK_ROWS,
                           on_batch=lambda b: during.append(settings(store)))
        assert during == [(-BULK_CACHE_KIB, BULK_WAL_PAGES)] * 3
        assert settings(store) == own
        small = []
        store.capture_many(entries(900, start=9_000), batch_size=300,
                           on_batch=lambda b: small.append(settings(store)))
        assert small == [own] * 3  # batches under BULK_ROWS: not a bulk load
        assert store.count() == 10 + 3 * BULK_ROWS + 900
        assert store.integrity_problems() == []


def test_a_failing_bulk_load_restores_the_settings_too(tmp_path):
    with TierStore(tmp_path / "t.db", name="agent") as store:
        store.create()
        own = settings(store)
        with pytest.raises(OSError, match="the input broke"):
            store.capture_many(failing_input(), batch_size=BULK_ROWS)
        assert settings(store) == own
        assert store.count() == 2 * BULK_ROWS


# Reads every row of a tier of ~40 MB through its connection, then reports SQLite's own
# count of the memory it holds (sqlite3_memory_used of the library Python's sqlite3 uses).
_READ_ALL = textwrap.dedent("""
    import ctypes, json, sys
    from tiervault.vault.entry import Entry
    from tiervault.vault.store import TierStore
    lib = ctypes.CDLL("libsqlite3.so.0")
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    path, n = sys.argv[1], int(sys.argv[2])
    pad = " ".join(f"word{j}" for j in range(600))
    with TierStore(path, name="team") as store:
        store.capture_many(Entry.from_dict({"id": f"row-{i:05d}", "title": f"row {i}",
                                            "description": f"{pad} {i}"}) for i in range(n))
    with TierStore(path, name="team") as store:
        opened = lib.sqlite3_memory_used()
        ids = [f"row-{i:05d}" for i in range(n)]
        for lo in range(0, n, 100):
            assert len(store.light_rows(ids[lo:lo + 100])) == len(ids[lo:lo + 100])
            assert len(store.get_many(ids[lo:lo + 100])) == len(ids[lo:lo + 100])
        print(json.dumps({"opened": opened, "after": lib.sqlite3_memory_used()}))
""")


def test_a_tier_connection_keeps_a_small_page_cache_while_reading_a_large_tier(tmp_path):
    """Searches read scattered rows of files far larger than any page cache: the
    connection's cache is capped at TIER_CACHE_KIB (8 MiB), not 64 MiB per tier
    (bench/README.md, issue 16 round 6: 110 MB of a 1M search process after 230 queries)."""
    assert TIER_CACHE_KIB <= 8_192
    proc = subprocess.run([sys.executable, "-c", _READ_ALL, str(tmp_path / "t.db"), "8000"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    used = json.loads(proc.stdout.strip().splitlines()[-1])
    assert used["opened"] > 0  # the counter belongs to the library this Python uses
    assert (tmp_path / "t.db").stat().st_size > 3 * 8_192 * 1024  # 3x the cache
    assert used["after"] - used["opened"] < (TIER_CACHE_KIB + 4_096) * 1024


def test_a_small_tier_file_is_read_through_a_mapping_and_a_large_one_with_pread(tmp_path, monkeypatch):
    """A tier file up to TIER_MMAP_BYTES when opened is read in place (``PRAGMA
    mmap_size``: no ``pread`` a page, issue 16 session 16); a larger one as before, so
    scattered row reads of a 1M tier do not make the file resident. Same rows either way."""
    path = tmp_path / "t.db"
    ids = [e.id for e in entries(300)]
    with TierStore(path, name="agent") as store:
        store.capture_many(entries(300))
    answers = []
    for limit, mapped in ((connection.TIER_MMAP_BYTES, connection.TIER_MMAP_BYTES),
                          (path.stat().st_size - 1, 0), (0, 0)):
        monkeypatch.setattr(connection, "TIER_MMAP_BYTES", limit)
        with TierStore(path, name="agent") as store:
            assert store.count() == 300
            assert store.db.conn.execute("PRAGMA mmap_size").fetchone()[0] == mapped
            answers.append((store.light_rows(ids), store.get_many(ids)))
    assert answers[0] == answers[1] == answers[2] and len(answers[0][0]) == 300


def secondary_indexes(conn) -> dict[str, tuple[int, str]]:
    """name -> (its row in sqlite_master, its SQL) of every index declared with SQL."""
    return {n: (r, s) for r, n, s in conn.execute(
        "SELECT rowid, name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}


_DECLARED = {"entries_domain": "CREATE INDEX entries_domain ON entries(domain)",
             "entries_hash": "CREATE INDEX entries_hash ON entries(content_hash)"}


def test_a_bulk_load_into_an_empty_tier_builds_its_secondary_indexes_once_at_the_end(tmp_path):
    with TierStore(tmp_path / "t.db", name="agent") as store:
        store.create()
        before = secondary_indexes(store.db.conn)
        during = []
        store.capture_many(entries(3 * BULK_ROWS), batch_size=BULK_ROWS,
                           on_batch=lambda b: during.append(set(secondary_indexes(store.db.conn))))
        after = secondary_indexes(store.db.conn)
        # dropped by the first batch's transaction, built again (same SQL) after the last
        assert all(not (set(_DECLARED) & names) for names in during)
        assert set(after) == set(before)
        assert {n: after[n][1] for n in _DECLARED} == _DECLARED
        assert after["entries_hash"][0] > before["entries_gen"][0]  # a new sqlite_master row
        hashes = [e.content_hash for e in entries(3)]
        assert set(store.ids_by_hash(hashes)) == set(hashes)
        plan = store.db.query("EXPLAIN QUERY PLAN SELECT id FROM entries WHERE content_hash = 'x'")
        assert "entries_hash" in " ".join(str(r) for r in plan)
        # a bulk load into a tier that holds rows keeps its indexes as they are
        store.capture_many(entries(2 * BULK_ROWS, start=50_000), batch_size=BULK_ROWS)
        assert secondary_indexes(store.db.conn) == after
        assert store.integrity_problems() == []


def test_a_failing_bulk_load_into_an_empty_tier_still_builds_its_indexes(tmp_path):
    with TierStore(tmp_path / "t.db", name="agent") as store:
        store.create()
        with pytest.raises(OSError, match="the input broke"):
            store.capture_many(failing_input(), batch_size=BULK_ROWS)
        assert {n: s for n, (_, s) in secondary_indexes(store.db.conn).items() if n in _DECLARED} == _DECLARED
        assert store.count() == 2 * BULK_ROWS


# A bulk load into an empty tier that stops for good after its second batch (the parent
# kills it with SIGKILL once it said so): its deferred indexes were never built.
_KILLED_LOAD = textwrap.dedent("""
    import sys, time
    from tiervault.vault.entry import Entry
    from tiervault.vault.store import BULK_ROWS, TierStore
    def stop(batch):
        print("ack", batch.total, flush=True)
        if batch.total >= 2 * BULK_ROWS:
            time.sleep(600)
    with TierStore(sys.argv[1], name="team") as store:
        store.capture_many((Entry.from_dict({"id": f"bulk-{i:05d}", "title": f"bulk entry {i}",
                                             "description": f"Entry {i} of a bulk load, word {i % 9}."})
                            for i in range(5 * BULK_ROWS)), batch_size=BULK_ROWS, on_batch=stop)
""")


def test_a_load_killed_before_its_end_leaves_a_tier_that_answers_and_gets_its_indexes_back(tmp_path):
    import signal
    db = tmp_path / "t.db"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_LOAD, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        acks = [proc.stdout.readline().split() for _ in range(2)]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert acks == [["ack", str(BULK_ROWS)], ["ack", str(2 * BULK_ROWS)]]
    hashes = [e.content_hash for e in entries(2 * BULK_ROWS)]
    with TierStore(db, name="team", read_only=True) as store:  # a reader builds nothing
        assert store.count() == 2 * BULK_ROWS
        assert not set(_DECLARED) & set(secondary_indexes(store.db.conn))
        assert len(store.ids_by_hash(hashes)) == 2 * BULK_ROWS  # answers without the index
    with TierStore(db, name="team") as store:  # the next writable open builds them
        store.count()
        indexes = secondary_indexes(store.db.conn)
        assert {n: indexes[n][1] for n in _DECLARED} == _DECLARED
        assert len(store.ids_by_hash(hashes)) == 2 * BULK_ROWS
        assert store.integrity_problems() == []


def test_a_build_the_tier_is_locked_against_is_logged_and_left_to_the_next_open(tmp_path, caplog):
    import logging
    import sqlite3
    db = tmp_path / "t.db"
    other = []

    def lock_at_the_end(batch):  # another writer holds the tier when the load ends
        if batch.total == 2 * BULK_ROWS:
            conn = sqlite3.connect(db, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            other.append(conn)

    with TierStore(db, name="team") as store:
        store.create()
        store.db.query("PRAGMA busy_timeout = 50")
        with caplog.at_level(logging.WARNING):
            assert store.capture_many(entries(2 * BULK_ROWS), batch_size=BULK_ROWS,
                                      on_batch=lock_at_the_end) == 2 * BULK_ROWS
        assert [r.getMessage() for r in caplog.records if "deferred" in r.getMessage()] == [
            "tier 'team': the indexes a bulk load deferred were not built (database is locked); "
            "its next writable open builds them"]
        other.pop().rollback()
        assert not set(_DECLARED) & set(secondary_indexes(store.db.conn))
        assert store.count() == 2 * BULK_ROWS
    with TierStore(db, name="team") as store:
        store.count()
        assert {n: s for n, (_, s) in secondary_indexes(store.db.conn).items() if n in _DECLARED} == _DECLARED


def test_an_open_while_another_connection_writes_does_not_wait_to_build_the_indexes(tmp_path):
    """A load still running builds its deferred indexes at its end: another process's
    writable open goes on without them instead of waiting for the tier's write lock."""
    import sqlite3
    db = tmp_path / "t.db"
    with TierStore(db, name="team") as store:
        store.capture_many(entries(50))
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    for name in _DECLARED:  # as a bulk load's first batch leaves them, not yet committed
        writer.execute(f"DROP INDEX {name}")
    writer.execute("COMMIT")
    writer.execute("BEGIN IMMEDIATE")  # the load's next batch holds the write lock
    try:
        with TierStore(db, name="team") as store:
            assert store.count() == 50
            assert not set(_DECLARED) & set(secondary_indexes(store.db.conn))
    finally:
        writer.rollback()
        writer.close()
    with TierStore(db, name="team") as store:
        assert store.count() == 50
        assert {n: s for n, (_, s) in secondary_indexes(store.db.conn).items() if n in _DECLARED} == _DECLARED
