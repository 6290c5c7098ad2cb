"""Modulations: each formula to 1e-6 on random data, the folded pass equals the unfolded
one, and the token grammar round-trips and refuses what it does not know."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiervault.brain import modulation as mod
from tiervault.brain.modulation_spec import Modulations, Target, parse_modulations
from tiervault.errors import QueryError, ValidationError


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    m = rng.standard_normal((n, d)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(5))
def test_folded_single_product_equals_unfolded_terms(seed):
    rng = np.random.default_rng(seed)
    m = _unit_rows(rng, 300, 32)
    q, a, b, x1, x2 = (mod.unit(rng.standard_normal(32)) for _ in range(5))
    t = mod.trajectory_direction(a, b)
    share = mod.TRAJECTORY_SHARE
    unfolded = (1 - share) * (m @ q) + share * (m @ t)
    unfolded = mod.suppress(unfolded, m, [x1, x2], [0.7, 0.2])
    u = mod.fold_direction(q, trajectory=t, suppress=[x1, x2], suppress_weights=[0.7, 0.2])
    np.testing.assert_allclose(m @ u, unfolded, atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_each_formula(seed):
    rng = np.random.default_rng(100 + seed)
    m = _unit_rows(rng, 200, 16)
    q = mod.unit(rng.standard_normal(16))
    s = m @ q
    x = mod.unit(rng.standard_normal(16))
    np.testing.assert_allclose(mod.suppress(s, m, [x], [0.5]), s - 0.5 * (m @ x), atol=1e-6)
    examples = m[:3]
    c = mod.centroid_query(q, examples, 0.3)
    expect = 0.3 * q + 0.7 * examples.mean(axis=0)
    np.testing.assert_allclose(c, expect / np.linalg.norm(expect), atol=1e-6)
    ages = rng.uniform(0, 400, 200).astype(np.float32)
    np.testing.assert_allclose(mod.reciprocal_decay(ages, 30), 1 / (1 + ages / 30), rtol=1e-6)
    np.testing.assert_allclose(mod.exponential_decay(ages, 30), 0.5 ** (ages / 30), rtol=1e-5)
    t = mod.trajectory_direction(m[0], m[1])
    np.testing.assert_allclose(t, (m[1] - m[0]) / np.linalg.norm(m[1] - m[0]), atol=1e-6)


def test_decay_unknown_age_is_neutral_and_half_life_halves():
    f = mod.reciprocal_decay(np.array([np.nan, 0.0, 30.0]), 30)
    np.testing.assert_allclose(f, [1.0, 1.0, 0.5])
    g = mod.exponential_decay(np.array([np.nan, 60.0]), 30)
    np.testing.assert_allclose(g, [1.0, 0.25])
    with pytest.raises(ValidationError, match="half-life 0 days is not positive"):
        mod.reciprocal_decay(np.zeros(2), 0)


def test_bad_arguments_raise_validation_errors_that_name_the_value():
    """The pure functions refuse what the token grammar would never produce, in the
    project's error tree (ValidationError is also a ValueError) and naming the value."""
    cases = [
        (lambda: mod.exponential_decay(np.zeros(2), -3), "decay", "half-life -3 days"),
        (lambda: mod.centroid_query(np.ones(4), np.zeros((0, 4))), "centroid", r"shape \(0, 4\)"),
        (lambda: mod.fold_direction(np.ones(4), suppress=[np.ones(4)], suppress_weights=[]),
         "suppress", "1 directions but 0 weights"),
        (lambda: mod.mmr(np.ones(3), np.eye(3, dtype=np.float32), 2, lam=1.5), "diverse",
         "lambda 1.5 is outside"),
    ]
    for call, field, message in cases:
        with pytest.raises(ValidationError, match=message) as info:
            call()
        assert info.value.field == field and isinstance(info.value, ValueError)


def test_mmr_matches_a_direct_implementation_and_trades_relevance_for_spread():
    rng = np.random.default_rng(7)
    base = _unit_rows(rng, 5, 24)
    # Five tight clusters of ten near-copies: pure relevance takes one cluster first.
    m = np.repeat(base, 10, axis=0) + 0.01 * rng.standard_normal((50, 24)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    # Relevance follows the clusters (cluster 0 best), so plain top-10 is one cluster.
    rel = 1.0 - 0.1 * np.repeat(np.arange(5), 10) + 0.05 * rng.uniform(0, 1, 50)
    res = mod.mmr(rel, m, 10, lam=0.5)
    # Direct, slow reference.
    chosen: list[int] = []
    for _ in range(10):
        best, best_v = -1, -np.inf
        for i in range(50):
            if i in chosen:
                continue
            pen = max((float(m[i] @ m[j]) for j in chosen), default=0.0)
            v = 0.5 * rel[i] - 0.5 * pen
            if v > best_v:
                best, best_v = i, v
        chosen.append(best)
    assert res.order.tolist() == chosen
    assert res.order[0] == int(np.argmax(rel))
    plain = np.argsort(-rel)[:10]

    def spread(idx: np.ndarray) -> float:
        sims = m[idx] @ m[idx].T
        return float(sims[np.triu_indices(len(idx), 1)].mean())

    assert spread(res.order) < spread(plain)
    pure = mod.mmr(rel, m, 10, lam=1.0)
    assert pure.order.tolist() == plain.tolist()


def test_grammar_parses_every_token():
    m = parse_modulations('suppress:deprecated suppress:"legacy orm" suppress:@old-api '
                          'centroid:a,b:0.3 trajectory:"sync io"->@async-io decay:30:exp '
                          'diverse:0.6 pool:200')
    assert m.suppress == (Target(text="deprecated"), Target(text="legacy orm"),
                          Target(entry_id="old-api"))
    assert m.centroid == ("a", "b") and m.centroid_alpha == pytest.approx(0.3)
    assert m.trajectory == (Target(text="sync io"), Target(entry_id="async-io"))
    assert (m.decay_days, m.decay_kind, m.diverse, m.pool) == (30.0, "exp", 0.6, 200)
    assert parse_modulations(str(m)) == m
    assert parse_modulations("diverse").diverse == mod.DEFAULT_DIVERSE_LAMBDA
    assert parse_modulations("").empty and parse_modulations(None).empty


def test_query_text_is_never_touched_by_the_grammar():
    # flexvec rewrote "similar:recent changes" into "decay changes"; here tokens are only
    # tokens, and a word that is not a token is an error, not a rewrite.
    with pytest.raises(QueryError, match="unknown token 'recent'"):
        parse_modulations("recent changes")


@pytest.mark.parametrize("bad, fragment", [
    ("similar:x", "unknown token 'similar:x'"),
    ("decay:", "half-life"),
    ("decay:-3", "positive"),
    ("decay:abc", "not a number"),
    ("decay:30:linear", "decay kind"),
    ("diverse:2", "within [0, 1]"),
    ("pool:0", "from 1 to"),
    ("pool:ten", "whole number"),
    ("centroid:", "entry ids"),
    ("centroid:Bad", "not an entry id"),
    ("centroid:a,b:nan", "finite"),
    ("trajectory:a", "FROM->TO"),
    ("suppress:", "empty target"),
    ("suppress:@NOT_AN_ID", "not an entry id"),
    ('suppress:"open', "quote"),
    ("pool:5 pool:6", "given twice"),
])
def test_malformed_tokens_are_named(bad, fragment):
    with pytest.raises(QueryError) as err:
        parse_modulations(bad)
    assert fragment in str(err.value)
    assert err.value.field == "modulate"


def test_typed_keywords_equal_tokens_and_are_checked():
    typed = Modulations.build(None, suppress=["deprecated"], decay_days=30, diverse=0.7, pool=50)
    assert typed == parse_modulations("suppress:deprecated decay:30 diverse pool:50")
    merged = Modulations.build("decay:10", pool=20)
    assert (merged.decay_days, merged.pool) == (10.0, 20)
    with pytest.raises(QueryError, match="unknown modulation 'decay'"):
        Modulations.build(None, decay=3)
    with pytest.raises(QueryError, match="pool must be an integer"):
        Modulations.build(None, pool="5")
    with pytest.raises(QueryError, match="must be a number"):
        Modulations.build(None, diverse=True)


def test_needs_vectors_lists_what_a_lexical_vault_cannot_do():
    m = parse_modulations("suppress:x suppress:@y decay:3 pool:9 diverse")
    assert m.needs_vectors == ("suppress:TEXT", "diverse")
    assert parse_modulations("suppress:@y decay:3 pool:9").needs_vectors == ()


_ids = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,10}", fullmatch=True)
_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1,
                 max_size=12).filter(lambda s: s.strip() == s and s and "->" not in s
                                     and not s.startswith("@"))
_targets = st.one_of(_texts.map(lambda t: Target(text=t)), _ids.map(lambda i: Target(entry_id=i)))


@settings(max_examples=150, deadline=None)
@given(suppress=st.lists(_targets, max_size=3), centroid=st.lists(_ids, max_size=3),
       alpha=st.sampled_from([0.5, 0.25, 1.0]), traj=st.none() | st.tuples(_targets, _targets),
       days=st.none() | st.sampled_from([1.0, 7.5, 365.0]), kind=st.sampled_from(["reciprocal", "exp"]),
       diverse=st.none() | st.sampled_from([0.7, 0.0, 0.35]), pool=st.none() | st.integers(1, 5000))
def test_any_value_round_trips_through_its_token_string(suppress, centroid, alpha, traj, days,
                                                        kind, diverse, pool):
    m = Modulations(suppress=tuple(suppress), centroid=tuple(centroid),
                    centroid_alpha=alpha if centroid else 0.5, trajectory=traj, decay_days=days,
                    decay_kind=kind if days is not None else "reciprocal", diverse=diverse,
                    pool=pool)
    assert parse_modulations(str(m)) == m
