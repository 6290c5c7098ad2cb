"""Each term's BM25 kept across queries (lexicon._term_scores, term_matches.TermScores):
reused while the tier is unchanged, never served after a write or under other
statistics; the numbers are those computed afresh, bit for bit."""

from __future__ import annotations

import numpy as np

from tiervault.vault import term_matches
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.rows import TermStats
from tiervault.vault.scoring import fts5_idf, top_k
from tiervault.vault.store import TierStore
from tiervault.vault.term_matches import TermScores
from tiervault.vault.tokenizer import STEMMER

from tests.test_vault_manager import random_entries

NOW = Filters(now=1.8e9)


def _stems(words: list[str]) -> list[str]:
    return list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))


def _expected(store: TierStore, stems: list[str], stats: TermStats, k: int) -> tuple[list[str], list[float]]:
    """The top k computed afresh: dense BM25 over every slot, no memo."""
    m = store.postings()
    matches = m.matches(stems)
    dense = m.bm25(matches, fts5_idf(stats.n_docs, np.asarray(stats.df, dtype=np.float64)),
                   stats.avg_len)
    top = top_k(dense, k, m.mask(NOW) & (dense > 0))
    return m.ids.take(top), dense[top].tolist()


def _check(store: TierStore, words: list[str], stats: TermStats | None = None, k: int = 12,
           computed: list[int] | None = None) -> tuple[list[str], int]:
    """The tier's top k equals :func:`_expected`; returns its ids and how many terms'
    BM25 the tier computed for it (``computed``: the counter's list)."""
    stems = _stems(words)
    stats = stats or store.term_stats(stems)
    before = len(computed) if computed is not None else 0
    hits = store.lexical_top_k(stems, stats, NOW, k)
    fresh = len(computed) - before if computed is not None else 0
    ids, scores = _expected(store, stems, stats, k)
    assert [h.id for h in hits] == ids
    assert [h.score for h in hits] == scores  # bit for bit
    return ids, fresh


def test_a_terms_kept_bm25_is_reused_then_dropped_by_a_write(tmp_path, monkeypatch):
    computed: list[int] = []
    real = term_matches.bm25_term

    real_of_norm = term_matches.bm25_of_norm

    def counted(wtf, doclen, avglen, idf):
        computed.append(wtf.size)
        return real(wtf, doclen, avglen, idf)

    def counted_of_norm(wtf, norm, idf):  # a term computed from the tier's kept norms
        computed.append(wtf.size)
        return real_of_norm(wtf, norm, idf)
    monkeypatch.setattr(term_matches, "bm25_term", counted)
    monkeypatch.setattr(term_matches, "bm25_of_norm", counted_of_norm)
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1500))
    assert _check(store, ["retry"], computed=computed)[1] == 1
    # retry's BM25 kept: only jitter's computed
    assert _check(store, ["retry", "jitter"], computed=computed)[1] == 1
    assert _check(store, ["jitter", "retry"], k=5, computed=computed)[1] == 0
    # a write: new postings, new statistics; nothing kept is served
    store.capture_many([Entry.create(id=f"w{i}", title="retry retry jitter", description="retry now")
                        for i in range(30)])
    top, fresh = _check(store, ["retry", "jitter"], computed=computed)
    assert fresh == 2 and any(i.startswith("w") for i in top)
    store.delete(top[0])  # a delete too
    after, fresh = _check(store, ["retry", "jitter"], computed=computed)
    assert top[0] not in after and fresh == 2
    store.close()


def test_an_update_under_unchanged_statistics_is_not_served_the_kept_bm25(tmp_path):
    """An edit that keeps every count (rows, the term's df, the total length) leaves
    (stem, idf, avglen) as they were, but moves the entry to a new slot: the kept
    BM25 of the old postings must not be served (the mirror's version keys it)."""
    store = TierStore(tmp_path / "a.db")
    # "u" first: its new slot (after every other) reorders the term's postings
    store.capture_many([Entry.create(id="u", title="retry retry retry gamma", description="delta")]
                       + random_entries(1500))
    before, _ = _check(store, ["retry"], k=40)
    assert "u" in before
    stats = store.term_stats(_stems(["retry"]))
    store.capture(Entry.create(id="u", title="retry retry retry omega", description="delta"))
    assert store.term_stats(_stems(["retry"])) == stats  # the same statistics
    after, _ = _check(store, ["retry"], k=40)
    assert after.index("u") == before.index("u")  # the same score, at its new slot
    store.close()


def test_other_statistics_are_not_served_the_kept_bm25(tmp_path):
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1200))
    stems = _stems(["cache", "retry"])
    own = store.term_stats(stems)
    _check(store, ["cache", "retry"], own)
    # federated statistics of a larger vault (another tier's rows): other idf and avglen
    other = own + TermStats(5000, own.total_len * 3.0, tuple(d * 2 for d in own.df))
    _check(store, ["cache", "retry"], other)
    _check(store, ["retry", "cache"], other)  # the same terms in another order
    _check(store, ["cache", "retry"], own)
    store.close()


def test_term_scores_hold_at_most_their_limit():
    memo = TermScores(100)
    memo.put(("a", 1.0, 2.0), np.ones(60, dtype=np.float32))
    memo.put(("b", 1.0, 2.0), np.ones(30, dtype=np.float32))
    assert memo.size == 90 and memo.get(("a", 1.0, 2.0)) is not None
    memo.put(("c", 1.0, 2.0), np.ones(20, dtype=np.float32))  # past the limit: dropped whole
    assert memo.size == 20 and memo.get(("a", 1.0, 2.0)) is None
    memo.put(("d", 1.0, 2.0), np.ones(101, dtype=np.float32))  # larger than the limit: not kept
    assert memo.get(("d", 1.0, 2.0)) is None and memo.size == 20
    kept = memo.get(("c", 1.0, 2.0))
    assert kept is not None and not kept.flags.writeable


def test_the_kept_idf_is_the_statistics_own():
    from tiervault.vault.scoring import fts5_idf

    a, b = TermStats(1000, 5e4, (3, 400, 0)), TermStats(1001, 5e4, (3, 400, 0))
    for stats in (a, b, a, a, TermStats(1000, 1.0, (3, 401, 0))):
        got = stats.idf()
        want = fts5_idf(stats.n_docs, np.asarray(stats.df, dtype=np.float64))
        assert got.tobytes() == want.tobytes() and not got.flags.writeable
    assert a.idf() is TermStats(1000, 7.0, (3, 400, 0)).idf()  # the same statistics: kept


def test_bm25_summed_by_bincount_equals_the_loop_over_terms_bit_for_bit():
    """TermMatches.bm25 / bm25_at add the terms with one np.bincount: the same float64
    sums as ``scores[slots] += part`` term by term (up to 12 terms on one slot)."""
    rng = np.random.default_rng(8)
    for trial in range(230):
        # the last 30: more slots than DENSE_SLOTS and few matches, the sparse sum
        big = trial >= 200
        n = int(rng.integers(term_matches.DENSE_SLOTS + 1, 90_000)) if big else int(rng.integers(50, 3000))
        n_terms = int(rng.integers(1, 13))
        most = n // 400 if big else n // 2
        slots = [np.sort(rng.choice(n, size=int(rng.integers(0, most + 1)), replace=False)).astype(np.int32)
                 for _ in range(n_terms)]
        wtf = [rng.uniform(0.5, 40.0, size=s.size).astype(np.float32) for s in slots]
        doclen = rng.integers(1, 300, size=n).astype(np.float32)
        idf = rng.uniform(1e-6, 9.0, size=n_terms)
        m = term_matches.TermMatches([f"t{i}" for i in range(n_terms)], slots, wtf)
        loop = np.zeros(n)
        for s, w, i in zip(slots, wtf, idf):
            loop[s] += term_matches.bm25_term(w, doclen[s], 61.3, float(i))
        assert m.bm25(doclen, idf, 61.3).tobytes() == loop.tobytes(), trial
        at = m.union(n)
        assert not big or at.size * term_matches.SPARSE_SHARE < n  # the sparse sum, when big
        assert m.bm25_at(doclen, idf, 61.3, at).tobytes() == loop[at].tobytes(), trial


def test_tfidf_at_follows_the_delta_and_a_rebuild(tmp_path):
    """tfidf_at (its columns kept for the query's words) after a write in the delta and
    after a rebuild (new base postings, refitted model): the dense scores' numbers."""
    store = TierStore(tmp_path / "a.db")
    store.capture_many(random_entries(1500))
    words = ["retry", "backoff", "cache", "jitter"]

    def check() -> None:
        m = store.postings()
        slots = np.arange(0, len(m.ids), 7)
        # the dense product rounds its own way: equal to 1e-12 (test_postings_fast_paths)
        np.testing.assert_allclose(m.tfidf_at(words, slots), m.tfidf_scores(words)[slots],
                                   rtol=1e-12, atol=0)

    check()
    check()  # the columns kept for these words
    store.capture(Entry.create(id="d1", title="retry cache cache", description="jitter"))
    assert store.postings().delta_W
    check()
    # a rebuild: every slot moves to new base postings (the first rows deleted first)
    for i in range(40):
        store.delete(f"e{i}")
    store.capture_many(random_entries(400, seed=3, prefix="r"))
    assert not store.postings().delta_W
    check()
    store.close()


def test_bm25_from_the_kept_norms_equals_bm25_term_bit_for_bit():
    """A term's BM25 from its slots' norms gathered out of every slot's (TermScores.norms,
    kept for the last lengths and average length) is bm25_term's, bit for bit; new lengths
    or a new average length make new norms; a tier past NORM_SLOTS keeps none."""
    rng = np.random.default_rng(21)
    memo = TermScores(1 << 20)
    for avglen in (17.25, 17.25, 3.0, 61.3333):
        doclen = rng.integers(1, 200, 5000).astype(np.float32)
        norms = memo.norms(doclen, avglen)
        assert memo.norms(doclen, avglen) is norms  # kept for the same lengths and average
        for idf in (1e-6, 0.4, 7.25):
            slots = np.sort(rng.choice(5000, size=300, replace=False))
            wtf = rng.integers(1, 40, 300).astype(np.float32)
            got = term_matches.bm25_of_norm(wtf, memo.norms(doclen, avglen)[slots], idf)
            assert got.tobytes() == term_matches.bm25_term(wtf, doclen[slots], avglen, idf).tobytes()
    assert memo.norms(np.ones(term_matches.NORM_SLOTS + 1, dtype=np.float32), 2.0) is None
