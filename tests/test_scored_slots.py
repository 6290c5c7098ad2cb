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
from tiervault.vault.term_matches import DENSE_SLOTS, TermMatches, scored_sparse
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


def test_sparse_sum_equals_the_dense_sum_bit_for_bit():
    """scored_sparse (postings under 1/SPARSE_SHARE of the slots, no dense array) answers
    the dense sum's slots scoring > 0 and their sums bit for bit: up to 14 terms a slot
    (a sum run in any other order, e.g. pairwise, moves last bits), weights of 0, NaN
    and negative ones left out, empty terms, int32 and int64 slots."""
    rng = np.random.default_rng(5)
    for case in range(400):
        n = int(rng.integers(50, 3000))
        terms = int(rng.integers(1, 15))
        where, parts = [], []
        for t in range(terms):
            size = int(rng.integers(0, max(1, n // 3))) if rng.random() > 0.15 else 0
            slots = np.sort(rng.choice(n, size=size, replace=False))
            where.append(slots.astype(np.int32 if case % 2 else np.int64))
            w = (rng.random(size) * 10 ** rng.uniform(-15, 15, size)).astype(np.float32)  # sums round
            if size and case % 5 == 0:
                w[rng.integers(0, size)] = 0.0
            if size and case % 7 == 0:
                w[rng.integers(0, size)] = np.nan
            if size and case % 11 == 0:
                w[rng.integers(0, size)] = -1.5
            parts.append(w)
        ref = np.zeros(n)  # the definition: each term added in turn
        for w, p in zip(where, parts):
            ref[w] += p
        want = np.flatnonzero(ref > 0)
        slots, sums = scored_sparse(where, parts)
        assert slots.dtype == np.int64 and sums.dtype == np.float64
        assert slots.tolist() == want.tolist()
        assert sums.tobytes() == ref[want].tobytes(), case


def test_scored_takes_the_sparse_sum_under_the_share_and_answers_the_dense_one():
    """TermMatches.scored on few postings (under 1/SPARSE_SHARE of the slots) and on many
    answers the dense definition's slots and scores bit for bit."""
    rng = np.random.default_rng(8)
    for n, size in ((4000, 30), (4000, 200), (4000, 900), (600, 200)):
        slots = [np.sort(rng.choice(n, size=size, replace=False)) for _ in range(4)]
        wtf = [rng.integers(1, 6, size).astype(np.float32) for _ in range(4)]
        tm = TermMatches(list("abcd"), slots, wtf)
        doclen = rng.integers(3, 40, n).astype(np.float32)
        idf = np.array([0.3, 1.2, 2.5, 0.9])
        dense = tm.bm25(doclen, idf, 12.0)
        got = tm.scored(doclen, idf, 12.0)
        assert got is not None
        want = np.flatnonzero(dense > 0)
        assert got[0].tolist() == want.tolist()
        assert got[1].tobytes() == dense[want].tobytes()
