"""Issue 10 / 16: the vector signal's scaling, pseudo-relevance feedback, the query's
stop words in the lexical leg, and the odd / even query split of eval/beir.py.

Real tier files and the real Brain; the formulas checked on small arrays.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tiervault.brain import combine
from tiervault.brain.expansion import expansion_terms
from tiervault.config import BrainConfig
from tiervault.errors import ValidationError
from tiervault.vault.entry import Entry

from brain_vault import entry, fixed_brain, vault_at

ROOT = Path(__file__).resolve().parents[1]



def filler(n: int) -> list[Entry]:
    topics = ["kafka topic retention", "terraform state locking", "css grid layout",
              "bash strict mode", "dns ttl caching", "cron schedule syntax"]
    return [entry(id=f"filler-{i}", title=f"{topics[i % len(topics)].title()} {i}",
              description=f"Notes on {topics[i % len(topics)]} number {i}.") for i in range(n)]


@pytest.fixture
def manager(tmp_path: Path):
    yield from vault_at(tmp_path, "agent")


brain = fixed_brain


# -- the vector signal's scale -------------------------------------------------------------
def test_vector_relevance_scales():
    cos = np.array([0.1, 0.3, 0.5, 0.7, np.nan])
    np.testing.assert_allclose(combine.vector_relevance(cos, 0.2, "max"),
                               [0, 0.1 / 0.5, 0.3 / 0.5, 1.0, 0])
    # minmax: the weakest candidate with a vector (0.1) is below the floor, so the floor is 0
    np.testing.assert_allclose(combine.vector_relevance(cos, 0.2, "minmax"),
                               combine.vector_relevance(cos, 0.2, "max"))
    np.testing.assert_allclose(combine.vector_relevance(cos, 0.0, "minmax"),
                               [0, 1 / 3, 2 / 3, 1.0, 0])
    z = combine.vector_relevance(cos, 0.0, "zscore")
    have = np.array([0.1, 0.3, 0.5, 0.7])
    mu, sd = have.mean(), have.std()
    want = np.clip(((have - mu) / sd + 1) / ((0.7 - mu) / sd + 1), 0, 1)
    np.testing.assert_allclose(z[:4], want)
    assert z[4] == 0 and z[3] == 1.0
    # nothing above the floor: no evidence at all, whatever the scale
    for scale in ("max", "minmax", "zscore"):
        assert not combine.vector_relevance(np.array([0.01, 0.02]), 0.05, scale).any()
    with pytest.raises(ValidationError, match="vector_scale"):
        combine.vector_relevance(cos, 0.0, "rank")


def test_vector_gain_moves_r_toward_the_vector():
    sem, vec = np.array([1.0, 0.2]), np.array([0.1, 1.0])
    r1 = combine.relevance(sem, vec, 0.2, 0.15)
    r2 = combine.relevance(sem, vec, 0.2, 2.0 * 0.15)
    assert r2[1] - r2[0] > r1[1] - r1[0]
    np.testing.assert_allclose(r2, (0.2 * sem + 0.3 * vec) / 0.5)


# -- pseudo-relevance feedback -------------------------------------------------------------
def test_expansion_terms_come_from_the_feedback_entries_and_skip_query_words(manager):
    manager.capture_many(filler(20))
    docs = [entry(id="a", title="Load shedding", description="Shed load: reject requests with 503 "
                                                          "when the queue is full; backpressure."),
            entry(id="b", title="Backpressure", description="Apply backpressure, reject early.")]
    manager.capture_many(docs)
    terms = expansion_terms(docs, [1.0, 0.5], "turn away excess traffic", manager, None, 3)
    assert terms and "backpressure" in terms
    assert not {"turn", "away", "excess", "traffic"} & set(terms)
    assert len(terms) == len(set(terms)) <= 3


def test_prf_finds_an_entry_that_shares_no_word_with_the_query(manager):
    manager.capture_many(filler(30))
    manager.capture_many([
        entry(id="shed", title="Reject excess traffic early",
          description="Reject excess traffic with 503 and a Retry-After header: load shedding "
                      "keeps the queue short; apply backpressure upstream."),
        entry(id="bp", title="Backpressure between services",
          description="Apply backpressure upstream; load shedding at the edge.")])
    query = "reject excess traffic"
    plain = [r["id"] for r in brain(manager, prf_terms=0).search_intelligent(query, limit=10)]
    assert "bp" not in plain  # no word in common with the query
    rows = brain(manager, prf_terms=5, prf_weight=0.3).search_intelligent(
        query, limit=10, explain=True)
    ids = [r["id"] for r in rows]
    assert ids == ["shed", "bp"]  # found through the expansion, below the direct match
    assert rows[1]["explain"]["via"] == "expansion"


def test_prf_off_ignores_its_other_knobs(manager):
    manager.capture_many(filler(30))
    q = "terraform state locking"
    off = [r["id"] for r in brain(manager, prf_terms=0).search_intelligent(q)]
    assert off == [r["id"] for r in brain(manager, prf_terms=0, prf_weight=0.9,
                                          prf_docs=1).search_intelligent(q)]
    assert BrainConfig().prf_terms == 0  # opt-in: a second lexical pass (bench/prf_cost.py)


# -- the query's stop words ----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["english"])  # "function": tests/test_function_words.py
def test_query_stopwords_drop_function_words_from_the_lexical_leg(manager, mode):
    manager.capture_many(filler(30))
    manager.capture_many([
        entry(id="how-notes", title="How to and what to", description="How do I what is the way."),
        entry(id="grid", title="CSS grid", description="Lay out a page with css grid areas.")])
    q = "how do I lay out a page with css grid"
    kept = [r["id"] for r in brain(manager, query_stopwords="off",
                                   prf_terms=0).search_intelligent(q, limit=40)]
    dropped = [r["id"] for r in brain(manager, query_stopwords=mode,
                                      prf_terms=0).search_intelligent(q, limit=40)]
    assert "how-notes" in kept and "how-notes" not in dropped  # matched only stop words
    assert dropped[0] == "grid"
    # a query of stop words only is searched whole, never emptied
    only = brain(manager, query_stopwords=mode, prf_terms=0).search_intelligent(
        "how to", limit=40)
    assert "how-notes" in [r["id"] for r in only]


# -- eval/beir.py --split --------------------------------------------------------------------
def test_beir_half_splits_by_query_id_parity():
    sys.path.insert(0, str(ROOT))
    from eval.beir import half

    qs = {"1": "a", "2": "b", "3": "c", "10": "d", "q7": "e"}
    assert list(half(qs, "odd")) == ["1", "3", "q7"]
    assert list(half(qs, "even")) == ["2", "10"]
    assert half(qs, "all") == qs
    assert set(half(qs, "odd")) | set(half(qs, "even")) == set(qs)
