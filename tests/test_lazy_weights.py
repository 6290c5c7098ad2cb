"""A query term's postings weights are read only when its BM25 is computed
(term_matches.term_postings): a term whose BM25 the tier keeps across queries
(TermScores) costs no read of them; the top k is the dense definition either way,
after a write and a delete too."""

from __future__ import annotations

import numpy as np

from tiervault.vault.checked_array import CheckedArray
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.scoring import fts5_idf, top_k
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import STEMMER

from tests.test_vault_manager import random_entries

NOW = Filters(now=1.8e9)


def _stems(words: list[str]) -> list[str]:
    return list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))


def _top(store: TierStore, words: list[str], reads: list[int]) -> tuple[int, list]:
    """(reads of the weights column, the top k as (id, score)); checked against the
    dense top k computed afresh."""
    stems = _stems(words)
    before = len(reads)
    stats = store.term_stats(stems)
    hits = store.lexical_top_k(stems, stats, NOW, 15)
    n = len(reads) - before
    m = store.postings()
    dense = m.bm25(m.matches(stems), fts5_idf(stats.n_docs, np.asarray(stats.df, dtype=np.float64)),
                   stats.avg_len)
    want = top_k(dense, 15, m.mask(NOW) & (dense > 0))
    assert [(h.id, h.score) for h in hits] == list(zip(m.ids.take(want), dense[want].tolist()))
    return n, [(h.id, h.score) for h in hits]


def test_weights_read_only_for_terms_whose_bm25_is_computed(tmp_path, monkeypatch):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1500, seed=2))
    store.close()
    store = TierStore(tmp_path / "a.db")  # the mirror from its cache file: columns read by pread
    data = store.postings().W.data
    reads: list[int] = []
    real = CheckedArray.get

    def counted(self, lo, hi):
        if self is data:
            reads.append(hi - lo)
        return real(self, lo, hi)
    monkeypatch.setattr(CheckedArray, "get", counted)
    assert _top(store, ["cache", "retry"], reads)[0] == 2  # both computed
    assert _top(store, ["cache", "lock"], reads)[0] == 1  # cache's BM25 kept: lock only
    assert _top(store, ["lock", "retry", "cache"], reads)[0] == 0
    store.capture(Entry.create(id="w1", title="cache lock", description="retry"))  # a write
    assert _top(store, ["cache", "lock"], reads)[0] == 2  # the kept BM25 dropped
    assert store.delete("w1")
    _top(store, ["cache", "retry", "lock"], reads)
    store.close()
