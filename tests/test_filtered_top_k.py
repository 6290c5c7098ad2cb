"""A tier's top k under filters read from the kept validity window (vault/lexicon.py,
issue 16 session 21): under a tag filter the tagged slots' mask is the kept validity
mask read there (the tag test passes at every tagged slot), under a category filter
only the narrowing fields are compiled at the union (the validity from the kept
mask), and a sparse union under validity-only filters is masked whole (no head) --
each answer the dense definition's, ids and scores bit for bit, across validity
edges, dead slots and rows written after the mirror was built."""

from __future__ import annotations

import numpy as np

from tiervault.vault import lexicon, postings
from tiervault.vault.entry import ENTRY_TYPES, Entry
from tiervault.vault.filters import Filters
from tiervault.vault.scoring import top_k
from tiervault.vault.store import TierStore
from tiervault.vault.validity_edges import ValidityEdges

from tests.test_term_parts import dense_bm25, query_stems
from tests.test_vault_manager import WORDS, random_entries

T0 = 1.8e9


def _store(tmp_path) -> TierStore:
    """1,200 rows, a third with a validity window around T0, tags and types of several kinds."""
    rng = np.random.default_rng(11)
    rows = []
    for i, e in enumerate(random_entries(1200, seed=21)):
        window = {}
        if i % 3 == 0:
            start = T0 + float(rng.integers(-50, 50))
            window = {"valid_from": start, "valid_until": start + float(rng.integers(1, 60))}
        elif i % 3 == 1 and i % 2:
            window = {"valid_until": T0 + float(rng.integers(-40, 40))}
        rows.append(Entry.create(id=e.id, title=e.title, description=e.description, context=e.context,
                                 tags=list(e.tags) + (["rare"] if i % 17 == 0 else []), domain=e.domain,
                                 type=ENTRY_TYPES[i % len(ENTRY_TYPES)], **window))
    store = TierStore(tmp_path / "f.db")
    store.capture_many(rows)
    store.postings()
    store.delete("e7")  # a dead slot
    store.capture(Entry.create(id="n1", title="retry backoff jitter", description="cache", tags=["rare"],
                               valid_until=T0 + 5.0))  # a row after the build
    return store


def _filters() -> list[Filters]:
    out = []
    for now in (T0 - 60.0, T0 - 1.0, T0, T0 + 3.0, T0 + 70.0):
        out += [Filters(now=now), Filters(now=now, include_expired=True), Filters(now=now, include_future=True),
                Filters(now=now, tags=("rare",)), Filters(now=now, tags=("rare", str(WORDS[3]))),
                Filters(now=now, tags=("rare",), domains=("db",)), Filters(now=now, tags=("rare",), include_expired=True),
                Filters(now=now, domains=("http",)), Filters(now=now, types=("rule", "decision")),
                Filters(now=now, domains=("ops",), include_expired=True, include_future=True),
                Filters(now=now, tags=("nobody",))]
    return out


def test_filtered_top_k_equals_the_dense_definition_across_validity_edges(tmp_path):
    store = _store(tmp_path)
    m = store.postings()
    rng = np.random.default_rng(5)
    queries = [["retry", "backoff"], ["cache"], ["jitter", "zzz"]]
    queries += [[str(w) for w in rng.choice(WORDS, size=int(rng.integers(1, 4)), replace=False)] for _ in range(12)]
    checked = 0
    for words in queries:
        stems = query_stems(words)
        stats, dense = dense_bm25(store, m, stems)
        for f in _filters():
            for k in (1, 7, 30):
                hits = store.lexical_top_k(stems, stats, f, k)
                want = top_k(dense, k, m.mask(f) & (dense > 0))
                assert [h.id for h in hits] == m.ids.take(want), (words, f, k)
                assert [h.score for h in hits] == dense[want].tolist()
                checked += 1
    assert checked == len(queries) * len(_filters()) * 3
    store.close()


def test_tag_and_category_masks_read_the_validity_from_the_kept_window(tmp_path, monkeypatch):
    """No mask at the tagged slots is compiled under a tag filter alone, and no mask
    compiled at a query's slots judges validity (the kept window does); fails with
    ``p.mask(filters, at)`` as before."""
    store = _store(tmp_path)
    stems = query_stems(["retry", "backoff", "cache"])
    stats = store.term_stats(stems)
    compiled: list[Filters] = []
    real = postings.Postings.mask

    def counted(self, filters, at=None):
        if at is not None:
            compiled.append(filters)
        return real(self, filters, at)
    monkeypatch.setattr(postings.Postings, "mask", counted)
    for now in (T0 - 1.0, T0 + 3.0):
        before = len(compiled)
        store.lexical_top_k(stems, stats, Filters(now=now, tags=("rare",)), 10)
        assert len(compiled) == before  # the tag alone: the kept window read at the tagged slots
        store.lexical_top_k(stems, stats, Filters(now=now, tags=("rare",), domains=("db",)), 10)
        store.lexical_top_k(stems, stats, Filters(now=now, domains=("http",)), 10)
    assert compiled and all(not f.tags and f.include_expired and f.include_future for f in compiled)
    store.close()


def test_a_sparse_union_under_a_kept_mask_is_masked_whole(tmp_path, monkeypatch):
    """A top k over a few scored slots under validity-only filters takes no head first
    (fails with the head tried first, as before)."""
    store = _store(tmp_path)
    heads: list[int] = []
    real = lexicon.top_k_from_head

    def counted(*args, **kwargs):
        heads.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(lexicon, "top_k_from_head", counted)
    for words in (["retry", "backoff"], ["cache", "jitter"], [str(WORDS[0]), str(WORDS[1])]):
        stems = query_stems(words)
        assert store.lexical_top_k(stems, store.term_stats(stems), Filters(now=T0), 5)
    assert heads == []
    store.close()


def test_the_kept_mask_follows_each_new_instant_between_the_same_edges(tmp_path, monkeypatch):
    """Each query's new Filters reuses the last validity-only mask while its instant lies
    between the same two validity edges (``ValidityEdges.window``), and only then: at
    instants around every edge, visited back and forth, each top k is the dense
    definition's; 20 queries inside one window search the edges once (fails with a
    search each, as before)."""
    store = _store(tmp_path)
    m = store.postings()
    stems = query_stems(["retry", "backoff", "cache", str(WORDS[2])])
    stats, dense = dense_bm25(store, m, stems)
    values = np.concatenate([m.valid_until, m.valid_from])
    edges = np.unique(values[~np.isnan(values)]).tolist()
    near = [t for e in edges[::3] for t in (e - 0.5, e, e + 0.25)]
    for t in [T0 - 1e4, *near, *reversed(near), T0 + 1e4]:
        for f in (Filters(now=t), Filters(now=t, include_expired=True)):
            hits = store.lexical_top_k(stems, stats, f, 25)
            want = top_k(dense, 25, m.mask(f) & (dense > 0))
            assert [h.id for h in hits] == m.ids.take(want), f
            assert [h.score for h in hits] == dense[want].tolist()
    searched: list[float] = []
    real = ValidityEdges.bucket

    def counted(self, p, now):
        searched.append(now)
        return real(self, p, now)
    monkeypatch.setattr(ValidityEdges, "bucket", counted)
    for i in range(20):
        assert store.lexical_top_k(stems, stats, Filters(now=T0 + 1e3 + i * 1e-3), 5)
    assert len(searched) == 1
    store.close()


def test_window_holds_the_instants_of_a_bucket():
    class Columns:
        build_id = 1
        valid_until = np.array([np.nan, 5.0, 10.0, 10.0])
        valid_from = np.array([1.0, np.nan, 5.0, np.nan])

    edges, cols = ValidityEdges(), Columns()
    inf = float("inf")
    assert [edges.window(cols, t) for t in (0.0, 1.0, 4.9, 5.0, 10.0, 1e9)] == [
        (-inf, 1.0), (1.0, 5.0), (1.0, 5.0), (5.0, 10.0), (10.0, inf), (10.0, inf)]
    assert edges.window(cols, float("nan")) is None
    for t in np.linspace(-3.0, 13.0, 97).tolist():
        lo, hi = edges.window(cols, t)
        assert lo <= t < hi
        assert {edges.bucket(cols, x) for x in (lo, (lo + hi) / 2 if hi < inf else lo + 1.0)
                if x > -inf} <= {edges.bucket(cols, t)}
