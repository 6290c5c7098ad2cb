"""How much can feedback lift queries it has not seen? Oracle ceilings of two mechanisms.

    python eval/feedback_ceiling.py [--split report|tune] [--embedder none|local]
                                    [--json eval/results/feedback_ceiling.json]

Every query's candidates are ranked once with no feedback (``search_intelligent``,
full mode, every candidate: the pool does not depend on the weights in FTS-only mode,
and in hybrid mode only through the text split of the graph seeds), their seven signal
values read from the breakdown, and the Brain's score is recomputed offline
(brain/combine.py)::

    R     = (w_sem * semantic + g * w_vec * vector) / (w_sem + g * w_vec)
    score = R * (1 + beta * P) * tierFactor * (1 + n_e),  beta = 0.2 * (1 - w_text) / w_text
    (R == 0: below every direct match, ordered by P)

**(a) Weights.** The weight vector maximising the mean nDCG@10 of a half, searched
over the whole simplex of the signals the base weighs (``w_text`` from 0 to 1 covers
every prior strength ``beta``): 4,000 Dirichlet samples (seed 0) around the base and
uniformly, then coordinate refinement. ``oracle_unseen`` is fitted on the unseen half's
*own* judgements — no weight learning, whatever its data, can do better on that half
with one weight vector. ``oracle_unseen_railed`` keeps the learner's guard rails
(text share >= MIN_TEXT_SHARE of the base's, L1 distance <= MAX_SHIFT). ``transfer``:
the oracle fitted on the *fed* half, applied to the unseen half (a perfect weight
learner from the fed half's judgements).

**(b) Per-entry nudges** (query-independent, ``score *= 1 + n_e``, ``|n_e| <= B``):
``oracle`` fits one n_e per entry on the unseen half's own judgements (coordinate
ascent over the grid {-B, -B/2, 0, B/2, B}, 3 passes); B = 0.1 (the shared-nudge bound)
and 0.8 (shared + own). ``from_fed``: n_e = B * tanh(accepts - dismissals of e) from the
fed half's judged verdicts on its first top 10 (the simulation's protocol), applied to
the unseen half — what a global "this entry is good" prior learned from feedback gives.
Per-(query, entry) nudges on unseen queries are the reorder ceilings of
eval/feedback_sim.py (a perfect reorder of the first top 10 / 20).

nDCG@10 is computed here with trec_eval's definition (linear gain, log2 discount,
ideal from every judged entry); ``base`` checks the recomputation against the Brain.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from eval.feedback_sim import PACK, SET_DIR, Sim, halves, load_set  # noqa: E402

SAMPLES = 4_000
SEED = 0
GRID_B = (0.1, 0.8)


class Cands:
    """One query's candidates: ids, signal matrix (n x 7), tier factor, judged grades."""

    def __init__(self, ids: list[str], sig: np.ndarray, tier: np.ndarray,
                 grades: dict[str, int]) -> None:
        self.ids, self.sig, self.tier = ids, sig, tier
        self.gain = np.array([float(grades.get(e, 0)) for e in ids])
        ideal = sorted((float(g) for g in grades.values() if g > 0), reverse=True)[:10]
        self.idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))


def collect(sim: Sim, queries: list[dict], qrels: dict) -> list[Cands]:
    from tiervault.brain.shapes import SIGNALS

    out = []
    for q in queries:
        rows = sim.brain.search_intelligent(q["text"], mode="full", limit=1000,
                                            **q.get("filters", {}))
        ids = [r["entry"]["id"] for r in rows]
        sig = np.array([[float(r["breakdown"].get(k, 0.0)) for k in SIGNALS] for r in rows])
        tier = np.array([float(r.get("explain", {}).get("tierFactor", 1.0)) for r in rows])
        out.append(Cands(ids, sig.reshape(len(rows), len(SIGNALS)), tier, qrels.get(q["id"], {})))
    return out


def scores(c: Cands, w: np.ndarray, gain: float, nudge: np.ndarray | None = None) -> np.ndarray:
    """The Brain's score of every candidate for weights w (brain/combine.py)."""
    s = c.sig
    w_sem, w_vec = w[0], gain * w[1]
    text = w[0] + w[1]
    rel = (w_sem * s[:, 0] + w_vec * s[:, 1]) / max(w_sem + w_vec, 1e-12)
    pw = w[2:]
    pri = s[:, 2:] @ pw / pw.sum() if pw.sum() > 0 else np.zeros(len(s))
    beta = 0.2 * (1 - text) / text if text > 0 else 0.2
    sc = rel * (1 + beta * pri) * c.tier
    if nudge is not None:
        sc = sc * (1 + nudge)
    direct = rel > 0
    if not direct.all():
        pos = sc[direct][sc[direct] > 0]
        low = 0.5 * float(pos.min()) if pos.size else 0.5
        sc = np.where(direct, sc, low * (0.5 + 0.5 * pri))
    return sc


def ndcg(cs: list[Cands], w: np.ndarray, gain: float,
         nudges: list[np.ndarray] | None = None) -> float:
    total = 0.0
    for qi, c in enumerate(cs):
        if c.idcg <= 0:
            continue
        sc = scores(c, w, gain, None if nudges is None else nudges[qi])
        order = np.argsort(-sc, kind="stable")[:10]
        total += sum(c.gain[j] / math.log2(i + 2) for i, j in enumerate(order)) / c.idcg
    return total / len(cs)


def railed(w: np.ndarray, base: np.ndarray) -> np.ndarray:
    from tiervault.brain.learning import bounded

    return bounded(w, base, None)


def oracle_weights(cs: list[Cands], base: np.ndarray, gain: float, rails: bool) -> tuple[np.ndarray, float]:
    """The best weights for ``cs`` found by sampling the simplex and coordinate refinement."""
    rng = np.random.default_rng(SEED)
    active = np.flatnonzero(base > 0)
    fix = (lambda v: railed(v, base)) if rails else (lambda v: v / v.sum())
    best_w, best = base.copy(), ndcg(cs, base, gain)
    for k in range(SAMPLES):
        v = np.zeros_like(base)
        alpha = np.ones(len(active)) if k % 2 else 20 * base[active]  # uniform / near the base
        v[active] = rng.dirichlet(alpha)
        v = fix(v)
        val = ndcg(cs, v, gain)
        if val > best + 1e-9:
            best_w, best = v, val
    for _ in range(3):  # coordinate refinement
        for i in active:
            for f in (0.5, 0.8, 1.25, 2.0):
                v = best_w.copy()
                v[i] *= f
                v = fix(v)
                val = ndcg(cs, v, gain)
                if val > best + 1e-9:
                    best_w, best = v, val
    return best_w, best


def entry_index(cs: list[Cands]) -> dict[str, list[tuple[int, int]]]:
    where: dict[str, list[tuple[int, int]]] = {}
    for qi, c in enumerate(cs):
        for j, e in enumerate(c.ids):
            where.setdefault(e, []).append((qi, j))
    return where


def nudge_arrays(cs: list[Cands], n_e: dict[str, float]) -> list[np.ndarray]:
    return [np.array([n_e.get(e, 0.0) for e in c.ids]) for c in cs]


def oracle_nudges(cs: list[Cands], w: np.ndarray, gain: float, bound: float) -> tuple[dict, float]:
    """Coordinate ascent on one query-independent nudge per entry."""
    where = entry_index(cs)
    n_e: dict[str, float] = {}
    best = ndcg(cs, w, gain, nudge_arrays(cs, n_e))
    for _ in range(3):
        for e in sorted(where):
            keep = n_e.get(e, 0.0)
            for v in (-bound, -bound / 2, 0.0, bound / 2, bound):
                n_e[e] = v
                val = ndcg(cs, w, gain, nudge_arrays(cs, n_e))
                if val > best + 1e-9:
                    best, keep = val, v
            n_e[e] = keep
    return {e: v for e, v in n_e.items() if v}, best


def fed_verdicts(cs: list[Cands], w: np.ndarray, gain: float) -> dict[str, float]:
    """accepts - dismissals per entry: the simulation's judged protocol on the first top 10."""
    net: dict[str, float] = {}
    for c in cs:
        order = np.argsort(-scores(c, w, gain), kind="stable")[:10]
        for rank, j in enumerate(order):
            if c.gain[j] >= 1:
                net[c.ids[j]] = net.get(c.ids[j], 0.0) + 1
            elif rank < 3:
                net[c.ids[j]] = net.get(c.ids[j], 0.0) - 1
    return net


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("report", "tune"), default="report")
    ap.add_argument("--agentset", type=Path, default=SET_DIR)
    ap.add_argument("--embedder", choices=("none", "local"), default="none")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.shapes import SIGNALS
    from tiervault.brain.weights import base_weights
    from tiervault.config import BrainConfig

    embedder = cache_dir = None
    if args.embedder != "none":
        from eval.beir import DEFAULT_CACHE, make_embedder

        embedder, why = make_embedder(args.embedder, 384)
        if embedder is None:
            raise SystemExit(f"--embedder {args.embedder}: {why}")
        cache_dir = DEFAULT_CACHE.expanduser()
    queries, qrels = load_set(args.agentset)
    pack = args.agentset / "pack.jsonl" if (args.agentset / "pack.jsonl").exists() else PACK
    fed, unseen = halves(queries, args.split)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tv-fbceil-") as tmp:
        sim = Sim(Path(tmp), "learned", pack, embedder, cache_dir)
        try:
            brain_ndcg = {"fed": sim.ndcg(fed, qrels), "unseen": sim.ndcg(unseen, qrels)}
            cf, cu = collect(sim, fed, qrels), collect(sim, unseen, qrels)
        finally:
            sim.close()
    hybrid = embedder is not None
    base = base_weights(hybrid, None)
    gain = BrainConfig().vector_gain if hybrid else 1.0
    named = lambda w: {k: round(float(v), 4) for k, v in zip(SIGNALS, w)}  # noqa: E731
    report: dict[str, Any] = {"set": str(args.agentset.name), "split": args.split,
                              "embedder": args.embedder, "fed": [q["id"] for q in fed],
                              "unseen": [q["id"] for q in unseen],
                              "brain_ndcg": {k: round(v, 4) for k, v in brain_ndcg.items()},
                              "base": {"weights": named(base), "fed": round(ndcg(cf, base, gain), 4),
                                       "unseen": round(ndcg(cu, base, gain), 4)}}
    b_unseen = ndcg(cu, base, gain)
    w_u, v_u = oracle_weights(cu, base, gain, rails=False)
    w_ur, v_ur = oracle_weights(cu, base, gain, rails=True)
    w_f, v_f = oracle_weights(cf, base, gain, rails=False)
    w_fr, v_fr = oracle_weights(cf, base, gain, rails=True)
    report["weights"] = {
        "oracle_unseen": {"weights": named(w_u), "unseen": round(v_u, 4),
                          "gain": round(v_u - b_unseen, 4)},
        "oracle_unseen_railed": {"weights": named(w_ur), "unseen": round(v_ur, 4),
                                 "gain": round(v_ur - b_unseen, 4)},
        "oracle_fed": {"weights": named(w_f), "fed": round(v_f, 4),
                       "unseen_with_them": round(ndcg(cu, w_f, gain), 4),
                       "transfer_gain": round(ndcg(cu, w_f, gain) - b_unseen, 4)},
        "oracle_fed_railed": {"weights": named(w_fr), "fed": round(v_fr, 4),
                              "unseen_with_them": round(ndcg(cu, w_fr, gain), 4),
                              "transfer_gain": round(ndcg(cu, w_fr, gain) - b_unseen, 4)},
    }
    net = fed_verdicts(cf, base, gain)
    report["nudges"] = {}
    for bound in GRID_B:
        n_e, v = oracle_nudges(cu, base, gain, bound)
        from_fed = {e: bound * math.tanh(x) for e, x in net.items()}
        v_fed = ndcg(cu, base, gain, nudge_arrays(cu, from_fed))
        report["nudges"][f"B={bound}"] = {
            "oracle_unseen": round(v, 4), "oracle_gain": round(v - b_unseen, 4),
            "oracle_entries_nudged": len(n_e),
            "from_fed": round(v_fed, 4), "from_fed_gain": round(v_fed - b_unseen, 4)}
    report["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
