"""The query's TF-IDF at the hits (tfidf_query.scores_at), fused: each term's count at
every slot (0 where absent) and one sum a slot in term order -- bit for bit the
term-by-term sum; the columns and term ids the query's BM25 read (Postings.matches)
reused by it, never across a write, a delete or a rebuild."""

from __future__ import annotations

import numpy as np

from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import STEMMER

from tests.test_vault_manager import WORDS, random_entries
from tests.tfidf_reference import scores_at_term_by_term

NOW = Filters(now=1.8e9)


def _term_by_term(m, words: list[str], slots: np.ndarray) -> np.ndarray:
    """TF-IDF at base ``slots``: each query term's hits weighted and added apart, in the
    query's order, its columns read afresh (the sum the matrix product makes)."""
    q = m.query_tfidf(words)
    if q is None:
        return np.zeros(slots.size, dtype=np.float64)
    return scores_at_term_by_term(q, slots, m)


def _stems(words: list[str]) -> list[str]:
    return list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))


def test_fused_sums_equal_the_term_by_term_sums_bit_for_bit(tmp_path):
    """Random tiers and queries (repeated words, unknown words, up to 9 terms), slots
    drawn with repeats: not one bit differs from the term-by-term sum."""
    rng = np.random.default_rng(5)
    for seed in range(3):
        store = TierStore(tmp_path / f"t{seed}.db")
        store.capture_many(random_entries(1200, seed=seed))
        m = store.postings()
        for _ in range(40):
            words = list(rng.choice(WORDS, size=int(rng.integers(1, 10))))
            if rng.random() < 0.3:
                words.append("zyzzyvaq")
            store.term_stats(_stems(words))  # the BM25 read first, as in a search
            slots = rng.choice(m.base_rows, size=int(rng.integers(1, 80)), replace=True).astype(np.int64)
            got = m.tfidf_at(words, slots)
            np.testing.assert_array_equal(got, _term_by_term(m, words, slots))
            np.testing.assert_allclose(got, m.tfidf_scores(words)[slots], rtol=1e-12, atol=0)
        store.close()


def _check_query(store: TierStore, words: list[str]) -> None:
    """A search's calls (term statistics, then the top k with its TF-IDF) against a
    mirror built afresh from the same tier, and the dense TF-IDF."""
    stems = _stems(words)
    stats = store.term_stats(stems)
    hits = store.lexical_top_k(stems, stats, NOW, 25, words=words)
    fresh = TierStore(store.path)
    try:
        assert fresh.term_stats(stems) == stats
        want = fresh.lexical_top_k(stems, stats, NOW, 25, words=words)
        assert [(h.id, h.score, h.tfidf) for h in hits] == [(h.id, h.score, h.tfidf) for h in want]
    finally:
        fresh.close()
    m = store.postings()
    slots = np.array([m.slot(h.id) for h in hits], dtype=np.int64)
    np.testing.assert_allclose([h.tfidf for h in hits], m.tfidf_scores(words)[slots], rtol=1e-12, atol=0)


def test_shared_columns_and_ids_never_outlive_a_write_a_delete_or_a_rebuild(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1200, seed=3))
    queries = [["cache", "retry", "lock"], ["queue", "token", "queue", "schema"], ["newword", "cache"]]
    for words in queries:
        _check_query(store, words)
    # a write in the delta: a new word gets a term id (unknown when first asked)
    store.capture(Entry.create(id="n1", title="newword cache cache", description="retry newword"))
    for words in queries:
        _check_query(store, words)
    # a delete: a slot dies, the columns' live postings change
    top = store.lexical_top_k(_stems(["cache"]), store.term_stats(_stems(["cache"])), NOW, 1)
    assert store.delete(top[0].id)
    for words in queries:
        _check_query(store, words)
    # a rebuild (more than 5% of the rows written): new term ids, new columns
    before = store.postings().build_id
    store.capture_many(random_entries(300, seed=9, prefix="r"))
    assert store.postings().build_id != before
    for words in queries:
        _check_query(store, words)
    store.close()


def test_a_mirror_with_a_delta_answers_base_mixed_and_delta_slots_alike(tmp_path):
    """With rows in the delta, TF-IDF at slots all in the base (the usual top k: the
    base path, no split), mixed and all in the delta: base slots bit for bit the
    term-by-term sum, every slot the dense TF-IDF's (the delta's rows' own sum)."""
    rng = np.random.default_rng(12)
    store = TierStore(tmp_path / "d.db")
    store.capture_many(random_entries(1200, seed=6))
    m = store.postings()
    store.capture_many(random_entries(40, seed=7, prefix="d"))  # rows in the delta
    m = store.postings()
    assert len(m.ids) > m.base_rows
    delta_slots = np.arange(m.base_rows, len(m.ids), dtype=np.int64)
    for _ in range(30):
        words = list(rng.choice(WORDS, size=int(rng.integers(1, 8))))
        store.term_stats(_stems(words))
        base = rng.choice(m.base_rows, size=int(rng.integers(1, 60)), replace=False).astype(np.int64)
        mixed = np.concatenate([base, rng.choice(delta_slots, size=5, replace=False)])
        rng.shuffle(mixed)
        dense = m.tfidf_scores(words)
        for slots in (base, mixed, delta_slots):
            got = m.tfidf_at(words, slots)
            np.testing.assert_allclose(got, dense[slots], rtol=1e-12, atol=0)
            in_base = slots < m.base_rows
            np.testing.assert_array_equal(got[in_base], _term_by_term(m, words, slots[in_base]))
    store.close()


def test_a_few_slots_tfidf_in_python_floats_equals_the_numpy_path_bit_for_bit(tmp_path, monkeypatch):
    """At most FEW_PRODUCTS (slot, term) pairs (a graph neighbour's ids) are summed in
    Python floats: every bit as the NumPy path (the same weights, rounded to float32, the
    same sums in the query's order), repeated and unknown words, slots holding no query
    word, rows of stop words only; slots in the delta take the NumPy path."""
    from tiervault.vault import tfidf_query

    calls: list[int] = []
    real = tfidf_query.few_scores

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(tfidf_query, "few_scores", counted)
    rng = np.random.default_rng(12)
    store = TierStore(tmp_path / "f.db")
    store.capture_many(random_entries(900, seed=7) + [Entry.create(id="s0", title="the of and", description="a")])
    m = store.postings()
    store.capture(Entry.create(id="n1", title="cache retry", description="lock newword"))
    m = store.postings()
    checked = 0
    for _ in range(300):
        words = list(rng.choice(WORDS + ["the", "zyzzyvaq"], size=int(rng.integers(1, 5))))
        q = m.query_tfidf(words)
        if q is None:
            continue
        n = int(rng.integers(1, max(2, tfidf_query.FEW_PRODUCTS // q[0].size + 1)))
        slots = rng.choice(len(m.ids), size=n, replace=False).astype(np.int64)
        before = len(calls)
        got = m.tfidf_at(words, slots)
        monkeypatch.setattr(tfidf_query, "FEW_PRODUCTS", 0)
        want = m.tfidf_at(words, slots)
        monkeypatch.setattr(tfidf_query, "FEW_PRODUCTS", 28)
        assert got.tobytes() == want.tobytes(), (words, slots)
        assert got.tobytes() == _term_by_term(m, words, slots).tobytes() or slots.max() >= m.base_rows
        checked += len(calls) > before
    assert checked > 150
    store.close()
