"""Modulation kernel speed: suppress + decay + diverse top-10 over N x d unit vectors.

    python bench/modulation.py [--sizes 100000,1000000] [--dim 384] [--runs 15] [--json out.json]

Timed per query, round-robin in the same run (the machine is shared: read the ratios):
- ``numpy_top10``: the baseline, ``M @ q`` then an argpartition top-10;
- ``unfolded``: query, two suppress directions and a trajectory as four products;
- ``folded``: the same four linear terms as ONE product (``fold_direction``), then
  reciprocal decay on cached float32 ages, then MMR (lambda 0.7) over the best 100.

Random unit vectors (seeded); prints median and p95 per system and the ratio to the
baseline, and writes them under the ``modulation`` key of the JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from tiervault.brain import modulation as mod


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part])]


def run_size(n: int, dim: int, runs: int, seed: int = 0) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, dim), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    ages = rng.uniform(0, 720, n).astype(np.float32)
    times: dict[str, list[float]] = {"numpy_top10": [], "unfolded": [], "folded": []}
    for _ in range(runs):
        q, x1, x2, a, b = (mod.unit(rng.standard_normal(dim)) for _ in range(5))
        t = mod.trajectory_direction(a, b)

        start = time.perf_counter()
        _top(m @ q, 10)
        times["numpy_top10"].append(time.perf_counter() - start)

        start = time.perf_counter()
        s = 0.5 * (m @ q) + 0.5 * (m @ t) - (m @ x1) - (m @ x2)
        s = s * mod.reciprocal_decay(ages, 30)
        pool = _top(s, 100)
        mod.mmr(s[pool], m[pool], 10)
        times["unfolded"].append(time.perf_counter() - start)

        start = time.perf_counter()
        u = mod.fold_direction(q, trajectory=t, suppress=[x1, x2], suppress_weights=[1.0, 1.0])
        s = (m @ u) * mod.reciprocal_decay(ages, 30)
        pool = _top(s, 100)
        mod.mmr(s[pool], m[pool], 10)
        times["folded"].append(time.perf_counter() - start)
    base = float(np.median(times["numpy_top10"]))
    return {name: {"p50_ms": 1e3 * float(np.median(v)), "p95_ms": 1e3 * float(np.percentile(v, 95)),
                   "ratio_to_numpy_top10": float(np.median(v)) / base}
            for name, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = {}
    for n in (int(s) for s in args.sizes.split(",")):
        res = run_size(n, args.dim, args.runs)
        out[str(n)] = res
        print(f"\n{n:,} x {args.dim}")
        print("| system | p50 ms | p95 ms | ratio to numpy top-10 |\n|---|---|---|---|")
        for name, r in res.items():
            print(f"| {name} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['ratio_to_numpy_top10']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"modulation": {"dim": args.dim, "runs": args.runs,
                                                        "sizes": out}}, indent=2) + "\n")


if __name__ == "__main__":
    main()
