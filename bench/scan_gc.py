"""The cyclic garbage collector's share of FTS-only scans in a loop, and the scan's SQL.

    python bench/scan_gc.py --workdir DIR [--queries 300] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase (``tiers/*.db``).
After 30 warm-up scans, each bench query is scanned once (as ``bench/scan_profile.py``'s
loop); ``gc.callbacks`` count every collection by generation and add its wall time,
and a wrapper of ``SqliteDb.query`` counts and times the scan's SQL statements (wall,
the statement and its fetch). Why: the cold-cache section asks whether a collection
(which walks every tracked object of its generations) lands in the timed scans.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (A/B: a checkout's own tiervault)

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import sqlite_db

    brain = Brain.open(write_config(args.workdir))

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, args.seed + 1):
        scan(q)
    collections = [0, 0, 0]
    gc_ns = [0, 0]  # total, start of the running collection

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_ns[1] = time.perf_counter_ns()
        else:
            gc_ns[0] += time.perf_counter_ns() - gc_ns[1]
            collections[info["generation"]] += 1

    sql = [0, 0]  # statements, ns
    query = sqlite_db.SqliteDb.query

    def timed_query(self: Any, *a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return query(self, *a, **kw)
        finally:
            sql[0] += 1
            sql[1] += time.perf_counter_ns() - t0

    sqlite_db.SqliteDb.query = timed_query  # type: ignore[method-assign]
    gc.callbacks.append(on_gc)
    load = os.getloadavg()[0]
    t0 = time.perf_counter_ns()
    n = args.queries
    for q in queries(n, args.seed):
        scan(q)
    wall = time.perf_counter_ns() - t0
    gc.callbacks.remove(on_gc)
    brain.close()
    emit({"workdir": str(args.workdir), "queries": n, "load_before": load,
          "scan_wall_ms_mean": round(wall / n / 1e6, 3),
          "gc_collections_per_scan": [round(c / n, 3) for c in collections],
          "gc_ms_per_scan": round(gc_ns[0] / n / 1e6, 4),
          "gc_thresholds": list(gc.get_threshold()), "gc_tracked_objects": len(gc.get_objects()),
          "sql_statements_per_scan": round(sql[0] / n, 2),
          "sql_ms_per_scan": round(sql[1] / n / 1e6, 3)}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
