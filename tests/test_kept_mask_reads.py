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
