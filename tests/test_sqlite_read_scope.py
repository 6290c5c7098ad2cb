"""The SQLite tier inside a read scope (one search): ``meta.gen`` is read once, then
answered from memory until this store writes; a write by another connection (another
process) is seen by the next scope. Real tier files, two real connections."""

from __future__ import annotations

from tiervault.brain.brain import Brain
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.read_scope import read_scope
from tiervault.vault.store import TierStore

GEN_SQL = "FROM meta WHERE key = 'gen'"


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
    assert sum(GEN_SQL in s for s in seen) == len(paths)
    manager.close()
