"""Concurrent agents on one shared tier: 8 capturing processes, 2 searching processes.

Each writer captures 1,000 entries one call at a time (one write transaction
each, the hard case for SQLite's single writer) into the same project tier,
which does not exist yet when the processes start; two readers search it the
whole time. Afterwards: every entry is present and whole, no caller saw an
error (in particular no "database is locked"), every search answered, SQLite's
and FTS5's integrity checks pass, and no reader ever got an id it could not
fetch, a half-written entry, or an entry FTS did not index.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tiervault.vault.filters import Filters
from tiervault.vault.store import TierStore

HELPERS = Path(__file__).parent / "helpers"
sys.path.insert(0, str(HELPERS))
from vault_worker import expected, intact  # noqa: E402

WRITERS = 8
PER_WRITER = 1_000
READERS = 2


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HELPERS / "vault_worker.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _report(proc: subprocess.Popen, timeout: float) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"worker exited {proc.returncode}: {err[-2000:]}"
    assert "locked" not in err.lower(), err[-2000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert "crash" not in report, report["crash"]
    return report


@pytest.mark.slow
def test_eight_writers_two_readers_one_tier(tmp_path):
    db = tmp_path / "shared" / "project.db"
    stop = tmp_path / "stop"
    # Readers first: they must also notice the tier file appearing under them.
    readers = [_spawn("search", str(db), str(stop), str(seed)) for seed in range(READERS)]
    for proc in readers:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    assert not db.exists()
    writers = [_spawn("capture", str(db), str(w), str(PER_WRITER)) for w in range(WRITERS)]
    try:
        w_reports = [_report(p, timeout=600) for p in writers]
    finally:
        stop.touch()
    r_reports = [_report(p, timeout=120) for p in readers]

    for rep in w_reports:
        assert rep["n_errors"] == 0, rep["errors"]
        assert rep["written"] == PER_WRITER
    for rep in r_reports:
        assert rep["n_errors"] == 0, rep["errors"]
        assert rep["searches"] > 0 and rep["checked"] > 0, rep
        # After the writers finished, the reader's own mirror holds every entry.
        assert rep["final_alive"] == WRITERS * PER_WRITER, rep

    with TierStore(db, name="project") as store:
        assert store.integrity_problems() == []
        assert store.count() == WRITERS * PER_WRITER
        seen = {}
        for entry in store.iter_entries():
            assert intact(entry) is None, intact(entry)
            seen[entry.id] = entry
        assert set(seen) == {expected(w, i)["id"] for w in range(WRITERS) for i in range(PER_WRITER)}
        # FTS holds every entry's text: each unique description token finds exactly its entry.
        for w in range(WRITERS):
            for i in range(0, PER_WRITER, 97):
                assert store.search_fts([f"desc{w}x{i}"], Filters(), 5).ids == [f"w{w}-{i:04d}"]
        # One generation per write transaction (readers add one when they name the tier).
        assert store.generation() >= WRITERS * PER_WRITER
    print(f"\nconcurrency: {WRITERS} writers x {PER_WRITER} single-entry captures, "
          f"{READERS} readers: {sum(r['searches'] for r in r_reports)} searches, "
          f"{sum(r['checked'] for r in r_reports)} hits checked; slowest capture "
          f"{max(r['slowest_s'] for r in w_reports)} s")


def test_reader_opened_before_the_tier_exists_sees_later_writes(tmp_path):
    """A long-lived reader (an MCP server, say) started before any agent wrote the
    shared tier must see what other processes write to it afterwards."""
    db = tmp_path / "project.db"
    from tiervault.vault.entry import Entry
    from tiervault.vault.manager import Tier, VaultManager

    with VaultManager([Tier("project", str(db), 0.8)]) as reader:
        assert reader.search("concurrent capture", tiers=["project"]).ids == []
        with TierStore(db, name="project") as writer:
            writer.capture(Entry.from_dict(expected(0, 1)))
        assert reader.search("concurrent capture", tiers=["project"]).ids == ["w0-0001"]
        assert reader.get("w0-0001")[1] == "project"


def test_opening_a_tier_while_another_process_creates_it(tmp_path, monkeypatch):
    """The creator commits its schema between the opener's first and later reads of the
    header: the opener must judge one consistent snapshot, never "tables but no
    tiervault application id" (which it would report as a foreign SQLite file)."""
    import sqlite3

    from tiervault.vault import connection
    from tiervault.vault.schema import MIGRATIONS

    path = tmp_path / "project.db"
    creator = sqlite3.connect(path, isolation_level=None)
    creator.execute("PRAGMA journal_mode = WAL")
    creator.execute("BEGIN IMMEDIATE")
    for statements in MIGRATIONS:
        for sql in statements:
            creator.execute(sql)
    creator.execute(f"PRAGMA application_id = {connection.APPLICATION_ID}")
    creator.execute(f"PRAGMA user_version = {connection.SCHEMA_VERSION}")

    real_connect = sqlite3.connect

    class Opener:
        """The opener's connection; the creator commits right after its first read."""

        def __init__(self, *args, **kwargs):
            self._conn = real_connect(*args, **kwargs)
            self._reads = 0

        def execute(self, sql, *params):
            cursor = self._conn.execute(sql, *params)
            if "busy_timeout" not in sql:
                self._reads += 1
                if self._reads == 1:
                    creator.execute("COMMIT")
            return cursor

        def __getattr__(self, name):
            return getattr(self._conn, name)

    monkeypatch.setattr(connection.sqlite3, "connect", Opener)
    conn = connection.open_tier_connection("project", path, read_only=False, create=True)
    monkeypatch.undo()
    conn.close()
    creator.close()
    with TierStore(path, name="project") as store:
        assert store.integrity_problems() == [] and store.count() == 0


def test_turning_a_new_tier_to_wal_waits_out_a_lock_longer_than_one_busy_timeout(tmp_path, monkeypatch):
    """Switching a new file to WAL needs it to itself; another process reading it (here:
    an open read transaction) for longer than one busy timeout must delay the open, not
    fail it with "database is locked" (seen with 8 agents starting at once at load 5+)."""
    import sqlite3
    import threading

    from tiervault.vault import connection

    path = tmp_path / "project.db"
    sqlite3.connect(path).close()  # an empty file in rollback-journal mode: a tier being created
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # holds a shared lock
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 50)
    released = threading.Timer(0.6, lambda: reader.execute("COMMIT"))
    released.start()
    try:
        conn = connection.open_tier_connection("project", path, read_only=False, create=False)
    finally:
        released.join()
        reader.close()
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == connection.SCHEMA_VERSION
    finally:
        conn.close()
