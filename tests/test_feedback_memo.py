"""Feedback read once per generation (vault/feedback_memo.py): the same answers as the
per-query SQL, another process's feedback seen by the next search, no feedback SQL
in a search while nothing was written. Real tier files, real connections."""

from __future__ import annotations

from tiervault.brain.brain import Brain
from tiervault.vault import feedback_memo
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.read_scope import read_scope
from tiervault.vault.store import TierStore


def _entries(n: int) -> list[Entry]:
    return [Entry.create(id=f"e{i}", title=f"retry backoff note {i}", description="jitter cache")
            for i in range(n)]


def test_answers_are_the_sql_answers_small_and_large(tmp_path, monkeypatch):
    store = TierStore(tmp_path / "t.db")
    store.capture_many(_entries(6))
    for i in range(40):
        store.add_feedback(f"query {i % 3}", f"e{i % 6}", ("accepted", "dismissed", "modified")[i % 3])
    asks = [(["e0"], 5), (["e1", "e2", "e1"], 100), (["e5", "e3"], 3), (["nope"], 10), ([], 4)]
    for cap in (feedback_memo.MAX_ROWS, 10):  # held in memory; too many rows: read per query
        monkeypatch.setattr(feedback_memo, "MAX_ROWS", cap)
        fresh = TierStore(tmp_path / "t.db")
        for ids, limit in asks:
            assert fresh.feedback_events_for(ids, limit) == store.journal.feedback_events_for(ids, limit)
        assert fresh.feedback_counts() == store.journal.feedback_counts()
        fresh.close()
    store.close()


def test_another_process_feedback_is_seen_by_the_next_scope(tmp_path):
    mine, other = TierStore(tmp_path / "t.db"), TierStore(tmp_path / "t.db")
    mine.capture_many(_entries(2))
    assert mine.feedback_events_for(["e0"], 10) == [] and mine.feedback_counts()["accepted"] == 0
    other.add_feedback("retry", "e0", "accepted")
    with read_scope():
        got = mine.feedback_events_for(["e0"], 10)
        assert [(e.entry_id, e.action) for e in got] == [("e0", "accepted")]
        assert mine.feedback_counts()["accepted"] == 1
    mine.add_feedback("retry", "e1", "dismissed")  # this store's own write: seen at once
    assert [e.action for e in mine.feedback_events_for(["e0", "e1"], 10)] == ["accepted", "dismissed"]
    mine.close()
    other.close()


def test_a_search_reads_no_feedback_sql_while_nothing_was_written(tmp_path):
    manager = VaultManager.at({"agent": str(tmp_path / "agent.db")})
    manager.store("agent").capture_many(_entries(5))
    brain = Brain(manager)
    brain.search_intelligent("retry jitter")  # mirror built, feedback read once
    seen: list[str] = []
    manager.store("agent").db.conn.set_trace_callback(seen.append)
    assert brain.search_intelligent("retry jitter")
    # the generation check's PRAGMA data_version (vault/sqlite_epochs.py) is no feedback read
    assert not [s for s in seen if "feedback" in s or ("PRAGMA" in s and "data_version" not in s)], seen
    manager.close()
