"""A warm loop of 100K hybrid scans in one fresh process, for an A/B of two checkouts
(issue 16, session 22: the hybrid scan).

    python bench/s22_hyb_loop.py --workdir DIR [--queries 200] [--warmup 30] [--json out.jsonl]

``DIR`` is a size directory made by ``bench/run.py --keep`` with vectors (its tiers are
read, never written; ``agent-hybrid.yaml`` is written afresh as run.py's hybrid phase
does). Run it from each checkout in turn (that checkout's ``.venv`` and ``PYTHONPATH``);
the JSON line it appends names the checkout ``tiervault.vault`` was imported from. As
run.py's hybrid phase: after ``--warmup`` queries, the bench queries
(``search_intelligent(mode="scan")``, their filters) paired round-robin with the
one-thread NumPy top-10 (``einsum``) over as many random 384-d vectors; wall p50 / mean
of each, the hybrid's calling-thread CPU p50, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (A/B: a checkout's own tiervault)

from bench.corpus import queries  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, help="append one JSON line")
    args = ap.parse_args()
    import tiervault.vault

    brain = open_hybrid_brain(args.workdir, 384)
    top = numpy_topk(args.entries, 384, args.seed, kernel="einsum")

    def scan(q: dict) -> object:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(args.warmup, args.seed + 1):
        scan(q)
        top(q)
    wall: list[float] = []
    cpu: list[float] = []
    base: list[float] = []
    for q in queries(args.queries, args.seed):
        t0, c0 = time.perf_counter(), time.thread_time()
        scan(q)
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.thread_time() - c0) * 1e3)
        t0 = time.perf_counter()
        top(q)
        base.append((time.perf_counter() - t0) * 1e3)
    row = {"checkout": str(Path(tiervault.vault.__file__).parent.parent),
           "scan_p50_ms": round(statistics.median(wall), 3), "scan_mean_ms": round(statistics.fmean(wall), 3),
           "caller_cpu_p50_ms": round(statistics.median(cpu), 3),
           "numpy_1t_p50_ms": round(statistics.median(base), 3),
           "ratio": round(statistics.median(wall) / statistics.median(base), 3), "n": len(wall)}
    print(json.dumps(row))
    if args.json:
        with args.json.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
