"""The Brain over real tier files: ranking, tiers, graph, filters, guard, feedback, vectors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import Brain
from tiervault.brain.shapes import SIGNALS
from tiervault.brain.vectors import VectorMatch
from tiervault.brain.weights import base_weights
from tiervault.config import BrainConfig
from tiervault.errors import EntryNotFound, QueryError, ValidationError

from brain_vault import DAY, NOW, at_a_day_old, filler, fixed_brain, vault_at

SCAN_KEYS = {"id", "title", "score", "type", "domain", "severity", "tags", "snippet",
             "tokenEstimate", "tier"}
FULL_KEYS = {"entry", "score", "breakdown", "tier"}
BREAKDOWN_KEYS = {*SIGNALS, "total"}


E = at_a_day_old  # a short constructor for test data


@pytest.fixture
def manager(tmp_path: Path):
    yield from vault_at(tmp_path, "agent", "project", "team")


brain = fixed_brain


def by_id(rows, key="id"):
    return {(r[key] if key == "id" else r["entry"]["id"]): r for r in rows}


# -- shapes, modes ----------------------------------------------------------------------
def test_scan_and_full_shapes_and_scan_then_load(manager):
    manager.capture_many(filler(40))
    manager.capture(E(id="kafka-lag", title="Watch Kafka consumer lag",
                      description="Alert when consumer lag grows for five minutes. " * 10,
                      tags=["kafka", "alerting"], severity="warning", domain="streaming"))
    b = brain(manager)
    scan = b.search_intelligent("kafka consumer lag")
    assert scan[0]["id"] == "kafka-lag"
    assert set(scan[0]) == SCAN_KEYS
    row = scan[0]
    assert row["snippet"] == ("Alert when consumer lag grows for five minutes. " * 10)[:120]
    entry = manager.get("kafka-lag")[0]
    chars = sum(len(getattr(entry, f)) for f in ("title", "description", "context", "example",
                                                 "counter_example", "why"))
    assert row["tokenEstimate"] == math.ceil(chars / 4)
    assert row["tags"] == ["kafka", "alerting"] and row["tier"] == "agent"
    full = b.search_intelligent("kafka consumer lag", mode="full")
    assert set(full[0]) == FULL_KEYS and set(full[0]["breakdown"]) == BREAKDOWN_KEYS
    assert full[0]["entry"] == entry.to_dict()
    assert full[0]["breakdown"]["total"] == full[0]["score"] == row["score"]
    loaded = b.load_entries(["kafka-lag", "missing-id", "fill-3"])
    assert [r["id"] for r in loaded] == ["kafka-lag", "missing-id", "fill-3"]
    assert loaded[0]["entry"] == entry.to_dict() and loaded[0]["found"]
    assert not loaded[1]["found"] and "missing-id" in loaded[1]["error"]
    explained = b.search_intelligent("kafka consumer lag", explain=True)[0]["explain"]
    assert explained["via"] == "search" and explained["weightSet"] == "fts"
    assert full[0]["score"] == pytest.approx(expected_total(explained, hybrid=False), abs=1e-5)
    w = dict(zip(SIGNALS, base_weights(False)))
    priors = [k for k in SIGNALS if k not in ("semantic", "vector")]
    assert explained["prior"] == pytest.approx(
        sum(w[k] * full[0]["breakdown"][k] for k in priors) / sum(w[k] for k in priors), abs=1e-5)


def test_bad_arguments_are_clear_errors(manager):
    b = brain(manager)
    with pytest.raises(QueryError, match="mode"):
        b.search_intelligent("x", mode="deep")
    with pytest.raises(QueryError, match="limit"):
        b.search_intelligent("x", limit=0)
    with pytest.raises(QueryError, match="severity"):
        b.search_intelligent("x", severity="fatal")
    with pytest.raises(ValidationError, match="tiers"):
        b.search_intelligent("x", tiers=["nowhere"])


def expected_total(explain: dict, hybrid: bool, prior_strength: float = BrainConfig().prior_strength
                   ) -> float:
    """score = R * (1 + beta * P) * tierFactor * (1 + feedback), beta from the weights."""
    w = dict(zip(SIGNALS, base_weights(hybrid)))
    w_text = w["semantic"] + w["vector"]
    beta = prior_strength * (1 - w_text) / w_text
    return (explain["relevance"] * (1 + beta * explain["prior"]) * explain["tierFactor"]
            * (1 + explain["feedback"]))


def test_score_is_relevance_times_bounded_priors(manager):
    manager.capture_many(filler(30))
    manager.capture(E(id="t1", title="Rotate JWT signing keys", description="Rotate keys monthly."),
                    tier="team")
    manager.capture(E(id="t2", title="Signing releases", description="Sign the release tags."),
                    tier="team")
    # PRF and proximity off: the semantic signal's formula below is the plain one
    # (PRF: test_relevance_fusion, proximity: test_proximity)
    rows = brain(manager, prf_terms=0, proximity_weight=0.0).search_intelligent(
        "jwt signing keys", mode="full", explain=True)
    row = rows[0]
    assert row["entry"]["id"] == "t1" and row["tier"] == "team"
    assert row["explain"]["tierWeight"] == 0.6
    assert row["explain"]["tierFactor"] == pytest.approx(1 - 0.25 * 0.4)
    # the best match of the query is at 1.0 on the per-query scale (FTS-only: R = semantic)
    assert row["breakdown"]["semantic"] == pytest.approx(1.0) == row["explain"]["relevance"]
    for r in rows:
        assert r["score"] == pytest.approx(expected_total(r["explain"], hybrid=False), abs=1e-5)
    lex, tfidf = row["explain"]["lexical"], row["explain"]["tfidf"]
    assert lex > 0 and tfidf > 0
    second = rows[1]
    assert second["entry"]["id"] == "t2"
    share, b = BrainConfig().tfidf_share, BrainConfig().lsa_share
    # explain's "lsa" is already on the per-query scale (brain/latent.py)
    assert 0 <= second["explain"]["lsa"] <= 1 and row["explain"]["lsa"] == pytest.approx(1.0)
    assert second["breakdown"]["semantic"] == pytest.approx(
        share * second["explain"]["tfidf"] / tfidf
        + (1 - share - b) * second["explain"]["lexical"] / lex
        + b * second["explain"]["lsa"], abs=1e-5)
    # with PRF the best match is still at 1.0 on the per-query scale
    top = brain(manager, prf_terms=10).search_intelligent("jwt signing keys", mode="full",
                                                          explain=True)[0]
    assert top["entry"]["id"] == "t1" and top["breakdown"]["semantic"] == pytest.approx(1.0)


# -- tiers ------------------------------------------------------------------------------
def test_tier_priority_on_duplicate_like_entries(manager):
    manager.capture_many(filler(30))
    text = dict(title="Use idempotency keys for payment retries",
                description="Send an Idempotency-Key header so a retried payment is not charged twice.")
    manager.capture(E(id="pay-team", tags=["payments", "team"], **text), tier="team")
    manager.capture(E(id="pay-project", tags=["payments", "proj"], **text), tier="project")
    manager.capture(E(id="pay-agent", tags=["payments", "agnt"], **text), tier="agent")
    rows = brain(manager).search_intelligent("idempotency key payment retries")
    assert [r["id"] for r in rows[:3]] == ["pay-agent", "pay-project", "pay-team"]
    # the lower tier's copy even wins a notch on severity: priority still decides
    manager.capture(E(id="pay-team", tags=["payments", "team"], severity="critical", **text), tier="team")
    rows = brain(manager).search_intelligent("idempotency key payment retries")
    assert rows[0]["id"] == "pay-agent"


def test_exact_duplicate_is_returned_once_from_the_highest_tier(manager):
    manager.capture_many(filler(30))
    same = dict(title="Pin container base images by digest",
                description="Tags move; digests do not.")
    manager.capture(E(id="pin-team", **same), tier="team")
    manager.capture(E(id="pin-agent", **same), tier="agent")
    rows = brain(manager).search_intelligent("container base images digest", explain=True)
    ids = [r["id"] for r in rows]
    assert "pin-agent" in ids and "pin-team" not in ids
    assert rows[ids.index("pin-agent")]["explain"]["alsoIn"] == ["team"]


# -- temporal decay ---------------------------------------------------------------------
def test_decay_on_back_dated_entry_and_validity_ramp(manager):
    manager.capture_many(filler(30))
    manager.capture(E(id="fresh", title="Vacuum analyze after bulk loads", description="Run it."))
    manager.capture(E(id="old", title="Vacuum analyze after bulk loads!", description="Run it!",
                      created_at=NOW - 800 * DAY, updated_at=NOW - 730 * DAY))
    # a window of 100 days with 10 left: in the last 25%, ramp = 10 / 25
    manager.capture(E(id="ending", title="Vacuum analyze after bulk loads!!", description="Run it!!",
                      valid_from=NOW - 90 * DAY, valid_until=NOW + 10 * DAY))
    rows = by_id(brain(manager).search_intelligent("vacuum analyze bulk loads", mode="full"), "entry")
    assert rows["fresh"]["breakdown"]["temporalDecay"] == pytest.approx(
        math.exp(-math.log(2) / 365), abs=1e-6)
    assert rows["old"]["breakdown"]["temporalDecay"] == pytest.approx(0.25, abs=1e-6)
    assert rows["ending"]["breakdown"]["temporalDecay"] == pytest.approx(0.4, abs=1e-6)
    assert rows["fresh"]["score"] > rows["old"]["score"]


def test_half_life_comes_from_config(manager):
    manager.capture_many(filler(30))
    manager.capture(E(id="month", title="Cache warmup on deploy", description="Warm it.",
                      updated_at=NOW - 30 * DAY, created_at=NOW - 30 * DAY))
    row = brain(manager, half_life_days=30.0).search_intelligent("cache warmup deploy", mode="full")[0]
    assert row["breakdown"]["temporalDecay"] == pytest.approx(0.5, abs=1e-6)


# -- graph ------------------------------------------------------------------------------
def test_graph_proximity_across_tiers_and_link_types(manager):
    manager.capture_many(filler(40))
    manager.capture(E(id="seed", title="Kafka consumer lag alerting",
                      description="Alert on consumer lag for Kafka topics."), tier="agent")
    manager.capture(E(id="hop1-team", title="Partition rebalancing storms",
                      description="Static membership avoids rebalances."), tier="team")
    manager.capture(E(id="hop2-project", title="Sticky assignor settings",
                      description="Cooperative sticky assignment."), tier="project")
    manager.capture(E(id="seq-team", title="Incident runbook step two",
                      description="Then add partitions."), tier="team")
    manager.capture(E(id="against", title="Ignore small delays",
                      description="Harmless below one hour."), tier="team")
    manager.link("seed", "hop1-team", "supports")            # stored in the agent tier
    manager.link("hop1-team", "hop2-project", "extends")     # stored in the team tier
    manager.link("seq-team", "seed", "sequences")            # team -> agent, stored in team
    manager.link("seed", "against", "contradicts")
    rows = by_id(brain(manager).search_intelligent("kafka consumer lag", mode="full", explain=True),
                 "entry")
    assert rows["hop1-team"]["breakdown"]["graphProximity"] == 0.5
    assert rows["hop1-team"]["tier"] == "team" and rows["hop1-team"]["explain"]["via"] == "graph"
    assert rows["hop2-project"]["breakdown"]["graphProximity"] == pytest.approx(1 / 3, abs=1e-6)
    assert rows["hop2-project"]["tier"] == "project"
    assert rows["seq-team"]["breakdown"]["graphProximity"] == 0.5
    assert "against" not in rows  # contradicts is not a hop: it pulls nothing in, boosts nothing
    assert rows["seed"]["explain"]["contradicts"] == ["against"]
    assert rows["seed"]["breakdown"]["graphProximity"] == 0.0  # a seed earns nothing for itself


def test_contradicting_entry_found_by_search_gets_no_boost(manager):
    manager.capture_many(filler(40))
    manager.capture(E(id="a", title="Retry payments with backoff", description="Backoff retries."))
    manager.capture(E(id="b", title="Never do that", description="It double charges."))
    manager.capture(E(id="c", title="Budget caps", description="Cap the attempts."))
    manager.capture(E(id="d", title="Payment retry budget", description="Cap retries."))
    manager.link("a", "b", "contradicts")
    manager.link("a", "c", "supports")
    manager.link("a", "d", "supports")  # d is a seed too: linked seeds do not lift each other
    rows = by_id(brain(manager).search_intelligent("retry payments", mode="full"), "entry")
    assert "b" not in rows  # a contradiction pulls nothing in and boosts nothing
    assert rows["c"]["breakdown"]["graphProximity"] == 0.5
    assert rows["d"]["breakdown"]["graphProximity"] == 0.0
    assert rows["a"]["breakdown"]["graphProximity"] == 0.0


def test_graph_neighbours_respect_filters(manager):
    manager.capture_many(filler(40))
    manager.capture(E(id="s", title="Kafka consumer lag", description="Lag.", domain="streaming"))
    manager.capture(E(id="n-other", title="Unrelated neighbour", description="x", domain="web"))
    manager.link("s", "n-other", "supports")
    ids = [r["id"] for r in brain(manager).search_intelligent("kafka lag", domain="streaming")]
    assert ids == ["s"]


# -- filters and the small-corpus guard -------------------------------------------------
def test_filtered_searches_find_matching_entries_ranked_far_down(manager):
    strong = [E(id=f"cache-{i}", title=f"Cache invalidation cache keys cache {i}",
                description="cache cache cache invalidation keys", domain="db", type="pattern",
                severity="suggestion", tags=["db"]) for i in range(150)]
    manager.capture_many(strong)
    manager.capture(E(id="weak", title="Notes on several things",
                      description="One of them is cache sizing for the edge.", domain="edge",
                      type="decision", severity="critical", tags=["cdn"]), tier="team")
    b = brain(manager)
    assert "weak" not in [r["id"] for r in b.search_intelligent("cache invalidation", limit=10)]
    for kw in ({"domain": "edge"}, {"type": "decision"}, {"severity": "critical"},
               {"tags": ["cdn"]}, {"domain": "edge", "type": "decision"}):
        rows = b.search_intelligent("cache invalidation", **kw)
        assert [r["id"] for r in rows] == ["weak"], kw
    assert b.search_intelligent("cache invalidation", domain="edge", tiers=["agent"]) == []
    assert b.search_intelligent("cache invalidation", domain="edge", tiers=["team"])[0]["id"] == "weak"


def test_small_corpus_guard(manager):
    manager.capture_many(filler(60))
    manager.capture_many([E(id=f"redis-{i}", title=f"Redis eviction policy {i}",
                            description="Pick an eviction policy.") for i in range(25)])
    b = brain(manager)
    rows = b.search_intelligent("redis eviction")  # the default 10 would drop 60%: all
    assert len(rows) == 25 and rows.widened
    assert len(b.search_intelligent("redis eviction", limit=5)) == 5  # a given limit is a ceiling
    assert not brain(manager, small_corpus_guard=False).search_intelligent("redis eviction").widened
    assert len(brain(manager, small_corpus_guard=False).search_intelligent("redis eviction")) == 10
    # 45 matches, over-fetch 30: the guard still sees every match
    manager.capture_many([E(id=f"redis-x{i}", title=f"Redis eviction note {i}",
                            description="More eviction notes.") for i in range(20)])
    assert len(b.search_intelligent("redis eviction")) == 45
    # a large result set is cut to the default limit
    manager.capture_many([E(id=f"redis-y{i}", title=f"Redis eviction memo {i}",
                            description="Even more.") for i in range(20)])
    rows = b.search_intelligent("redis eviction")
    assert len(rows) == 10 and not rows.widened


# -- memories ---------------------------------------------------------------------------
def test_memory_queries_with_punctuation_on_the_entry_scale(manager):
    manager.capture_many(filler(40))
    manager.capture(E(id="retry-policy", title="HTTP retry policy",
                      description="Retry idempotent calls three times with backoff."))
    manager.capture(E(id="weak-entry", title="Deploy checklist",
                      description="Among other things, mention the policy owner."))
    mem = manager.store("agent").add_memory("Agreed retry policy: 3 attempts, 2s base backoff",
                                            topics=["retry"], created_at=NOW - DAY)
    manager.store("agent").add_memory("Lunch order for the offsite", created_at=NOW - DAY)
    b = brain(manager)
    for q in ("what's the retry policy?", "retry-policy: (attempts)?", "\"retry\" OR policy*"):
        rows = b.search_intelligent(q, include_memories=True, explain=True)
        ids = [r["id"] for r in rows]
        assert mem in ids, q
        assert all("Lunch" not in r["title"] for r in rows)
        # a strong memory beats a weak entry; the strong entry beats... both are strong
        assert ids.index(mem) < ids.index("weak-entry"), q
        m = rows[ids.index(mem)]
        assert set(m) == SCAN_KEYS | {"explain"} and m["type"] == "memory"
        assert m["explain"]["via"] == "memory" and m["explain"]["lexical"] > 0
    assert mem not in [r["id"] for r in b.search_intelligent("what's the retry policy?")]
    full = b.search_intelligent("retry policy", include_memories=True, mode="full")
    mrow = next(r for r in full if r["entry"]["id"] == mem)
    assert set(mrow) == FULL_KEYS and set(mrow["breakdown"]) == BREAKDOWN_KEYS
    assert mrow["breakdown"]["semantic"] > 0 and mrow["breakdown"]["tagOverlap"] == 0


def test_weak_memory_loses_to_strong_entry(manager):
    manager.capture_many(filler(40))
    manager.capture(E(id="pg-vacuum", title="Postgres autovacuum tuning",
                      description="Tune autovacuum scale factor for large Postgres tables."))
    mem = manager.store("agent").add_memory("Someone mentioned tuning once", created_at=NOW - DAY)
    rows = brain(manager).search_intelligent("postgres autovacuum tuning", include_memories=True)
    ids = [r["id"] for r in rows]
    assert ids[0] == "pg-vacuum" and mem in ids and ids.index(mem) > 0


# -- feedback ---------------------------------------------------------------------------
def test_feedback_validation_and_storage_in_agent_tier(manager):
    manager.capture_many(filler(5))
    manager.capture(E(id="team-entry", title="Team thing", description="t"), tier="team")
    b = brain(manager)
    with pytest.raises(ValidationError, match="action"):
        b.feedback("q", "team-entry", "liked")
    with pytest.raises(EntryNotFound):
        b.feedback("q", "no-such-entry", "accepted")
    out = b.feedback("team thing", "team-entry", "accepted")
    assert out["tier"] == "team" and out["feedback"]["accepted"] == 1
    assert manager.store("agent").feedback_counts()["accepted"] == 1
    assert manager.store("team").feedback_counts()["accepted"] == 0


def test_weights_adapt_at_the_30th_non_failed_feedback(manager):
    """The seed's rule (brain.adaptation: seed), exactly as the reference design has it."""
    manager.capture_many(filler(5))
    b = brain(manager, adaptation="seed")
    base = b.weights()
    assert sum(base.values) == pytest.approx(1.0) and not base.adapted
    for _ in range(10):
        b.feedback("alpha", "fill-1", "failed")  # failures never count
    for i in range(29):
        b.feedback("alpha", "fill-1", "accepted" if i % 3 else "modified")
        assert b.weights().values == base.values
    b.feedback("alpha", "fill-1", "dismissed")
    ws = b.weights()
    acc, mod, dis = 19, 10, 1
    rate = (acc + 0.5 * mod) / (acc + mod + dis)
    assert ws.adapted and ws.accept_rate == pytest.approx(rate)
    assert ws.values[0] == pytest.approx(base.values[0] + (rate - 0.5) * 0.3)
    assert sum(ws.values) == pytest.approx(1.0)
    stats = b.stats()
    assert list(stats["weights"]) == list(SIGNALS) and stats["adapted"]
    assert stats["feedback"] == {"accepted": 19, "modified": 10, "dismissed": 1, "failed": 10}


def test_feedback_nudges_the_entry_for_similar_queries(manager):
    manager.capture_many(filler(40))
    manager.capture(E(id="twin-a", title="Connection pool sizing", description="Size pools.",
                      tags=["aaa"]))
    manager.capture(E(id="twin-b", title="Connection pool sizing", description="Size pools.",
                      tags=["bbb"]))
    b = brain(manager)
    before = by_id(b.search_intelligent("connection pool sizing", explain=True))
    assert before["twin-a"]["score"] == before["twin-b"]["score"]
    b.feedback("pool sizing for connections", "twin-a", "dismissed")
    b.feedback("pool sizing for connections", "twin-b", "accepted")
    rows = b.search_intelligent("connection pool sizing", explain=True)
    ids = [r["id"] for r in rows]
    assert ids.index("twin-b") < ids.index("twin-a")
    after = by_id(rows)
    assert after["twin-a"]["explain"]["feedback"] < 0 < after["twin-b"]["explain"]["feedback"]
    # the same content words in another order: the agent's own verdict, but one pair is
    # too little to check the agent (learning.MIN_TRUST_PAIRS): it counts as a similar
    # query's, up to 0.1 (tests/test_feedback_trust.py: a trusted agent's goes further)
    assert b.nudge_trust() is None
    assert 0.05 < abs(after["twin-a"]["explain"]["feedback"]) <= 0.1
    # a query sharing 1 of the 3 stems but retrieving the same entries (the same
    # relevance profile, cosine 1) gets the whole (age-decayed) acceptance; the
    # dismissal counts only through the other entry (cosine 0.5 < 0.7): nothing
    (_, _, _, at), = manager.store("agent").feedback_for(["twin-b"])
    decay = math.exp(-math.log(2) * (NOW - at) / DAY / 90)
    other = by_id(b.search_intelligent("sizing", explain=True))
    assert other["twin-b"]["explain"]["feedback"] == pytest.approx(0.1 * math.tanh(decay), abs=1e-4)
    assert other["twin-a"]["explain"]["feedback"] == 0.0


# -- vectors ----------------------------------------------------------------------------
class HashVectors:
    """A VectorSource over the real offline hash embedder (brute force, all tiers)."""

    def __init__(self, manager, embedder) -> None:
        self.manager, self.embedder = manager, embedder
        self.vecs: dict[tuple[str, str], np.ndarray] = {}
        for tier in manager.ordered():
            for e in tier.store.iter_entries():
                self.vecs[(tier.name, e.id)] = embedder.embed([f"{e.title}\n{e.description}"])[0]

    def embed_query(self, query):
        return self.embedder.embed([query], "query")[0]

    def similarities(self, qv, tier, ids):
        return np.array([float(self.vecs[(tier, i)] @ qv) if (tier, i) in self.vecs else np.nan
                         for i in ids])

    def prefetch(self, qv, tiers):
        return False  # a hint: nothing to start here

    def search(self, qv, k, tiers, filters):
        hits = sorted(((float(v @ qv), t, i) for (t, i), v in self.vecs.items() if t in tiers),
                      reverse=True)[:k]
        return [VectorMatch(i, t, s) for s, t, i in hits]


class ProviderVectors(HashVectors):
    """Entry vectors from the hash embedder, query vectors from a remote provider."""

    def __init__(self, manager, embedder, query_embedder) -> None:
        super().__init__(manager, embedder)
        self.query_embedder = query_embedder

    def embed_query(self, query):
        return self.query_embedder.embed([query], "query")[0]


def test_hybrid_weights_with_vectors_and_fts_fallback_when_embedding_fails(manager, embeddings_server):
    from embeddings_server import Fault

    from tiervault.embeddings.providers.hash import HashEmbedder
    from tiervault.embeddings.providers.openai import OpenAIEmbedder

    manager.capture_many(filler(40))
    manager.capture(E(id="tls", title="Renew TLS certificates early", description="Renew at 30 days."))
    hashed = HashEmbedder(dim=64)
    b = Brain(manager, brain(manager).settings, vectors=HashVectors(manager, hashed), clock=lambda: NOW)
    row = b.search_intelligent("renew tls certificates", mode="full", explain=True)[0]
    assert row["entry"]["id"] == "tls" and row["explain"]["weightSet"] == "hybrid"
    assert row["breakdown"]["vector"] > 0
    w = dict(zip(SIGNALS, base_weights(True)))
    assert row["explain"]["relevance"] == pytest.approx(
        (w["semantic"] * row["breakdown"]["semantic"] + w["vector"] * row["breakdown"]["vector"])
        / (w["semantic"] + w["vector"]), abs=1e-5)
    assert row["score"] == pytest.approx(expected_total(row["explain"], hybrid=True), abs=1e-5)
    # reciprocal-rank fusion of the lexical and vector rankings, for comparison
    fused = b.search_intelligent("renew tls certificates", mode="full", fusion="rrf")
    assert fused[0]["entry"]["id"] == "tls" and fused[0]["score"] == pytest.approx(2 / 61, abs=1e-6)
    with pytest.raises(QueryError, match="fusion"):
        b.search_intelligent("tls", fusion="mean")
    # the provider refuses the key: this query runs with the FTS-only weights, vector 0
    remote = OpenAIEmbedder(base_url=embeddings_server.openai_url, api_keys=["sk-test"], dim=64)
    embeddings_server.push(Fault("status", status=401))
    failing = Brain(manager, b.settings, vectors=ProviderVectors(manager, hashed, remote),
                    clock=lambda: NOW)
    row = failing.search_intelligent("renew tls certificates", mode="full", explain=True)[0]
    assert row["entry"]["id"] == "tls" and row["explain"]["weightSet"] == "fts"
    assert row["breakdown"]["vector"] == 0.0
    assert row["explain"]["weights"]["vector"] == 0.0


def test_weights_follow_the_config_in_force(manager):
    """Brain.weights keeps each base set made once (not per search): a config put in
    place later is followed."""
    b = brain(manager, weights={"severity": 0.3})
    first = b.weights(False)
    assert first.values == tuple(base_weights(False, {"severity": 0.3}).tolist())
    assert b.weights(True).values == tuple(base_weights(True, {"severity": 0.3}).tolist())
    b.config = BrainConfig(weights={"graphProximity": 0.5})
    assert b.weights(False).values == tuple(base_weights(False, {"graphProximity": 0.5}).tolist())
    assert b.weights(False).values != first.values
