"""The seven Brain signals and the weight rules, on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tiervault.brain import signals
from tiervault.brain.feedback import MAX_NUDGE, MAX_SAME_NUDGE, entry_nudges
from tiervault.brain.weights import FTS_ONLY, HYBRID, adapt, base_weights, normalise
from tiervault.errors import ConfigError

DAY = 86_400.0
NOW = 1_800_000_000.0
NAN = float("nan")


def test_semantic_blends_tfidf_and_lexical():
    # 0.2 * 0.5 + 0.8 * 0.25 = 0.3 ; values outside [0, 1] are clipped first
    got = signals.semantic(np.array([0.5, 0.0, 1.5]), np.array([0.25, 0.0, -1.0]))
    assert got == pytest.approx([0.3, 0.0, 0.2])
    assert signals.semantic(np.array([1.0]), np.array([0.0]), share=1.0) == pytest.approx([1.0])


def test_vector_is_zero_without_embeddings_and_clipped_with():
    assert signals.vector(None, 3).tolist() == [0.0, 0.0, 0.0]
    assert signals.vector(np.array([0.9, -0.2, NAN]), 3) == pytest.approx([0.9, 0.0, 0.0])


def test_severity_map():
    assert signals.severity(["critical", "warning", "suggestion", "other"]).tolist() == [1.0, 0.7, 0.4, 0.0]


def test_temporal_decay_half_life_from_updated_else_created():
    upd = np.array([NOW, NOW - 365 * DAY, NAN, NAN, NOW + 10 * DAY])
    crt = np.array([NOW, NOW - 900 * DAY, NOW - 730 * DAY, NAN, NOW])
    none = np.full(5, NAN)
    got = signals.temporal_decay(upd, crt, none, none, NOW, 365.0)
    # new -> 1; one half-life -> 0.5 (updated_at wins over created_at); two -> 0.25
    # (created_at used when updated_at is missing); no time -> 1; future -> 1
    assert got == pytest.approx([1.0, 0.5, 0.25, 1.0, 1.0])
    assert signals.temporal_decay(np.array([NOW - 100 * DAY]), np.array([NAN]), np.array([NAN]),
                                  np.array([NAN]), NOW, 365.0)[0] == pytest.approx(
        math.exp(-math.log(2) * 100 / 365))
    # a shorter half-life decays faster
    assert signals.temporal_decay(np.array([NOW - 30 * DAY]), np.array([NAN]), np.array([NAN]),
                                  np.array([NAN]), NOW, 30.0)[0] == pytest.approx(0.5)


def test_validity_window_full_for_75_percent_then_linear_ramp():
    start, end = NOW - 100 * DAY, NOW + 100 * DAY  # window 200 days, ramp zone 50 days
    times = [NOW - 90 * DAY, NOW + 49 * DAY, NOW + 50 * DAY, NOW + 75 * DAY, NOW + 90 * DAY,
             NOW + 100 * DAY, NOW + 120 * DAY]
    got = [signals.temporal_decay(np.array([start]), np.array([start]), np.array([start]),
                                  np.array([end]), t, 365.0)[0] for t in times]
    # remaining: 190, 51, 50, 25, 10, 0, -20 days -> 1, 1, 1 (=50/50), 0.5, 0.2, 0, 0
    assert got == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.2, 0.0, 0.0])
    # the window replaces the exponential: an old entry inside its window is at full strength
    old = NOW - 3000 * DAY
    assert signals.temporal_decay(np.array([old]), np.array([old]), np.array([NAN]),
                                  np.array([NOW + 3000 * DAY]), NOW, 365.0)[0] == 1.0
    # without valid_from the window starts at created_at: [NOW-35d, NOW+5d], zone 10 days
    assert signals.temporal_decay(np.array([NAN]), np.array([NOW - 35 * DAY]), np.array([NAN]),
                                  np.array([NOW + 5 * DAY]), NOW, 365.0)[0] == pytest.approx(0.5)


def test_tag_overlap_is_jaccard():
    got = signals.tag_overlap(["http", "Retry"], [["retry", "http"], ["retry", "db", "x"], [], ["db"]])
    # {http,retry} vs {retry,http} = 1; vs {retry,db,x}: 1/4; vs {}: 0/2; vs {db}: 0/3
    assert got == pytest.approx([1.0, 0.25, 0.0, 0.0])
    assert signals.tag_overlap([], [["a"]]).tolist() == [0.0]


def test_domain_match():
    assert signals.domain_match("API", ["api", "db", "Api"]).tolist() == [1.0, 0.0, 1.0]
    assert signals.domain_match(None, ["api"]).tolist() == [0.0]


def test_graph_proximity_by_hops():
    assert signals.graph_proximity(np.array([-1, 0, 1, 2, 3])) == pytest.approx([0, 0, 0.5, 1 / 3, 0])


def test_seed_weight_sets_are_normalised():
    fts = base_weights(False)
    assert fts.sum() == pytest.approx(1.0)
    assert fts == pytest.approx(np.array(FTS_ONLY) / 0.9)  # the seed's set sums to 0.9
    assert fts[1] == 0.0
    assert base_weights(True) == pytest.approx(np.array(HYBRID) / 0.9)  # also 0.9 in the seed
    over = base_weights(False, {"semantic": 0.5, "vector": 0.3})
    assert over.sum() == pytest.approx(1.0) and over[1] == 0.0  # no vector weight without vectors
    assert over[0] == pytest.approx(0.5 / (0.5 + 0.55))
    with pytest.raises(ConfigError):
        base_weights(False, {"semantik": 0.1})
    with pytest.raises(ConfigError):
        normalise((0, 0, 0, 0, 0, 0, 0))


@pytest.mark.parametrize("hybrid", [False, True])
def test_adaptation_threshold_and_formula(hybrid):
    base = base_weights(hybrid)
    # 29 non-failed actions (plus any number of failures): no change
    w, rate, adapted = adapt(base, {"accepted": 29, "modified": 0, "dismissed": 0, "failed": 50})
    assert not adapted and w == pytest.approx(base) and rate == 1.0
    # 30: rate = (20 + 0.5 * 4) / 30; semantic += (rate - 0.5) * 0.3; the rest rescale
    counts = {"accepted": 20, "modified": 4, "dismissed": 6, "failed": 3}
    w, rate, adapted = adapt(base, counts)
    assert adapted and rate == pytest.approx(22 / 30)
    sem = base[0] + (22 / 30 - 0.5) * 0.3
    assert w[0] == pytest.approx(sem)
    assert w[1:] == pytest.approx(base[1:] * (1 - sem) / (1 - base[0]))
    assert w.sum() == pytest.approx(1.0)


def test_adaptation_is_clamped_and_sums_to_one_in_every_state():
    base = base_weights(False)
    w, _, _ = adapt(base, {"accepted": 1000})
    assert w[0] == pytest.approx(base[0] + 0.15)
    w, _, _ = adapt(base, {"dismissed": 1000})
    assert w[0] == pytest.approx(base[0] - 0.15)
    for hybrid in (False, True):
        for acc in range(0, 60, 7):
            for dis in range(0, 60, 11):
                for mod in (0, 5, 40):
                    w, _, _ = adapt(base_weights(hybrid), {"accepted": acc, "dismissed": dis,
                                                           "modified": mod, "failed": 3})
                    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()


def test_entry_nudge_sign_similarity_age_and_bound():
    from tiervault.vault.rows import FeedbackEvent

    def ev(eid: str, query: str, action: str, at: float) -> FeedbackEvent:
        return FeedbackEvent(0, query, eid, action, at, "", "")  # no context: word similarity only

    ids = ["a", "b", "c", "d"]
    rows = [
        ev("a", "retry policy http", "accepted", NOW),           # same words: full similarity
        ev("b", "retry policy http", "dismissed", NOW),
        ev("c", "database migrations", "dismissed", NOW),        # unrelated query: no effect
        ev("d", "retry policy http", "accepted", NOW - 90 * DAY),  # one half-life old
    ]
    got = entry_nudges("What's the HTTP retry policy?", ids, rows, None, NOW)
    both = MAX_NUDGE + MAX_SAME_NUDGE  # the same words: the similar-query share and the own one
    assert got[0] == pytest.approx(both * math.tanh(1.0))
    assert got[1] == pytest.approx(-both * math.tanh(1.0))
    assert got[2] == 0.0
    assert got[3] == pytest.approx(both * math.tanh(0.5))
    many = [ev("a", "retry policy http", "accepted", NOW)] * 500
    assert 0 < entry_nudges("retry policy http", ["a"], many, None, NOW)[0] <= both
    # a similar, not the same, query (stem Jaccard 3/4 >= 0.7, < 0.8) shares only MAX_NUDGE
    near = entry_nudges("retry policy http client", ["a"], many, None, NOW)[0]
    assert near == pytest.approx(MAX_NUDGE * math.tanh(500 * 0.75))
