"""The hybrid scan's own parts by wall clock, warm or cold (as ``bench/run.py`` times it).

    python bench/hybrid_cold_parts.py --workdir DIR [--queries 200] [--fresh] \
        [--conditions warm,cold] [--deep] [--json out.json]

``DIR``: a ``bench/run.py`` build with vectors (``agent-hybrid.yaml``, hash embedder).
For each condition, a fresh process-local pass: 30 warm-up scans, then ``--queries``
scans (``search_intelligent(mode="scan")``, the bench queries). ``cold``: before each
scan, the one-thread NumPy top-10 over a 100K x 384 float32 matrix (153 MB) that
``bench/run.py`` pairs with every hybrid scan (:func:`bench.phases.numpy_topk`), which
evicts every cache the scan had; ``warm``: the scans back to back. ``--fresh``: the
timed queries were never asked before (each embedded, its ids not remembered: run.py's
first pass); else they were asked in the warm-up too (run.py's paired pass).

Wall time (``perf_counter``) per query of the whole scan (p50, mean) and of wrapped
parts: the lexical leg (``manager.search``), the vector leg (``vectors.search``) and
inside it the tiers' filter views (``filter_mask``), their row masks (``allowed_rows``)
and plans (``kept_plan``), the scans (``VectorIndex.scan``: the int8 kernel), the
federated rescoring (``rescore_federated``); the vector hits and graph neighbours
joining the pool (``Pool.add_external``), the candidates' cosines (``similarities``)
and the query's embedding (``embed_query``); ``--deep``: also the vector leg's inner
parts (the int8 kernel ``int8_approx``, the masks ``_excluded``, ``TierScan``'s
``top_approx`` / ``rescore`` / ``rescore_reaching``, the float32 rows' reads and their
count, ``_hits`` / ``_shadowed`` / ``_dedup``). Wrappers cost a little each: compare
conditions and commits, not the parts' sum with the scan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs  # noqa: E402


def measure(workdir: Path, n_queries: int, seed: int, dim: int, cold: bool, fresh: bool,
            deep: bool = False) -> dict[str, Any]:
    """One condition's figures (module docstring), in this process."""
    import tiervault.embeddings.index as index_mod
    import tiervault.embeddings.recall as recall
    from tiervault.brain.pool import Pool

    brain = open_hybrid_brain(workdir, dim)
    qs = queries(n_queries, seed)

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, seed + 1) + ([] if fresh else qs):
        scan(q)
    spent: dict[str, int] = {}

    def wrap(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0) + time.perf_counter_ns() - t0
        return timed

    # probes only: instance / module attributes replaced in this process
    for tier in brain.manager.ordered(None):
        tier.store.filter_mask = wrap(tier.store.filter_mask, "filter_mask")
    for name in ("allowed_rows", "kept_plan", "rescore_federated"):
        setattr(recall, name, wrap(getattr(recall, name), name))
    index_mod.VectorIndex.scan = wrap(index_mod.VectorIndex.scan, "VectorIndex.scan")  # type: ignore[method-assign]
    vectors, manager = brain.vectors, brain.manager
    for name in ("search", "similarities", "embed_query"):
        setattr(vectors, name, wrap(getattr(vectors, name), f"vectors.{name}"))
    manager.search = wrap(manager.search, "manager.search")
    counts: dict[str, int] = {}
    if deep:  # the vector leg's inner parts (module attributes, as the callers look them up)
        import tiervault.embeddings.tier_scan as tier_scan
        import tiervault.embeddings.vector_base as vector_base

        vector_base.int8_approx = wrap(vector_base.int8_approx, "int8_approx")
        vector_base._excluded = wrap(vector_base._excluded, "_excluded (masks)")
        for name in ("top_approx", "rescore_reaching", "rescore"):
            setattr(tier_scan.TierScan, name, wrap(getattr(tier_scan.TierScan, name), f"TierScan.{name}"))
        read = vector_base.BaseScan.rows

        def counted_read(self: Any, rows: Any) -> Any:
            counts["rows_read"] = counts.get("rows_read", 0) + len(rows)
            return read(self, rows)
        vector_base.BaseScan.rows = wrap(counted_read, "BaseScan.rows (f32 rows)")  # type: ignore[method-assign]
        for name in ("_hits", "_shadowed", "_dedup"):
            setattr(recall, name, wrap(getattr(recall, name), name))
    Pool.add_external = wrap(Pool.add_external, "Pool.add_external")  # type: ignore[method-assign]
    evict = numpy_topk(100_000, 384, seed, kernel="einsum") if cold else None
    timed_qs = queries(n_queries, seed + 2) if fresh else qs
    wall = []
    for q in timed_qs:
        if evict is not None:
            evict(q)
        t0 = time.perf_counter_ns()
        scan(q)
        wall.append(time.perf_counter_ns() - t0)
    brain.close()
    n = len(timed_qs)
    return {"scan_p50_ms": round(statistics.median(wall) / 1e6, 3),
            "scan_mean_ms": round(statistics.fmean(wall) / 1e6, 3),
            "parts_ms_per_query": {k: round(v / n / 1e6, 3)
                                   for k, v in sorted(spent.items(), key=lambda kv: -kv[1])},
            **({"per_query": {k: round(v / n, 2) for k, v in counts.items()}} if counts else {})}


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        import json

        _, _, workdir, n, seed, dim, cold, fresh, deep = sys.argv
        print(json.dumps(measure(Path(workdir), int(n), int(seed), int(dim), cold == "1", fresh == "1",
                                 deep == "1")))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--conditions", default="warm,cold")
    ap.add_argument("--deep", action="store_true", help="also the vector leg's inner parts")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import json
    import subprocess

    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries, "fresh": args.fresh,
                           "load_before": load_avg(), "conditions": {}}
    for cond in args.conditions.split(","):
        if cond not in ("warm", "cold"):
            raise SystemExit(f"--conditions: {cond!r} is neither warm nor cold")
        proc = subprocess.run([sys.executable, __file__, "--_worker", str(args.workdir), str(args.queries),
                               str(args.seed), str(args.dim), str(int(cond == "cold")), str(int(args.fresh)),
                               str(int(args.deep))],
                              capture_output=True, text=True, check=True)  # a fresh process each
        out["conditions"][cond] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
