"""The learned weights' step is checked on held-out result lists (brain/shrinkage.py) and
follows the agent's trust (learning.trusted); a careless agent costs held-out queries
little (the agent set's simulation, eval/feedback_sim.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import learning, shrinkage
from tiervault.brain.shapes import SIGNALS
from tiervault.brain.weights import base_weights
from tiervault.vault.rows import FeedbackEvent

BASE = base_weights(False)
SEM = SIGNALS.index("semantic")
PRIORS = [SIGNALS.index(k) for k in ("severity", "temporalDecay", "graphProximity")]


def lists(n: int, favourite) -> list[FeedbackEvent]:
    """``n`` result lists, each one accepted and one dismissed entry; in list g the
    accepted entry matches the text a little better and is high on the prior
    ``favourite(g)``, the dismissed one on the other two."""
    out, seq = [], 0
    for g in range(n):
        fav = favourite(g)
        acc, dis = [0.0] * len(SIGNALS), [0.0] * len(SIGNALS)
        acc[SEM], dis[SEM] = 0.82, 0.8
        for k in PRIORS:
            acc[k], dis[k] = (1.0, 0.0) if k == fav else (0.0, 1.0)
        for eid, action, s in ((f"a{g}", "accepted", acc), (f"d{g}", "dismissed", dis)):
            seq += 1
            ctx = learning.FeedbackContext(tuple(s), {}).to_json()
            out.append(FeedbackEvent(seq, f"topic {g}", eid, action, 0.0, "a", ctx))
    return out


def test_a_fit_that_holds_out_is_kept_whole():
    pairs = learning.pairs_from_events(lists(12, lambda g: PRIORS[0]))  # always severity
    assert len(np.unique(pairs.groups)) == 12
    w, lam = shrinkage.shrunk_fit(pairs, BASE)
    assert lam == 1.0
    assert w == pytest.approx(learning.fit_pairwise(pairs, BASE))
    assert w[PRIORS[0]] > BASE[PRIORS[0]] + 0.05


def test_a_fit_that_orders_only_its_own_lists_keeps_the_base():
    """Each list prefers another prior (list g: prior g mod 3, the fold it is held out in):
    the lists together can be fitted, but what the other folds teach misorders every
    held-out list, so none of the step is taken."""
    pairs = learning.pairs_from_events(lists(12, lambda g: PRIORS[g % 3]))
    full = learning.fit_pairwise(pairs, BASE)
    assert np.abs(full - BASE).sum() > 0.01  # the fit alone would move
    w, lam = shrinkage.shrunk_fit(pairs, BASE)
    assert lam == 0.0 and w == pytest.approx(BASE)
    assert np.array_equal(w, shrinkage.shrunk_fit(pairs, BASE)[0])  # deterministic


def test_few_lists_are_not_held_out():
    pairs = learning.pairs_from_events(lists(shrinkage.MIN_LISTS - 1, lambda g: PRIORS[g % 3]))
    assert shrinkage.held_out_lambda(pairs, BASE) == 1.0
    assert shrinkage.held_out_lambda(learning.Pairs.empty(), BASE) == 1.0


def test_weights_follow_the_trust():
    target = np.array([0.2, 0.0, 0.3, 0.1, 0.1, 0.1, 0.2])
    assert learning.trusted(target, BASE, 1.0) == pytest.approx(target)
    assert learning.trusted(target, BASE, 0.5) == pytest.approx((target + BASE) / 2)
    assert learning.trusted(target, BASE, 0.0) == pytest.approx(BASE)
    assert learning.trusted(target, BASE, None) == pytest.approx(target)  # unchecked: the rails
    assert learning.trusted(target, BASE, 0.5).sum() == pytest.approx(1.0)


def test_a_careless_agent_costs_held_out_queries_little():
    """The judged agent, but each verdict random with probability 0.3 (the simulation's
    ``noisy`` policy), on the agent set's tune halving: the unseen half loses at most
    0.02 nDCG@10 after 100 actions."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from eval import feedback_sim as sim

    queries, qrels = sim.load_set()
    fed, unseen = sim.halves(queries, "tune")
    run = sim.run_policy("learned", "noisy", fed, unseen, qrels, checkpoints=(0, 100))
    before, after = run["curve"][0], run["curve"][-1]
    assert after["events"] == 100 and after["nudge_trust"] is not None
    assert before["unseen"] - after["unseen"] <= 0.02
