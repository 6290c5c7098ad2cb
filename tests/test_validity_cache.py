"""The dense filter mask kept across queries while no validity edge lies between their
instants (vault/validity_edges.py, MirrorLexicon._dense_mask): at every instant it is
the mask computed afresh, an edge passing between two searches (explicit instants or
the wall clock) is seen, and so is a write that moves an entry's validity."""

from __future__ import annotations

import time

import numpy as np

from test_recall import MODEL, fill, unit
from tiervault.embeddings.recall import VectorRecall
from tiervault.embeddings.slot_map import SlotMap, allowed_rows
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.manager import VaultManager
from tiervault.vault.rows import IdMask
from tiervault.vault.store import TierStore
from tiervault.vault.validity_edges import ValidityEdges, edges_of

BASE = 1_800_000_000.0  # unix seconds, in the future of any test run's wall clock


def _validity(i: int) -> dict[str, float]:
    """Entry i's window: some expire, some start later, some both, the rest always valid;
    a few share an edge."""
    out: dict[str, float] = {}
    if i % 3 == 0:
        out["valid_until"] = BASE + 10.0 * (i % 40) + 5.0
    if i % 4 == 1:
        out["valid_from"] = BASE + 10.0 * (i % 40) - 100.0
    return out


def _entries(n: int, prefix: str = "e") -> list[Entry]:
    kinds = ("rule", "pattern", "decision")
    return [Entry.create(id=f"{prefix}{i:05d}", title=f"title {i}", description="d",
                         type=kinds[i % 3], **_validity(i)) for i in range(n)]


def _instants(p) -> list[float]:
    values = np.concatenate([p.valid_until, p.valid_from])
    edges = np.unique(values[~np.isnan(values)])
    near = [t for e in edges.tolist() for t in (e - 0.5, e, e + 0.25, e + 0.5)]
    rng = np.random.default_rng(5)
    return [BASE - 1e4, *rng.permutation(near).tolist(), *near, BASE + 1e6]


def _check_every_instant(store: TierStore) -> int:
    """The kept mask equals ``Postings.mask`` (computed, never kept) at instants around
    every edge, visited back and forth; returns how many were answered from the cache."""
    p = store.postings()
    kept = 0
    last: dict[Filters, np.ndarray] = {}
    for t in _instants(p):
        for f in (Filters(now=t), Filters(now=t, include_expired=True),
                  Filters(types=("rule",), now=t), Filters(now=t, include_future=True)):
            got = store.filter_mask(f).mask
            assert np.array_equal(got, p.mask(f)), (t, f)
            assert not got.flags.writeable
            plain = Filters(**{**{k: getattr(f, k) for k in f.__slots__}, "now": None})
            kept += got is last.get(plain)
            last[plain] = got
    return kept


def test_kept_mask_is_the_fresh_mask_at_every_instant(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(_entries(300))
    assert _check_every_instant(store) > 0  # instants in one window share a mask


def test_a_large_tier_grown_by_writes_keeps_exact_edges(tmp_path):
    """A tier over the small-tier size appends slots (no rebuild): the edges grow from the
    new slots' columns; an update moving an entry's validity and a delete are seen."""
    store = TierStore(tmp_path / "a.db")
    store.capture_many(_entries(1_500))
    _check_every_instant(store)  # the edges read once here; the writes below add to them
    build = store.postings().build_id
    store.capture_many(_entries(40, prefix="new"))  # new edges too (the same windows)
    store.capture(Entry.create(id="late", title="late", description="d",
                               valid_from=BASE + 123.0, valid_until=BASE + 7_777.0))
    assert store.postings().build_id == build  # appended, not rebuilt: the incremental path
    _check_every_instant(store)
    f = Filters(now=BASE + 200.0)
    p = store.postings()
    assert store.filter_mask(f).mask[p.ids.index("late")]
    # a write moves "late"'s window past the same instant: excluded at once
    store.capture(Entry.create(id="late", title="late", description="d", valid_until=BASE + 150.0))
    view = store.filter_mask(f)
    assert store.postings().build_id == build
    assert not any(view.mask[i] for i, eid in enumerate(view.ids) if eid == "late")
    assert np.array_equal(view.mask, store.postings().mask(f))
    _check_every_instant(store)
    store.delete("e00003")
    assert np.array_equal(store.filter_mask(f).mask, store.postings().mask(f))


def test_a_tier_opened_from_its_cache_starts_from_the_saved_edges(tmp_path):
    """The base's edges are saved with the mirror cache: a new process reads them (no sort
    of both columns at its first filtered query) and grows them by the slots appended."""
    store = TierStore(tmp_path / "a.db")
    store.capture_many(_entries(1_500))
    store.postings()
    store.close()
    again = TierStore(tmp_path / "a.db")
    p = again.postings()
    assert p.validity_edges is not None and not p.validity_edges.flags.writeable
    assert np.array_equal(p.validity_edges, edges_of(p.valid_until, p.valid_from))
    _check_every_instant(again)
    again.capture_many(_entries(40, prefix="new"))
    again.capture(Entry.create(id="late", title="late", description="d",
                               valid_from=BASE + 123.0, valid_until=BASE + 7_777.0))
    assert again.postings().validity_edges is p.validity_edges  # appended, not rebuilt
    _check_every_instant(again)


def test_edges_bucket_instants_exactly():
    """Same bucket <=> no edge in (t1, t2]; a NaN instant has none."""

    class Columns:
        build_id = 1
        valid_until = np.array([np.nan, 5.0, 10.0, 10.0])
        valid_from = np.array([1.0, np.nan, 5.0, np.nan])

    edges, cols = ValidityEdges(), Columns()
    assert [edges.bucket(cols, t) for t in (0.0, 1.0, 4.9, 5.0, 9.99, 10.0, 1e9)] == [0, 1, 1, 2, 2, 3, 3]
    assert edges.bucket(cols, float("nan")) is None
    cols.valid_until = np.append(cols.valid_until, 7.0)  # a slot appended
    cols.valid_from = np.append(cols.valid_from, np.nan)
    assert edges.bucket(cols, 7.0) == 3 and edges.bucket(cols, 6.9) == 2
    cols.build_id = 2  # a rebuilt mirror: slots renumbered, the edges read again
    cols.valid_until, cols.valid_from = np.array([3.0]), np.array([np.nan])
    assert edges.bucket(cols, 6.0) == 1


def test_the_vector_leg_sees_an_edge_pass(tmp_path):
    """The vector pre-filter (a tier's filter view, kept across queries) drops an entry
    once its validity ends between two searches: explicit instants, then the wall clock."""
    with VaultManager.at({"agent": str(tmp_path / "agent.db")}) as vault:
        rng = np.random.default_rng(11)
        fill(vault.store("agent"), rng, 60, "a")
        q = unit(rng, 1)[0]
        store = vault.store("agent")
        now = time.time()
        store.capture(Entry.create(id="soon", title="soon", description="d", valid_until=now + 1.0))
        store.put_vectors(MODEL, [("soon", "h", q)])
        until = store.get("soon").valid_until  # as stored (timestamps keep milliseconds)
        recall = VectorRecall(vault, MODEL)
        assert recall.search(q, 5, filters=Filters(now=now))[0][0] == "soon"
        assert recall.search(q, 5, filters=Filters(now=until - 0.5))[0][0] == "soon"
        assert "soon" not in recall.search(q, 5, filters=Filters(now=until))[0]
        assert recall.search(q, 5, filters=Filters(now=until - 0.1))[0][0] == "soon"  # back again
        while (t := time.time()) < until:  # the wall clock, as a Brain reads it per query
            assert recall.search(q, 5, filters=Filters(now=t))[0][0] == "soon"
            time.sleep(0.05)
        assert "soon" not in recall.search(q, 5, filters=Filters(now=time.time()))[0]


def test_allowed_rows_copies_a_writable_view():
    """A writable view mask may change in place: its rows are not taken from the last
    view by identity."""
    from tiervault.embeddings.index import VectorIndex

    ids = [f"x{i}" for i in range(8)]
    index = VectorIndex.build(ids, unit(np.random.default_rng(2), 8))
    mask = np.ones(8, dtype=bool)
    slots = SlotMap()
    assert allowed_rows(IdMask(ids, mask, ("v",)), index, slots) is None  # every row passes
    mask[3] = False
    rows = allowed_rows(IdMask(ids, mask, ("v",)), index, slots)
    assert rows is not None and not rows[index.rows_of(["x3"])[0]] and rows.sum() == 7
