"""The vector hits' ids read by mirror slot (embeddings/slot_map.py ids_by_slot): the same
ids as the index's own table, through every kind of change between queries, and
remembered by the mirror's id table, so the pool's look-ups of them find no miss."""

from __future__ import annotations

import numpy as np
import pytest

from lookup_spy import strings_looked_up
from test_recall import MODEL, check_same, fill, reference, unit
from tiervault.embeddings.recall import VectorRecall
from tiervault.embeddings.slot_map import SlotMap, ids_by_slot
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager


@pytest.fixture
def vault(tmp_path):
    with VaultManager.at({"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")}) as m:
        yield m


def test_hits_read_by_slot_are_the_reference_through_changes(vault):
    """Ids, tiers and cosines equal the brute force before and after a capture without a
    vector, a rewrite of an entry (its mirror slot moves), a new vector and a delete --
    the slot map made for an older index is never used for the ids."""
    rng = np.random.default_rng(41)
    agent = fill(vault.store("agent"), rng, 300, "a")
    team = fill(vault.store("team"), rng, 200, "t")
    recall = VectorRecall(vault, MODEL)

    def check(q):
        check_same(recall.search(q, 12), reference(q, [("agent", 1.0, agent), ("team", 0.6, team)], 12))

    for _ in range(3):
        check(unit(rng, 1)[0])
    slots = recall._state("agent").slots
    assert slots.row_slots is not None and slots.row_slots_key == slots.key  # the inverse was made
    store = vault.store("agent")
    store.capture(Entry.create(id="b00000", title="no vector", description="d"))
    store.capture(Entry.create(id="a00011", title="rewritten", description="moved slot"))
    check(unit(rng, 1)[0])
    new = unit(rng, 1)[0]
    store.put_vectors(MODEL, [("a00012", "h2", new)])
    agent["a00012"] = new
    store.delete("a00013")
    del agent["a00013"]
    for v in (new, agent["a00011"], unit(rng, 1)[0]):  # the changed rows at the top too
        check(v)


def test_ids_by_slot_falls_back_to_the_index_table(vault):
    """Without a current map (none yet, or one made for another index version) the ids
    come from the index's own table; with one, from the mirror column: the same."""
    rng = np.random.default_rng(43)
    fill(vault.store("agent"), rng, 120, "a")
    recall = VectorRecall(vault, MODEL)
    index = recall.index("agent")
    rows = np.array([0, 5, 119, 60], dtype=np.int64)
    want = index.ids_at(rows).tolist()
    assert ids_by_slot(SlotMap(), index, rows) == want
    recall.search(unit(rng, 1)[0], 5)
    slots = recall._state("agent").slots
    assert ids_by_slot(slots, index, rows) == want
    assert ids_by_slot(slots, index, np.empty(0, dtype=np.int64)) == []
    vault.store("agent").put_vectors(MODEL, [("a00005", "h2", unit(rng, 1)[0])])
    moved = recall.index("agent")  # a new version: the map is stale until the next search
    assert ids_by_slot(slots, moved, rows[[0, 2]]) == moved.ids_at(rows[[0, 2]]).tolist()


def test_the_pool_looks_no_vector_hit_up_again(vault, monkeypatch):
    """After a search, the mirror's id table answers the hits' look-ups (the pool's
    lexical evidence, ``Postings.slots_of``) from memory: no fingerprint search."""
    rng = np.random.default_rng(47)
    fill(vault.store("agent"), rng, 400, "a")
    recall = VectorRecall(vault, MODEL)
    recall.search(unit(rng, 1)[0], 10)  # the slot map made
    postings = vault.store("agent").postings()
    table = postings.ids.base
    looked_up = strings_looked_up(monkeypatch, table)
    ids, tiers, _ = recall.search(unit(rng, 1)[0], 10)
    assert len(ids) == 10 and set(tiers) == {"agent"}
    slots = postings.slots_of(ids)
    assert not looked_up, looked_up
    assert [postings.ids[s] for s in slots] == ids


def test_allowed_rows_gathered_equal_the_scatter_of_passing_slots(tmp_path):
    """allowed_rows' row gather (embeddings/slot_map.py _RowGather) and its rows of a view
    passing few slots (sorted, distinct) equal the scatter of the passing slots' rows for
    every filter view, in a tier whose rewritten entries hold two mirror slots each (the
    old one dead), before and after more writes."""
    from tiervault.embeddings.slot_map import SPARSE_SHARE, allowed_rows
    from tiervault.vault.filters import Filters
    from tiervault.vault.postings import SMALL_TIER_ROWS

    with VaultManager.at({"agent": str(tmp_path / "agent.db")}) as vault:
        rng = np.random.default_rng(53)
        store = vault.store("agent")
        n = SMALL_TIER_ROWS + 200  # appended to, not rebuilt: old slots stay
        fill(store, rng, n, "a", domain=lambda i: ("db", "web", "ops")[i % 3])
        recall = VectorRecall(vault, MODEL)
        views = [Filters(now=1.0), Filters(domains=("db",), now=1.0), Filters(types=("rule",), now=1.0),
                 Filters(domains=("nowhere",), now=1.0), Filters(domains=("db",), types=("rule",), now=1.0)]

        def check():
            index = recall.index("agent")
            slots = SlotMap()
            forms = set()
            for f in views * 2:  # each view twice: the kept rows answer the second time
                view = store.filter_mask(f)
                rows = index.rows_of(list(view.ids))
                passing = view.mask & (rows >= 0)
                want = np.zeros(index.row_count, dtype=bool)
                want[rows[passing]] = True
                got = allowed_rows(view, index, slots)
                if got is None:
                    assert want.sum() == len(index)
                    continue
                forms.add(got.dtype == bool)
                if got.dtype != bool:  # row numbers: sorted, distinct, those of the mask
                    assert np.array_equal(got, np.flatnonzero(want))
                    assert np.count_nonzero(view.mask) * SPARSE_SHARE <= view.mask.size
                else:
                    assert np.array_equal(want, got)
            assert forms == {True, False}  # both forms checked

        check()
        for i in range(0, 120, 3):  # rewrites: a new slot each, the old one dead; domains move
            store.capture(Entry.create(id=f"a{i:05d}", title=f"title {i}", description="d",
                                       domain="db" if i % 2 else "web"))
        store.delete("a00007")
        assert len(store.postings().ids) > store.postings().n_alive  # duplicates are there
        check()
