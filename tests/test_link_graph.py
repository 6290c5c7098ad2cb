"""A tier's memory-mapped link graph (vault/link_graph.py) answers exactly what SQL answers.

``link_ends(ids)`` of an SQLite tier is compared with ``links_touching(ids)`` (the SQL)
after random walks of links, unlinks, entry deletes (cascading to links), writes of
another process, reopened stores (the saved file mapped again) and damaged, foreign
and other-history graph files; the manager's ``link_ends`` with the contract's
``links_touching`` over every backend; the graph hops of both paths.
"""

from __future__ import annotations

import logging
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tiervault.brain.graph import graph_hops
from tiervault.vault.entry import LINK_TYPES
from tiervault.vault.link_graph import LinkGraph, bucket_bits, graph_path
from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.read_scope import read_scope
from tiervault.vault.rows import Link, LinkEnds
from tiervault.vault.store import TierStore
from tiervault.vault.transfer import transfer_for

from tier_contract import entry, open_tier  # noqa: F401  (fixture, every backend)

TIERS = ("agent", "project", "team")


def _sql(store, ids) -> set[LinkEnds]:
    return {LinkEnds(l.source_id, l.target_id, l.link_type) for l in store.links_touching(ids)}


def _same(store, ids) -> None:
    got = store.link_ends(ids)
    assert len(got) == len(set(got))  # each link once
    assert set(got) == _sql(store, ids), ids


class SqlPath:
    """A manager whose ``link_ends`` is its ``links_touching`` (the path of before)."""

    def __init__(self, manager: VaultManager) -> None:
        self.link_ends = manager.links_touching


def _other_process(db: Path, code: str) -> None:
    """Run ``code`` with ``store`` = a TierStore on ``db`` in a new Python process."""
    script = ("import sys\nfrom tiervault.vault.store import TierStore\n"
              f"store = TierStore(sys.argv[1], name='x')\n{code}\nstore.close()\n")
    subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=120)


@pytest.mark.parametrize("seed", [3, 17, 2024])
def test_link_ends_equal_sql_through_random_walks(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    paths = {t: tmp_path / f"{t}.db" for t in TIERS}
    stores = {t: TierStore(p, name=t) for t, p in paths.items()}
    ids = {t: [f"{t[0]}{i:03d}" for i in range(40)] for t in TIERS}
    for t in TIERS:
        stores[t].capture_many([entry(i, f"title {i}", f"text of {i}") for i in ids[t]])
    every = [i for t in TIERS for i in ids[t]] + ["ghost1", "\u00e9t\u00e9-id"]  # non-ASCII too
    manager = VaultManager([Tier(t, str(paths[t]), 1.0 - k / 10, store=stores[t])
                            for k, t in enumerate(TIERS)])
    for step in range(60):
        t = rng.choice(TIERS)
        store = stores[t]
        alive = [e for e in ids[t] if store.get(e) is not None]
        op = rng.random()
        if op < 0.45 and alive:  # link within or across tiers (the target may not exist)
            for _ in range(rng.randint(1, 6)):
                target = rng.choice(every)
                src = rng.choice(alive)
                if target != src:
                    store.link(src, target, rng.choice(LINK_TYPES))
        elif op < 0.6:
            links = store.links_touching(alive[:20])
            if links:
                gone = rng.choice(links)
                assert store.unlink(gone.source_id, gone.target_id,
                                    rng.choice([gone.link_type, None])) >= 1
        elif op < 0.72 and alive:  # an entry delete: its links cascade (source and target)
            store.delete(rng.choice(alive))
        elif op < 0.8 and alive:  # an unrelated write: the graph stays, caught up by generation
            builds = store.graph.builds
            store.capture(entry(f"{t}-new{step}", "fresh", "unlinked"))
            _same(store, rng.sample(every, 10))
            assert store.graph.builds == builds
        elif op < 0.9 and alive:  # another process links, unlinks or deletes
            src, target = rng.choice(alive), rng.choice(every)
            code = rng.choice([f"store.link({src!r}, {target!r}, 'supports')",
                               f"store.unlink({src!r}, {target!r})", f"store.delete({src!r})"])
            if src != target:
                _other_process(paths[t], code)
        else:  # reopen: the saved graph is mapped again (or rebuilt if links changed since)
            store.close()
            stores[t] = store = TierStore(paths[t], name=t)
            manager.tiers[t].store = store
        for _ in range(3):
            asked = rng.sample(every, rng.randint(1, 12))
            with read_scope():
                for s in stores.values():
                    _same(s, asked)
                assert sorted(manager.link_ends(asked)) == sorted(
                    LinkEnds(l.source_id, l.target_id, l.link_type) for l in manager.links_touching(asked))
                seeds = rng.sample(every, 4)
                a, b = graph_hops(manager, seeds), graph_hops(SqlPath(manager), seeds)
                assert a.hops == b.hops
                assert {k: v for k, v in a.contradicts.items() if v} == \
                    {k: v for k, v in b.contradicts.items() if v}
    for s in stores.values():
        s.close()


def test_unrelated_delete_keeps_the_graph_and_an_endpoint_delete_rebuilds_it(tmp_path: Path) -> None:
    store = TierStore(tmp_path / "agent.db", name="agent")
    store.capture_many([entry(i) for i in ("a", "b", "c", "lonely")])
    store.link("a", "b", "supports")
    store.link("c", "elsewhere", "contradicts")
    assert set(store.link_ends(["b"])) == {LinkEnds("a", "b", "supports")}
    assert store.graph.builds == 1 and graph_path(store).exists()
    store.delete("lonely")  # no link of it: the graph is still exact
    assert set(store.link_ends(["a", "c"])) == {LinkEnds("a", "b", "supports"),
                                                LinkEnds("c", "elsewhere", "contradicts")}
    assert store.graph.builds == 1
    store.delete("b")  # a target in the same tier: its link cascades, the graph is rebuilt
    assert store.link_ends(["a", "b"]) == [] and store.graph.builds == 2
    store.delete("c")  # a source: its link to another tier cascades too
    assert store.link_ends(["elsewhere"]) == [] and _sql(store, ["elsewhere"]) == set()
    store.close()


def test_a_reopened_store_maps_the_saved_graph(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    store = TierStore(db, name="agent")
    store.capture_many([entry(f"e{i}") for i in range(30)])
    for i in range(29):
        store.link(f"e{i}", f"e{i + 1}", LINK_TYPES[i % 4])
    assert len(store.link_ends(["e5"])) == 2
    store.capture(entry("other"))  # moves the generation: the file's graph catches up
    store.close()
    again = TierStore(db, name="agent")
    _same(again, ["e0", "e5", "e29", "nope"])
    assert again.graph.builds == 0  # mapped from the file, caught up, not rebuilt
    again.close()


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the last array: its CRC-32 fails on open
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["damaged", "truncated", "foreign", "not a graph"])
def test_a_bad_graph_file_is_rebuilt_with_a_warning(tmp_path: Path, how: str, caplog) -> None:
    db, other_db = tmp_path / "agent.db", tmp_path / "team.db"
    store, other = TierStore(db, name="agent"), TierStore(other_db, name="team")
    for s, prefix in ((store, "a"), (other, "t")):
        s.capture_many([entry(f"{prefix}{i}") for i in range(5)])
        s.link(f"{prefix}0", f"{prefix}1", "extends")
        s.link(f"{prefix}2", f"{prefix}0", "sequences")
        assert len(s.link_ends([f"{prefix}0"])) == 2
    store.close()
    path = graph_path(store)
    if how == "damaged":
        _damage(path)
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:-10])
    elif how == "foreign":  # the other tier's graph (another uid) under this tier's name
        shutil.copy(graph_path(other), path)
    else:
        path.write_bytes(b"TVARRAYS" + b"\0" * 40)
    again = TierStore(db, name="agent")
    with caplog.at_level(logging.WARNING, logger="tiervault.vault.link_graph"):
        _same(again, ["a0", "a1", "a2", "t0"])
    assert again.graph.builds == 1 and "rebuilding" in caplog.text
    assert LinkGraph.load(path)[0].n == 3  # saved again, whole
    again.close()
    other.close()


def _restore(backup: Path, db: Path) -> None:
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    shutil.copy(backup, db)


def test_a_restored_older_copy_does_not_serve_a_newer_graph(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    store = TierStore(db, name="agent")
    store.capture_many([entry(i) for i in "abcd"])
    store.link("a", "b", "supports")
    assert len(store.link_ends(["a"])) == 1
    backup = tmp_path / "backup.db"
    src, dst = sqlite3.connect(db), sqlite3.connect(backup)
    src.backup(dst)
    src.close()
    dst.close()
    store.link("a", "c", "supports")
    store.link("a", "d", "supports")
    assert len(store.link_ends(["a"])) == 3  # the graph file is saved at a later generation
    newer = graph_path(store).read_bytes()
    store.close()
    # the older copy is back with the newer graph file: a generation it never reached
    _restore(backup, db)
    graph_path(store).write_bytes(newer)
    restored = TierStore(db, name="agent")
    _same(restored, ["a", "b", "c", "d"])
    assert len(restored.link_ends(["a"])) == 1
    # the same generation reached again with other links (another history): other epochs
    restored.link("a", "d", "contradicts")
    restored.link("b", "c", "extends")
    restored.close()
    assert graph_path(store).read_bytes() != newer
    graph_path(store).write_bytes(newer)
    again = TierStore(db, name="agent")
    _same(again, ["a", "b", "c", "d"])
    assert LinkEnds("a", "c", "supports") not in again.link_ends(["a"])
    again.close()


def test_a_read_only_tier_answers_from_a_graph_in_memory(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with TierStore(db, name="agent") as store:
        store.capture_many([entry("x"), entry("y")])
        store.link("x", "y", "extends")
    graph_path(TierStore(db, name="agent")).unlink(missing_ok=True)
    reader = TierStore(db, name="agent", read_only=True)
    assert reader.link_ends(["y"]) == [LinkEnds("x", "y", "extends")]
    assert not graph_path(reader).exists()
    reader.close()


def test_graph_arrays_that_disagree_are_refused() -> None:
    graph = LinkGraph.build([("a", "b", "supports"), ("b", "c", "contradicts")], 1, 1, "")
    assert graph.n == 3 and graph.arrays["starts"].size == (1 << bucket_bits(3)) + 1
    for name, bad in (("adj", lambda a: a + 1000), ("offsets", lambda a: a[::-1].copy()),
                      ("keys", lambda a: a[::-1].copy())):
        arrays = dict(graph.arrays)
        arrays[name] = bad(arrays[name])
        with pytest.raises(ValueError):
            LinkGraph(arrays, 1, 1, "")


@pytest.mark.parametrize("open_tier", ["sqlite", "postgres", "remote"], indirect=True)
def test_manager_link_ends_over_every_backend(open_tier) -> None:  # noqa: F811
    agent, team = open_tier("agent"), open_tier("team")
    agent.capture_many([entry("a1"), entry("a2")])
    team.capture(entry("t1"))
    agent.link("a1", "t1", "supports")
    agent.link("a2", "a1", "contradicts")
    team.link("t1", "a2", "extends")
    manager = VaultManager([Tier("agent", "agent", 1.0, store=agent), Tier("team", "team", 0.5, store=team)])
    want = {LinkEnds("a1", "t1", "supports"), LinkEnds("a2", "a1", "contradicts"),
            LinkEnds("t1", "a2", "extends")}
    assert sorted(manager.link_ends(["a1", "t1"])) == sorted(want)
    assert manager.link_ends([]) == [] and manager.link_ends(["zz"]) == []
    hops = graph_hops(manager, ["a1"])
    assert hops.hops == {"t1": 1, "a2": 2} and hops.contradicts["a1"] == {"a2"}


def test_the_mirror_build_makes_the_graph_file_and_a_new_process_maps_it(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with TierStore(db, name="agent") as store:
        store.capture_many([entry("p"), entry("q")])
        store.link("p", "q", "sequences")
        graph_path(store).unlink(missing_ok=True)
        store.postings()  # the first mirror of this process prepares the link graph too
        assert graph_path(store).exists() and store.graph.builds == 1
    with TierStore(db, name="agent") as again:
        again.postings()
        assert again.graph.builds == 0 and again.link_ends(["q"]) == [LinkEnds("p", "q", "sequences")]


def test_a_saved_graph_outlives_the_epoch_window(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setattr("tiervault.vault.connection.EPOCH_WINDOW", 4)  # epochs kept: 4 generations
    db = tmp_path / "agent.db"
    with TierStore(db, name="agent") as store:
        store.capture_many([entry("a"), entry("b")])
        store.link("a", "b", "supports")
        assert store.link_ends(["a"]) == [LinkEnds("a", "b", "supports")]
        saved_at = LinkGraph.load(graph_path(store))[0].gen
        for i in range(10):  # writes without a search: the saved generation's epoch leaves the window
            store.add_memory(f"memory {i}")
        assert store.epoch_at(saved_at) is None
    with caplog.at_level(logging.WARNING, logger="tiervault.vault.link_graph"):
        again = TierStore(db, name="agent")
        assert again.link_ends(["b"]) == [LinkEnds("a", "b", "supports")]
    assert again.graph.builds == 0 and "rebuilding" not in caplog.text  # the pin kept it ours
    again.close()


def test_a_mapped_graph_reads_only_the_blocks_it_checked(tmp_path: Path, caplog) -> None:
    db = tmp_path / "agent.db"
    with TierStore(db, name="agent") as store:
        names = [f"an-entry-with-a-long-name-{i:05d}" for i in range(3000)]  # 93 KB of ids
        store.capture_many([entry(n) for n in names])
        for i in range(0, 2999, 2):
            store.link(names[i], names[i + 1], "supports")
        assert store.link_ends([names[0]]) == [LinkEnds(names[0], names[1], "supports")]
    graph, _ = LinkGraph.load(graph_path(TierStore(db, name="agent")))
    assert all(done == 0 for done, _ in graph.blocks_verified().values())
    assert graph.touching([names[2]]) == {LinkEnds(names[2], names[3], "supports")}
    done, blocks = graph.blocks_verified()["blob"]
    assert blocks == 2 and done == 1  # only the block read
    # a block read later that fails its CRC: one warning, the graph rebuilt from the table
    path = graph_path(TierStore(db, name="agent"))
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last block of the last array (adj)
    path.write_bytes(bytes(data))
    again = TierStore(db, name="agent")
    with caplog.at_level(logging.WARNING, logger="tiervault.vault.link_graph"):
        _same(again, names[-2:])
    assert "damaged" in caplog.text and again.graph.builds == 1
    again.close()


@pytest.fixture
def eager_stale(monkeypatch):
    """Rebuild thresholds small enough for a test's graph: stale after any change below 3."""
    from tiervault.vault import link_graph

    monkeypatch.setattr(link_graph, "SMALL_LINKS", 0)
    monkeypatch.setattr(link_graph, "REBUILD_MIN", 3)
    monkeypatch.setattr(link_graph, "REBUILD_SHARE", 0.0)


def test_a_stale_graph_is_never_read_and_rebuilds_at_the_threshold(tmp_path: Path, eager_stale) -> None:
    store = TierStore(tmp_path / "agent.db", name="agent")
    store.capture_many([entry(f"e{i}") for i in range(12)])
    for i in range(8):
        store.link(f"e{i}", f"e{i + 1}", "supports")
    _same(store, ["e0", "e4"])
    assert store.graph.builds == 1
    store.link("e9", "e10", "extends")  # 1 change: stale, SQL answers, nothing rebuilt
    _same(store, ["e9", "e10", "e4"])
    assert store.graph.builds == 1 and store.graph.current() is None
    store.unlink("e3", "e4")  # 2 changes
    _same(store, ["e3", "e4", "e9"])
    store.delete("e0")  # an endpoint deleted: its link cascaded (3 changes: rebuilt)
    _same(store, ["e0", "e1", "e3", "e9"])
    assert store.graph.builds == 2 and store.graph.current() is not None
    store.delete("e11")  # no link of it: the rebuilt graph stays exact
    _same(store, ["e1", "e11"])
    assert store.graph.builds == 2
    store.close()


def test_a_large_graph_is_not_rebuilt_per_link_change(tmp_path: Path) -> None:
    from tiervault.vault import link_graph

    store = TierStore(tmp_path / "agent.db", name="agent")
    n = link_graph.SMALL_LINKS + 10
    store.capture_many([entry(f"e{i}") for i in range(n + 1)])
    # one transaction: the bulk copy of links (migrate / import)
    transfer_for(store).put_links([Link(f"e{i}", f"e{i + 1}", "supports", "", 0.0, "agent")
                                   for i in range(n)])
    _same(store, ["e0", "e7"])
    assert store.graph.builds == 1
    for i in range(5):  # an agent linking between its searches
        store.link(f"e{i}", f"e{i + 7}", "extends")
        _same(store, [f"e{i}", f"e{i + 7}"])
    assert store.graph.builds == 1  # below max(256, 5%): answered by SQL, not rebuilt
    store.close()


@pytest.mark.parametrize("seed", [5, 41])
def test_link_ends_equal_sql_through_random_walks_with_stale_graphs(tmp_path: Path, seed: int,
                                                                     eager_stale) -> None:
    test_link_ends_equal_sql_through_random_walks(tmp_path, seed)


def test_a_schema_4_tier_opens_as_schema_6_with_the_link_change_count(tmp_path: Path) -> None:
    """A tier written by schema 4 (no change count) opens as schema 6: the count at 0, then
    moved by the links' triggers (one link row: 1); tiervaults of schema 4 and 5 (which link
    without the triggers) refuse the file from then on."""
    from tiervault.vault.schema import SCHEMA_VERSION, migrate

    db = tmp_path / "agent.db"
    conn = sqlite3.connect(db, isolation_level=None)
    migrate(conn, target=4)
    conn.close()
    store = TierStore(db, name="agent")
    store.capture_many([entry("a"), entry("b")])
    store.link("a", "b", "supports")
    assert set(store.link_ends(["a"])) == {LinkEnds("a", "b", "supports")}
    store.close()
    conn = sqlite3.connect(db)
    assert SCHEMA_VERSION == 6
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 6
    assert conn.execute("SELECT value FROM meta WHERE key = 'links.changes'").fetchone() == ("1",)
    conn.close()


def test_check_reports_a_graph_that_disagrees_with_the_table_and_repair_rebuilds_it(tmp_path: Path) -> None:
    from tiervault.vault.tier_check import check_tier

    db = tmp_path / "agent.db"
    store = TierStore(db, name="agent")
    store.capture_many([entry("a"), entry("b"), entry("c")])
    store.link("a", "b", "supports")
    assert store.link_ends(["a"]) and graph_path(store).exists()
    assert check_tier(store).ok
    conn = sqlite3.connect(db)  # outside SQL: a link written, its count forged back
    conn.execute("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
                 "VALUES ('b', 'c', 'extends', '', 0)")
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) - 1 WHERE key = 'links.changes'")
    conn.commit()
    conn.close()
    found = check_tier(store)
    assert any("disagrees with the tier's links (1 links differ)" in p for p in found.problems), found
    assert check_tier(store, repair=True).ok
    assert not check_tier(store).problems
    assert set(store.link_ends(["c"])) == {LinkEnds("b", "c", "extends")}
    store.close()


@pytest.mark.parametrize("array", ["starts", "keys", "adj_offsets", "adj", "offsets", "blob"])
def test_every_block_a_look_up_reads_is_verified_first(array: str) -> None:
    """A mapped graph's look-up verifies each block it reads, of every array, the other
    end's offsets and bytes too (issue 16 session 19: the checks run per array until
    that array is verified whole, not while any array is not): a damaged block the
    look-up reads -- and only that one -- raises, not a wrong answer."""
    from zlib import crc32

    import numpy as np

    from tiervault.vault.checked_array import BLOCK_BYTES, CheckedArray, block_crcs

    rows = [(f"node-{i:06d}", f"node-{i + 1:06d}", "supports") for i in range(0, 48_000, 2)]
    built = LinkGraph.build(rows, 1, len(rows), "e")
    keys = built.arrays["keys"]

    def at(name: str) -> int:  # an endpoint's position: its CRC-32 in the sorted keys
        return int(np.searchsorted(keys, crc32(name.encode())))

    def block(name: str, i: int) -> int:
        return i * built.arrays[name].itemsize // BLOCK_BYTES

    # a link whose two ends' offsets and bytes lie in other blocks of every array
    src, dst = next((s, t) for s, t, _ in rows[::97]
                    if block("offsets", at(s)) != block("offsets", at(t))
                    and block("offsets", at(s) + 1) == block("offsets", at(s))
                    and block("offsets", at(t) + 1) == block("offsets", at(t))
                    and block("blob", int(built.arrays["offsets"][at(s)]))
                    != block("blob", int(built.arrays["offsets"][at(t)])))
    i, j = at(src), at(dst)
    arrays = {k: v.copy() for k, v in built.arrays.items()}
    checked = {k: CheckedArray(arrays[k], np.array(block_crcs(arrays[k]), dtype=np.uint32),
                               name=k) for k in arrays}
    where = {"starts": int(crc32(src.encode())) >> (32 - bucket_bits(keys.size)),
             "keys": i, "adj_offsets": i, "adj": int(arrays["adj_offsets"][i]),
             "offsets": j, "blob": int(arrays["offsets"][j])}[array]
    arrays[array][where] ^= 1  # after the CRCs: that block fails its check
    graph = LinkGraph({k: checked[k].a for k in arrays}, 1, len(rows), "e", checked)
    with pytest.raises(ValueError):
        graph.touching([src])
