"""Issue 10: text relevance decides whether an entry is relevant, the priors only the order.

Real tier files; the issue's example through the real CLI (subprocess) on the
bundled starter pack, plus the graph, tier, query-length and limit rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import combine
from tiervault.config import BrainConfig

from brain_vault import at_a_day_old, filler, fixed_brain, vault_at

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "vault" / "packs" / "starter.jsonl"
ISSUE_QUERY = ("what's the safe way to re-send a charge request to a payment provider after "
               "the first attempt timed out?")


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TIERVAULT_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "tiervault", "--config", str(home / "agent.yaml"),
                           *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def starter_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starter pack in the team tier, plus one loud, barely related agent-tier entry."""
    home = tmp_path_factory.mktemp("starter")
    (home / "agent.yaml").write_text(f"agent_id: rel\ntiers:\n  agent: {home / 'agent.db'}\n"
                                     f"  team: {home / 'team.db'}\n", encoding="utf-8")
    done = cli(home, "import", "--tier", "team", str(PACK))
    assert done.returncode == 0, done.stderr
    loud = {"id": "agent-provider-contacts", "type": "reference", "domain": "operations",
            "title": "Provider contact list", "severity": "critical",
            "description": "Who to call at each provider when the on-call rotation changes."}
    (home / "loud.jsonl").write_text(json.dumps(loud) + "\n", encoding="utf-8")
    done = cli(home, "import", "--tier", "agent", str(home / "loud.jsonl"))
    assert done.returncode == 0, done.stderr
    return home


def search_ids(home: Path, query: str, *extra: str) -> list[str]:
    done = cli(home, "search", query, "--json", *extra)
    assert done.returncode == 0, done.stderr
    return [r["id"] for r in json.loads(done.stdout)]


def test_issue_example_ranks_the_idempotency_entry_first_through_the_cli(starter_vault: Path):
    ids = search_ids(starter_vault, ISSUE_QUERY)
    assert ids[0] == "api-idempotency-keys"
    assert "rel-retry-backoff-jitter" in ids[:3]
    # the seed's inversion: a critical, well-linked entry with a weak text match came 1st
    assert "sec-secrets-out-of-source" not in ids[:5]
    # an agent-tier entry (tier weight 1.0 vs 0.6) matching only "provider" stays below
    assert ids.index("agent-provider-contacts") > ids.index("rel-retry-backoff-jitter") \
        if "agent-provider-contacts" in ids else True


def test_short_and_long_question_agree_on_the_first_entry(starter_vault: Path):
    short = search_ids(starter_vault, "resend payment charge safely")
    long = search_ids(starter_vault, ISSUE_QUERY)
    assert short[0] == long[0] == "api-idempotency-keys"


def test_explicit_limit_is_a_ceiling_through_the_cli(starter_vault: Path):
    assert len(search_ids(starter_vault, ISSUE_QUERY, "--limit", "3")) == 3


# -- the rules on small hand-made vaults --------------------------------------------------
E = at_a_day_old  # a short constructor for test data


@pytest.fixture
def manager(tmp_path: Path):
    yield from vault_at(tmp_path, "agent", "project", "team")


make_brain = fixed_brain


def test_graph_neighbour_without_text_match_ranks_below_every_direct_match(manager):
    manager.capture_many(filler(30))
    manager.capture_many([
        E(id="seed", title="Rotate JWT signing keys", description="Rotate JWT keys with kid headers."),
        E(id="weak", title="Token notes", description="Some words about jwt.", severity="suggestion"),
        E(id="hub", title="Incident commander duties", description="Run the call and the timeline.",
          severity="critical")])
    manager.link("seed", "hub", "supports")
    rows = make_brain(manager).search_intelligent("jwt signing key rotation", explain=True)
    ids = [r["id"] for r in rows]
    assert ids[:2] == ["seed", "weak"] and "hub" in ids
    hub = rows[ids.index("hub")]
    assert hub["explain"]["via"] == "graph" and hub["explain"]["relevance"] == 0
    assert hub["score"] < min(r["score"] for r in rows if r["explain"]["relevance"] > 0)


def test_graph_seeds_need_real_evidence(manager):
    manager.capture_many(filler(30))
    manager.capture_many([
        E(id="strong", title="Postgres vacuum tuning", description="Tune postgres autovacuum."),
        E(id="faint", title="Misc", description="A passing mention of postgres."),
        E(id="faint-friend", title="Unrelated friend", description="Nothing in common.")])
    manager.link("faint", "faint-friend", "supports")
    rows = make_brain(manager).search_intelligent("postgres autovacuum tuning vacuum", explain=True)
    # "faint" matches one word of four: not a seed, so its neighbour is not pulled in
    assert "faint-friend" not in [r["id"] for r in rows]


def test_irrelevant_agent_entry_does_not_outrank_relevant_team_entry(manager):
    manager.capture_many(filler(30))
    manager.capture(E(id="team-answer", title="Circuit breaker for flaky dependencies",
                      description="Open the circuit breaker after repeated dependency failures."),
                    tier="team")
    manager.capture(E(id="agent-noise", title="Dependency list", severity="critical",
                      description="Where the dependency manifest lives."), tier="agent")
    ids = [r["id"] for r in make_brain(manager).search_intelligent(
        "circuit breaker for failing dependency")]
    assert ids.index("team-answer") < ids.index("agent-noise")


def test_default_limit_may_widen_in_scan_mode_and_says_so(manager):
    manager.capture_many(filler(60))
    manager.capture_many([E(id=f"redis-{i}", title=f"Redis eviction policy {i}",
                            description="Pick an eviction policy.") for i in range(25)])
    b = make_brain(manager)
    wide = b.search_intelligent("redis eviction")  # default 10 would drop 60% of 25 matches
    assert len(wide) == 25 and wide.widened and wide.limit == 25
    given = b.search_intelligent("redis eviction", limit=5)
    assert len(given) == 5 and not given.widened and given.limit == 5
    full = b.search_intelligent("redis eviction", mode="full")
    assert len(full) == 20 and not full.widened  # full mode is never widened
    assert len(b.search_intelligent("redis eviction", mode="full", limit=3)) == 3


# -- the combination, as formulas --------------------------------------------------------
def test_combine_formulas_on_random_data():
    rng = np.random.default_rng(7)
    rel, pri, nudge = rng.random(50), rng.random(50), rng.uniform(-0.1, 0.1, 50)
    tw = rng.choice([1.0, 0.8, 0.6], 50)
    tf = combine.tier_factor(tw, 0.25)
    np.testing.assert_allclose(tf, 1 - 0.25 * (1 - tw))
    beta = combine.prior_strength(0.2, 0.35 / 0.9)
    np.testing.assert_allclose(beta, 0.2 * (1 - 0.35 / 0.9) / (0.35 / 0.9))
    s = combine.combine(rel, pri, beta, tf, nudge)
    np.testing.assert_allclose(s, rel * (1 + beta * pri) * tf * (1 + nudge))
    x = rng.random(20) * 7
    np.testing.assert_allclose(combine.per_query_scale(x), x / x.max())
    assert combine.per_query_scale(np.zeros(3)).tolist() == [0, 0, 0]
    cos = np.array([0.1, 0.4, 0.7, np.nan])
    np.testing.assert_allclose(combine.vector_relevance(cos, 0.2), [0, 0.4, 1.0, 0])
    w = rng.random(5)
    vals = rng.random((10, 5))
    np.testing.assert_allclose(combine.prior(vals, w), vals @ w / w.sum())


def test_below_direct_keeps_indirect_under_every_direct_match():
    score = np.array([0.9, 0.2, 0.0, 0.05, 0.0])
    direct = np.array([True, True, False, True, False])
    pri = np.array([0.1, 0.2, 1.0, 0.3, 0.2])
    out = combine.below_direct(score, direct, pri)
    assert out[direct].min() > out[~direct].max()
    assert out[2] > out[4]  # indirect ones keep the priors' order
    np.testing.assert_allclose(out[direct], score[direct])


def test_priors_cannot_lift_a_weak_match_over_a_strong_one():
    beta = combine.prior_strength(BrainConfig().prior_strength, 0.35 / 0.9)
    strong = combine.combine(np.array([1.0]), np.array([0.0]), beta, np.ones(1), np.zeros(1))
    weak = combine.combine(np.array([0.6]), np.array([1.0]), beta, np.ones(1), np.zeros(1))
    assert strong[0] > weak[0]


def test_cli_says_when_the_default_limit_was_widened(tmp_path: Path):
    (tmp_path / "agent.yaml").write_text(f"agent_id: w\ntiers:\n  agent: {tmp_path / 'agent.db'}\n",
                                         encoding="utf-8")
    lines = [json.dumps({"id": f"redis-{i}", "title": f"Redis eviction policy {i}",
                         "description": "Pick an eviction policy."}) for i in range(25)]
    lines += [json.dumps({"id": f"fill-{i}", "title": f"Unrelated note {i}",
                          "description": "Nothing about caches."}) for i in range(40)]
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cli(tmp_path, "import", "--tier", "agent", str(tmp_path / "p.jsonl")).returncode == 0
    wide = cli(tmp_path, "search", "redis eviction", "--json")
    assert wide.returncode == 0 and len(json.loads(wide.stdout)) == 25
    assert "returning all 25 matches" in wide.stderr
    capped = cli(tmp_path, "search", "redis eviction", "--json", "--limit", "10")
    assert len(json.loads(capped.stdout)) == 10 and "returning all" not in capped.stderr
