"""Entries deleted by outside SQL (schema v6's ``entries_tomb_ad``, vault/schema.py) are
dropped by the next search of a process whose search mirror is already open.

Before v6 an outside delete left its tombstone at the current generation, which a mirror
already at that generation never reads: the mirror kept answering the deleted entry until
the tier's next tiervault write. tiervault's own deletes keep their transaction's one
generation (``own_deletes``). Outside SQL is a plain ``sqlite3`` connection of this
process or of a separate Python process that never imports tiervault.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tiervault.vault.manager import Tier, VaultManager
from tiervault.vault.schema import OWN_DELETE, own_deletes
from tiervault.vault.store import TierStore

from tier_contract import entry

WORD = "zebra"


def _outside(db: Path, sql: str, params: tuple = (), *, process: bool = False) -> None:
    if process:
        script = ("import sqlite3, sys, json\nconn = sqlite3.connect(sys.argv[1], timeout=30)\n"
                  "conn.execute(sys.argv[2], json.loads(sys.argv[3]))\nconn.commit()\nconn.close()\n")
        subprocess.run([sys.executable, "-c", script, str(db), sql, json.dumps(list(params))],
                       check=True, timeout=120)
        return
    conn = sqlite3.connect(db, timeout=30)
    try:
        conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


def _table_ids(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()


def _meta(db: Path, key: str) -> str | None:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def _vault(tmp_path: Path, n: int) -> tuple[TierStore, VaultManager, Path]:
    db = tmp_path / "agent.db"
    store = TierStore(db, name="agent")
    store.capture_many([entry(f"e{i}", title=f"{WORD} number {i}", description="a striped horse")
                        for i in range(n)])
    manager = VaultManager([Tier("agent", str(db), 1.0, store=store)])
    assert set(manager.search(WORD, limit=10_000).ids) == _table_ids(db)  # the mirror is open
    return store, manager, db


@pytest.mark.parametrize("process", [False, True])
def test_an_entry_deleted_by_outside_sql_is_dropped_by_the_open_mirror(tmp_path, process):
    store, manager, db = _vault(tmp_path, 40)
    gen = store.generation()
    _outside(db, "DELETE FROM entries WHERE id IN ('e3', 'e7')", process=process)
    found = set(manager.search(WORD, limit=10_000).ids)
    assert "e3" not in found and "e7" not in found
    assert found == _table_ids(db) and len(found) == 38
    assert store.generation() > gen
    # the vector caches read the same tombstones (by entry id) past their generation
    assert {"e3", "e7"} <= set(store.vector_changes_since("any-model", gen).deleted)


def _tombstone_gens(db: Path, ids: list[str]) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute(
            "SELECT gen FROM tombstones WHERE entry_id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),))]
    finally:
        conn.close()


def test_tiervaults_own_deletes_keep_one_generation_and_leave_no_marker(tmp_path):
    store, manager, db = _vault(tmp_path, 30)
    gen = store.generation()
    assert store.delete_many(["e2", "e3", "e4"]) == 3
    # one transaction, one generation: the three tombstones carry the delete's own
    assert len(set(_tombstone_gens(db, ["e2", "e3", "e4"]))) == 1
    assert _tombstone_gens(db, ["e2"])[0] == gen + 1
    assert _meta(db, OWN_DELETE) is None
    assert set(manager.search(WORD, limit=10_000).ids) == _table_ids(db)
    # an outside delete of several rows in one statement moves the generation past each
    before = store.generation()
    _outside(db, "DELETE FROM entries WHERE id IN ('e5', 'e6', 'e8')")
    assert sorted(_tombstone_gens(db, ["e5", "e6", "e8"])) == [before + 1, before + 2, before + 3]
    assert set(manager.search(WORD, limit=10_000).ids) == _table_ids(db)


def test_a_failed_own_delete_commits_no_marker(tmp_path):
    store, manager, db = _vault(tmp_path, 5)
    gen = store.generation()
    with pytest.raises(RuntimeError):
        with store.db.write("delete") as txn, own_deletes(txn.conn):
            txn.conn.execute("DELETE FROM entries WHERE id = 'e0'")
            raise RuntimeError("fails after the marker and the delete were written")
    assert _meta(db, OWN_DELETE) is None and "e0" in _table_ids(db)
    assert store.generation() == gen
    assert store.delete("e0")
    assert _meta(db, OWN_DELETE) is None
    assert set(manager.search(WORD, limit=10_000).ids) == _table_ids(db)


def test_random_walk_of_own_and_outside_writes_matches_the_table(tmp_path):
    rng = random.Random(13)
    store, manager, db = _vault(tmp_path, 60)
    next_id = 60
    for step in range(40):
        alive = sorted(_table_ids(db))
        kind = rng.choice(["own_delete", "own_capture", "outside_delete", "outside_update",
                           "outside_delete_many"])
        if kind == "own_delete" and alive:
            store.delete(rng.choice(alive))
        elif kind == "own_capture":
            store.capture(entry(f"e{next_id}", title=f"{WORD} late {next_id}"))
            next_id += 1
        elif kind == "outside_delete" and alive:
            _outside(db, "DELETE FROM entries WHERE id = ?", (rng.choice(alive),),
                     process=step % 7 == 0)
        elif kind == "outside_delete_many" and len(alive) > 3:
            gone = rng.sample(alive, 3)
            _outside(db, "DELETE FROM entries WHERE id IN (?, ?, ?)", tuple(gone))
        elif kind == "outside_update" and alive:
            # an outside edit that removes the word: v3's update trigger moves the row
            _outside(db, "UPDATE entries SET title = 'plain' WHERE id = ?", (rng.choice(alive),))
        expected = {i for i in _table_ids(db)
                    if WORD in (store.get(i).title if store.get(i) else "")}
        assert set(manager.search(WORD, limit=10_000).ids) == expected, (step, kind)
    assert _meta(db, OWN_DELETE) is None
