"""The SQLite tier inside a read scope (one search): ``meta.gen`` is read once, then
answered from memory until this store writes; a write by another connection (another
process) is seen by the next scope. Real tier files, two real connections."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tiervault.brain.brain import Brain
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.postings import Postings
from tiervault.vault.read_scope import read_scope
from tiervault.vault.store import TierStore

GEN_SQL = "FROM meta WHERE key = 'gen'"
DATA_VERSION = "PRAGMA data_version"
#: another process: one entry written to the tier file argv[1] with id argv[2]
_WRITE = ("import sys; from tiervault.vault.store import TierStore; "
          "from tiervault.vault.entry import Entry; s = TierStore(sys.argv[1]); "
          "s.capture(Entry.create(id=sys.argv[2], title='zebra' + sys.argv[2][5:] + ' retry', "
          "description='jitter')); s.close()")


def _entry(i: int) -> Entry:
    return Entry.create(id=f"e{i}", title=f"retry backoff note {i}", description="jitter cache")


def test_generation_is_read_once_per_scope_until_this_store_writes(tmp_path):
    mine, other = TierStore(tmp_path / "t.db"), TierStore(tmp_path / "t.db")
    mine.capture(_entry(0))
    g0 = mine.generation()
    with read_scope():
        assert mine.generation() == g0
        other.capture(_entry(1))  # another process's write, committed mid-scope
        assert mine.generation() == g0  # the scope keeps its view
        mine.capture(_entry(2))  # this store's own write: read again
        assert mine.generation() == other.generation() == g0 + 2
    assert mine.generation() == g0 + 2
    with read_scope():
        other.capture(_entry(3))
        assert mine.generation() == g0 + 3  # a new scope reads it again
    mine.close()
    other.close()


def test_one_search_reads_the_generation_once_per_tier(tmp_path):
    paths = {t: tmp_path / f"{t}.db" for t in ("agent", "project")}
    manager = VaultManager.at({t: str(p) for t, p in paths.items()})
    for i, t in enumerate(paths):
        manager.store(t).capture_many([_entry(10 * i + j) for j in range(5)])
    brain = Brain(manager)
    brain.search_intelligent("retry jitter")  # mirrors built
    seen: list[str] = []
    for t in paths:
        manager.store(t).db.conn.set_trace_callback(seen.append)
    assert brain.search_intelligent("retry jitter")
    # nothing committed since the last read: each tier's check is its data_version alone
    assert sum(DATA_VERSION in s for s in seen) == len(paths)
    assert sum(GEN_SQL in s for s in seen) == 0
    seen.clear()
    other = TierStore(paths["project"])  # another connection (as another process's) writes
    other.capture(Entry.create(id="fresh", title="retry jitter fresh", description="jitter"))
    other.close()
    assert "fresh" in {r["id"] for r in brain.search_intelligent("retry jitter fresh", limit=50)}
    assert sum(GEN_SQL in s for s in seen) >= 1  # the tier written: its generation read again
    manager.close()


def test_a_write_by_another_process_is_seen_by_the_next_search(tmp_path):
    """A real second process commits between two searches of this one: the next search
    reads the new generation (data_version moved) and finds the entry; nothing stale."""
    path = tmp_path / "agent.db"
    manager = VaultManager.at({"agent": str(path)})
    manager.store("agent").capture_many([_entry(j) for j in range(5)])
    brain = Brain(manager)
    for round_ in range(3):
        assert brain.search_intelligent("retry jitter")  # memo of the generation settled
        g0 = manager.store("agent").generation()
        proc = subprocess.run([sys.executable, "-c", _WRITE, str(path), f"other{round_}"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert manager.store("agent").generation() == g0 + 1
        ids = {r["id"] for r in brain.search_intelligent(f"zebra{round_} retry", limit=50)}
        assert f"other{round_}" in ids
    manager.close()


def test_a_write_rolled_back_leaves_the_generation_read_before(tmp_path):
    """A write of this connection that fails is rolled back: the generation kept is the
    committed one, and another connection's next commit is seen."""
    mine, other = TierStore(tmp_path / "t.db"), TierStore(tmp_path / "t.db")
    mine.capture(_entry(0))
    g0 = mine.generation()
    with pytest.raises(RuntimeError):
        with mine.db.write("test") as txn:
            assert mine.generation() == g0 + 1  # inside: its own uncommitted generation
            txn.conn.execute("SELECT 1")
            raise RuntimeError("rolled back")
    assert mine.generation() == g0
    assert mine.generation() == g0
    other.capture(_entry(1))
    assert mine.generation() == g0 + 1
    mine.close()
    other.close()


def test_the_mirror_catches_up_once_per_scope_and_sees_every_write_after(tmp_path, monkeypatch):
    """Inside a read scope the mirror is caught up on the first ask only (the scope's
    view); this store's own write, a damaged cache block and the next scope catch up
    again, and another connection's write is seen by the next scope."""
    mine, other = TierStore(tmp_path / "t.db"), TierStore(tmp_path / "t.db")
    mine.capture(_entry(0))
    mine.postings()  # built
    caught: list[int] = []
    catch_up = Postings.catch_up
    monkeypatch.setattr(Postings, "catch_up", lambda p, store: (caught.append(1), catch_up(p, store)))
    with read_scope():
        p = mine.postings()
        other.capture(_entry(1))  # another process's write, committed mid-scope
        assert mine.postings() is p and mine.postings().slots_of(["e1"]) == [None]
        assert len(caught) == 1
        mine.capture(_entry(2))  # this store's own write: caught up (both entries)
        assert None not in mine.postings().slots_of(["e1", "e2"])
        n = len(caught)
        mine.postings()
        assert len(caught) == n
        p.mark_damaged(RuntimeError("a block failed its check"))
        mine.postings()
        assert len(caught) == n + 1 and p.damaged is None  # rebuilt
    other.capture(_entry(3))
    with read_scope():
        assert mine.postings().slots_of(["e3"])[0] is not None  # the next scope sees it
    n = len(caught)
    mine.postings()
    mine.postings()
    assert len(caught) == n + 2  # outside a scope: every ask catches up
    mine.close()
    other.close()


def test_a_closed_tier_forgets_the_mirror_its_scope_caught_up(tmp_path, monkeypatch):
    """close() inside a read scope: the next ask is not answered from the scope's memo
    (it opens the file again and catches up, as every ask did before the memo)."""
    store = TierStore(tmp_path / "t.db")
    store.capture(_entry(0))
    store.postings()
    caught: list[int] = []
    catch_up = Postings.catch_up
    monkeypatch.setattr(Postings, "catch_up", lambda p, s: (caught.append(1), catch_up(p, s)))
    with read_scope():
        store.postings()
        store.postings()
        assert len(caught) == 1
        store.close()
        assert store.postings().n_alive == 1  # the file opened again, the mirror caught up
        assert len(caught) == 2  # asked the tier again, not the memo
    store.close()
