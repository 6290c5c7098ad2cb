"""A careless agent: the learned weights move only as far as the agent's verdicts are
trusted (``learning.trusted``), over real SQLite tiers, and a noisy agent costs the
agent set's held-out queries little (eval/feedback_sim.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import learning
from tiervault.brain.adaptation import MAX_EVENTS
from tiervault.brain.weights import base_weights

from brain_vault import fixed_brain, good_and_loud

BASE = base_weights(False)
TOPICS = ["kafka consumer lag", "postgres vacuum bloat", "redis eviction policy",
          "jwt token rotation", "terraform state locking", "docker layer caching",
          "celery task retries", "grpc deadline propagation", "s3 multipart uploads",
          "ldap group sync", "mysql replica lag"]


@pytest.fixture
def manager(tmp_path: Path):
    yield from good_and_loud(tmp_path, TOPICS)


def test_weights_follow_the_trust_pure():
    target = np.array([0.2, 0.0, 0.3, 0.1, 0.1, 0.1, 0.2])
    assert learning.trusted(target, BASE, 1.0) == pytest.approx(target)
    assert learning.trusted(target, BASE, 0.5) == pytest.approx((target + BASE) / 2)
    assert learning.trusted(target, BASE, 0.0) == pytest.approx(BASE)
    assert learning.trusted(target, BASE, None) == pytest.approx(target)  # unchecked: the rails
    assert learning.trusted(target, BASE, 0.5).sum() == pytest.approx(1.0)


def test_a_partly_trusted_agent_moves_the_weights_part_of_the_way(manager, monkeypatch):
    """7 topics judged (the answer accepted, the loud rule dismissed), 4 the other way round:
    the pairs agree with text relevance only in part, so the refit at the 30th action aims
    at the fitted step times the trust, not the whole step (the one-refit step bound is
    lifted so that the target, not the step, decides)."""
    monkeypatch.setattr(learning, "MAX_STEP", 2.0)
    b = fixed_brain(manager)
    for i, topic in enumerate(TOPICS):
        good, loud = ("good", "loud") if i < 7 else ("loud", "good")
        b.feedback(topic, f"{good}-{i}", "accepted")
        b.feedback(topic, f"{loud}-{i}", "dismissed")
    for i in range(8):  # accepts without dismissals: no pairs, 30 actions in all
        b.feedback(f"{TOPICS[i]} checklist", f"good-{i}", "accepted")
    pairs = learning.pairs_from_events(manager.store("agent").feedback_events(MAX_EVENTS))
    trust = learning.nudge_trust(pairs, base_weights(True))
    assert len(pairs) == len(TOPICS) and trust is not None and 0.1 < trust < 0.9
    fit = learning.fit_pairwise(pairs, BASE)
    whole = learning.bounded(fit, BASE, BASE)
    part = learning.bounded(learning.trusted(fit, BASE, trust), BASE, BASE)
    ws = b.weights()
    assert ws.adapted and len(b.adaptation.history(10)) == 1
    assert np.array(ws.values) == pytest.approx(part, abs=1e-5)
    assert np.abs(whole - part).sum() > 1e-3  # the whole step would have gone further
    assert np.abs(np.array(ws.values) - BASE).sum() < np.abs(whole - BASE).sum()


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

