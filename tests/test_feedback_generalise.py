"""Feedback that teaches beyond its own queries: learned weights reorder queries never
given feedback, the agent's own verdict on a query, pooled counts, the weights cache
across processes, hybrid weights — over real SQLite tiers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from test_feedback_learning import BASE, NOW, SEM, SEV, E, brain, by_id, filler
from tiervault.brain import Brain, learning
from tiervault.brain.shapes import SIGNALS
from tiervault.vault.manager import VaultManager

LOUD_TOPICS = ["kafka consumer lag", "postgres vacuum bloat", "redis eviction policy",
               "jwt token rotation", "terraform state locking", "docker layer caching",
               "nginx upstream timeout", "grpc deadline propagation"]


def loud_vault(tmp_path: Path) -> VaultManager:
    """Per topic: the answer (a suggestion, matching every word) and a loud entry (critical,
    matching nearly as well): the severity prior puts the loud one first."""
    m = VaultManager.at({t: str(tmp_path / f"{t}.db") for t in ("agent", "team")})
    m.capture_many(filler(30), tier="team")
    for i, topic in enumerate(LOUD_TOPICS):
        m.capture(E(id=f"good-{i}", title=f"Handling {topic}",
                    description=f"What to do about {topic} in practice.", severity="suggestion"),
                  tier="team")
        m.capture(E(id=f"loud-{i}", title=f"Handling {topic} rule",
                    description=f"What to do about {topic} in practice, always.", severity="critical"),
                  tier="team")
    return m


def first_of(b: Brain, query: str, ids: tuple[str, str]) -> str:
    ranked = [r["id"] for r in b.search_intelligent(query, limit=10)]
    return min(ids, key=ranked.index)


def test_learned_weights_reorder_queries_never_given_feedback(tmp_path):
    m = loud_vault(tmp_path)
    b = brain(m)
    fed, unseen = range(0, 4), range(4, 8)
    assert all(first_of(b, LOUD_TOPICS[i], (f"good-{i}", f"loud-{i}")) == f"loud-{i}" for i in unseen)
    for _ in range(10):  # 80 actions on the first four topics only
        for i in fed:
            b.feedback(LOUD_TOPICS[i], f"good-{i}", "accepted")
            b.feedback(LOUD_TOPICS[i], f"loud-{i}", "dismissed")
    ws = b.weights()
    assert ws.adapted and ws.values[SEV] < BASE[SEV]
    for i in unseen:  # no nudge reaches these (other topics): the weights did it
        rows = by_id(b.search_intelligent(LOUD_TOPICS[i], explain=True, limit=10))
        assert rows[f"good-{i}"]["explain"]["feedback"] == 0.0 == rows[f"loud-{i}"]["explain"]["feedback"]
        assert first_of(b, LOUD_TOPICS[i], (f"good-{i}", f"loud-{i}")) == f"good-{i}"
    m.close()


def test_the_agents_verdict_on_the_same_query_nudges_more_than_a_similar_querys(tmp_path):
    from tiervault.brain import feedback

    m = loud_vault(tmp_path)
    b = brain(m)
    # the same verdict on the other topics (two wordings each): 15 pairs, all preferring
    # the better text match, so the agent is checked and trusted (learning.nudge_trust)
    for i, topic in enumerate(LOUD_TOPICS[1:], start=1):
        for query in (topic, f"{topic} handling"):
            b.feedback(query, f"good-{i}", "accepted")
            b.feedback(query, f"loud-{i}", "dismissed")
    b.feedback("kafka consumer lag", "good-0", "accepted")
    b.feedback("kafka consumer lag", "loud-0", "dismissed")
    assert b.nudge_trust() == 1.0
    same = by_id(b.search_intelligent("Kafka consumer  lag", explain=True, limit=10))
    assert same["good-0"]["explain"]["feedback"] > 2 * feedback.MAX_NUDGE
    assert same["loud-0"]["explain"]["feedback"] < -2 * feedback.MAX_NUDGE
    # a longer question about the same thing shares only the small nudge
    near = by_id(b.search_intelligent("kafka consumer lag growing", explain=True, limit=10))
    assert 0 < near["good-0"]["explain"]["feedback"] <= feedback.MAX_NUDGE
    m.close()


def test_pooled_counts_are_the_ones_the_weights_rest_on(tmp_path):
    """feedbackPool: team — stats and feedback() report the team's counts, which the
    threshold and the accept rate use (they showed the agent's own, 0 here)."""
    team = str(tmp_path / "team.db")
    m1 = loud_vault(tmp_path)  # agent.db + team.db
    one = brain(m1, agent_id="one", feedback_pool="team", adaptation="seed")
    for _ in range(4):
        for i in range(8):
            one.feedback(LOUD_TOPICS[i], f"good-{i}", "accepted")
    m2 = VaultManager.at({"agent": str(tmp_path / "two.db"), "team": team})
    two = brain(m2, agent_id="two", feedback_pool="team", adaptation="seed")
    ws, stats = two.weights(), two.stats()
    assert ws.adapted and ws.accept_rate == 1.0
    assert stats["feedback"]["accepted"] == 32 == two.feedback_counts()["accepted"]
    assert stats["agentFeedback"]["accepted"] == 0  # agent two's own tier
    out = two.feedback(LOUD_TOPICS[0], "loud-0", "dismissed")
    assert out["feedback"] == {"accepted": 32, "modified": 0, "dismissed": 1, "failed": 0}
    assert two.stats()["agentFeedback"]["dismissed"] == 1
    from starlette.testclient import TestClient

    from tiervault.server.principal import Principal
    from tiervault.web import LocalAccess, create_web_app

    client = TestClient(create_web_app(lambda p: two, LocalAccess(
        Principal("two", {"agent": "rw", "team": "rw"}), "tok")), base_url="http://127.0.0.1")
    client.cookies.set("tiervault_token", "tok")
    assert "33 feedback actions recorded in the team pool (1 by this agent)" in client.get("/health").text
    m1.close()
    m2.close()


def test_weights_follow_another_process_and_are_read_once_per_feedback(tmp_path, monkeypatch):
    m = loud_vault(tmp_path)
    reader = brain(m)
    store = m.store("agent")
    reads = []
    original = store.weight_history
    monkeypatch.setattr(store, "weight_history", lambda limit=20: reads.append(limit) or original(limit))
    for _ in range(5):
        reader.search_intelligent("kafka consumer lag")
    assert len(reads) == 1  # no feedback between the searches: the history was read once
    # another process (its own connections to the same files) gives feedback and refits
    other = VaultManager.at({"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")})
    writer = brain(other)
    for _ in range(5):
        for i in range(4):
            writer.feedback(LOUD_TOPICS[i], f"good-{i}", "accepted")
            writer.feedback(LOUD_TOPICS[i], f"loud-{i}", "dismissed")
    assert writer.weights().adapted
    assert reader.weights().values == pytest.approx(writer.weights().values)
    assert reader.weights().adapted
    other.close()
    m.close()


def test_hybrid_weights_are_fitted_in_the_scores_shape(tmp_path):
    from test_brain import HashVectors
    from tiervault.embeddings.providers.hash import HashEmbedder

    m = loud_vault(tmp_path)
    b = Brain(m, brain(m).settings, vectors=HashVectors(m, HashEmbedder(dim=64)), clock=lambda: NOW)
    rows = [r for r in b.search_intelligent("kafka consumer lag rule", mode="full", limit=30)
            if r["breakdown"]["semantic"] > 0]
    w = np.array(b.weights().values)
    assert b.weights().name == "hybrid" and w[SIGNALS.index("vector")] > 0
    phi = learning.score_features(np.array([[r["breakdown"][k] for k in SIGNALS] for r in rows]), w)
    ratios = np.array([r["score"] for r in rows]) / (phi @ w)
    assert len(rows) >= 3 and np.allclose(ratios, ratios[0], rtol=1e-4)  # the base's split: exact
    for _ in range(5):
        for i in range(4):
            b.feedback(LOUD_TOPICS[i], f"good-{i}", "accepted")
            b.feedback(LOUD_TOPICS[i], f"loud-{i}", "dismissed")
    ws = b.weights()
    assert ws.name == "hybrid" and ws.adapted and sum(ws.values) == pytest.approx(1.0)
    assert ws.values[SEV] < w[SEV] and min(ws.values) >= 0
    text = ws.values[SEM] + ws.values[SIGNALS.index("vector")]
    assert text >= learning.MIN_TEXT_SHARE * (w[SEM] + w[SIGNALS.index("vector")]) - 1e-9
    m.close()


def test_cli_stats_names_the_pool_and_the_agents_own_counts(tmp_path):
    import subprocess
    import sys

    m = loud_vault(tmp_path)
    one = brain(m, agent_id="one", feedback_pool="team")
    one.feedback(LOUD_TOPICS[0], "good-0", "accepted")
    one.feedback(LOUD_TOPICS[0], "loud-0", "dismissed")
    m.close()
    (tmp_path / "two.yaml").write_text(
        f"agent_id: two\ntiers:\n  agent: {tmp_path / 'two.db'}\n  team: {tmp_path / 'team.db'}\n"
        "brain:\n  feedbackPool: team\n")
    out = subprocess.run([sys.executable, "-m", "tiervault", "--config", str(tmp_path / "two.yaml"),
                          "stats"], capture_output=True, text=True, check=True).stdout
    assert ("feedback (team pool, what the weights rest on): accepted 1, modified 0, dismissed 1, "
            "failed 0\nthis agent's own: accepted 0, modified 0, dismissed 0, failed 0") in out
