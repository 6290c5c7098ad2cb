"""``tiervault migrate`` through the real CLI: SQLite -> PostgreSQL -> SQLite, killed and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np

from tiervault.vault.entry import Entry
from tiervault.vault.store import TierStore

from migrate_source import fill_tier, kill_when


def _cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tiervault", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _entry_indexes(pg_server, schema: str) -> dict[str, int]:
    """{index name: oid} of ``schema``.entries, read without opening the tier (which
    would re-create missing indexes)."""
    import psycopg

    with psycopg.connect(pg_server.url("tiervault_test"), autocommit=True) as conn:
        return dict(conn.execute("SELECT c.relname, c.oid::bigint FROM pg_index x JOIN pg_class c "
                                 "ON c.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
                                 "JOIN pg_namespace n ON n.oid = t.relnamespace "
                                 "WHERE n.nspname = %s AND t.relname = 'entries'", (schema,)).fetchall())


def test_migrate_into_an_empty_postgres_tier_takes_the_bulk_path(tmp_path, pg_server):
    """All pages go to ONE capture_many call: into an empty tier of several batches the
    store drops the secondary indexes of entries and builds them once at the end (new
    index objects), and every batch's links and vectors still arrive."""
    from tiervault.vault.postgres import PgTierStore
    from tiervault.vault.postgres.schema import ENTRY_INDEXES

    fill_tier(tmp_path / "team.db", 1_200).close()
    schema = "t_migrate_bulk"
    pg_server.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE", "tiervault_test")
    PgTierStore(pg_server.url("tiervault_test"), name="team", schema=schema).close()  # empty, indexed
    before = _entry_indexes(pg_server, schema)
    assert set(ENTRY_INDEXES) <= set(before)
    done = _cli("migrate", "--from", str(tmp_path / "team.db"), "--to", pg_server.url("tiervault_test"),
                "--schema", schema, "--batch", "250", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["copied"]["entries"] == 1_200
    assert report["copied"]["vectors (hash-8)"] == 1_200 and report["copied"]["links"] == 1_200 // 7 + 2
    after = _entry_indexes(pg_server, schema)
    assert all(after[name] != before[name] for name in ENTRY_INDEXES)  # dropped and built again
    assert after["entries_id_key"] == before["entries_id_key"]  # the unique key is never dropped
    pg_server.execute(f"DROP SCHEMA {schema} CASCADE", "tiervault_test")


def test_migrate_round_trip_with_kill_and_resume(tmp_path, pg_server):
    src = fill_tier(tmp_path / "team.db", 3_000)
    src.close()
    url = pg_server.url("tiervault_test").replace(pg_server.password, "${TV_MIGRATE_PW}")
    env = {"TV_MIGRATE_PW": pg_server.password}
    pg_server.execute("DROP SCHEMA IF EXISTS t_migrate CASCADE", "tiervault_test")
    argv = [sys.executable, "-m", "tiervault", "migrate", "--from", str(tmp_path / "team.db"),
            "--to", url, "--schema", "t_migrate", "--batch", "200"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    # Kill it once some batches are in (the progress lines say so), before it finishes.
    assert kill_when(proc, "entries: 600 read") == -signal.SIGKILL
    from tiervault.vault.postgres import PgTierStore
    from tiervault.vault.postgres.schema import ENTRY_INDEXES

    # Killed inside the bulk path: the secondary indexes of entries were dropped for the
    # load (into an empty tier) and not built yet ...
    assert not set(ENTRY_INDEXES) & set(_entry_indexes(pg_server, "t_migrate"))
    partial = PgTierStore(pg_server.url("tiervault_test"), name="team", schema="t_migrate")
    assert partial.count() >= 600  # the killed run had committed batches: this is a resume
    assert set(ENTRY_INDEXES) <= set(_entry_indexes(pg_server, "t_migrate"))  # ... opening rebuilt them
    partial.close()

    done = _cli("migrate", "--from", str(tmp_path / "team.db"), "--to", url, "--schema",
                "t_migrate", "--batch", "200", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: both sides hold the same tier" in done.stdout
    assert "ok  entries: source 3000, destination 3000" in done.stdout
    assert "ok  vectors (hash-8): source 3000, destination 3000" in done.stdout
    assert pg_server.password not in done.stdout + done.stderr

    back = tmp_path / "back.db"  # and back into a new SQLite file
    done = _cli("migrate", "--from", url, "--to", str(back), "--schema", "t_migrate", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified" in done.stdout and "ok  links: source" in done.stdout
    # what was copied counts the rows themselves (not the FTS rows SQLite's triggers add)
    assert "1 memories" in done.stdout and "2 feedback" in done.stdout
    original, copy = TierStore(tmp_path / "team.db", name="team"), TierStore(back, name="team")
    assert [e for e in original.iter_entries()] == [e for e in copy.iter_entries()]
    assert sorted(map(repr, original.links_touching(["m00000", "m00007"]))) == \
        sorted(map(repr, copy.links_touching(["m00000", "m00007"])))
    assert copy.feedback_counts() == original.feedback_counts()
    np.testing.assert_array_equal(copy.vectors_for("hash-8", ["m00042"])["m00042"],
                                  original.vectors_for("hash-8", ["m00042"])["m00042"])
    assert [m.summary for m in copy.search_memories(["migrat"], 5)] == ["migrations need a verify step"]
    pg_server.execute("DROP SCHEMA t_migrate CASCADE", "tiervault_test")


def test_migrate_reports_a_difference_and_fails(tmp_path, pg_server):
    fill_tier(tmp_path / "a.db", 20).close()
    extra = TierStore(tmp_path / "b.db", name="team")
    extra.capture(Entry.create(id="zz-extra", title="only here", description="d", type="rule"))
    extra.close()
    done = _cli("migrate", "--from", str(tmp_path / "a.db"), "--to", str(tmp_path / "b.db"))
    assert done.returncode == 1
    assert "DIFFERENT entries: source 20, destination 21" in done.stdout
    assert "NOT verified" in done.stdout
