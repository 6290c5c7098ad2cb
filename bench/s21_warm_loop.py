"""A warm loop of FTS-only scans in one process, for an A/B of two checkouts at any size.

    python bench/s21_warm_loop.py --workdir DIR [--queries 300] [--warmup 50] [--json out.json]

``DIR`` is a size directory made by ``bench/run.py --keep`` (``tiers/*.db``). Run it from each
checkout in turn (its own ``tiervault`` first on the path); the JSON lines it appends name the
checkout by the file ``tiervault.vault`` was imported from. Wall p50 / mean of
``search_intelligent(mode="scan")`` over the bench queries, after ``--warmup`` others.
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
from bench.phases import query_kwargs, write_config  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--json", type=Path, help="append one JSON line")
    args = ap.parse_args()
    import tiervault.vault
    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(args.workdir))
    for q in queries(args.warmup, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    ms = []
    for q in queries(args.queries, 7):
        t0 = time.perf_counter()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        ms.append((time.perf_counter() - t0) * 1e3)
    row = {"checkout": str(Path(tiervault.vault.__file__).parent.parent), "p50_ms": round(statistics.median(ms), 3),
           "mean_ms": round(statistics.mean(ms), 3), "n": len(ms)}
    print(json.dumps(row))
    if args.json:
        with args.json.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
