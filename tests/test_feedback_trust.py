"""Feedback guard rails and generalisation over real SQLite tiers: how far an agent's
verdicts are trusted to move the queries it gave them on (the text agreement of its
pairs), and that consistent feedback reaches a query it was never given on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import feedback, learning
from tiervault.brain.shapes import SIGNALS
from tiervault.brain.weights import base_weights

from brain_vault import fixed_brain, good_and_loud

BASE = base_weights(False)
SEV = SIGNALS.index("severity")
#: 12 topics: each has the answer (matches the words best, a suggestion) and a loud
#: incident rule (critical, matches a little worse) that its severity lifts above the
#: answer. The last topic is never given feedback.
TOPICS = ["kafka consumer lag", "postgres vacuum bloat", "redis eviction policy",
          "jwt token rotation", "terraform state locking", "docker layer caching",
          "celery task retries", "grpc deadline propagation", "s3 multipart uploads",
          "ldap group sync", "mysql replica lag", "nginx upstream timeout"]
FED, UNSEEN = TOPICS[:-1], TOPICS[-1]


def sig(semantic: float) -> list[float]:
    return [semantic, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0]


@pytest.fixture
def manager(tmp_path: Path):
    yield from good_and_loud(tmp_path, TOPICS)


def ranking(b, query: str) -> list[str]:
    return [r["id"] for r in b.search_intelligent(query, limit=5)]


def nudges(b, query: str) -> dict[str, float]:
    return {r["id"]: r["explain"]["feedback"] for r in b.search_intelligent(query, explain=True, limit=5)}


def burst(b, rounds: int, accept: str, dismiss: str | None, topics=FED) -> None:
    for _ in range(rounds):
        for i, topic in enumerate(topics):
            b.feedback(topic, f"{accept}-{i}", "accepted")
            if dismiss:
                b.feedback(topic, f"{dismiss}-{i}", "dismissed")


# -- the trust (pure) -----------------------------------------------------------------------
def test_trust_is_the_text_agreement_of_the_pairs():
    def pairs(better: int, worse: int) -> learning.Pairs:
        hi = [sig(0.9)] * better + [sig(0.4)] * worse
        lo = [sig(0.5)] * better + [sig(0.8)] * worse
        return learning.Pairs(np.array(hi), np.array(lo), np.ones(better + worse))

    assert learning.text_agreement(pairs(12, 0), BASE) == pytest.approx(1.0)
    assert learning.text_agreement(pairs(0, 12), BASE) == pytest.approx(-1.0)
    assert learning.text_agreement(pairs(9, 3), BASE) == pytest.approx(0.5)  # (9 - 3) / 12
    assert learning.nudge_trust(pairs(12, 0), BASE) == 1.0
    assert learning.nudge_trust(pairs(0, 12), BASE) == 0.0
    assert learning.nudge_trust(pairs(15, 5), BASE) == pytest.approx(0.5 / learning.TRUST_FULL_AGREEMENT)
    assert learning.nudge_trust(pairs(7, 2), BASE) is None  # too few pairs to judge the agent
    assert learning.nudge_trust(learning.pairs_from_events([]), BASE) is None
    assert learning.text_agreement(pairs(0, 0), BASE) is None


def test_entry_nudges_scale_by_trust():
    from tiervault.vault.rows import FeedbackEvent

    ctx = learning.FeedbackContext(None, {"x": 1.0}).to_json()
    events = [FeedbackEvent(i, "kafka consumer lag", "x", "accepted", 0.0, "a", ctx) for i in range(5)]
    full, half, none, unchecked = (
        feedback.entry_nudges("kafka consumer lag", ["x"], events, {"x": 1.0}, now=0.0, trust=t)[0]
        for t in (1.0, 0.5, 0.0, None))
    assert full == pytest.approx(feedback.MAX_SAME_NUDGE * np.tanh(5) + feedback.MAX_NUDGE * np.tanh(5))
    assert none == 0.0
    assert none < half < full and half == pytest.approx(full / 2)
    assert unchecked == pytest.approx(feedback.MAX_NUDGE * np.tanh(5))


# -- over real tiers ------------------------------------------------------------------------
def test_a_burst_of_random_verdicts_leaves_its_queries_as_they_were(manager):
    """Verdicts that prefer the worse text match (accept the loud rule, dismiss the
    answer: what random accepts below dismissed top hits look like) move neither the
    queries they were given on nor similar ones, however many: trust 0, base weights."""
    b = fixed_brain(manager)
    before = {t: ranking(b, t) for t in TOPICS}
    burst(b, 5, accept="loud", dismiss="good")  # 110 actions, 11 pairs reversing the text order
    assert b.nudge_trust() == 0.0 and b.stats()["nudgeTrust"] == 0.0
    assert b.weights().adapted and b.weights().values == pytest.approx(tuple(BASE))
    for t in TOPICS:
        assert ranking(b, t) == before[t]
        assert all(v == 0.0 for v in nudges(b, t).values())
    # nor a similar query (3 of its 4 words: shared, not the same query)
    assert all(v == 0.0 for v in nudges(b, f"{TOPICS[0]} incident").values())


def test_unchecked_verdicts_move_their_query_by_at_most_the_shared_bound(manager):
    """Accepts without dismissals form no pairs: the agent cannot be checked, and a
    burst of them moves a score by at most x(1 + MAX_NUDGE)."""
    b = fixed_brain(manager)
    for _ in range(20):
        b.feedback(TOPICS[0], "loud-0", "accepted")
    assert b.nudge_trust() is None and b.stats()["nudgeTrust"] is None
    got = nudges(b, TOPICS[0])
    assert 0.0 < got["loud-0"] <= feedback.MAX_NUDGE + 1e-9
    assert all(v == 0.0 for k, v in got.items() if k != "loud-0")


def test_trusted_verdicts_move_their_query_further(manager):
    b = fixed_brain(manager)
    assert ranking(b, FED[0])[:2] == ["loud-0", "good-0"]
    burst(b, 1, accept="good", dismiss="loud")
    assert b.nudge_trust() == 1.0  # every pair prefers the better text match
    got = nudges(b, FED[0])
    assert got["good-0"] > feedback.MAX_NUDGE and got["loud-0"] < -feedback.MAX_NUDGE
    assert ranking(b, FED[0])[:2] == ["good-0", "loud-0"]


def test_consistent_feedback_generalises_to_an_unseen_query(manager):
    """An agent that keeps preferring the answer to the loud rule on 11 topics teaches
    the weights (less severity, more text): the 12th topic, never given feedback and
    sharing no nudge, ranks its answer first too."""
    b = fixed_brain(manager)
    assert ranking(b, UNSEEN)[:2] == ["loud-11", "good-11"]
    burst(b, 3, accept="good", dismiss="loud")  # 66 actions: refits at the 30th ... 60th
    ws = b.weights()
    assert ws.adapted and ws.values[SEV] < BASE[SEV]
    assert all(v == 0.0 for v in nudges(b, UNSEEN).values())  # not through a nudge
    assert ranking(b, UNSEEN)[:2] == ["good-11", "loud-11"]
