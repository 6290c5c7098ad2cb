"""Feedback that teaches: the pairwise learner, its guard rails, generalised nudges,
team pooling, stats and the CLI — over real SQLite tiers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import Brain, feedback, learning
from tiervault.brain.shapes import SIGNALS
from tiervault.brain.weights import base_weights
from tiervault.config import load_settings
from tiervault.errors import ConfigError
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.rows import FeedbackEvent
from tiervault.vault.schema import SCHEMA_VERSION, migrate
from tiervault.vault.store import TierStore

from brain_vault import NOW, at_a_day_old, fixed_brain

BASE = base_weights(False)
SEM, SEV, GRAPH = (SIGNALS.index(k) for k in ("semantic", "severity", "graphProximity"))


E = at_a_day_old  # a short constructor for test data


brain = fixed_brain


def event(seq, query, eid, action, signals=None, agent="a", profile=None) -> FeedbackEvent:
    ctx = learning.FeedbackContext(None if signals is None else tuple(signals), profile or {})
    return FeedbackEvent(seq, query, eid, action, NOW, agent, ctx.to_json())


def sig(semantic=0.0, severity=0.0, decay=1.0, graph=0.0) -> list[float]:
    return [semantic, 0.0, severity, decay, 0.0, 0.0, graph]


# -- the learner (pure) ---------------------------------------------------------------------
def test_fit_moves_weight_to_the_signal_that_orders_the_pairs():
    # most accepted entries simply match the text better; in 2 lists of 5 a loud
    # neighbour (critical, graph-linked) matching a little worse was lifted above them
    rng = np.random.default_rng(0)
    events, seq = [], 0
    for q in range(40):
        a = 0.6 + 0.3 * rng.random()
        loud = q % 5 >= 3
        pair = (sig(semantic=a, severity=0.4),
                sig(semantic=a - 0.05 * rng.random(), severity=1.0, graph=0.5) if loud
                else sig(semantic=a - 0.3, severity=0.4))
        for kind, s in zip(("acc", "dis"), pair):
            seq += 1
            events.append(event(seq, f"q{q}", f"{kind}{q}", "accepted" if kind == "acc" else "dismissed", s))
    pairs = learning.pairs_from_events(events)
    assert len(pairs) == 40
    w = learning.fit_pairwise(pairs, BASE)
    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()
    assert w[SEM] > BASE[SEM] + 0.1 and w[SEV] < BASE[SEV] and w[GRAPH] < BASE[GRAPH]
    assert w[SIGNALS.index("vector")] == 0.0  # a signal the base does not weigh stays 0
    assert np.array_equal(w, learning.fit_pairwise(pairs, BASE))  # deterministic
    # the fitted weights' scores order every pair; the base's only the first kind
    d = learning.score_features(pairs.preferred, BASE) - learning.score_features(pairs.other, BASE)
    assert (d @ w > 0).all() and (d @ BASE > 0).mean() == pytest.approx(0.6, abs=0.05)


def test_score_features_give_the_brains_score(manager):
    """w . phi(signals) is the Brain's score up to one positive factor (FTS-only, one
    tier, no feedback): so a fit over phi fits the ranking the Brain makes."""
    b = brain(manager)
    rows = [r for r in b.search_intelligent("kafka consumer lag outage", mode="full", limit=30)
            if r["breakdown"]["semantic"] > 0]
    assert len(rows) >= 3
    w = np.array(b.weights().values)
    phi = learning.score_features(np.array([[r["breakdown"][k] for k in SIGNALS] for r in rows]), w)
    ratios = np.array([r["score"] for r in rows]) / (phi @ w)
    assert np.allclose(ratios, ratios[0], rtol=1e-4)


def test_fit_keeps_the_base_without_evidence_or_against_it():
    empty = learning.pairs_from_events([])
    assert np.array_equal(learning.fit_pairwise(empty, BASE), BASE)
    # pairs preferring the reverse of the base ordering (random accepts below dismissed top hits)
    reverse = learning.Pairs(np.array([sig(semantic=0.3, severity=0.4)] * 30),
                             np.array([sig(semantic=0.8, severity=0.7)] * 30), np.ones(30))
    assert np.array_equal(learning.fit_pairwise(reverse, BASE), BASE)


def test_pairs_latest_action_wins_and_caps_hold():
    s_hi, s_lo = sig(semantic=0.9), sig(semantic=0.1, severity=1.0)
    events = [event(1, "Same  Query", "x", "dismissed", s_hi),
              event(2, "same query", "x", "accepted", s_hi),   # replaces the dismissal
              event(3, "same query", "y", "dismissed", s_lo),
              event(4, "same query", "y", "dismissed", s_lo),  # repeating adds nothing
              event(5, "same query", "z", "failed", s_lo),      # failures never pair
              event(6, "same query", "w", "dismissed")]         # no signals: no pair
    pairs = learning.pairs_from_events(events)
    assert len(pairs) == 1 and pairs.weights.tolist() == [1.0]
    assert pairs.diffs[0].tolist() == pytest.approx(np.subtract(s_hi, s_lo).tolist())
    many = [event(i, "q", f"a{i}", "accepted" if i % 2 else "dismissed", sig(semantic=i / 100))
            for i in range(40)]
    assert len(learning.pairs_from_events(many)) == learning.MAX_PAIRS_PER_QUERY
    burst = [event(i, f"q{i // 2}", f"e{i}", "accepted" if i % 2 else "dismissed", sig(i / 99), "b")
             for i in range(100)]
    assert len(learning.pairs_from_events(burst, max_per_agent=7)) == 7


def test_unreadable_stored_context_is_logged_by_id_not_content(caplog):
    # a truncated context (a damaged row) counts as "no signals", but the loss is visible:
    # one warning naming the feedback id and entry, never the stored text itself
    good = event(1, "q", "x", "accepted", sig(semantic=0.9))
    bad = FeedbackEvent(7, "retry policy", "y", "dismissed", NOW, "a", '{"signals": [0.1, "sk-secret-zz')
    with caplog.at_level("WARNING", logger="tiervault.brain.learning"):
        assert len(learning.pairs_from_events([good, bad])) == 0
        # another query's feedback: its stored profile is read to compare the two queries
        feedback.entry_nudges("kafka consumer lag", ["y"], [bad], {"y": 1.0}, now=NOW)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned and all("feedback #7" in m and "'y'" in m for m in warned)
    assert not any("sk-secret" in m for m in warned)
    caplog.clear()
    with caplog.at_level("WARNING", logger="tiervault.brain.learning"):
        assert learning.FeedbackContext.from_json("") == learning.FeedbackContext()
        learning.pairs_from_events([good])  # '' and readable contexts: nothing to report
    assert not caplog.records


def test_guard_rails_bound_the_shift_and_the_step():
    # a burst of pairs preferring severity over a slightly better text match
    hi = np.array([sig(semantic=0.8)] * 100 + [sig(semantic=0.78, severity=1.0)] * 400)
    lo = np.array([sig(semantic=0.5)] * 100 + [sig(semantic=0.8, severity=0.0)] * 400)
    target = learning.fit_pairwise(learning.Pairs(hi, lo, np.ones(len(hi))), BASE, c=100.0)
    assert target[SEV] > 2 * BASE[SEV] and np.abs(target - BASE).sum() > 0.2
    w = learning.bounded(target, BASE, max_shift=0.1)
    assert np.abs(w - BASE).sum() == pytest.approx(0.1)
    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()
    prev = learning.bounded(target, BASE, max_shift=0.05)
    step = learning.bounded(target, BASE, previous=prev, max_step=0.02)
    assert np.abs(step - prev).sum() == pytest.approx(0.02)
    assert np.allclose(learning.bounded(BASE, BASE, previous=BASE), BASE)
    # all weight on the priors: the text weight is held at MIN_TEXT_SHARE of the base's
    priors_only = np.array([0.0, 0, 0.2, 0.2, 0.2, 0.2, 0.2])
    held = learning.bounded(priors_only, BASE, max_shift=2.0)
    assert held[SEM] == pytest.approx(learning.MIN_TEXT_SHARE * BASE[SEM])
    assert held.sum() == pytest.approx(1.0) and (held >= 0).all()


def test_profiles_and_their_cosine():
    p = learning.query_profile(["a", "b", "c", "d"], np.array([0.3, 0.4, 0.0, 0.1]), k=2)
    assert p == pytest.approx({"b": 0.8, "a": 0.6})
    assert learning.profile_similarity(p, p) == pytest.approx(1.0)
    assert learning.profile_similarity(p, {"b": 1.0}) == pytest.approx(0.8)
    assert learning.profile_similarity(p, {"z": 1.0}) == 0.0


# -- over real tiers ------------------------------------------------------------------------
def filler(n: int) -> list[Entry]:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    return [E(id=f"fill-{i}", title=f"{words[i % 8]} {words[(i * 3) % 8]} note {i}",
              description=f"General remark number {i} about {words[(i * 5) % 8]} matters.")
            for i in range(n)]


TOPICS = ["kafka consumer lag", "postgres vacuum bloat", "redis eviction policy",
          "jwt token rotation", "terraform state locking", "docker layer caching"]


@pytest.fixture
def manager(tmp_path: Path):
    m = VaultManager.at({t: str(tmp_path / f"{t}.db") for t in ("agent", "team")})
    m.capture_many(filler(30), tier="team")
    for i, topic in enumerate(TOPICS):
        # the right answer: matches the words, a mere suggestion
        m.capture(E(id=f"good-{i}", title=topic.title(), description=f"How to handle {topic} well.",
                    severity="suggestion"), tier="team")
        # a loud neighbour: critical, one shared word, linked from the right answer
        word = topic.split()[0]
        m.capture(E(id=f"loud-{i}", title=f"Critical {word} outage rule",
                    description=f"Always page someone about {word}.", severity="critical"), tier="team")
    yield m
    m.close()


def give_feedback(b: Brain, rounds: int, policy: str = "judged") -> int:
    n = 0
    for _ in range(rounds):
        for i, topic in enumerate(TOPICS):
            if policy == "judged":
                b.feedback(topic, f"good-{i}", "accepted")
                b.feedback(topic, f"loud-{i}", "dismissed")
            else:  # adversarial: accept the loud entry, dismiss the right answer
                b.feedback(topic, f"loud-{i}", "accepted")
                b.feedback(topic, f"good-{i}", "dismissed")
            n += 2
    return n


def test_feedback_records_signals_and_learned_weights_rest_on_it(manager):
    b = brain(manager)
    b.feedback(TOPICS[0], "good-0", "accepted")
    (ev,) = manager.store("agent").feedback_events(10)
    ctx = learning.FeedbackContext.from_json(ev.context)
    assert ev.agent == "t" and ctx.signals is not None and len(ctx.signals) == len(SIGNALS)
    full = by_id(b.search_intelligent(TOPICS[0], mode="full", limit=30))
    assert list(ctx.signals) == pytest.approx([full["good-0"]["breakdown"][k] for k in SIGNALS])
    assert next(iter(ctx.profile)) == "good-0"  # the best text match leads the profile
    give_feedback(b, 4)  # 49 actions: refits at the 30th and the 40th
    ws = b.weights()
    assert ws.adapted and sum(ws.values) == pytest.approx(1.0)
    assert ws.values[SEM] > BASE[SEM] and ws.values[SEV] < BASE[SEV]
    stats = b.stats()
    assert stats["adaptation"] == "learned" and stats["weightEvents"] == 40
    hist = stats["weightHistory"]
    assert [h["events"] for h in hist] == [30, 40] and hist[-1]["pairs"] == len(TOPICS)
    assert hist[-1]["weights"]["fts"] == pytest.approx(stats["weights"], abs=1e-5)


def by_id(rows):
    return {r["entry"]["id"] if "entry" in r else r["id"]: r for r in rows}


def test_a_burst_cannot_swing_the_weights_past_the_bounds(manager, monkeypatch):
    # tighter bounds than the defaults so that this small vault reaches them
    monkeypatch.setattr(learning, "MAX_STEP", 0.004)
    monkeypatch.setattr(learning, "MAX_SHIFT", 0.02)
    b = brain(manager)
    base = np.array(b.weights().values)
    give_feedback(b, 25)  # 300 actions from one agent in one go
    hist = [h.as_dict() for h in b.adaptation.history(100)]
    assert len(hist) == 28  # a refit at the 30th action, then every 10th
    ws = [base] + [np.array([h["weights"]["fts"][k] for k in SIGNALS]) for h in hist]
    steps = [float(np.abs(a - c).sum()) for a, c in zip(ws, ws[1:])]
    assert max(steps) == pytest.approx(learning.MAX_STEP, abs=1e-5)  # the step guard held it back
    assert max(np.abs(w - base).sum() for w in ws) <= learning.MAX_SHIFT + 1e-5
    assert np.abs(ws[-1] - base).sum() == pytest.approx(learning.MAX_SHIFT, abs=1e-5)
    assert ws[-1][SEM] > base[SEM]


def test_adversarial_burst_leaves_the_base_weights(manager):
    b = brain(manager)
    give_feedback(b, 10, policy="adversarial")  # accept the loud entry, dismiss the answer
    ws = b.weights()
    assert ws.adapted and ws.values == pytest.approx(tuple(BASE))  # pairs reverse the base: untrusted
    assert len(b.adaptation.history(100)) == 10


def test_seed_rule_stays_available(manager):
    b = brain(manager, adaptation="seed")
    give_feedback(b, 3)  # 36 actions, accept rate 0.5: the seed's rule leaves the weights
    ws = b.weights()
    assert ws.adapted and ws.accept_rate == pytest.approx(0.5)
    assert ws.values == pytest.approx(tuple(BASE))
    assert b.stats()["weightHistory"][-1]["adaptation"] == "seed"


def test_nudges_reach_paraphrases_not_other_topics(tmp_path):
    m = VaultManager.at({"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")})
    m.capture_many(filler(30), tier="team")
    m.capture_many([
        E(id="retry-jitter", title="Retry with exponential backoff and jitter",
          description="Spread retries of failed requests so clients do not stampede."),
        E(id="retry-budget", title="Cap retries with a retry budget",
          description="Retries of failed requests amplify load; cap them per client."),
        E(id="idem-keys", title="Idempotency keys for payment requests",
          description="Send an idempotency key so a retried charge is applied once."),
        E(id="pay-webhooks", title="Verify payment provider webhooks",
          description="Check the signature of every payment webhook before trusting it.")],
        tier="team")
    b = brain(m)
    fed = "cap retries of failed requests"
    b.feedback(fed, "retry-budget", "dismissed")
    b.feedback(fed, "retry-jitter", "accepted")
    # the same words in another order: both nudges
    same = by_id(b.search_intelligent("failed requests: cap retries", explain=True, limit=5))
    assert same["retry-jitter"]["explain"]["feedback"] > 0 > same["retry-budget"]["explain"]["feedback"]
    # different words, the same entries retrieved: the acceptance carries over
    para = by_id(b.search_intelligent("spread retried requests", explain=True, limit=5))
    assert para["retry-jitter"]["explain"]["feedback"] > 0
    # another topic retrieving the dismissed entry (its best match in both queries)
    # does not count as similar: the entry is left out of the cosine
    other = by_id(b.search_intelligent("amplify load per client", explain=True, limit=5))
    assert other["retry-budget"]["explain"]["feedback"] == 0.0
    fed_profile = learning.FeedbackContext.from_json(
        m.store("agent").feedback_events(1)[0].context).profile
    assert max(fed_profile, key=fed_profile.get) == "retry-budget"
    m.close()


def test_team_pooling_shares_feedback_between_agents(tmp_path):
    team = str(tmp_path / "team.db")
    m1 = VaultManager.at({"agent": str(tmp_path / "a1.db"), "team": team})
    m1.capture_many(filler(30), tier="team")
    for i, topic in enumerate(TOPICS):
        m1.capture(E(id=f"good-{i}", title=topic.title(), description=f"How to handle {topic} well.",
                     severity="suggestion"), tier="team")
        m1.capture(E(id=f"loud-{i}", title=f"Critical {topic.split()[0]} outage rule",
                     description="Always page someone.", severity="critical"), tier="team")
    a1 = brain(m1, agent_id="one", feedback_pool="team")
    give_feedback(a1, 3)
    m2 = VaultManager.at({"agent": str(tmp_path / "a2.db"), "team": team})
    pooled, alone = brain(m2, agent_id="two", feedback_pool="team"), brain(m2, agent_id="two")
    assert pooled.weights().adapted and pooled.weights().values[SEM] > BASE[SEM]
    assert not alone.weights().adapted  # agent two gave no feedback of its own
    assert {e.agent for e in m2.store("team").feedback_events(100)} == {"one"}
    assert m1.store("agent").feedback_counts()["accepted"] == 18  # still the agent's own too
    m1.close()
    m2.close()
    with pytest.raises(ConfigError, match="feedbackPool"):
        brain(VaultManager.at({"agent": str(tmp_path / "x.db")}), feedback_pool="team")


def test_random_feedback_costs_little_on_either_half():
    """Adversarial (random) feedback on the starter pack: neither the unseen half nor the
    queries given the feedback lose more than 0.02 nDCG@10 (the trust guard: random
    verdicts disagree with text relevance, so they move neither weights nor their queries)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from eval import feedback_sim as sim

    queries, qrels = sim.load_set()
    fed, unseen = sim.halves(queries, "tune")
    run = sim.run_policy("learned", "random", fed, unseen, qrels, checkpoints=(0, 100))
    before, after = run["curve"][0], run["curve"][-1]
    assert after["events"] == 100
    assert before["unseen"] - after["unseen"] <= 0.02
    assert before["fed"] - after["fed"] <= 0.02
    assert after["nudge_trust"] == 0.0  # the feedback was read and judged: not trusted


def test_config_keys_and_migration(tmp_path):
    cfg = tmp_path / "agent.yaml"
    cfg.write_text("brain:\n  adaptation: seed\n  feedbackPool: team\n  refitEvery: 5\n")
    b = load_settings(str(cfg)).brain
    assert (b.adaptation, b.feedback_pool, b.refit_every) == ("seed", "team", 5)
    assert load_settings(None).brain.adaptation == "learned"
    cfg.write_text("brain:\n  adaptation: magic\n")
    with pytest.raises(ConfigError, match="brain.adaptation"):
        load_settings(str(cfg))
    # a v2 tier with feedback migrates: old rows keep working, with no agent and no context
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=2)
    conn.execute("INSERT INTO feedback(query, entry_id, action, created_at) VALUES ('q', 'x', 'accepted', 1)")
    conn.close()
    old = TierStore(path, read_only=True)  # readable as is (not migrated): no context, no history
    assert old.feedback_events(5) == [FeedbackEvent(1, "q", "x", "accepted", 1.0, "", "")]
    assert old.feedback_events_for(["x"], 5)[0].context == "" and old.weight_history() == []
    old.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2
    store = TierStore(path)
    assert store.feedback_events(5) == [FeedbackEvent(1, "q", "x", "accepted", 1.0, "", "")]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()


def test_cli_feedback_and_stats_show_the_learned_weights(tmp_path):
    (tmp_path / "agent.yaml").write_text(
        f"agent_id: cli\ntiers:\n  agent: {tmp_path / 'agent.db'}\n  team: {tmp_path / 'team.db'}\n"
        "brain:\n  feedbackThreshold: 2\n  refitEvery: 2\n")
    m = VaultManager.at({"agent": str(tmp_path / "agent.db"), "team": str(tmp_path / "team.db")})
    m.capture_many(filler(30), tier="team")
    m.capture_many([E(id="good-0", title="Kafka Consumer Lag", description="Handle kafka consumer lag.",
                      severity="suggestion"),
                    E(id="loud-0", title="Critical kafka outage rule", description="Page someone.",
                      severity="critical")], tier="team")
    m.close()

    def cli(*args: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "tiervault", "--config", str(tmp_path / "agent.yaml"),
                              *args, "--json"], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    cli("feedback", "good-0", "accepted", "--query", "kafka consumer lag")
    out = cli("feedback", "loud-0", "dismissed", "--query", "kafka consumer lag")
    assert out["adapted"] and out["weights"]["semantic"] > BASE[SEM]
    stats = cli("stats")
    assert stats["adaptation"] == "learned" and stats["weightEvents"] == 2
    assert stats["weightHistory"][0]["pairs"] == 1
    text = subprocess.run([sys.executable, "-m", "tiervault", "--config", str(tmp_path / "agent.yaml"),
                           "stats"], capture_output=True, text=True, check=True).stdout
    assert "learned from 2 feedback actions" in text and "history" in text
    assert stats["nudgeTrust"] is None and "same-query nudge trust: unchecked" in text  # 1 pair


def test_cli_search_warns_once_about_a_damaged_feedback_row(tmp_path):
    config = tmp_path / "agent.yaml"
    config.write_text(f"agent_id: cli\ntiers:\n  agent: {tmp_path / 'agent.db'}\n")
    m = VaultManager.at({"agent": str(tmp_path / "agent.db")})
    m.capture_many(filler(10) + [E(id=f"lag-{i}", title=f"Kafka consumer lag {i}",
                                   description=f"Watch the consumer lag {i}.") for i in range(3)],
                   tier="agent")
    m.close()

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tiervault", "--config", str(config), *args],
                              capture_output=True, text=True, timeout=120)

    assert cli("feedback", "lag-1", "accepted", "--query", "consumer lag watch").returncode == 0
    db = sqlite3.connect(tmp_path / "agent.db")
    with db:
        db.execute("UPDATE feedback SET context = '{\"signals\": [1.0, \"sk-secret-zz' WHERE seq = 1")
    db.close()
    r = cli("search", "kafka topic")
    assert r.returncode == 0 and "lag-1" in r.stdout and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "WARNING" in lines[0] and "feedback #1 on entry 'lag-1'" in lines[0]
    assert "sk-secret" not in r.stderr


def test_team_pooling_on_a_postgresql_team_tier(pg_tier, tmp_path):
    """The pooled feedback, its context and the weight history live in a PostgreSQL team tier."""
    from tiervault.vault.manager import Tier

    team = pg_tier()
    team.capture_many(filler(30))
    for i, topic in enumerate(TOPICS):
        team.capture(E(id=f"good-{i}", title=topic.title(), description=f"How to handle {topic} well.",
                       severity="suggestion"))
        team.capture(E(id=f"loud-{i}", title=f"Critical {topic.split()[0]} outage rule",
                       description="Always page someone.", severity="critical"))
    agent = TierStore(tmp_path / "agent.db", name="agent")
    with VaultManager([Tier("agent", str(agent.path), 1.0, store=agent),
                       Tier("team", team.location, 0.6, store=team)]) as m:
        b = brain(m, agent_id="pg-agent", feedback_pool="team")
        give_feedback(b, 3)
        events = team.feedback_events(100)
        assert len(events) == 36 and {e.agent for e in events} == {"pg-agent"}
        assert learning.FeedbackContext.from_json(events[0].context).signals is not None
        assert [r.events for r in team.weight_history()] == [30]
        assert b.weights().adapted and b.weights().values[SEM] > BASE[SEM]
        assert b.stats()["weightHistory"][0]["pairs"] == len(TOPICS)


def test_health_page_shows_the_learned_weights_and_their_history(manager):
    from starlette.testclient import TestClient

    from tiervault.server.principal import Principal
    from tiervault.web import LocalAccess, create_web_app

    b = brain(manager)
    give_feedback(b, 4)  # refits at the 30th and 40th action
    client = TestClient(create_web_app(lambda p: b, LocalAccess(Principal("t", {"agent": "rw", "team": "rw"}),
                                                               "tok")), base_url="http://127.0.0.1")
    client.cookies.set("tiervault_token", "tok")
    html = client.get("/health").text
    assert "learned from 40 actions" in html and 'id="weight-history"' in html
    table = html[html.index('id="weight-history"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 3  # header + two refits, newest first
    assert table.index("<td class=\"num\">40</td>") < table.index("<td class=\"num\">30</td>")

