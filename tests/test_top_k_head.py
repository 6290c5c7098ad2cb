"""A top k that reads the filter mask at the best scores first (scoring.top_k_from_head)
picks what the top k over the whole mask picks, or declines (None) -- never another
answer; and a tier's top k through it equals the dense definition, ties included."""

from __future__ import annotations

import numpy as np

from tiervault.vault import lexicon
from tiervault.vault.entry import Entry
from tiervault.vault.filters import Filters
from tiervault.vault.scoring import fts5_idf, top_k, top_k_from_head
from tiervault.vault.store import TierStore
from tiervault.vault.tokenizer import STEMMER

from tests.test_vault_manager import random_entries


def test_the_head_picks_what_the_whole_mask_picks_or_declines():
    rng = np.random.default_rng(5)
    decided = declined = 0
    for trial in range(3300):
        # long arrays too (the last 300): their cut comes from a sample of the scores
        n = int(rng.integers(1, 900)) if trial < 3000 else int(rng.integers(5_000, 60_000))
        # few distinct values (ties inside the top k and at its cut) or many
        levels = int(rng.choice([3, 40, 100_000]))
        scores = rng.integers(0, levels, size=n).astype(np.float64) / 7.0
        mask = rng.random(n) < rng.choice([0.05, 0.5, 0.9, 1.0])
        k = int(rng.integers(1, 40))
        asked: list[np.ndarray] = []

        def passes(idx: np.ndarray) -> np.ndarray:
            assert np.all(np.diff(idx) > 0)  # sorted, distinct, as Postings.mask needs
            asked.append(idx)
            return mask[idx].copy()

        got = top_k_from_head(scores, k, passes, 2 * k + 16)
        expected = top_k(scores, k, mask & (scores > 0))
        if got is None:
            declined += 1
            continue
        decided += 1
        assert got.tolist() == expected.tolist(), trial
        assert sum(a.size for a in asked) < n  # the mask was read at part of the array only
    # both outcomes happen on these arrays: the test can tell a head that always declines
    assert decided > 600 and declined > 600


def test_a_tie_at_the_cut_is_left_to_the_whole_mask():
    scores = np.concatenate([[5.0] * 3, [4.0] * 10, np.linspace(3.0, 0.01, 200)])
    # the 4th..13th scores tie: a top 5 cuts through them
    assert top_k_from_head(scores, 5, lambda idx: np.ones(idx.size, dtype=bool), 26) is None
    # a top 3 ends before the tie: decided from the head
    got = top_k_from_head(scores, 3, lambda idx: np.ones(idx.size, dtype=bool), 22)
    assert got is not None and got.tolist() == [0, 1, 2]
    # too few passing in the head (a narrow filter): declined, not answered short
    assert top_k_from_head(scores, 3, lambda idx: np.zeros(idx.size, dtype=bool), 22) is None


def test_a_tiers_filtered_top_k_equals_the_dense_top_k_with_many_ties(tmp_path, monkeypatch):
    answered: list[bool] = []

    def counted(*args, **kwargs):
        got = top_k_from_head(*args, **kwargs)
        answered.append(got is not None)
        return got
    monkeypatch.setattr(lexicon, "top_k_from_head", counted)
    # the head tried at any union (a sparse union under the kept mask is masked whole:
    # tests/test_filtered_top_k.py), so both of its answers are met here
    monkeypatch.setattr(lexicon, "HEADLESS", 0)
    store = TierStore(tmp_path / "a.db")
    twins = [Entry.create(id=f"t{i:03d}", title="retry backoff", description="jitter cache",
                          type=("pattern", "rule", "decision")[i % 3])
             for i in range(300)]  # the same words and lengths: equal scores
    store.capture_many(twins + random_entries(1500))
    m = store.postings()
    for words, filters, k in ((["retry"], Filters(now=1.8e9), 10),
                              (["jitter"], Filters(now=1.8e9), 4),
                              (["retry", "backoff"], Filters(now=1.8e9), 320),
                              (["cache", "jitter"], Filters(now=1.8e9, include_expired=True), 9),
                              (["retry", "jitter"], Filters(now=1.8e9, types=("rule",)), 25),
                              (["cache"], Filters(now=1.8e9, types=("decision", "pattern")), 7),
                              (["backoff", "the"], Filters(now=1.8e9, domains=("db",)), 30)):
        stems = list(dict.fromkeys(s for s in STEMMER.stems(words).values() if s))
        matches = m.matches(stems)
        n = m.n_alive
        dense = m.bm25(matches, fts5_idf(n, matches.df), m.total_len / n)
        expected = top_k(dense, k, m.mask(filters) & (dense > 0))
        hits = store.lexical_top_k(stems, store.term_stats(stems), filters, k)
        assert [h.id for h in hits] == m.ids.take(expected)
        assert [h.score for h in hits] == dense[expected].tolist()
    store.close()
    # both paths were taken (a category filter goes straight to the whole mask)
    assert True in answered and False in answered and len(answered) == 4
