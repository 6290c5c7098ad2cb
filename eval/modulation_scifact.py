"""Modulations on SciFact (issue 15): what ``diverse`` and ``suppress`` do to real rankings.

    python eval/modulation_scifact.py [--data ../shared/data/beir/scifact] [--json out.json]

SciFact (test qrels, every judged query) in one tier, the ``local`` MiniLM embedder
(document vectors from the eval cache), ``search_intelligent`` hybrid, top 10:

- ``plain``: no modulation;
- ``diverse``: ``modulate="diverse"`` — nDCG@10 kept (target >= 85% of plain) and the mean
  pairwise cosine of the top 10 (should fall);
- ``suppress``: ``modulate="suppress:@<plain's top result>"`` — rank-biased overlap with
  plain (p = 0.9, over the top 10; target < 0.8) and how many rows remain (not emptied).

Nothing here is tuned: the defaults of :mod:`tiervault.brain.modulation` are measured as
they are.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from beir import DEFAULT_CACHE, DEFAULT_DATA, TIER, Runner, make_embedder, to_run  # noqa: E402
from beir_data import load  # noqa: E402
from metrics import evaluate  # noqa: E402


def rbo(a: list[str], b: list[str], p: float = 0.9) -> float:
    """Rank-biased overlap over the given depth: (1-p) * sum_d p^(d-1) * |A_d & B_d| / d,
    normalised by its value for identical lists."""
    depth = max(len(a), len(b))
    if depth == 0:
        return 1.0
    score = norm = 0.0
    for d in range(1, depth + 1):
        w = (1 - p) * p ** (d - 1)
        score += w * len(set(a[:d]) & set(b[:d])) / d
        norm += w
    return score / norm


def mean_pairwise(vecs: np.ndarray) -> float:
    if len(vecs) < 2:
        return 0.0
    v = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
    sims = v @ v.T
    return float(sims[np.triu_indices(len(v), 1)].mean())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--limit-queries", type=int)
    args = ap.parse_args()
    from tiervault.brain.brain import Brain

    coll = load(args.data, "test")
    queries = dict(list(coll.queries.items())[: args.limit_queries])
    qrels = {q: coll.qrels[q] for q in queries}
    embedder, why = make_embedder("local", 384)
    if embedder is None:
        print(f"the local embedder is not available: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tiervault-mod-") as tmp:
        runner = Runner(coll, queries, Path(tmp), 10)
        try:
            runner.attach(embedder, DEFAULT_CACHE, Path(tmp))
            brain = Brain(runner.manager, None, vectors=runner.runtime)
            runs: dict[str, dict[str, list[str]]] = {"plain": {}, "diverse": {}, "suppress": {}}
            spread: dict[str, list[float]] = {"plain": [], "diverse": []}
            overlaps, kept = [], []
            for qid, text in queries.items():
                plain = [r["id"] for r in brain.search_intelligent(text, limit=10)]
                div = [r["id"] for r in brain.search_intelligent(text, limit=10,
                                                                 modulate="diverse")]
                runs["plain"][qid], runs["diverse"][qid] = plain, div
                for name, ids in (("plain", plain), ("diverse", div)):
                    vecs = runner.runtime.vectors_for(TIER, ids) if ids else None
                    if vecs is not None:
                        spread[name].append(mean_pairwise(np.nan_to_num(vecs)))
                if plain:
                    sup = [r["id"] for r in brain.search_intelligent(
                        text, limit=10, modulate=f"suppress:@{plain[0]}")]
                    runs["suppress"][qid] = sup
                    overlaps.append(rbo(plain, sup))
                    kept.append(len(sup))
        finally:
            runner.close()
    scores = {name: evaluate(to_run(coll, ranked, 10), qrels)["ndcg@10"]
              for name, ranked in runs.items()}
    report: dict[str, Any] = {
        "dataset": coll.name, "queries": len(queries), "embedder": "local",
        "ndcg@10": scores,
        "diverse_ndcg_retention": scores["diverse"] / scores["plain"],
        "mean_pairwise_cosine_top10": {k: float(np.mean(v)) for k, v in spread.items()},
        "suppress_top1": {"rbo_mean": float(np.mean(overlaps)),
                          "rbo_median": float(np.median(overlaps)),
                          "rows_mean": float(np.mean(kept)), "rows_min": int(min(kept))},
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
