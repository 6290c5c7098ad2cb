"""The links' change count of schema v6 (vault/schema.py's triggers) catches every change
to a tier's links table, whoever makes it, so the memory-mapped link graph
(vault/link_graph.py) never answers other links than the table.

Outside SQL is a plain ``sqlite3`` connection of this process or of a separate
Python process (neither loads tiervault; foreign keys off, as in the sqlite3 shell,
or on): links inserted, replaced, re-pointed, deleted, entries deleted (their links
cascade by trigger or foreign key). After each step the next read of every tier in a
new read scope is compared with the table: ``link_ends`` with ``links_touching`` and
the graph hops of both paths.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tiervault.brain.graph import graph_hops
from tiervault.vault import link_graph
from tiervault.vault.entry import LINK_TYPES
from tiervault.vault.link_graph import graph_path
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.read_scope import read_scope
from tiervault.vault.rows import Link, LinkEnds
from tiervault.vault.schema import SCHEMA_VERSION, migrate
from tiervault.vault.store import TierStore
from tiervault.vault.transfer import transfer_for

from tier_contract import entry

TIERS = ("agent", "team")


def _sql(store, ids) -> set[LinkEnds]:
    return {LinkEnds(l.source_id, l.target_id, l.link_type) for l in store.links_touching(ids)}


def _same(store, ids) -> None:
    got = store.link_ends(ids)
    assert len(got) == len(set(got))
    assert set(got) == _sql(store, ids), ids


def _count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'links.changes'").fetchone()[0])
    finally:
        conn.close()


def _outside(db: Path, statements: list[tuple[str, tuple]], *, process: bool, fk: bool) -> None:
    """Run ``statements`` in one transaction of a plain sqlite3 connection: in this
    process, or in a separate Python process that never imports tiervault."""
    if process:
        script = ("import json, sqlite3, sys\n"
                  "conn = sqlite3.connect(sys.argv[1], timeout=30)\n"
                  "if sys.argv[2] == '1':\n    conn.execute('PRAGMA foreign_keys = ON')\n"
                  "for sql, params in json.loads(sys.argv[3]):\n    conn.execute(sql, params)\n"
                  "conn.commit()\nconn.close()\n")
        import json

        subprocess.run([sys.executable, "-c", script, str(db), "1" if fk else "0",
                        json.dumps([[s, list(p)] for s, p in statements])], check=True, timeout=120)
        return
    conn = sqlite3.connect(db, timeout=30)
    try:
        if fk:
            conn.execute("PRAGMA foreign_keys = ON")
        for sql, params in statements:
            conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


def _outside_step(rng: random.Random, db: Path, ids: list[str], every: list[str]) -> None:
    """One random write of outside SQL to the links (or an entry delete cascading to them)."""
    conn = sqlite3.connect(db)
    links = conn.execute("SELECT source_id, target_id, link_type FROM links").fetchall()
    alive = [r[0] for r in conn.execute("SELECT id FROM entries")]
    conn.close()
    op = rng.random()
    stmts: list[tuple[str, tuple]] = []
    if op < 0.35 and alive:  # new links (a target in any tier, or none)
        for _ in range(rng.randint(1, 5)):
            stmts.append(("INSERT OR IGNORE INTO links (source_id, target_id, link_type, note, created_at) "
                          "VALUES (?, ?, ?, '', 0)", (rng.choice(alive), rng.choice(every),
                                                      rng.choice(LINK_TYPES))))
    elif op < 0.45 and alive:  # INSERT OR REPLACE: the old row deleted (no delete trigger), one inserted
        stmts.append(("INSERT OR REPLACE INTO links (source_id, target_id, link_type, note, created_at) "
                      "VALUES (?, ?, ?, 'replaced', 1)", (rng.choice(alive), rng.choice(every),
                                                          rng.choice(LINK_TYPES))))
    elif op < 0.6 and links:  # delete some links
        for s, t, ty in rng.sample(links, min(len(links), rng.randint(1, 3))):
            stmts.append(("DELETE FROM links WHERE source_id = ? AND target_id = ? AND link_type = ?",
                          (s, t, ty)))
    elif op < 0.7 and links:  # re-point a link (OR IGNORE: the new ends may exist already)
        s, t, ty = rng.choice(links)
        stmts.append(("UPDATE OR IGNORE links SET target_id = ? WHERE source_id = ? AND target_id = ? "
                      "AND link_type = ?", (rng.choice(every), s, t, ty)))
    elif op < 0.75 and links:  # the note alone: the graph holds no notes, nothing to see
        s, t, ty = rng.choice(links)
        stmts.append(("UPDATE links SET note = 'edited' WHERE source_id = ? AND target_id = ? "
                      "AND link_type = ?", (s, t, ty)))
    elif op < 0.9 and alive:  # an entry deleted: target links cascade by trigger, source by FK
        stmts.append(("DELETE FROM entries WHERE id = ?", (rng.choice(alive),)))
    elif alive:  # a whole source's links at once
        stmts.append(("DELETE FROM links WHERE source_id = ?", (rng.choice(alive),)))
    if stmts:
        _outside(db, stmts, process=rng.random() < 0.25, fk=rng.random() < 0.5)


@pytest.fixture(params=["default", "eager"])
def thresholds(request, monkeypatch) -> str:
    """The rebuild thresholds as shipped (a small graph is rebuilt at once), or small
    enough that a test's graph goes stale (SQL answers) and is rebuilt at 3 changes."""
    if request.param == "eager":
        monkeypatch.setattr(link_graph, "SMALL_LINKS", 0)
        monkeypatch.setattr(link_graph, "REBUILD_MIN", 3)
        monkeypatch.setattr(link_graph, "REBUILD_SHARE", 0.0)
    return request.param


@pytest.mark.parametrize("seed", [1, 29, 404])
def test_outside_sql_link_writes_are_seen_by_the_next_read(tmp_path: Path, seed: int, thresholds) -> None:
    rng = random.Random(seed)
    paths = {t: tmp_path / f"{t}.db" for t in TIERS}
    stores = {t: TierStore(p, name=t) for t, p in paths.items()}
    ids = {t: [f"{t[0]}{i:03d}" for i in range(30)] for t in TIERS}
    for t in TIERS:
        stores[t].capture_many([entry(i) for i in ids[t]])
        for i in range(0, 24, 2):
            stores[t].link(ids[t][i], ids[t][i + 1], LINK_TYPES[i % 4])
    every = [i for t in TIERS for i in ids[t]] + ["ghost", "\u00e9t\u00e9"]
    manager = VaultManager([Tier(t, str(paths[t]), 1.0 - k / 4, store=stores[t])
                            for k, t in enumerate(TIERS)])
    graph_reads = 0
    for step in range(50):
        t = rng.choice(TIERS)
        store = stores[t]
        if rng.random() < 0.8:
            _outside_step(rng, paths[t], ids[t], every)
        else:  # tiervault's own link or unlink among the outside writes
            alive = [e for e in ids[t] if store.get(e) is not None]
            if alive and rng.random() < 0.6:
                store.link(rng.choice(alive), rng.choice(every), rng.choice(LINK_TYPES))
            elif alive:
                store.unlink(rng.choice(alive), rng.choice(every))
        if rng.random() < 0.1:  # a reopen: the saved graph file is mapped again
            store.close()
            stores[t] = TierStore(paths[t], name=t)
            manager.tiers[t].store = stores[t]
        for _ in range(2):
            asked = rng.sample(every, rng.randint(1, 10))
            with read_scope():
                for s in stores.values():
                    _same(s, asked)
                    graph_reads += s.graph.current() is not None
                seeds = rng.sample(every, 3)
                a = graph_hops(manager, seeds)
                b = graph_hops(type("Sql", (), {"link_ends": manager.links_touching})(), seeds)
                assert a.hops == b.hops
    assert graph_reads  # the graph was read, not only SQL
    for s in stores.values():
        s.close()


def test_each_link_row_is_counted_once_whoever_writes_it(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    store = TierStore(db, name="agent")
    store.capture_many([entry(i) for i in ("a", "b", "c", "d")])
    base = _count(db)
    store.link("a", "b", "supports")
    assert _count(db) == base + 1
    store.link("a", "b", "supports", note="again")  # the note only: the graph holds no notes
    assert _count(db) == base + 1
    store.link("a", "c", "supports")
    store.link("c", "a", "extends")
    assert store.unlink("a", "c") == 1 and _count(db) == base + 4
    store.link("d", "a", "contradicts")
    store.delete("a")  # a->b (source, foreign key), c->a and d->a (targets, trigger) cascade
    assert _count(db) == base + 8 and store.link_count() == 0
    transfer_for(store).put_links([Link("b", f"x{i}", "supports", "", 0.0, "agent") for i in range(7)])
    assert _count(db) == base + 15
    transfer_for(store).put_links([Link("b", f"x{i}", "supports", "n", 1.0, "agent") for i in range(7)])
    assert _count(db) == base + 15  # the same ends again: notes and times only
    _outside(db, [("UPDATE links SET target_id = 'y' WHERE target_id = 'x0'", ())], process=False, fk=False)
    _outside(db, [("DELETE FROM links WHERE target_id IN ('x1', 'x2')", ())], process=True, fk=False)
    assert _count(db) == base + 18
    store.close()


def test_a_graph_read_in_the_same_generation_sees_outside_links(tmp_path: Path) -> None:
    """The case schema 5 missed: outside SQL does not move the generation, so the graph
    claimed to be exact and answered without the new link."""
    db = tmp_path / "agent.db"
    store = TierStore(db, name="agent")
    store.capture_many([entry(i) for i in "abc"])
    store.link("a", "b", "supports")
    assert store.link_ends(["c"]) == [] and store.graph.builds == 1
    gen = store.generation()
    _outside(db, [("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                   "VALUES ('c', 'a', 'extends', '', 0)", ())], process=True, fk=False)
    assert store.generation() == gen
    assert store.link_ends(["c"]) == [LinkEnds("c", "a", "extends")]
    assert store.graph.builds == 2  # a small graph: rebuilt at once, then read again
    _outside(db, [("DELETE FROM entries WHERE id = 'b'", ())], process=False, fk=False)
    assert set(store.link_ends(["a", "b"])) == {LinkEnds("c", "a", "extends")}
    store.close()


def _schema_5_tier(db: Path) -> None:
    """A tier file as tiervault of schema 5 left it: two links, the count bumped by hand."""
    conn = sqlite3.connect(db, isolation_level=None)
    migrate(conn, target=5)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("INSERT INTO meta (key, value) VALUES ('uid', 'u5')")
    conn.executemany("INSERT INTO entries (id, type, domain, title, description, severity, origin, "
                     "created_at, updated_at, content_hash) VALUES (?, 'pattern', 'd', ?, 'x', "
                     "'suggestion', 'user', 0, 0, ?)", [(i, f"title {i}", i) for i in "abcd"])
    conn.executemany("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                     "VALUES (?, ?, 'supports', '', 0)", [("a", "b"), ("b", "c")])
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'links.changes'")
    conn.close()


def test_a_schema_5_tier_migrates_to_6_and_counts_outside_writes(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    _schema_5_tier(db)
    store = TierStore(db, name="agent")
    assert SCHEMA_VERSION == 6 and store.links.counted()
    assert set(store.link_ends(["b"])) == {LinkEnds("a", "b", "supports"), LinkEnds("b", "c", "supports")}
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 6
    assert sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                              "AND tbl_name = 'links'")) == \
        ["links_count_ad", "links_count_ai", "links_count_au"]
    assert _count(db) == 2  # the count of schema 5 carries on
    conn.close()
    _outside(db, [("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                   "VALUES ('d', 'a', 'sequences', '', 0)", ())], process=False, fk=False)
    assert _count(db) == 3
    assert set(store.link_ends(["a"])) == {LinkEnds("a", "b", "supports"), LinkEnds("d", "a", "sequences")}
    store.close()


def test_a_schema_5_tier_opened_read_only_answers_by_sql(tmp_path: Path) -> None:
    """Read-only, a v5 file is read as is (not migrated): no trigger keeps its count, so
    no graph is read and every answer comes from the table."""
    db = tmp_path / "agent.db"
    _schema_5_tier(db)
    reader = TierStore(db, name="agent", read_only=True)
    assert reader.link_ends(["a"]) == [LinkEnds("a", "b", "supports")]
    _outside(db, [("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                   "VALUES ('c', 'a', 'extends', '', 0)", ())], process=True, fk=False)
    assert set(reader.link_ends(["a"])) == {LinkEnds("a", "b", "supports"), LinkEnds("c", "a", "extends")}
    assert reader.graph.by_sql and reader.graph.graph is None and reader.graph.builds == 0
    reader.close()


def test_a_large_stale_graph_waits_for_the_threshold_with_outside_writes(tmp_path: Path) -> None:
    """Above SMALL_LINKS links, outside link rows count toward the rebuild threshold like
    tiervault's own: answered by SQL until then, never by the stale graph."""
    db = tmp_path / "agent.db"
    store = TierStore(db, name="agent")
    n = link_graph.SMALL_LINKS + 10
    store.capture_many([entry(f"e{i}") for i in range(n + 1)])
    transfer_for(store).put_links([Link(f"e{i}", f"e{i + 1}", "supports", "", 0.0, "agent")
                                   for i in range(n)])
    _same(store, ["e0"])
    assert store.graph.builds == 1
    limit = max(link_graph.REBUILD_MIN, int(n * link_graph.REBUILD_SHARE))
    _outside(db, [("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                   "VALUES (?, 'far', 'extends', '', 0)", (f"e{i}",)) for i in range(limit - 1)],
             process=True, fk=False)
    _same(store, ["far", "e3"])
    assert store.graph.builds == 1 and store.graph.current() is None  # stale: SQL answered
    _outside(db, [("DELETE FROM links WHERE source_id = 'e0' AND target_id = 'far'", ())],
             process=False, fk=False)
    _same(store, ["far", "e0"])
    assert store.graph.builds == 2 and store.graph.current() is not None  # the threshold: rebuilt
    assert graph_path(store).exists()
    store.close()


def test_a_postgres_tier_reads_its_links_by_sql_so_outside_writes_are_seen(pg_tier, pg_server) -> None:
    """A PostgreSQL tier keeps no link graph: ``link_ends`` is its ``links_touching``, one
    SQL read a call, so links written or deleted by another client are seen at once."""
    team, agent = pg_tier("team"), pg_tier("agent")
    team.capture_many([entry("t1"), entry("t2"), entry("t3")])
    agent.capture(entry("a1"))
    team.link("t1", "t2", "supports")
    manager = VaultManager([Tier("agent", "agent", 1.0, store=agent), Tier("team", "team", 0.5, store=team)])
    assert not hasattr(team, "link_ends")
    with read_scope():
        assert manager.link_ends(["t1"]) == [LinkEnds("t1", "t2", "supports")]
    schema = team.address.schema
    pg_server.execute(f"INSERT INTO {schema}.links (source_id, target_id, link_type, note, created_at) "
                      "VALUES ('t3', 'a1', 'extends', '', 0)", "tiervault_test")
    with read_scope():
        assert sorted(manager.link_ends(["a1", "t1"])) == sorted(
            [LinkEnds("t1", "t2", "supports"), LinkEnds("t3", "a1", "extends")])
        assert graph_hops(manager, ["a1"]).hops == {"t3": 1}
    pg_server.execute(f"DELETE FROM {schema}.entries WHERE id = 't2'", "tiervault_test")
    with read_scope():
        assert manager.link_ends(["t1", "t2"]) == []
        assert sorted(manager.link_ends(["t3"])) == [LinkEnds("t3", "a1", "extends")]
