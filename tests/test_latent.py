"""The latent semantic (LSA) signal of FTS-only queries (brain/latent.py) on real tier files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import latent
from tiervault.vault import latent as vlatent

from brain_vault import at_a_day_old as E
from brain_vault import fixed_brain, vault_at

PAY = ["payment", "charge", "retry", "timeout", "provider", "idempotency", "duplicate", "refund"]
KAFKA = ["kafka", "consumer", "lag", "partition", "rebalance", "offset", "broker", "topic"]


def topical(prefix: str, words: list[str], n: int) -> list:
    """n entries each using 4 of the topic's words (a rotating window), nothing else."""
    return [E(id=f"{prefix}-{i}", title=" ".join(words[(i + j) % 8] for j in range(2)),
              description=" ".join(words[(i + j) % 8] for j in range(2, 4)) + ".")
            for i in range(n)]


@pytest.fixture
def manager(tmp_path: Path):
    yield from vault_at(tmp_path, "agent", "team")


def test_latent_match_without_shared_words_and_one_fit_per_base(manager):
    # above SMALL_TIER_ROWS (1,000), so a later write goes to the mirror's delta
    manager.capture_many([*topical("pay", PAY, 500), *topical("kafka", KAFKA, 500)], tier="team")
    manager.capture_many([E(id="keys", title="idempotency keys", description="duplicate refund.")],
                         tier="team")
    ids, tiers = ["keys", "kafka-0", "pay-0"], ["team"] * 3
    # "retry timeout" is not in "keys", but co-occurs with its words in the payment entries
    s = latent.scores(manager, ["retry", "timeout"], ids, tiers, 2)
    assert s[0] > 0.5 and s[1] < 0.2, s
    p = manager.store("team").postings()
    m = vlatent.model_for(p, 2)
    assert m is vlatent.model_for(p, 2)  # cached for this base matrix
    # deterministic: a second fit of the same matrix gives the same vectors
    again = vlatent.LatentModel(p.T.tocsc().tocsr(), 2)
    mine = m.rows(p, np.arange(p.base_rows))
    assert np.allclose(np.abs(again.base), np.abs(mine), atol=1e-5)
    # a write after the fit is folded in with the same V (no refit while the base stands)
    manager.capture(E(id="late", title="charge retry", description="provider timeout."),
                    tier="team")
    base = p.T
    s2 = latent.scores(manager, ["idempotency", "duplicate"], ["late", "kafka-1"], ["team"] * 2, 2)
    p2 = manager.store("team").postings()
    assert p2.T is base and p2.delta_T and vlatent.model_for(p2, 2) is m
    assert s2[0] > 0.5 and s2[1] < 0.2, s2


def test_tier_too_small_for_k_falls_back_to_lexical_and_share_zero_is_the_seed_formula(manager):
    manager.capture(E(id="one", title="Watch Kafka consumer lag", description="Alert on lag."),
                    tier="agent")
    manager.capture_many([*topical("kafka", KAFKA, 20), *topical("pay", PAY, 20)], tier="team")
    # one entry cannot hold 16 latent dimensions: NaN, the Brain then uses its lexical signal
    assert np.isnan(latent.scores(manager, ["kafka", "lag"], ["one"], ["agent"], 16)).all()
    rows = fixed_brain(manager, proximity_weight=0.0).search_intelligent(
        "kafka consumer lag", mode="full", explain=True)
    one = next(r for r in rows if r["entry"]["id"] == "one")
    # its lexical signal stood in (0 without it), on the per-query scale
    lex_top = max(r["explain"]["lexical"] for r in rows)
    assert one["explain"]["lsa"] == pytest.approx(one["explain"]["lexical"] / lex_top, abs=1e-4)
    assert one["explain"]["lsa"] > 0
    off = fixed_brain(manager, proximity_weight=0.0, lsa_share=0.0).search_intelligent(
        "kafka consumer lag", mode="full", explain=True)
    assert all(r["explain"]["lsa"] == 0.0 for r in off)
    lex = max(r["explain"]["lexical"] for r in off)
    tfidf = max(r["explain"]["tfidf"] for r in off)
    for r in off:
        assert r["breakdown"]["semantic"] == pytest.approx(
            0.3 * r["explain"]["tfidf"] / tfidf + 0.7 * r["explain"]["lexical"] / lex, abs=1e-5)


def test_scores_of_held_missing_and_other_tiers_ids_one_tier_or_several(manager):
    """brain/latent.scores and a tier's latent_scores (issue 16 session 19: every id held
    -> the scores in order at once; one tier -> no grouping): a missing id scores 0 and
    leaves the others' floats as the held ids asked alone (one product of their rows:
    the same float32 bits), a tier without latent space NaN."""
    manager.capture_many([*topical("pay", PAY, 40), *topical("kafka", KAFKA, 40)], tier="team")
    manager.capture(E(id="one", title="Watch Kafka consumer lag", description="Alert on lag."),
                    tier="agent")
    words = ["retry", "timeout", "lag"]
    store = manager.store("team")
    held = ["pay-3", "kafka-1"]
    pair = store.latent_scores(words, held, 4)
    assert pair == pytest.approx([store.latent_scores(words, [i], 4)[0] for i in held], abs=1e-6)
    assert pair[0] > 0.3 and all(isinstance(v, float) for v in pair)
    mixed = ["pay-3", "nope", "kafka-1", "one"]  # "one" is the agent tier's, not the team's
    assert store.latent_scores(words, mixed, 4) == [pair[0], 0.0, pair[1], 0.0]
    got = latent.scores(manager, words, held, ["team"] * 2, 4)
    assert got.dtype == np.float64 and got.tolist() == pair
    ids, tiers = ["pay-3", "one", "kafka-1", "gone"], ["team", "agent", "team", "agent"]
    got = latent.scores(manager, words, ids, tiers, 4)
    assert got[0] == pair[0] and got[2] == pair[1]
    assert np.isnan(got[1]) and np.isnan(got[3])  # the agent tier has no latent space
    assert latent.scores(manager, words, [], [], 4).shape == (0,)
