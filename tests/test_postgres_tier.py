"""PostgreSQL tier: what only a server brings (faults, roles, passwords, many writers).

The backend-neutral behaviour is checked by the contract suite, which runs
on SQLite and PostgreSQL alike; this file covers the server-specific parts,
against the real server of the ``pg_server`` fixture.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pg_server import TcpProxy
from tiervault.errors import ConfigError, ReadOnlyTier, StorageError, TierUnavailable, TierVaultError
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.postgres import PgTierStore
from tiervault.vault.query import query_terms
from tiervault.vault.store import TierStore

HELPERS = Path(__file__).parent / "helpers"
PLANTED = "Planted-Pw-7f3e9a"


def _entries(n: int, prefix: str = "e") -> list[Entry]:
    words = ["retry", "backoff", "jwt", "token", "rotation", "cache", "index", "vacuum", "lock"]
    return [Entry.create(id=f"{prefix}{i}", type=("pattern", "rule", "decision")[i % 3],
                         title=f"{words[i % 9]} {words[(i * 7) % 9]} note {i}",
                         description=" ".join(words[(i + j) % 9] for j in range(3 + i % 11)),
                         context=f"ctx {words[(i * 5) % 9]}", domain=("net", "db")[i % 2],
                         tags=[words[i % 9], "t" + str(i % 4)]) for i in range(n)]


def test_bm25_equals_the_sqlite_tier_for_the_same_entries(pg_tier, tmp_path):
    pg = pg_tier()
    sq = TierStore(tmp_path / "t.db", name="team")
    data = _entries(120)
    pg.capture_many(data)
    sq.capture_many(data)
    for q in ["retry backoff", "jwt token rotation", "vacuum lock index cache", "note 17"]:
        terms = query_terms(q)
        a, b = pg.search_fts(terms, Filters(), 15), sq.search_fts(terms, Filters(), 15)
        assert a.ids == b.ids
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-9)
        f = Filters.build(domain="db", type="rule")
        assert pg.search_fts(terms, f, 5).ids == sq.search_fts(terms, f, 5).ids
    sq.close()


def test_manager_federates_a_postgres_team_tier_with_sqlite_tiers(pg_tier, tmp_path):
    team = pg_tier()
    team.capture_many(_entries(40, "team-"))
    agent = TierStore(tmp_path / "agent.db", name="agent")
    agent.capture_many(_entries(10, "agent-"))
    with VaultManager([Tier("agent", str(agent.path), 1.0, store=agent),
                       Tier("team", team.location, 0.6, store=team)]) as vm:
        found = vm.search("retry backoff", limit=50)
        assert {"agent", "team"} <= set(found.tiers) and not vm.problems


def test_a_write_by_another_process_is_seen_by_the_next_search(pg_tier, pg_server):
    reader = pg_tier()
    reader.capture_many(_entries(5))
    assert reader.term_stats(["zebra"]).df == (0,)
    code = ("import sys; from tiervault.vault.postgres import PgTierStore; "
            "from tiervault.vault.entry import Entry; "
            "s = PgTierStore(sys.argv[1], name='team', schema=sys.argv[2]); "
            "s.capture(Entry.create(id='z1', title='zebra crossing', description='d', type='rule'))")
    subprocess.run([sys.executable, "-c", code, pg_server.url("tiervault_test"),
                    reader.address.schema], check=True, timeout=60)
    assert reader.term_stats(["zebra"]).df == (1,)
    assert [h.id for h in reader.lexical_top_k(["zebra"], reader.term_stats(["zebra"]),
                                               Filters(), 5)] == ["z1"]


def test_wrong_password_missing_database_missing_pgvector_name_the_tier_and_the_fix(pg_server):
    with pytest.raises(TierUnavailable, match="check the user and the password") as err:
        PgTierStore(pg_server.url("tiervault_test", user="postgres", password=PLANTED), name="team")
    assert "'team'" in str(err.value) and PLANTED not in str(err.value)
    with pytest.raises(TierUnavailable, match=r"database does not exist.*createdb"):
        PgTierStore(pg_server.url("no_such_db"), name="team")
    pg_server.create_database("tv_novector", vector=False)
    pg_server.execute("DROP ROLE IF EXISTS tv_plain")
    pg_server.execute("CREATE ROLE tv_plain LOGIN PASSWORD 'plain-pw'")
    pg_server.execute("GRANT ALL ON DATABASE tv_novector TO tv_plain")
    pg_server.execute("GRANT ALL ON SCHEMA public TO tv_plain", "tv_novector")
    with pytest.raises(TierUnavailable, match="CREATE EXTENSION vector"):
        PgTierStore(pg_server.url("tv_novector", user="tv_plain", password="plain-pw"), name="team")


def test_read_only_role_reads_and_its_writes_are_refused_clearly(pg_tier, pg_server):
    owner = pg_tier()
    owner.capture_many(_entries(10))
    schema = owner.address.schema
    pg_server.execute("DROP OWNED BY tv_reader CASCADE; DROP ROLE IF EXISTS tv_reader"
                      if _role_exists(pg_server, "tv_reader") else "SELECT 1", "tiervault_test")
    pg_server.execute("CREATE ROLE tv_reader LOGIN PASSWORD 'reader-pw'")
    pg_server.execute(f"GRANT USAGE ON SCHEMA {schema} TO tv_reader; "
                      f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO tv_reader", "tiervault_test")
    reader = pg_tier(schema=schema, url=pg_server.url("tiervault_test", user="tv_reader",
                                                      password="reader-pw"))
    assert reader.count() == 10 and reader.get("e3") is not None
    assert reader.lexical_top_k(["retri"], reader.term_stats(["retri"]), Filters(), 3)
    with pytest.raises(ReadOnlyTier, match="this role may only read") as err:
        reader.capture(Entry.create(id="new", title="t", description="d", type="rule"))
    assert "'team'" in str(err.value)
    assert reader.count() == 10  # nothing half-written


def _role_exists(server, role: str) -> bool:
    import psycopg

    with psycopg.connect(server.url("postgres")) as conn:
        return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None


def test_the_password_is_never_printed(pg_server, monkeypatch, caplog):
    pg_server.execute("DROP ROLE IF EXISTS tv_secret")
    pg_server.execute(f"CREATE ROLE tv_secret LOGIN SUPERUSER PASSWORD '{PLANTED}'")
    monkeypatch.setenv("TV_TEAM_PW", PLANTED)
    url = f"postgresql://tv_secret:${{TV_TEAM_PW}}@{pg_server.host}:{pg_server.port}/tiervault_test"
    caplog.set_level(logging.DEBUG)
    store = PgTierStore(url, name="team", schema="t_secret")
    store.capture_many(_entries(3))
    shown = [repr(store), store.location, str(store.stats()), repr(store.address)]
    with pytest.raises(TierVaultError) as err:  # a failing statement: its message must be clean
        store.query("SELECT * FROM no_such_table_here")  # the boundary itself
    shown.append(str(err.value))
    bad = PgTierStore(f"postgresql://tv_secret:{PLANTED}x@{pg_server.host}:1/tiervault_test",
                      name="team")  # unreachable: logged, retried later
    with pytest.raises(StorageError) as down:
        bad.count()
    shown += [str(down.value), repr(bad), caplog.text]
    assert not [s for s in shown if PLANTED in s]
    with pytest.raises(ConfigError, match=r"\$\{TV_UNSET_PW\}"):
        PgTierStore("postgresql://u:${TV_UNSET_PW}@h/db", name="team")
    store.close()
    pg_server.execute("DROP SCHEMA t_secret CASCADE", "tiervault_test")


def test_upsert_skips_unchanged_entries_and_keeps_generations(pg_tier):
    store = pg_tier()
    data = _entries(30)
    assert store.capture_many(data, batch_size=7) == 30
    gen = store.generation()
    assert store.capture_many(data) == 0
    changed = [Entry.create(id="e1", title="changed title", description="d", type="rule")]
    assert store.capture_many(changed) == 1
    changes = store.changes_since(gen)
    assert [r.id for r in changes.rows] == ["e1"] and changes.deleted == []
    key = changes.rows[0].key
    store.delete("e1")
    assert store.changes_since(changes.generation).deleted == [key]


def test_exact_vector_search_scores_and_an_index_built_by_another_store(pg_tier, monkeypatch):
    """Below the threshold the search is exact (cosine = 1 - distance, ties by id); a missing
    index is remembered for INDEX_RECHECK_S, and one another store builds is then used."""
    from tiervault.vault.postgres import vectors as pgv
    from tiervault.vault.rows import VectorRow

    store = pg_tier()
    data = _entries(60)
    store.capture_many(data)
    rng = np.random.default_rng(3)
    mat = rng.standard_normal((60, 8)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    store.put_vectors("m", [VectorRow(e.id, "h", v) for e, v in zip(data, mat)])
    q = mat[11]
    hits = store.vector_search("m", q, 6)
    exact = sorted(range(60), key=lambda i: -float(mat[i] @ q))[:6]
    assert [h.id for h in hits] == [data[i].id for i in exact]
    np.testing.assert_allclose([h.score for h in hits], [float(mat[i] @ q) for i in exact], atol=1e-5)
    name = pgv.index_name("m", 8)
    assert name in store.vector_index_misses
    other = pg_tier(schema=store.address.schema)
    monkeypatch.setattr(pgv, "HNSW_MIN_ROWS", 50)
    assert other.vectors.ensure_index("m", 8)
    assert not store.vectors.has_index(name)  # the miss is still trusted
    monkeypatch.setattr(pgv, "INDEX_RECHECK_S", 0.0)
    assert store.vectors.has_index(name)
    assert [h.id for h in store.vector_search("m", q, 6)] == [data[i].id for i in exact]


def test_exact_vector_search_with_a_filter_none_of_the_nearest_pass(pg_tier):
    """The exact path ranks a candidate pool before the filters; when the filter passes
    fewer than k of them it must still return the k nearest passing entries."""
    from tiervault.vault.rows import VectorRow

    store = pg_tier()
    data = _entries(250)  # even i: domain net, odd i: domain db
    store.capture_many(data)
    rng = np.random.default_rng(4)
    mat = rng.standard_normal((250, 8)).astype(np.float32) * 0.1
    mat[:, 0] += np.where(np.arange(250) % 2 == 0, 1.0, -1.0)  # net near +x, db near -x
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    store.put_vectors("m", [VectorRow(e.id, "h", v) for e, v in zip(data, mat)])
    q = np.zeros(8, dtype=np.float32)
    q[0] = 1.0
    hits = store.vector_search("m", q, 6, filters=Filters.build(domain="db"))
    exact = sorted((i for i in range(250) if i % 2), key=lambda i: (-float(mat[i] @ q), data[i].id))[:6]
    assert [h.id for h in hits] == [data[i].id for i in exact]
    np.testing.assert_allclose([h.score for h in hits], [float(mat[i] @ q) for i in exact], atol=1e-5)
    near = store.vector_search("m", q, 6, filters=Filters.build(domain="net"))
    assert [h.id for h in near] == [data[i].id for i in sorted(
        (i for i in range(250) if i % 2 == 0), key=lambda i: (-float(mat[i] @ q), data[i].id))[:6]]


def test_vectors_hnsw_above_the_threshold_with_filters_inside_the_sql(pg_tier, monkeypatch):
    from tiervault.vault.postgres import vectors as pgv

    monkeypatch.setattr(pgv, "HNSW_MIN_ROWS", 50)
    store = pg_tier()
    data = _entries(80)
    store.capture_many(data)
    rng = np.random.default_rng(1)
    mat = rng.standard_normal((80, 16)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    from tiervault.vault.rows import VectorRow

    assert store.put_vectors("m", [VectorRow(e.id, "h", v) for e, v in zip(data, mat)]) == 80
    assert store.vectors.has_index(pgv.index_name("m", 16))
    q = mat[7]
    hits = store.vector_search("m", q, 5, filters=Filters.build(domain="db"))
    allowed = [i for i, e in enumerate(data) if e.domain == "db"]
    exact = sorted(allowed, key=lambda i: -float(mat[i] @ q))[:5]
    assert [h.id for h in hits] == [data[i].id for i in exact]  # small: the pool holds them all
    np.testing.assert_allclose([h.score for h in hits], [float(mat[i] @ q) for i in exact], atol=1e-5)
    changes = store.vector_changes_since("m", -1)
    np.testing.assert_allclose(changes.matrix[changes.ids.index("e7")], mat[7], atol=1e-6)


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HELPERS / "pg_worker.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _report(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert out.strip(), f"worker printed nothing; stderr:\n{err[-2000:]}"
    report = json.loads(out.strip().splitlines()[-1])
    assert "error" not in report, report["error"]
    return report


def test_eight_writer_processes_and_two_searchers(pg_tier, pg_server, tmp_path):
    store = pg_tier()  # creates the schema once, before the writers race
    url, schema, n = pg_server.url("tiervault_test"), store.address.schema, 30
    stop = tmp_path / "stop"
    searchers = [_spawn("search", url, schema, str(stop)) for _ in range(2)]
    writers = [_spawn("capture", url, schema, str(w), str(n), "10") for w in range(8)]
    reports = [_report(p) for p in writers]
    stop.touch()
    seen = [_report(p) for p in searchers]
    assert sum(r["written"] for r in reports) == 8 * n
    assert store.count() == 8 * n
    ids = [e.id for e in store.iter_entries()]
    assert len(ids) == len(set(ids)) == 8 * n
    for r in seen:
        assert r["searches"] > 0 and r["errors"] == [] and r["last_seen"] == 8 * n
    assert store.integrity_problems() == []


def test_browse_vocabulary_and_memories_match_the_sqlite_tier(pg_tier, tmp_path):
    """list_entries (sort, since, filters), count_matching, vocabulary, get/list_memories:
    the same answers from both backends (issue 11: list, stats vocabulary, memories)."""
    pg = pg_tier()
    sq = TierStore(tmp_path / "t.db", name="team")
    data = [e.with_times(1_000.0 + i, 2_000.0 + (i * 37) % 50) for i, e in enumerate(_entries(30))]
    for store in (pg, sq):
        store.capture_many(data)
    f = Filters.build(domain="db", include_expired=True, include_future=True)
    for sort in ("updated", "created", "rowid"):
        for since in (None, 2_020.0):
            a = [e.id for e in pg.list_entries(filters=f, sort=sort, since=since, limit=7, offset=2)]
            b = [e.id for e in sq.list_entries(filters=f, sort=sort, since=since, limit=7, offset=2)]
            assert a == b and a
            assert pg.count_matching(f, since) == sq.count_matching(f, since)
    assert pg.vocabulary() == sq.vocabulary()
    assert sq.vocabulary()["domains"] == {"db": 15, "net": 15}
    ids = [s.add_memory("deploy went fine", topics=["deploy"], project="p", created_at=5.0)
           for s in (pg, sq)]
    for store, mid in zip((pg, sq), ids):
        store.add_memory("other", project="q", created_at=6.0)
        assert store.get_memories([mid, "mem-nope"])[mid].summary == "deploy went fine"
        assert [m.summary for m in store.list_memories()] == ["other", "deploy went fine"]
        assert [m.project for m in store.list_memories(project="p")] == ["p"]
    sq.close()
