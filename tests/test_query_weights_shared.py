"""A query's TF-IDF weights (vault/tfidf_query.py ``query_weights``): tf * idf in Python
floats, the norm and the division NumPy's -- the same bits as the arrays' formula --
and the words' content stems (stop words out) made once a query for every tier
(issue 16, session 21)."""

from __future__ import annotations

import numpy as np

from tiervault.vault import tokenizer
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS

from tests.test_vault_manager import WORDS, random_entries


def _reference(words: list[str], m) -> tuple[np.ndarray, np.ndarray] | None:
    """The weights as the arrays' formula made them (issue 16, session 12's code)."""
    stems = STEMMER.stems(words)
    stop = STOP_WORDS.get()
    counts: dict[int, float] = {}
    for tid in m.vocab.ids([stems[w] for w in words if w not in stop]):
        if tid is None or tid >= m.tfidf_terms:
            continue
        counts[tid] = counts.get(tid, 0.0) + 1.0
    if not counts:
        return None
    tids = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    x = np.fromiter(counts.values(), dtype=np.float64, count=len(counts)) * m.idf[tids]
    norm = float(np.sqrt(np.dot(x, x)))
    return tids, (x / norm if norm > 0 else x)


def test_query_weights_are_the_arrays_formula_bit_for_bit(tmp_path):
    store = TierStore(tmp_path / "w.db")
    store.capture_many(random_entries(700, seed=13))
    m = store.postings()
    rng = np.random.default_rng(2)
    cases = [["the", "retry", "retry", "and", "cache"], ["zzzz", "of"], ["the"], [str(WORDS[0])] * 3]
    cases += [[str(w) for w in rng.choice(WORDS + ["the", "of", "zzz", "is"], size=int(rng.integers(1, 7)))]
              for _ in range(60)]
    for words in cases:
        got, want = m.query_tfidf(words), _reference(words, m)
        if want is None:
            assert got is None, words
            continue
        assert got.tids.tolist() == want[0].tolist(), words
        assert got.weights.tobytes() == want[1].tobytes(), words
    store.close()


def test_the_content_stems_are_made_once_for_every_tier(tmp_path, monkeypatch):
    stores = [TierStore(tmp_path / f"{i}.db") for i in range(3)]
    for i, s in enumerate(stores):
        s.capture_many(random_entries(200, seed=i, prefix=f"t{i}e"))
    mirrors = [s.postings() for s in stores]
    words = ["retry", "the", "cache", "backoff"]
    STEMMER.stems(words)  # stemmed by the query's terms first, as a search does
    calls: list[int] = []
    real = tokenizer.STEMMER.stems

    def counted(ws):
        calls.append(1)
        return real(ws)
    monkeypatch.setattr(tokenizer.STEMMER, "stems", counted)
    got = [m.query_tfidf(words) for m in mirrors]
    assert all(q is not None for q in got)
    assert len(calls) == 1  # the same words: one stemming for three tiers
    for s in stores:
        s.close()
