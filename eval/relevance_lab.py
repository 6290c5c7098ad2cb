"""Offline grid over the text-relevance combination, on captured candidate pools.

    python eval/relevance_lab.py scifact --half odd  [--grid '{"tfidf_share": [0.1, 0.2]}']
    python eval/relevance_lab.py agent   --half tune

Runs the Brain's own ``gather``, ``expand`` and ``score`` stages once per query
(hybrid with the ``local`` embedder, and FTS-only) and keeps every candidate's
lexical BM25, TF-IDF, cosine, prior P, tier factor and nudge. Then every
combination of the grid is re-scored with :mod:`tiervault.brain.combine` (the same
functions the Brain uses, so a cell equals a real run with those BrainConfig
values; the chosen cell is always confirmed with ``eval/beir.py`` / ``eval/agent.py``).

Only the **odd** SciFact query ids / the starter **tune** half are for choosing;
``--half even`` / ``report`` exists to print the held-out figure of a choice made
before. Knobs (BrainConfig fields): ``tfidf_share``, ``vector_floor``,
``vector_scale`` (max | minmax | zscore), ``vector_gain``, ``prior_strength``,
``proximity_weight`` / ``hybrid_proximity_weight`` (the proximity feature itself is captured with the capture
config's window; ``eval/lexical_lab.py`` grids the window).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.metrics import per_query  # noqa: E402

DEPTH = 100


@dataclass
class Captured:
    """One query's candidate pool as the Brain saw it."""

    ids: list[str]
    lexical: np.ndarray
    tfidf: np.ndarray
    cosines: np.ndarray  # NaN: no vector; all NaN for FTS-only
    prior: np.ndarray
    tier_factor: np.ndarray
    nudge: np.ndarray
    w_sem: float
    w_vec: float
    w_text: float
    expansion: np.ndarray | None = None  # BM25 under the PRF expansion query
    proximity: np.ndarray | None = None  # brain/proximity.py (computed for every capture)


def capture(brain: Any, text: str, filters: dict[str, Any] | None = None) -> Captured:
    """The pool of one query after gather / expand / score (scan, limit DEPTH)."""
    from tiervault.brain import stages
    from tiervault.vault.query import hashtags
    from tiervault.brain.matrix import pick
    from tiervault.brain.modulation_spec import Modulations
    from tiervault.vault.filters import Filters

    f = Filters.build(**(filters or {}))
    ctx = stages.ScoringContext(
        query=text, mode="scan", limit=DEPTH, limit_given=True, filters=f, tiers=None,
        query_tags=list(dict.fromkeys([*f.tags, *hashtags(text)])),
        query_domain=f.domains[0] if len(f.domains) == 1 else None, include_memories=False,
        explain=False, fusion="signals", now=brain.clock(), config=brain.config,
        modulations=Modulations())
    for st in (stages.gather, stages.expand, stages.score):
        st(brain, ctx)
    w = ctx.weights.array
    w_sem, w_vec = (float(x) for x in pick(w, ("semantic", "vector")))
    n = len(ctx.pool)
    cos = ctx.cosines if ctx.qvec is not None else np.full(n, np.nan)
    return Captured(list(ctx.pool.ids), np.asarray(ctx.pool.lexical, dtype=float),
                    np.asarray(ctx.pool.tfidf, dtype=float), np.asarray(cos, dtype=float),
                    np.asarray(ctx.prior), np.asarray(ctx.tier_factor), np.asarray(ctx.nudge),
                    w_sem, w_vec, w_sem + w_vec,
                    None if ctx.expansion is None else np.asarray(ctx.expansion.lexical),
                    np.asarray(ctx.proximity, dtype=float))


def rescore(c: Captured, knobs: dict[str, Any], hybrid: bool) -> list[str]:
    """The ranking with these BrainConfig knobs (same rule as brain/relevance.py)."""
    from tiervault.brain import combine, signals

    share = knobs.get("tfidf_share", 0.2)
    if hybrid and "hybrid_tfidf_share" in knobs:
        share = knobs["hybrid_tfidf_share"]
    lex_q = combine.per_query_scale(c.lexical)
    if c.expansion is not None:
        lam = knobs.get("prf_weight", 0.3)
        lex_q = combine.per_query_scale((1 - lam) * lex_q + lam * combine.per_query_scale(c.expansion))
    mu = (knobs.get("hybrid_proximity_weight", 0.3) if hybrid
          else knobs.get("proximity_weight", 0.0))
    if mu and c.proximity is not None and c.proximity.any():
        lex_q = combine.per_query_scale(lex_q + mu * c.proximity)
    sem = signals.semantic(combine.per_query_scale(c.tfidf), lex_q, share)
    if hybrid and not np.isnan(c.cosines).all():
        vec = combine.vector_relevance(c.cosines, knobs.get("vector_floor", 0.05),
                                       knobs.get("vector_scale", "max"))
        g = knobs.get("vector_gain", 1.0)
        rel = np.where(~np.isnan(c.cosines), combine.relevance(sem, vec, c.w_sem, g * c.w_vec), sem)
    else:
        rel = sem
    beta = combine.prior_strength(knobs.get("prior_strength", 0.2), c.w_text)
    raw = combine.combine(rel, c.prior, beta, c.tier_factor, c.nudge)
    score = combine.below_direct(raw, rel > 0, c.prior)
    order = sorted(range(len(c.ids)), key=lambda i: (-score[i], i))
    return [c.ids[i] for i in order[:DEPTH]]


def grid_cells(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*grid.values())]


DEFAULT_GRID = {"tfidf_share": [0.1, 0.2, 0.3], "vector_floor": [0.0, 0.05, 0.1, 0.2],
                "vector_scale": ["max", "minmax", "zscore"], "vector_gain": [0.75, 1.0, 1.33, 1.75]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", choices=("scifact", "agent", "ops"))
    ap.add_argument("--half", required=True, help="odd|even|all (scifact), tune|report|all (agent)")
    ap.add_argument("--grid", help="JSON {knob: [values]} (default: a grid over every knob)")
    ap.add_argument("--config", default="{}", help="JSON BrainConfig fields for the capture")
    ap.add_argument("--scifact", type=Path,
                    default=Path("/work/shared/data/beir/scifact"))
    ap.add_argument("--out", type=Path, help="write every cell as JSON here")
    args = ap.parse_args(argv)
    grid = json.loads(args.grid) if args.grid else DEFAULT_GRID
    from tiervault.config import BrainConfig, Settings
    from tiervault.brain.brain import Brain
    from eval.beir import DEFAULT_CACHE, make_embedder

    cfg = replace(BrainConfig(), **json.loads(args.config))
    settings = Settings(agent_id="lab", tiers=(), embedding=None, features=frozenset(),
                        brain=cfg, config_path=None)
    emb, why = make_embedder("local", 384)
    if emb is None:
        raise SystemExit(why)
    tmp = Path(tempfile.mkdtemp(prefix="tiervault-lab-"))
    if args.data == "scifact":
        from eval.beir import Runner, beir_half

        bh = beir_half(args.scifact, args.half)
        items, qrels, now, to_doc = bh.items, bh.qrels, None, bh.coll.run_to_doc_ids
        runner = Runner(bh.coll, bh.queries, tmp, DEPTH)
        runner.attach(emb, DEFAULT_CACHE, tmp)
        manager, runtime = runner.manager, runner.runtime
    else:
        from eval import agent as A

        ds = A.dev_set_half(args.data, args.half)
        items, qrels, now = ds.items, ds.qrels, ds.now
        runner = A.AgentRunner(ds.pack, tmp, now)
        runner.attach(emb, DEFAULT_CACHE)
        manager, runtime = runner.manager, runner.runtime
        to_doc = None
    clock = {"clock": (lambda: now)} if now is not None else {}
    fts = Brain(manager, settings, **clock)
    hyb = Brain(manager, settings, vectors=runtime, **clock)
    cap_f = {q: capture(fts, t, f) for q, t, f in items}
    cap_h = {q: capture(hyb, t, f) for q, t, f in items}
    cells = []
    for knobs in grid_cells(grid):
        row: dict[str, Any] = {"knobs": knobs}
        for name, caps, hybrid in (("fts", cap_f, False), ("hybrid", cap_h, True)):
            run = {q: {e: float(DEPTH - i) for i, e in enumerate(rescore(c, knobs, hybrid))}
                   for q, c in caps.items()}
            if to_doc is not None:
                run = to_doc(run)
            pq = {q: v["ndcg@10"] for q, v in per_query(run, qrels).items()}
            row[name] = round(float(np.mean(list(pq.values()))), 4)
        cells.append(row)
        print(json.dumps(row), flush=True)
    best_h = max(cells, key=lambda r: r["hybrid"])
    best_f = max(cells, key=lambda r: r["fts"])
    print("best hybrid", json.dumps(best_h), "\nbest fts", json.dumps(best_f))
    if args.out:
        args.out.write_text(json.dumps({"data": args.data, "half": args.half, "queries": len(items),
                                        "capture_config": json.loads(args.config), "grid": grid,
                                        "cells": cells}, indent=1) + "\n")
    runner.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
