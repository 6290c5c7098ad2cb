"""The FTS-only text relevance in Python floats (brain/relevance.py, issue 16 session 19)
against the NumPy path it stands in for: the same float64 bits, every output."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiervault.brain import relevance
from tiervault.brain.context import ScoringContext
from tiervault.brain.pool import Pool
from tiervault.brain.weights import WeightSet, base_weights
from tiervault.config.settings import BrainConfig
from tiervault.vault.filters import Filters

# scores as the tiers give them: 0, -0.0, tiny, ties, large BM25 sums
SCORE = st.one_of(st.sampled_from([0.0, -0.0, 1.0, 0.5, 5e-324, 2.0 ** -1074, 12.75]),
                  st.floats(min_value=0.0, max_value=40.0, allow_nan=False))
LSA = st.one_of(st.sampled_from([0.0, -0.0, 1.0, 0.25]),
                st.floats(min_value=-1.0, max_value=1.0, allow_nan=False))


def _ctx(lexical, tfidf, lsa, config: BrainConfig, weights=None) -> ScoringContext:
    n = len(lexical)
    pool = Pool(ids=[f"e{i}" for i in range(n)], tiers=["agent"] * n, lexical=list(lexical),
                tfidf=list(tfidf))
    ctx = ScoringContext(query="q", mode="scan", limit=10, limit_given=False, filters=Filters(),
                         tiers=None, query_tags=[], query_domain=None, include_memories=False,
                         explain=True, fusion="signals", now=0.0, config=config)
    ctx.weights = WeightSet(tuple(weights if weights is not None else base_weights(False).tolist()))
    ctx.pool = pool
    ctx.lsa_raw = None if lsa is None else np.array(lsa, dtype=np.float64)
    return ctx


def _bits(a) -> bytes | None:
    return None if a is None else np.asarray(a).dtype.str.encode() + np.asarray(a).tobytes()


def _both(ctx: ScoringContext):
    fast = relevance.text_relevance(ctx)
    fast_lsa = (_bits(ctx.lsa), _bits(ctx.memory_lsa))
    ctx.lsa = ctx.memory_lsa = None
    slow = relevance.array_relevance(ctx)
    slow_lsa = (_bits(ctx.lsa), _bits(ctx.memory_lsa))
    return fast, fast_lsa, slow, slow_lsa


def _assert_same(ctx: ScoringContext) -> None:
    fast, fast_lsa, slow, slow_lsa = _both(ctx)
    for a, b in zip(fast, slow):
        assert _bits(a) == _bits(b)
    assert fast_lsa == slow_lsa


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(1, 60), with_lsa=st.booleans(),
       lsa_share=st.sampled_from([0.0, 0.2, 0.35]), tfidf_share=st.sampled_from([0.3, 0.2, 0.0]))
def test_python_floats_give_the_numpy_bits(data, n, with_lsa, lsa_share, tfidf_share):
    lexical = data.draw(st.lists(SCORE, min_size=n, max_size=n))
    tfidf = data.draw(st.lists(SCORE, min_size=n, max_size=n))
    lsa = data.draw(st.lists(LSA, min_size=n, max_size=n)) if with_lsa else None
    config = BrainConfig(lsa_share=lsa_share, tfidf_share=tfidf_share)
    _assert_same(_ctx(lexical, tfidf, lsa, config))


@pytest.mark.parametrize("lexical, tfidf, lsa", [
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),  # nothing matched: all +0.0
    ([-0.0, 2.0, 2.0], [-0.0, -0.0, 0.3], [-0.0, 0.4, 0.4]),  # -0.0 and ties at the top
    ([3.0], [0.0], [-0.5]),  # one candidate, a negative latent score
    ([1.0, 2.0], [0.5, 0.5], [math.nan, 0.3]),  # a tier without latent space: NumPy path
    ([1.0, math.inf], [0.5, 0.5], [0.1, 0.3]),  # not finite: NumPy path
])
def test_edge_pools(lexical, tfidf, lsa):
    _assert_same(_ctx(lexical, tfidf, lsa, BrainConfig()))


def test_a_zero_semantic_weight_scores_zero_either_way():
    weights = [0.0] * len(base_weights(False))
    _assert_same(_ctx([1.0, 2.0], [0.5, 0.1], [0.2, 0.9], BrainConfig(), weights))


def test_the_fast_path_answers_an_fts_only_scan():
    """The Python-float path is the one taken (its arrays are new float64 arrays of the
    pool's length) and it sets the scaled LSA the rows render."""
    ctx = _ctx([1.0, 4.0, 2.0], [0.2, 0.4, 0.0], [0.5, 0.25, 0.0], BrainConfig())
    got = relevance.text_relevance(ctx)
    assert got.entries.dtype == np.float64 and got.entries.shape == (3,)
    assert ctx.lsa.tolist() == [1.0, 0.5, 0.0] and ctx.memory_lsa.size == 0
    assert got.vector.tolist() == [0.0, 0.0, 0.0] and got.memories.size == 0
