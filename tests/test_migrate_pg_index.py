"""``tiervault migrate`` into PostgreSQL builds the HNSW index once, after the copy.

The real CLI runs in a subprocess whose ``HNSW_MIN_ROWS`` is lowered to 500
(``tests/helpers/migrate_low_threshold.py``), so 3,000 8-d vectors cross it
early, as 100K vectors cross the product's 10,000: a copy killed past the
threshold has no index yet (it was not built row by row on the way); the
resumed copy verifies, builds it, and a search then reads it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from migrate_source import fill_tier, kill_when

HELPER = Path(__file__).parent / "helpers" / "migrate_low_threshold.py"


def _hnsw_indexes(pg_server, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(pg_server.url("tiervault_test"), autocommit=True) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename "
                            "= 'entry_vectors' AND indexdef ILIKE '%%USING hnsw%%'", (schema,)).fetchall()
    return [r[0] for r in rows]


def _index_scans(store, name: str) -> int:
    store.query("SELECT pg_stat_force_next_flush()")  # this backend's counters, published now
    rows = store.query("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", (name,))
    return int(rows[0][0])


def test_migrate_defers_the_hnsw_index_to_the_end_and_resumes(tmp_path, pg_server):
    fill_tier(tmp_path / "team.db", 3_000).close()
    url = pg_server.url("tiervault_test")
    pg_server.execute("DROP SCHEMA IF EXISTS t_migrate_ix CASCADE", "tiervault_test")
    argv = [sys.executable, str(HELPER), "500", "migrate", "--from", str(tmp_path / "team.db"),
            "--to", url, "--schema", "t_migrate_ix", "--batch", "200"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert kill_when(proc, "entries: 1000 read") == -signal.SIGKILL
    from tiervault.vault.postgres import PgTierStore

    partial = PgTierStore(url, name="team", schema="t_migrate_ix")
    n = partial.query("SELECT count(*) FROM entry_vectors")[0][0]
    assert n >= 1_000  # past the (lowered) threshold of 500 ...
    assert _hnsw_indexes(pg_server, "t_migrate_ix") == []  # ... and no index built on the way
    partial.close()

    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: both sides hold the same tier" in done.stdout
    assert "ok  vectors (hash-8): source 3000, destination 3000" in done.stdout
    assert "vector indexes built after the copy: vec_hnsw_" in done.stdout
    [name] = _hnsw_indexes(pg_server, "t_migrate_ix")

    store = PgTierStore(url, name="team", schema="t_migrate_ix")
    before = _index_scans(store, name)
    q = np.random.default_rng(3).standard_normal((3_000, 8)).astype(np.float32)[42]  # m00042's vector
    hits = store.vector_search("hash-8", q, 5)
    assert hits[0].id == "m00042" and abs(hits[0].score - 1.0) < 1e-5
    assert _index_scans(store, name) > before  # the search read the index built after the copy
    again = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    assert report["ok"] and report["copied"].get("entries", 0) == 0  # links are upserted again
    assert not any(k.startswith("vectors") for k in report["copied"])
    assert report["vector_indexes_built"] == []  # present already: not built twice
    store.close()
    pg_server.execute("DROP SCHEMA t_migrate_ix CASCADE", "tiervault_test")
