"""A small tier's top k and score look-ups over the slots read off one dense BM25 sum
(TermMatches.scored: the slots scoring > 0) answer what the dense definition answers:
the same hits in the same order, ties at the cut and filters included, with deleted
slots and updated entries in the delta; score look-ups 0.0 for an entry matching no
term; a larger tier keeps the union (scored declines)."""

from __future__ import annotations

import numpy as np

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.scoring import fts5_idf, top_k
from tiervault.vault.store import TierStore
from tiervault.vault.term_matches import DENSE_SLOTS, TermMatches
from tiervault.vault.tokenizer import STEMMER

from tests.test_vault_manager import WORDS, random_entries

_FILTERS = (Filters(now=1.8e9), Filters(now=1.8e9, include_expired=True),
            Filters(now=1.8e9, types=("rule",)), Filters(now=1.8e9, domains=("db",)),
            Filters(now=1.8e9, types=("decision", "pattern")), Filters())


def _stems(words: list[str]) -> list[str]:
    return list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))


def _dense(m, stems):
    matches = m.matches(stems)
    n = m.n_alive
    return matches, m.bm25(matches, fts5_idf(n, matches.df), m.total_len / n)


def test_scored_slots_are_the_union_less_zero_scores_and_decline_past_dense_slots():
    slots = [np.array([1, 4, 7]), np.array([], dtype=np.int64), np.array([0, 4, 9])]
    wtf = [np.array([1.0, 2.0, 0.0], dtype=np.float32), np.zeros(0, dtype=np.float32),
           np.array([3.0, 1.0, 1.0], dtype=np.float32)]
    tm = TermMatches(["a", "b", "c"], slots, wtf)
    doclen = np.full(12, 5.0)
    idf = np.array([1.5, 2.0, 0.5])
    got = tm.scored(doclen, idf, 5.0)
    assert got is not None
    dense = tm.bm25(doclen, idf, 5.0)
    # slot 7 holds a term with a weight of 0: in the union, scoring 0, left out
    assert tm.union(12).tolist() == [0, 1, 4, 7, 9]
    assert got[0].tolist() == [0, 1, 4, 9]
    assert got[1].tolist() == dense[[0, 1, 4, 9]].tolist()
    assert tm.scored(np.full(DENSE_SLOTS + 1, 5.0), idf, 5.0) is None


def test_top_k_and_scores_over_scored_slots_equal_the_dense_definition(tmp_path):
    rng = np.random.default_rng(11)
    store = TierStore(tmp_path / "a.db")
    twins = [Entry.create(id=f"t{i:03d}", title="retry backoff", description="jitter cache",
                          type=("pattern", "rule", "decision")[i % 3], domain=("db", "http")[i % 2])
             for i in range(120)]  # equal scores: ties inside the top k and at its cut
    store.capture_many(twins + random_entries(900, seed=3))
    store.postings()  # the base built, then deletes and updates go to the delta
    for i in rng.choice(900, size=60, replace=False).tolist():
        store.delete(f"e{i}")
    store.capture_many([Entry.create(id=f"e{i}", title="retry cache jitter", description="backoff",
                                     domain="db") for i in range(900, 940)]
                       + [Entry.create(id=f"t{i:03d}", title="retry backoff", description="jitter cache",
                                       type="rule") for i in range(0, 30)])
    m = store.postings()
    assert m.n_alive < len(m.ids)  # dead slots are there
    queries = [["retry"], ["jitter"], ["retry", "backoff"], ["cache", "jitter", "the"]]
    queries += [list(rng.choice(WORDS, size=int(rng.integers(1, 4)), replace=False)) for _ in range(30)]
    compared = zero_scored = 0
    for words in queries:
        stems = _stems([str(w) for w in words])
        if not stems:
            continue
        matches, dense = _dense(m, stems)
        stats = store.term_stats(stems)
        for filters in _FILTERS:
            for k in (1, 5, 30, 200, 2000):
                expected = top_k(dense, k, m.mask(filters) & (dense > 0))
                hits = store.lexical_top_k(stems, stats, filters, k)
                assert [h.id for h in hits] == m.ids.take(expected), (words, filters, k)
                assert [h.score for h in hits] == dense[expected].tolist()
                compared += 1
        # look-ups: live ids matching or not, a deleted id (absent), in any order
        asked = [str(i) for i in rng.choice(m.ids.take(np.flatnonzero(m.alive)), size=40)] + ["e0", "e1"]
        got = {h.id: h.score for h in store.lexical_scores(stems, stats, ids=asked)}
        for entry_id, score in got.items():
            slot = m.slots_of([entry_id])[0]
            assert slot is not None and score == float(dense[slot])
            zero_scored += score == 0.0
    assert compared > 800 and zero_scored > 20  # look-ups of entries matching no term met
    store.close()
