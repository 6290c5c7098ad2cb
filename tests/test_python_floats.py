"""The FTS-only scan's Python-float paths (issue 16, session 19) against the NumPy code
they stand in for, bit for bit: text relevance (brain/relevance.py), freshness
(brain/signals.py) and the graph seeds' order (brain/stages.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiervault.brain import relevance, signals
from tiervault.brain.stages import seed_order
from tiervault.brain.context import ScoringContext
from tiervault.brain.pool import Pool
from tiervault.brain.weights import WeightSet, base_weights
from tiervault.config.settings import BrainConfig
from tiervault.vault.filters import Filters
from tiervault.vault.scoring import top_k

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


# cosines as a hybrid pool holds them: NaN (no vector), -0.0, ties, the floor itself
COSINE = st.one_of(st.sampled_from([math.nan, 0.0, -0.0, 0.05, 1.0, -1.0, 0.5]),
                   st.floats(min_value=-1.0, max_value=1.0, allow_nan=False))
PROXIMITY = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0))


def _hybrid_ctx(lexical, tfidf, cosines, proximity, config: BrainConfig, weights=None) -> ScoringContext:
    ctx = _ctx(lexical, tfidf, None, config,
               weights if weights is not None else base_weights(True).tolist())
    ctx.qvec = np.ones(4, dtype=np.float32)
    ctx.cosines = np.array(cosines, dtype=np.float64)
    if proximity is not None:
        ctx.pairs = [("a", "b")]
        ctx.proximity = np.array(proximity, dtype=np.float64)
    return ctx


@settings(max_examples=400, deadline=None)
@given(data=st.data(), n=st.integers(1, 60), with_pairs=st.booleans(),
       floor=st.sampled_from([0.05, 0.0, 0.9]), gain=st.sampled_from([1.0, 1.33]),
       tfidf_share=st.sampled_from([0.2, 0.0]))
def test_the_hybrid_python_floats_give_the_numpy_bits(data, n, with_pairs, floor, gain, tfidf_share):
    lexical = data.draw(st.lists(SCORE, min_size=n, max_size=n))
    tfidf = data.draw(st.lists(SCORE, min_size=n, max_size=n))
    cosines = data.draw(st.lists(COSINE, min_size=n, max_size=n))
    proximity = data.draw(st.lists(PROXIMITY, min_size=n, max_size=n)) if with_pairs else None
    config = BrainConfig(vector_floor=floor, vector_gain=gain, hybrid_tfidf_share=tfidf_share)
    _assert_same(_hybrid_ctx(lexical, tfidf, cosines, proximity, config))


@pytest.mark.parametrize("lexical, cosines, proximity", [
    ([0.0, 0.0], [math.nan, math.nan], None),  # no vector at all: every cosine -1
    ([1.0, 2.0], [0.01, 0.02], [0.0, 0.5]),  # every cosine under the floor
    ([1.0, 2.0, 2.0], [-0.0, 0.05, 1.0], [1.0, 0.0, 1.0]),  # -0.0, the floor, the top
    ([1.0, math.inf], [0.3, 0.4], None),  # not finite: the NumPy path
    ([1.0, 2.0], [0.3, math.inf], None),  # ... a cosine too
    ([1.0, 2.0], [0.3, 0.4], [0.5, math.nan]),  # ... a proximity too
])
def test_hybrid_edge_pools(lexical, cosines, proximity):
    _assert_same(_hybrid_ctx(lexical, [0.5] * len(lexical), cosines, proximity, BrainConfig()))


def test_hybrid_zero_text_weights_score_zero_either_way():
    weights = [0.0] * len(base_weights(True))
    _assert_same(_hybrid_ctx([1.0, 2.0], [0.5, 0.1], [0.2, math.nan], [0.1, 0.0], BrainConfig(), weights))


def test_the_fast_path_answers_a_hybrid_scan(monkeypatch):
    """A hybrid scan's relevance without memories, PRF or LSA scores takes the Python-float
    path (fails when it goes to the NumPy one), which gives R, semantic and vector signals."""
    ctx = _hybrid_ctx([1.0, 4.0, 2.0], [0.2, 0.4, 0.0], [0.75, math.nan, 0.5], [0.0, 1.0, 0.5],
                      BrainConfig(vector_floor=0.25))

    def refused(_ctx):
        raise AssertionError("the NumPy path")
    monkeypatch.setattr(relevance, "array_relevance", refused)
    got = relevance.text_relevance(ctx)
    assert got.vector.tolist() == [1.0, 0.0, 0.5] and ctx.lsa is None
    assert got.entries[1] == got.semantic[1] and got.entries.dtype == np.float64


NOW = 1_700_000_000.0
DAY = 86_400.0
# times around NOW: past, future, equal to now, far past, missing (None)
TIME = st.one_of(st.none(), st.sampled_from([NOW, NOW - DAY, NOW + DAY, 0.0, NOW - 0.5]),
                 st.floats(min_value=NOW - 4000 * DAY, max_value=NOW + 400 * DAY))


def _decay_bits(updated, created, valid_from, valid_until, now, half_life):
    got = signals.freshness(updated, created, valid_from, valid_until, now, half_life)
    want = signals.temporal_decay(*(np.array(t, dtype=np.float64)
                                    for t in (updated, created, valid_from, valid_until)),
                                  now, half_life)
    return got.dtype.str + got.tobytes().hex(), want.dtype.str + want.tobytes().hex()


@settings(max_examples=400, deadline=None)
@given(data=st.data(), n=st.integers(0, 50), windows=st.booleans(),
       half_life=st.sampled_from([365.0, 30.0, 0.5]))
def test_freshness_gives_temporal_decays_bits(data, n, windows, half_life):
    cols = [data.draw(st.lists(TIME, min_size=n, max_size=n)) for _ in range(3)]
    until = (data.draw(st.lists(TIME, min_size=n, max_size=n)) if windows else [None] * n)
    got, want = _decay_bits(*cols, until, NOW, half_life)
    assert got == want


@pytest.mark.parametrize("updated, created, valid_from, valid_until", [
    ([None], [None], [None], [None]),  # no time at all: new
    ([NOW], [NOW], [NOW], [NOW]),  # a window of no length ending now
    ([NOW], [NOW], [NOW + DAY], [NOW + DAY]),  # ... in the future
    ([None], [None], [None], [NOW + DAY]),  # a window with no start
    ([NOW - DAY], [None], [NOW + 2 * DAY], [NOW - DAY]),  # a window that ends before it starts
    ([NOW - DAY], [None], [NOW - 1e-300], [NOW + 1e-9]),  # a tiny zone: the ramp overflows
    ([NOW - DAY, math.nan], [NOW, NOW], [None, None], [None, None]),  # NaN: the NumPy path
    ([NOW - DAY, 5], [NOW, NOW], [None, None], [None, NOW]),  # an integer time: NumPy path
    ([NOW - DAY], [NOW], [None], [math.inf]),  # not finite: the NumPy path
])
def test_freshness_edges(updated, created, valid_from, valid_until):
    got, want = _decay_bits(updated, created, valid_from, valid_until, NOW, 365.0)
    assert got == want


REL = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.25, 0.75]), st.floats(0.0, 1.0))


@settings(max_examples=400, deadline=None)
@given(rel=st.lists(REL, min_size=1, max_size=60), share=st.sampled_from([0.5, 0.0, 1.0]),
       k=st.integers(0, 8))
def test_seed_order_is_top_ks_unless_a_tie_sits_at_the_cut(rel, share, k):
    a = np.array(rel)
    cut = share * a.max()
    want = top_k(a, k, (a > 0) & (a >= cut)).tolist()
    got = seed_order(rel, cut, k)
    passing = sorted((-v for v in rel if v > 0 and v >= cut))
    tie = k > 0 and len(passing) > k and passing[k - 1] == passing[k]
    assert got is None if tie else got == want


@settings(max_examples=200, deadline=None)
@given(hops=st.dictionaries(st.sampled_from([f"e{i}" for i in range(12)]), st.sampled_from([1, 2, 3, 0])),
       ids=st.lists(st.sampled_from([f"e{i}" for i in range(15)]), max_size=20))
def test_hop_proximity_is_graph_proximity_of_the_hop_array(hops, ids):
    want = signals.graph_proximity(np.array([hops.get(e, -1) for e in ids], dtype=np.int64))
    got = signals.hop_proximity(hops, ids)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
