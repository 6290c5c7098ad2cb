"""nDCG@10, Recall@100 and MRR@10 through trec_eval (``pytrec-eval-terrier``).

The numbers come from trec_eval itself (the reference implementation TREC,
BEIR and Anserini report), via the ``pytrec_eval`` bindings shipped by the
``pytrec-eval-terrier`` wheel in the ``[bench]`` extra. We only add three
conventions on top, each a known trap when calling trec_eval directly:

* **Averaged over every judged query.** trec_eval averages over the queries
  present in the run; a query that retrieved nothing would silently drop out
  and inflate the mean. Here it counts as 0 for every metric.
* **MRR@10** is trec_eval's ``recip_rank`` on the run cut to its top 10 (the
  measure has no cutoff parameter). The cut uses trec_eval's own ordering.
* **Ties.** trec_eval orders by score descending, then by doc id *descending*
  (``strcmp``), ignoring the order of the dict. Callers who need another order
  for equal scores must make the scores distinct (e.g. from ranks).

nDCG uses trec_eval's definition: gain = relevance grade (linear, not 2^rel-1),
discount log2(rank + 1), ideal ranking from all judged documents of the query;
relevance <= 0 is non-relevant for recall and MRR.
"""

from __future__ import annotations

from typing import Mapping

from tiervault.errors import ValidationError

__all__ = ["evaluate", "per_query", "METRICS"]

METRICS = ("ndcg@10", "recall@100", "mrr@10")
_TREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "mrr@10": "recip_rank"}


def _pytrec_eval():
    try:
        import pytrec_eval
    except ImportError as exc:  # optional dependency: say how to get it
        raise ImportError("eval.metrics needs pytrec-eval-terrier: "
                          "pip install 'tiervault[bench]'") from exc
    return pytrec_eval


def _top(hits: Mapping[str, float], k: int) -> dict[str, float]:
    """The first ``k`` docs in trec_eval's order (score desc, then doc id desc)."""
    ranked = sorted(hits.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return dict(ranked[:k])


def _check(run: Mapping[str, Mapping[str, float]],
           qrels: Mapping[str, Mapping[str, int]]) -> tuple[dict, dict]:
    clean_qrels: dict[str, dict[str, int]] = {}
    for qid, judged in qrels.items():
        try:
            clean_qrels[str(qid)] = {str(d): int(r) for d, r in judged.items()}
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"qrels[{qid!r}]", f"relevance must be integers ({exc})") from exc
    clean_run: dict[str, dict[str, float]] = {}
    for qid, hits in run.items():
        try:
            clean_run[str(qid)] = {str(d): float(s) for d, s in hits.items()}
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"run[{qid!r}]", f"scores must be numbers ({exc})") from exc
    return clean_run, clean_qrels


def per_query(run: Mapping[str, Mapping[str, float]],
              qrels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, float]]:
    """Metric values per judged query (missing or empty run -> 0.0 for each)."""
    pytrec_eval = _pytrec_eval()
    clean_run, clean_qrels = _check(run, qrels)
    # trec_eval needs at least one judged doc per query it scores; an empty
    # judgement set scores 0 everywhere, as an unanswerable query should.
    judged = {q: j for q, j in clean_qrels.items() if j}
    out = {q: {m: 0.0 for m in METRICS} for q in clean_qrels}
    scored_run = {q: h for q, h in clean_run.items() if q in judged and h}
    if not scored_run:
        return out
    full = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "recall.100"})
    for qid, vals in full.evaluate(scored_run).items():
        out[qid]["ndcg@10"] = float(vals["ndcg_cut_10"])
        out[qid]["recall@100"] = float(vals["recall_100"])
    cut = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"})
    for qid, vals in cut.evaluate({q: _top(h, 10) for q, h in scored_run.items()}).items():
        out[qid]["mrr@10"] = float(vals["recip_rank"])
    return out


def evaluate(run: Mapping[str, Mapping[str, float]],
             qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 over every query in ``qrels``.

    ``run``: query id -> {doc id: score} (higher is better); queries of the run
    that are not in ``qrels`` are ignored. Returns ``{"ndcg@10", "recall@100", "mrr@10"}``.
    """
    if not qrels:
        raise ValidationError("qrels", "is empty; nothing to evaluate against")
    values = per_query(run, qrels)
    n = len(values)
    return {m: sum(v[m] for v in values.values()) / n for m in METRICS}
