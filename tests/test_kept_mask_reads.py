"""Under validity-only filters naming their instant (a search's usual filters), a tier's
top k and its dedup look-ups read the dense filter mask kept across queries
(MirrorLexicon._kept_mask) at their slots, not a mask compiled per call: the same
answers as the dense definition, across a write, a delete and a validity edge crossed."""

from __future__ import annotations

import numpy as np

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.postings import Postings
from tiervault.vault.scoring import fts5_idf, top_k
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import STEMMER

from tests.test_vault_manager import random_entries

T0 = 1.8e9
QUERIES = [["cache", "retry"], ["lock", "token", "schema"], ["queue"], ["cache", "lock", "index"]]


def _entries(n: int, seed: int, prefix: str) -> list[Entry]:
    """Random entries, a third of them valid only before or after ``T0 + 100``."""
    out = []
    for i, e in enumerate(random_entries(n, seed=seed, prefix=prefix)):
        d = e.to_dict()
        if i % 3 == 1:
            d["valid_until"] = T0 + 100
        elif i % 3 == 2:
            d["valid_from"] = T0 + 100
        out.append(Entry.from_dict(d))
    return out


def _stems(words: list[str]) -> list[str]:
    return list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))


def _check(store: TierStore, filters: Filters, k: int) -> None:
    m = store.postings()
    mask = m.mask(filters)
    for words in QUERIES:
        stems = _stems(words)
        stats = store.term_stats(stems)
        dense = m.bm25(m.matches(stems), fts5_idf(stats.n_docs, np.asarray(stats.df, dtype=np.float64)),
                       stats.avg_len)
        want = top_k(dense, k, mask & (dense > 0))
        hits = store.lexical_top_k(stems, stats, filters, k)
        assert [h.id for h in hits] == m.ids.take(want)
        assert [h.score for h in hits] == dense[want].tolist()
        ids = [m.ids[s] for s in range(0, len(m.ids), 7)]
        looked = store.lexical_scores(stems, stats, ids=ids, filters=filters)
        assert {h.id: h.passes for h in looked} == {
            i: bool(mask[m.slot(i)]) for i in ids if m.slot(i) is not None}


def test_kept_mask_reads_equal_the_dense_definition_and_follow_changes(tmp_path, monkeypatch):
    calls: list[bool] = []
    real = Postings.mask

    def counted(self, filters, at=None):
        calls.append(at is None)
        return real(self, filters, at)
    monkeypatch.setattr(Postings, "mask", counted)
    store = TierStore(tmp_path / "a.db")
    store.capture_many(_entries(1500, 4, "e"))
    before = Filters(now=T0)
    for k in (1, 5, 40, 400):
        _check(store, before, k)
    # the top k and look-ups of one instant: the kept mask, never one compiled at slots
    calls.clear()
    for k in (3, 30):
        for words in QUERIES:
            stems = _stems(words)
            stats = store.term_stats(stems)
            store.lexical_top_k(stems, stats, before, k)
            store.lexical_scores(stems, stats, ids=["e1", "e2", "e3"], filters=before)
    assert calls == []
    # past the validity edge, after a write and after a delete: a new mask, right answers
    after = Filters(now=T0 + 200)
    _check(store, after, 20)
    store.capture(Entry.create(id="w1", title="cache retry lock", description="queue token"))
    _check(store, after, 20)
    _check(store, before, 20)
    assert store.delete("e3")
    _check(store, after, 20)
    # a filter that narrows (a domain): compiled at the slots as before
    _check(store, Filters(now=T0, domains=("db",)), 20)
    store.close()


def test_narrowing_dense_masks_take_the_kept_window_and_equal_the_definition(tmp_path, monkeypatch):
    """A narrowing filter's dense mask (filter_mask; a top k over many slots) is its
    fields compiled alone, and-ed with the kept validity-only mask: equal to
    ``p.mask(filters)`` for every kind of narrowing field, window flag and instant
    (either side of a validity edge), after a write and a delete; the validity columns
    are compared only for the window's own mask (fails when the fields are compiled with
    the window)."""
    compiled: list[tuple[bool, bool]] = []
    real = Postings.mask

    def spied(self, filters, at=None):
        if at is None:
            compiled.append((filters.restricts, filters.checks_validity))
        return real(self, filters, at)
    monkeypatch.setattr(Postings, "mask", spied)
    store = TierStore(tmp_path / "n.db")
    store.capture_many(_entries(900, 6, "n"))
    narrowing = [dict(domains=("db",)), dict(types=("rule", "decision")), dict(tags=("t1", "t3")),
                 dict(not_types=("pattern",)), dict(severities=("high",)), dict(not_tags=("t2",)),
                 dict(exclude_ids=("n1", "n5")), dict(updated_after=T0 - 1e8)]
    flags = [dict(), dict(include_expired=True), dict(include_future=True),
             dict(include_expired=True, include_future=True)]

    def check() -> None:
        m = store.postings()
        for instant in (T0, T0 + 200):
            for fields in narrowing:
                for flag in flags:
                    f = Filters(now=instant, **fields, **flag)
                    got = store.filter_mask(f)
                    assert got.mask.tolist() == real(m, f).tolist(), (instant, fields, flag)
    check()
    # narrowing masks made with a window never compare the validity columns themselves
    assert (True, True) not in compiled and (False, True) in compiled
    store.capture(Entry.create(id="w1", title="cache retry", description="db rule", domain="db"))
    check()
    assert store.delete("n7")
    check()
    store.close()


def test_a_filter_view_after_a_top_k_with_the_same_filters_takes_its_kept_mask(tmp_path, monkeypatch):
    """A hybrid search's vector pre-filter (``filter_mask``) comes right after its top k
    with the same Filters object: it takes the mask that top k read (no validity bucket
    searched again; fails when the view makes its key again), the same booleans as the
    dense definition, and a new mask after a write or for another object past an edge."""
    from tiervault.vault.validity_edges import ValidityEdges

    searched: list[float] = []
    real_bucket = ValidityEdges.bucket

    def counted(self, p, now):
        searched.append(now)
        return real_bucket(self, p, now)
    monkeypatch.setattr(ValidityEdges, "bucket", counted)
    store = TierStore(tmp_path / "v.db")
    store.capture_many(_entries(900, 5, "v"))
    stems = _stems(QUERIES[0])

    def view_after_top_k(filters: Filters) -> np.ndarray:
        store.lexical_top_k(stems, store.term_stats(stems), filters, 10)
        searched.clear()
        return store.filter_mask(filters).mask

    f = Filters(now=T0)
    got = view_after_top_k(f)
    assert searched == [] and not got.flags.writeable
    assert got.tolist() == store.postings().mask(f).tolist()
    assert store.filter_mask(Filters(now=T0)).mask.tolist() == got.tolist()  # another object: its key
    assert searched  # ... searched for
    store.capture(Entry.create(id="late", title="cache retry", description="queue"))
    f2 = Filters(now=T0)
    assert store.filter_mask(f).mask.tolist() == store.postings().mask(f).tolist()  # a write: not the last
    later = Filters(now=T0 + 200)
    got = view_after_top_k(later)
    assert searched == [] and got.tolist() == store.postings().mask(later).tolist()
    assert got.tolist() != store.postings().mask(f2).tolist()  # the edge passed: other rows
    store.close()
