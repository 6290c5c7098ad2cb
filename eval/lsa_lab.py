"""Offline test of a latent semantic (LSA) text signal for the FTS-only Brain (issue 10).

    python eval/lsa_lab.py agent   --half tune --json eval/results/lsa-grid-agent-tune.json
    python eval/lsa_lab.py scifact --half odd  --json bench/results/lsa-grid-scifact-odd.json

Idea: FTS-only has no semantic signal beyond shared words. LSA gives one from the
tier's own text, without a model: a rank-k truncated SVD of the tier's l2 TF-IDF
matrix (the Postings mirror's ``T``, the same matrix the Brain's TF-IDF cosine
uses), ``T ~ U S V^T``; an entry's latent vector is its row of ``T V`` and the
query's is ``q V`` (q = the query's l2 TF-IDF row, ``Postings.query_tfidf``);
lsa = max(0, cosine) of the two. Mixed into the semantic signal like the TF-IDF
share:

    semantic = (1 - a - b) * lex_q + a * tfidf_q + b * lsa_q     (each / the query's best)

with a = 0.3 (today's FTS-only ``tfidf_share``), b in {0, 0.1, 0.2, 0.3} and
k in {64, 128, 256} (TruncatedSVD, randomized, random_state 0; k capped at
min(docs, terms) - 1). The rest (prior, tier factor, below-direct) is
``eval/relevance_lab.rescore``'s FTS-only path; b = 0 must reproduce it exactly
(checked per query). The pool is the Brain's own FTS-only candidate pool
(captured through its stages with today's defaults), so LSA re-orders entries
that have lexical evidence; it does not add candidates (the lexical ceiling of
eval/README.md says recall is not the gap).

Only the agent set's **tune** half and SciFact **odd** ids are for choosing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.metrics import per_query  # noqa: E402
from eval.relevance_lab import DEPTH, Captured, capture, rescore  # noqa: E402

A_SHARE = 0.3
B_GRID = (0.0, 0.1, 0.2, 0.3)
K_GRID = (16, 32, 64, 128, 256)  # 16, 32: beyond the brief's grid (the starter tier has 210 entries)


def ranked(c: Captured, lsa: np.ndarray, b: float) -> list[str]:
    """The FTS-only ranking with the LSA share b (relevance_lab.rescore's rule otherwise)."""
    from tiervault.brain import combine

    lex_q = combine.per_query_scale(c.lexical)
    t_q = combine.per_query_scale(c.tfidf)
    l_q = combine.per_query_scale(lsa)
    rel = (1 - A_SHARE - b) * np.clip(lex_q, 0, 1) + A_SHARE * np.clip(t_q, 0, 1) + b * l_q
    beta = combine.prior_strength(0.2, c.w_text)
    raw = combine.combine(rel, c.prior, beta, c.tier_factor, c.nudge)
    score = combine.below_direct(raw, rel > 0, c.prior)
    order = sorted(range(len(c.ids)), key=lambda i: (-score[i], i))
    return [c.ids[i] for i in order[:DEPTH]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", choices=("scifact", "agent", "ops"))
    ap.add_argument("--half", required=True)
    ap.add_argument("--scifact", type=Path, default=Path("/work/shared/data/beir/scifact"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from sklearn.decomposition import TruncatedSVD

    from tiervault.brain.brain import Brain
    from tiervault.config import BrainConfig, Settings

    settings = Settings(agent_id="lab", tiers=(), embedding=None, features=frozenset(),
                        brain=BrainConfig(), config_path=None)
    tmp = Path(tempfile.mkdtemp(prefix="tiervault-lsalab-"))
    if args.data == "scifact":
        from eval.beir import TIER, Runner, beir_half

        bh = beir_half(args.scifact, args.half)
        items, qrels, now, to_doc = bh.items, bh.qrels, None, bh.coll.run_to_doc_ids
        runner = Runner(bh.coll, bh.queries, tmp, DEPTH)
    else:
        from eval import agent as A

        TIER = A.TIER
        ds = A.dev_set_half(args.data, args.half)
        items, qrels, now = ds.items, ds.qrels, ds.now
        runner = A.AgentRunner(ds.pack, tmp, now)
        to_doc = None
    m = runner.manager
    clock = {"clock": (lambda: now)} if now is not None else {}
    fts = Brain(m, settings, **clock)
    caps = {q: capture(fts, t, f) for q, t, f in items}
    p = m.store(TIER).postings()
    T = p.T.tocsc().tocsr()
    if p.delta_T:
        raise SystemExit("mirror has delta rows; the lab expects a freshly built tier")
    qrows = {}
    for q, t, _ in items:
        lq = m.lexical_query(t)
        qrows[q] = p.query_tfidf(list(lq.words))

    def evaluate(lsa_of: dict[str, np.ndarray], b: float) -> float:
        run = {q: {e: float(DEPTH - i) for i, e in enumerate(ranked(c, lsa_of[q], b))}
               for q, c in caps.items()}
        if to_doc is not None:
            run = to_doc(run)
        return round(float(np.mean([v["ndcg@10"] for v in per_query(run, qrels).values()])), 4)

    # b = 0 must be today's FTS-only ranking, query by query
    zeros = {q: np.zeros(len(c.ids)) for q, c in caps.items()}
    for q, c in caps.items():
        assert ranked(c, zeros[q], 0.0) == rescore(c, {"tfidf_share": A_SHARE,
                                                      "proximity_weight": 0.0}, False), q
    base = evaluate(zeros, 0.0)
    cells: list[dict[str, Any]] = [{"k": None, "b": 0.0, "fts": base}]
    print(json.dumps(cells[0]), flush=True)
    for k in K_GRID:
        kk = min(k, min(T.shape) - 1)
        t0 = time.perf_counter()
        svd = TruncatedSVD(n_components=kk, algorithm="randomized", random_state=0)
        D = svd.fit_transform(T)
        fit_s = time.perf_counter() - t0
        D /= np.maximum(np.linalg.norm(D, axis=1, keepdims=True), 1e-12)
        V = svd.components_.T  # (terms, k)
        lsa_of = {}
        for q, c in caps.items():
            qr = qrows[q]
            if qr is None:
                lsa_of[q] = np.zeros(len(c.ids))
                continue
            tids, w = qr
            qv = w @ V[tids]
            qv /= max(float(np.linalg.norm(qv)), 1e-12)
            slots = p.slots_of(c.ids)
            lsa_of[q] = np.array([max(0.0, float(D[s] @ qv)) if s is not None else 0.0
                                  for s in slots])
        for b in B_GRID[1:]:
            row = {"k": k, "k_used": kk, "b": b, "fts": evaluate(lsa_of, b),
                   "fit_s": round(fit_s, 2)}
            cells.append(row)
            print(json.dumps(row), flush=True)
    runner.close()
    if args.json:
        args.json.write_text(json.dumps({
            "data": args.data, "half": args.half, "queries": len(items),
            "matrix": list(T.shape), "tfidf_share": A_SHARE,
            "formula": "(1-a-b)*lex_q + a*tfidf_q + b*lsa_q, FTS-only pool, defaults otherwise",
            "cells": cells}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
