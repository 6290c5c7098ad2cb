"""The vector leg (``VectorRecall.search``) replayed call by call with one function swapped
between an older checkout's version and this one's, the same call under both, in ONE process.

    python bench/vector_leg_swap.py --old /path/to/old/checkout --workdir DIR \
        [--swap embeddings/vector_base.py:BaseScan.scan] [--queries 100] [--rounds 4] \
        [--no-evict] [--json out.json]

``DIR``: a ``bench/run.py`` build with vectors (hash embedder). This checkout's
``tiervault`` answers ``--queries`` bench queries (``search_intelligent(mode="scan")``,
after 30 warm-up scans) recording the arguments of every ``VectorRecall.search`` call.
Each recorded call is then made by both variants (``--swap`` targets from ``OLD``, as
``bench/scan_swap_ab.py`` loads them) and the answers compared (ids, tiers, cosines bit
for bit). ``--rounds`` timed rounds follow; in each, every call is made once by each
variant, the order alternating call by call (ABBA), each call after run.py's one-thread
NumPy top-10 over 100K x 384 float32 (the cache eviction of its paired hybrid pass;
``--no-evict``: none). Wall (perf_counter) and process CPU per call: p50 and mean per
variant, and the mean of the paired differences (new - old) with its standard error, over
all calls, the unfiltered ones (default filters: the validity window only) and the
filtered ones; also the kernel's wall time inside each call (SimSIMD's ``cdist``, timed
through a wrapper) and the call's wall time outside it.
A whole-scan A/B mixes the lexical leg's noise in; this times the vector leg alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs  # noqa: E402
from bench.scan_swap_ab import Swap  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--swap", action="append", default=[], help="FILE:ATTR (default: BaseScan.scan)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-evict", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    specs = args.swap or ["embeddings/vector_base.py:BaseScan.scan"]
    swaps = [Swap(args.old, spec, n) for n, spec in enumerate(specs)]

    def use(old: bool) -> None:
        for s in swaps:
            s.use(old, [])

    brain = open_hybrid_brain(args.workdir, 384)
    recall = brain.vectors.recall
    search = type(recall).search
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def recording(self: Any, *a: Any, **kw: Any) -> Any:
        calls.append((a, kw))
        return search(self, *a, **kw)

    for q in queries(30, args.seed + 1):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    type(recall).search = recording  # type: ignore[method-assign]
    for q in queries(args.queries, args.seed):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    type(recall).search = search  # type: ignore[method-assign]
    out: dict[str, Any] = {"old_checkout": str(args.old), "swaps": specs, "workdir": str(args.workdir),
                           "queries": args.queries, "calls": len(calls), "rounds": args.rounds,
                           "evict": not args.no_evict, "load_before": load_avg()}
    differing = 0
    for a, kw in calls:
        use(True)
        old = recall.search(*a, **kw)
        use(False)
        new = recall.search(*a, **kw)
        differing += not (old[0] == new[0] and old[1] == new[1] and old[2].tobytes() == new[2].tobytes())
    out["differing_answers"] = differing
    kernel_s = [0.0]
    import tiervault.embeddings.vector_math as vector_math

    if vector_math.simd_available():  # the kernel's time inside each call (SimSIMD's cdist)
        import simsimd

        cdist = simsimd.cdist

        def timed_cdist(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return cdist(*a, **kw)
            finally:
                kernel_s[0] += time.perf_counter() - t0
        simsimd.cdist = timed_cdist  # the module vector_math calls through
    plain = [not kw["filters"].restricts if kw.get("filters") is not None else True for _, kw in calls]
    evict = None if args.no_evict else numpy_topk(100_000, 384, args.seed, kernel="einsum")
    wall: dict[str, list[list[float]]] = {"old": [[] for _ in calls], "new": [[] for _ in calls]}
    kern: dict[str, list[list[float]]] = {"old": [[] for _ in calls], "new": [[] for _ in calls]}
    cpu: dict[str, list[list[float]]] = {"old": [[] for _ in calls], "new": [[] for _ in calls]}
    for r in range(args.rounds):
        for i, (a, kw) in enumerate(calls):
            first_old = (i + r) % 2 == 0
            for old in (first_old, not first_old):
                use(old)
                if evict is not None:
                    evict({"text": str(i)})
                kernel_s[0] = 0.0
                c0, t0 = time.process_time(), time.perf_counter()
                recall.search(*a, **kw)
                side = "old" if old else "new"
                kern[side][i].append(kernel_s[0] * 1e3)
                wall[side][i].append((time.perf_counter() - t0) * 1e3)
                cpu[side][i].append((time.process_time() - c0) * 1e3)
    use(False)
    outside = {side: [[w - k for w, k in zip(ws, ks)] for ws, ks in zip(wall[side], kern[side])]
               for side in ("old", "new")}
    for name, per in (("wall", wall), ("cpu", cpu), ("kernel_wall", kern), ("wall_outside_kernel", outside)):
        for subset, pick in (("all", None), ("unfiltered", True), ("filtered", False)):
            idx = [i for i in range(len(calls)) if pick is None or plain[i] == pick]
            if not idx:
                continue
            o = [statistics.fmean(per["old"][i]) for i in idx]
            n = [statistics.fmean(per["new"][i]) for i in idx]
            d = np.array(n) - np.array(o)
            out.setdefault(name, {})[subset] = {
                "calls": len(idx), "old_p50_ms": round(statistics.median(o), 3),
                "old_mean_ms": round(statistics.fmean(o), 3), "new_p50_ms": round(statistics.median(n), 3),
                "new_mean_ms": round(statistics.fmean(n), 3), "paired_mean_diff_ms": round(float(d.mean()), 3),
                "paired_diff_stderr_ms": round(float(d.std(ddof=1) / np.sqrt(d.size)), 3) if d.size > 1 else None}
    out["load_after"] = load_avg()
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
