"""A query's BM25 kept as its terms' parts (vault/term_parts.py ``TermParts``): its top k
from the other terms' best sums when some terms are common (a word in most rows, its
idf floored), its scores at any slots, and a tier's top k under a tag filter scored at
the tagged slots only (vault/lexicon.py) -- each the dense definition's answer bit for
bit, ties and filters included, without the sum over every slot a common word holds."""

from __future__ import annotations

import numpy as np

from tiervault.vault import term_matches, term_parts
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.scoring import bm25_term, fts5_idf, top_k
from tiervault.vault.store import TierStore
from tiervault.vault.term_matches import summed
from tiervault.vault.term_parts import TermParts, splits
from tiervault.vault.tokenizer import STEMMER

from tests.test_vault_manager import WORDS, random_entries


def _case(rng: np.random.Generator, n: int, twins: int) -> tuple[TermParts, np.ndarray]:
    """Parts of 1-2 common terms (in most slots, idf floored or small) and 1-4 others
    over ``n`` slots whose first ``twins`` hold the same words at the same lengths (equal
    scores: ties in the top k and at its cut); the dense sum of every term in order."""
    doclen = rng.integers(3, 60, n).astype(np.float32)
    doclen[:twins] = 9.0
    kinds = ["common"] * int(rng.integers(1, 3)) + ["rare"] * int(rng.integers(1, 5))
    rng.shuffle(kinds)  # a common word anywhere in the query's order
    slots, parts, idf = [], [], []
    for kind in kinds:
        share = rng.uniform(0.55, 0.95) if kind == "common" else rng.uniform(0.002, 0.1)
        s = np.flatnonzero(rng.random(n) < share)
        s = np.union1d(s, np.arange(twins)).astype(np.int32 if rng.random() < 0.5 else np.int64)
        wtf = rng.integers(1, 9, s.size).astype(np.float32)
        wtf[s < twins] = 3.0
        i = 1e-6 if kind == "common" and rng.random() < 0.7 else (
            float(rng.uniform(0.001, 0.05)) if kind == "common" else float(rng.uniform(0.5, 9.0)))
        slots.append(s)
        parts.append(bm25_term(wtf, doclen[s], 21.0, i))
        idf.append(i)
    return TermParts(slots, parts, idf, n), summed(slots, parts, n)


def test_top_k_from_the_other_terms_equals_the_dense_top_k_bit_for_bit():
    rng = np.random.default_rng(20)
    decided = declined = 0
    for case in range(300):
        n = int(rng.integers(300, 6000))
        parts, dense = _case(rng, n, int(rng.integers(0, 120)))
        assert splits(parts.slots, parts.idf, n)
        mask = rng.random(n) < rng.choice([1.0, 0.9, 0.5])
        for k in (1, 5, 30, 100):
            got = parts.top_k(k, 2 * k + 16, lambda at: mask[at])
            if got is None:
                declined += 1
                continue
            want = top_k(dense, k, mask & (dense > 0))
            assert got[0].tolist() == want.tolist(), case
            assert got[1].tobytes() == dense[want].tobytes(), case
            decided += 1
        at = rng.choice(n, size=int(rng.integers(1, 80)), replace=False)
        assert parts.at(at).tobytes() == dense[at].tobytes()
        assert parts.at(np.sort(at).astype(np.int32)).tobytes() == dense[np.sort(at)].tobytes()
    assert decided > 400 and declined > 20  # ties at the cut and small tiers declined


def test_top_k_declines_without_a_common_term_or_when_a_common_word_may_reach_the_cut():
    s = np.arange(100, dtype=np.int64)
    common = np.arange(0, 1000, dtype=np.int64)
    w = np.full(100, 0.5, dtype=np.float32)
    # no common term: the caller's dense path
    assert TermParts([s], [w], [2.0], 1000).top_k(5, 26, lambda at: np.ones(at.size, bool)) is None
    # a common term whose bound (idf * 2.2) is not below the other terms' 26th best sum
    parts = TermParts([common, s], [np.full(1000, 0.1, np.float32), w], [0.04, 2.0], 1000)
    assert parts.top_k(5, 26, lambda at: np.ones(at.size, bool)) is None
    assert not splits([common, common], [1e-6, 1e-6], 1000)


def query_stems(words: list[str]) -> list[str]:
    """The distinct stems of ``words``, in order (a query's terms)."""
    return list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))


def dense_bm25(store: TierStore, m, stems: list[str]):
    """``store``'s term stats of ``stems`` and the definition: their BM25 at every slot
    of mirror ``m`` (FTS5's idf)."""
    stats = store.term_stats(stems)
    idf = fts5_idf(stats.n_docs, np.asarray(stats.df, dtype=np.float64))
    return stats, m.bm25(m.matches(stems), idf, stats.avg_len)


def test_a_tiers_top_k_with_a_common_word_or_a_tag_is_the_dense_one_without_every_slots_sum(
        tmp_path, monkeypatch):
    dense_calls: list[int] = []
    real = term_matches.TermMatches.scored  # every slot's sum of a tier of this size

    def counted(self, *args, **kwargs):
        dense_calls.append(1)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(term_matches.TermMatches, "scored", counted)
    store = TierStore(tmp_path / "a.db")
    twins = [Entry.create(id=f"t{i:03d}", title="retry backoff", description="jitter cache often",
                          tags=["rare"] if i % 3 else ["rare", "other"], domain=("db", "http")[i % 2])
             for i in range(40)]  # equal scores, a tag few rows hold
    rows = random_entries(1500, seed=4)
    store.capture_many(twins + [Entry.create(id=e.id, title=e.title + " often", description=e.description,
                                             context=e.context, tags=e.tags, domain=e.domain)
                                for e in rows])  # "often": in every row, its idf floored
    store.postings()
    store.delete("e3")
    store.capture(Entry.create(id="e5", title="retry often", description="jitter", tags=["rare"]))
    m = store.postings()
    rng = np.random.default_rng(3)
    queries = [["often", "jitter"], ["retry", "often", "backoff"], ["often", "zzz"], ["often"]]
    queries += [["often"] + [str(w) for w in rng.choice(WORDS, size=int(rng.integers(1, 4)), replace=False)]
                for _ in range(25)]
    filters = (Filters(now=1.8e9), Filters(now=1.8e9, include_expired=True),
               Filters(now=1.8e9, tags=("rare",)), Filters(now=1.8e9, tags=("rare", "other"), domains=("db",)),
               Filters(now=1.8e9, tags=("nobody",)))
    without = 0
    for words in queries:
        stems = query_stems(words)
        stats, dense = dense_bm25(store, m, stems)
        for f in filters:
            for k in (1, 5, 30, 200):
                before = len(dense_calls)
                hits = store.lexical_top_k(stems, stats, f, k)
                without += len(dense_calls) == before
                want = top_k(dense, k, m.mask(f) & (dense > 0))
                assert [h.id for h in hits] == m.ids.take(want), (words, f, k)
                assert [h.score for h in hits] == dense[want].tolist()
        asked = m.ids.take(rng.choice(len(m.ids), size=30, replace=False))
        for h in store.lexical_scores(stems, stats, ids=asked):
            assert h.score == float(dense[m.slots_of([h.id])[0]])
    assert without > 200  # neither a common word's every slot nor, under a tag, any sum
    store.close()


def test_a_tier_answers_the_same_with_the_parts_top_k_declining(tmp_path, monkeypatch):
    """With the parts' top k declining every time the tier answers the same (the dense path)."""
    store = TierStore(tmp_path / "b.db")
    store.capture_many(random_entries(600, seed=9))
    stems = query_stems(["retry", "cache"])
    stats = store.term_stats(stems)
    first = [(h.id, h.score) for h in store.lexical_top_k(stems, stats, Filters(now=1.8e9), 20)]
    store.close()
    monkeypatch.setattr(term_parts.TermParts, "top_k", lambda self, k, head, passes: None)
    store = TierStore(tmp_path / "b.db")
    assert [(h.id, h.score) for h in store.lexical_top_k(stems, stats, Filters(now=1.8e9), 20)] == first
    store.close()
