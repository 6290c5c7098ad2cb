"""A bulk load into a PostgreSQL tier: helper processes, a dying helper, a crashing server.

A bulk load (more than one batch into an empty tier) stems its batches in term
worker processes (:mod:`tiervault.vault.postgres.term_workers`) and builds the
secondary indexes once at the end. Whatever happens to a helper, the rows are
the ones an in-process load stores; whatever happens to the server, every batch
acknowledged through ``on_batch`` is there, whole, and no batch is there in part.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pg_server import start_server
from tiervault.errors import StorageError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.postgres import PgTierStore
from tiervault.vault.postgres.schema import ENTRY_INDEXES
from tiervault.vault.postgres.term_workers import TermWorkers
from tiervault.vault.rows import CommittedBatch

_ROW = "SELECT id, title, description, tags, doclen, terms::text, content_hash FROM entries ORDER BY id"


def _entries(n: int, prefix: str = "b") -> list[Entry]:
    words = ["Retrying", "backoff", "JWT", "tokens", "rotated", "caches", "indexing", "vacuum",
             "naïve", "Straße", "c++", "node.js", "Ünïcödé", "ponies"]
    return [Entry.create(id=f"{prefix}{i:05d}", type="rule", domain="net",
                         title=f"{words[i % 14]} {words[(i * 3) % 14]} {i}",
                         description=" ".join(words[(i + j) % 14] for j in range(3 + i % 7)) + f" w{i * 7}",
                         context="" if i % 3 else f"seen in {words[(i * 5) % 14]} run{i}",
                         tags=[words[i % 14].lower().replace(".", "").replace("+", "")],
                         created_at=1_700_000_000 + i, updated_at=1_700_000_500 + i) for i in range(n)]


def _term_worker_pids() -> list[int]:
    """This process's children running a term worker."""
    me, found = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and b"tiervault.vault.postgres.term_worker" in cmd:
            found.append(int(d))
    return found


def test_helpers_store_the_rows_an_in_process_load_stores(pg_tier):
    data = _entries(1_200)
    helped, alone = pg_tier(), pg_tier()
    helped.term_workers, alone.term_workers = 2, 0
    seen: list[list[int]] = []
    assert helped.capture_many(data, batch_size=250,  # 5 batches: a bulk load
                               on_batch=lambda batch: seen.append(_term_worker_pids())) == 1_200
    assert len(seen) == 5 and len(seen[0]) == 2  # the stems came from the two helpers
    assert alone.capture_many(data, batch_size=250) == 1_200
    assert helped.query(_ROW) == alone.query(_ROW)
    assert _term_worker_pids() == []  # the helpers exited with the load
    names = {r[0] for r in helped.query("SELECT indexname FROM pg_indexes WHERE schemaname = %s",
                                        (helped.address.schema,))}
    assert set(ENTRY_INDEXES) <= names  # dropped for the load, built at its end


def test_term_workers_answer_in_order_and_report_a_dead_worker():
    rows = [(e.id, e.title, e.description, e.context, e.tag_text) for e in _entries(50)]
    from tiervault.vault.postgres.lexical import batch_terms
    from tiervault.vault.postgres.term_workers import TermWorkerError

    with TermWorkers(3) as workers:
        assert workers.submit(rows).result() == batch_terms(rows, binary=True)
        assert workers.submit([]).result() == []
        os.kill(workers.workers[1].proc.pid, signal.SIGKILL)
        with pytest.raises(TermWorkerError, match="stopped"):
            workers.submit(rows).result()


def test_a_worker_that_crashes_is_reported_with_the_end_of_its_stderr():
    from tiervault.vault.postgres.term_workers import TermWorkerError

    with TermWorkers(1) as workers:
        stdin = workers.workers[0].proc.stdin
        stdin.write((3).to_bytes(8, "little") + b"\xff\xff\xff")  # a frame marshal cannot read
        stdin.flush()
        with pytest.raises(TermWorkerError, match="(?s)stderr ends: .*bad marshal data"):
            workers.submit([("id", "title", "", "", "")]).result()


def test_a_helper_killed_mid_load_costs_speed_not_rows(pg_tier):
    data = _entries(2_000)
    store, reference = pg_tier(), pg_tier()
    store.term_workers, reference.term_workers = 2, 0
    killed: list[int] = []

    def on_batch(batch: CommittedBatch) -> None:
        if not killed:
            killed.extend(_term_worker_pids())
            for pid in killed:
                os.kill(pid, signal.SIGKILL)

    assert store.capture_many(data, batch_size=200, on_batch=on_batch) == 2_000
    assert killed  # the helpers were running, and were killed after the first commit
    reference.capture_many(data, batch_size=200)
    assert store.query(_ROW) == reference.query(_ROW)


def test_a_server_crash_mid_load_keeps_every_acknowledged_batch_and_no_half_batch():
    # A durable server (fsync, synchronous_commit on): the session fixture's server runs
    # with synchronous_commit off, which loses the last acknowledged commits in a crash.
    server = start_server(fsync=True)
    try:
        url = server.create_database("tv_bulk_crash")
        data = _entries(3_000)
        store = PgTierStore(url, name="team", schema="bulk")
        store.term_workers = 1
        acked: list[int] = []

        def on_batch(batch: CommittedBatch) -> None:
            acked.append(batch.total)
            if len(acked) == 3:  # three batches committed and acknowledged: the server dies
                server.crash()

        with pytest.raises(StorageError):
            store.capture_many(data, batch_size=300, on_batch=on_batch)
        store.close()
        assert acked == [300, 600, 900]
        server.resume()
        with PgTierStore(url, name="team", schema="bulk") as reopened:
            ids = [r[0] for r in reopened.query("SELECT id FROM entries ORDER BY rowid")]
            # Every acknowledged entry is there; what is there is whole batches, in order
            # (a batch whose commit reached the server before it died may be there too).
            assert len(ids) >= 900 and len(ids) % 300 == 0
            assert ids == [e.id for e in data[:len(ids)]]
            assert reopened.integrity_problems() == []
            names = {r[0] for r in reopened.query(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'bulk'")}
            assert set(ENTRY_INDEXES) <= names  # the killed load's indexes, rebuilt on open
            assert reopened.capture_many(data, batch_size=300) == 3_000 - len(ids)  # resumed
            assert reopened.count() == 3_000
            assert reopened.term_stats(["retri"]).df[0] == sum("Retrying" in e.title + e.description
                                                                 for e in data)
    finally:
        server.stop()


def test_a_malformed_worker_count_in_the_environment_is_warned_about(monkeypatch, caplog):
    from tiervault.vault.postgres.term_workers import default_worker_count

    monkeypatch.setenv("TIERVAULT_PG_TERM_WORKERS", "2")
    assert default_worker_count() == 2
    monkeypatch.setenv("TIERVAULT_PG_TERM_WORKERS", "off")
    with caplog.at_level("WARNING", logger="tiervault.vault.postgres.term_workers"):
        assert default_worker_count() >= 1  # the default
    assert "TIERVAULT_PG_TERM_WORKERS='off' is not a count" in caplog.text


def test_the_btrees_are_built_while_another_connection_builds_the_gin(pg_tier):
    """The end of a bulk load builds the GIN in one connection and the B-trees in another:
    each index has its own build lock, so the B-trees are not held up by a GIN build in
    progress (here one left open in another connection's transaction; with one lock for
    all of a tier's indexes, as before, the B-trees waited for it)."""
    import psycopg

    from tiervault.vault.postgres.schema import GIN_INDEX, build_entry_indexes, drop_entry_indexes

    tier = pg_tier()
    assert tier.capture_many(_entries(600), batch_size=200) == 600  # a bulk load: indexes rebuilt
    schema = tier.address.schema
    with tier.mapped("test") as conn:
        drop_entry_indexes(conn, schema)
    btrees = [n for n in ENTRY_INDEXES if n != GIN_INDEX]
    gin_builder = psycopg.connect(tier.address.dsn, autocommit=False)
    try:
        gin_builder.execute("SELECT 1")  # a transaction stays open around the build below
        assert build_entry_indexes(gin_builder, schema, [GIN_INDEX]) == [GIN_INDEX]
        with tier.mapped("test") as conn:
            conn.execute("SET lock_timeout = '5s'")  # held up by the GIN build: an error, not a hang
            try:
                assert build_entry_indexes(conn, schema, btrees) == btrees
            finally:
                conn.execute("RESET lock_timeout")
        gin_builder.commit()
    finally:
        gin_builder.close()
    with tier.mapped("test") as conn:
        assert build_entry_indexes(conn, schema) == []  # all there
    names = {r[0] for r in tier.query("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,))}
    assert set(ENTRY_INDEXES) <= names
    assert tier.search_fts(["retrying"], Filters(), 5).ids  # the GIN answers
