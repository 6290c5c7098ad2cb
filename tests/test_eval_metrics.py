"""eval.metrics against hand-computed values of the standard formulas."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # eval/ is not installed

from eval.metrics import METRICS, evaluate, per_query  # noqa: E402
from tiervault.errors import ValidationError  # noqa: E402


def _ranked(hits: dict[str, float]) -> list[str]:
    # trec_eval's order: score descending, ties by doc id descending.
    return [d for d, _ in sorted(hits.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def _dcg(gains: list[int]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def _reference(hits: dict[str, float], judged: dict[str, int]) -> dict[str, float]:
    """Textbook nDCG@10 (linear gain), Recall@100, MRR@10, written out independently."""
    ranking = _ranked(hits)
    gains = [max(judged.get(d, 0), 0) for d in ranking[:10]]
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    ndcg = _dcg(gains) / _dcg(ideal) if ideal else 0.0
    relevant = {d for d, g in judged.items() if g > 0}
    recall = len(relevant & set(ranking[:100])) / len(relevant) if relevant else 0.0
    mrr = next((1.0 / (i + 1) for i, d in enumerate(ranking[:10]) if d in relevant), 0.0)
    return {"ndcg@10": ndcg, "recall@100": recall, "mrr@10": mrr}


def test_single_graded_query_by_hand():
    qrels = {"q1": {"d1": 2, "d2": 1, "d3": 0}}
    run = {"q1": {"d3": 0.9, "d1": 0.8, "dx": 0.7, "d2": 0.6}}
    # Ranks: d3 (gain 0), d1 (2), dx (0), d2 (1).
    dcg = 0 / math.log2(2) + 2 / math.log2(3) + 0 / math.log2(4) + 1 / math.log2(5)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    got = evaluate(run, qrels)
    assert got["ndcg@10"] == pytest.approx(dcg / idcg, abs=1e-4)
    assert got["ndcg@10"] == pytest.approx(0.6433, abs=1e-4)  # 1.6925 / 2.6309
    assert got["recall@100"] == pytest.approx(1.0)
    assert got["mrr@10"] == pytest.approx(0.5)
    assert set(got) == set(METRICS)


def test_perfect_and_useless_rankings():
    qrels = {"q": {"a": 1, "b": 1}}
    assert evaluate({"q": {"a": 2.0, "b": 1.0, "c": 0.5}}, qrels) == pytest.approx(
        {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0})
    assert evaluate({"q": {"c": 1.0, "d": 0.5}}, qrels) == pytest.approx(
        {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0})


def test_cutoffs_at_10_and_100():
    # One relevant doc at rank 11, another at rank 101: outside MRR@10 / nDCG@10,
    # and only the first inside Recall@100.
    hits = {f"n{i:03d}": 1000.0 - i for i in range(1, 120)}
    hits["rel_a"] = 1000.0 - 10.5   # rank 11
    hits["rel_b"] = 1000.0 - 99.5   # rank 101 (99 n-docs and rel_a above it)
    qrels = {"q": {"rel_a": 1, "rel_b": 1}}
    assert _ranked(hits).index("rel_a") == 10 and _ranked(hits).index("rel_b") == 100
    got = evaluate({"q": hits}, qrels)
    assert got["mrr@10"] == 0.0
    assert got["ndcg@10"] == 0.0
    assert got["recall@100"] == pytest.approx(0.5)
    # Moving rel_a to rank 10 puts it inside both top-10 metrics.
    hits["rel_a"] = 1000.0 - 9.5
    got = evaluate({"q": hits}, qrels)
    assert got["mrr@10"] == pytest.approx(0.1)
    assert got["ndcg@10"] == pytest.approx((1 / math.log2(11)) / (1 + 1 / math.log2(3)), abs=1e-4)


def test_missing_and_empty_queries_count_as_zero():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    run = {"q1": {"a": 1.0}, "q2": {}, "q_unjudged": {"z": 1.0}}
    got = evaluate(run, qrels)
    # q1 perfect, q2 retrieved nothing, q3 absent: mean over all three judged queries.
    assert got == pytest.approx({"ndcg@10": 1 / 3, "recall@100": 1 / 3, "mrr@10": 1 / 3})
    per = per_query(run, qrels)
    assert set(per) == {"q1", "q2", "q3"} and per["q3"]["ndcg@10"] == 0.0


def test_ties_follow_trec_eval_order():
    # Equal scores: doc id descending, whatever the dict order.
    qrels = {"q": {"a": 1}}
    assert evaluate({"q": {"a": 1.0, "b": 1.0}}, qrels)["mrr@10"] == pytest.approx(0.5)
    assert evaluate({"q": {"b": 1.0, "a": 1.0}}, qrels)["mrr@10"] == pytest.approx(0.5)


def test_mrr_cut_uses_trec_eval_order_for_ties_at_the_boundary():
    # Ten docs share the 10th place score; the cut must keep the ones trec_eval ranks first.
    hits = {f"x{i}": 10.0 - i for i in range(9)}
    hits.update({"rel": 0.5, "zz": 0.5})  # "zz" > "rel": zz is 10th, rel is 11th
    got = evaluate({"q": hits}, {"q": {"rel": 1}})
    assert got["mrr@10"] == 0.0
    assert got["recall@100"] == 1.0


def test_random_runs_match_the_textbook_formulas():
    rng = random.Random(5)
    qrels, run = {}, {}
    for q in range(60):
        docs = [f"d{q}_{i}" for i in range(150)]
        judged = {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 15))}
        hits = {d: rng.random() for d in rng.sample(docs, rng.randint(5, 140))}
        qrels[f"q{q}"], run[f"q{q}"] = judged, hits
    per = per_query(run, qrels)
    for qid in qrels:
        expected = _reference(run[qid], qrels[qid])
        for metric in METRICS:
            assert per[qid][metric] == pytest.approx(expected[metric], abs=1e-4), (qid, metric)
    mean = evaluate(run, qrels)
    for metric in METRICS:
        assert mean[metric] == pytest.approx(
            sum(_reference(run[q], qrels[q])[metric] for q in qrels) / len(qrels), abs=1e-4)


def test_bad_input_is_a_validation_error():
    with pytest.raises(ValidationError, match="qrels"):
        evaluate({"q": {"a": 1.0}}, {})
    with pytest.raises(ValidationError, match="relevance"):
        evaluate({"q": {"a": 1.0}}, {"q": {"a": "high"}})
    with pytest.raises(ValidationError, match="scores"):
        evaluate({"q": {"a": "best"}}, {"q": {"a": 1}})
