"""Ids read by slot are remembered for later look-ups (StringColumn.take_distinct): the
look-ups answer as a fresh table does, an id updated after the base (a delta slot)
included, and a search looks none of its own top-k ids up again for LSA."""

from __future__ import annotations

import numpy as np

from lookup_spy import strings_looked_up
from tiervault.brain.brain import Brain
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.string_table import StringColumn, StringTable


def test_remembered_ids_answer_as_a_fresh_look_up():
    ids = [f"id-{i:04d}" for i in range(500)]
    col = StringColumn(StringTable.build(ids))
    col.extend(["id-0007", "new-1"])  # an update of id-0007 and a new id, after the base
    fresh = StringColumn(StringTable.build(ids))
    fresh.extend(["id-0007", "new-1"])
    at = np.array([7, 3, 499, 250], dtype=np.int64)
    assert col.take_distinct(at) == ["id-0007", "id-0003", "id-0499", "id-0250"]
    asked = ["id-0007", "id-0003", "id-0499", "new-1", "id-0250", "nope"]
    assert col.slots_many(asked) == fresh.slots_many(asked)
    assert col.slots_many(["id-0007"]) == [[7, 500]]


def test_a_search_looks_up_no_top_k_id_again(tmp_path, monkeypatch):
    manager = VaultManager.at({"agent": str(tmp_path / "agent.db")})
    manager.store("agent").capture_many([
        Entry.create(id=f"e{i}", title=f"retry backoff note {i} {'jitter' * (i % 3)}",
                     description=f"cache {i} words {i * 7}") for i in range(60)])
    brain = Brain(manager)
    brain.search_intelligent("retry jitter cache")  # mirror and LSA model built
    ids_table = manager.store("agent").postings().ids.base
    looked_up = strings_looked_up(monkeypatch, ids_table)
    rows = brain.search_intelligent("backoff note words", limit=5)
    assert rows and not looked_up, looked_up  # the top k's ids come remembered


def test_the_spy_sees_a_look_up_the_memo_does_not_serve(monkeypatch):
    table = StringTable.build([f"id-{i:04d}" for i in range(50)])
    looked_up = strings_looked_up(monkeypatch, table)
    assert table.find(["id-0003", "nope"]) == [[3], []]
    assert looked_up == ["id-0003", "nope"]
    assert table.find(["id-0003"]) == [[3]]  # from the memo: not looked up again
    assert looked_up == ["id-0003", "nope"]
    StringTable.build(["other"]).find(["other"])  # another table: not counted
    assert looked_up == ["id-0003", "nope"]


def test_remembered_ids_of_any_number_skip_the_fingerprints(monkeypatch):
    from tiervault.vault import string_table

    ids = [f"id-{i:04d}" for i in range(500)]
    table, fresh = StringTable.build(ids), StringTable.build(ids)
    at = np.arange(3, 500, 17, dtype=np.int64)  # 30 slots (a tier's candidates: > FEW)
    read = StringColumn(table).take_distinct(at)
    asked = [*read[:20], "nope", *read[20:]]  # one the memo does not know: the full look-up
    expected, expected_asked = fresh.held(read), fresh.held(asked)
    fingerprinted: list[str] = []
    real = string_table.lookup_fingerprints

    def counted(strings):
        fingerprinted.extend(strings)
        return real(strings)

    monkeypatch.setattr(string_table, "lookup_fingerprints", counted)
    assert len(read) == 30 and table.held(read) == expected
    assert fingerprinted == []  # every one remembered: before, all 30 fingerprinted
    assert table.held(asked) == {i: [int(s)] for i, s in zip(
        [*range(20), *range(21, 31)], at.tolist())} == expected_asked
    assert "nope" in fingerprinted
