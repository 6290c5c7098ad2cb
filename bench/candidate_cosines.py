"""What a hybrid scan spends on its candidates' cosines (``VectorSource.similarities``).

    python bench/candidate_cosines.py --workdir DIR [--queries 200] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase with vectors (hash
embedder, ``--dim``-d). After 30 scans of other queries, each bench query (fresh: not
seen before, so no id look-up is remembered from an earlier answer of it) is answered
once by ``search_intelligent(mode="scan")``; the process CPU time of every
``similarities`` call (the lexical and graph candidates' exact cosines, evidence.cosines)
and of each scan are recorded. Compare checkouts by running it from each (issue 16,
session 8: the slot -> row map of ``recall._rows_by_slot``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    brain = open_hybrid_brain(args.workdir, args.dim)
    for q in queries(30, args.seed + 1000):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    calls: list[float] = []
    similarities = brain.vectors.similarities

    def timed(qvec: Any, tier: str, ids: Any) -> Any:
        c0 = time.process_time()
        out = similarities(qvec, tier, ids)
        calls.append((time.process_time() - c0) * 1e3)
        return out

    brain.vectors.similarities = timed  # the runtime's attribute: a bench probe only
    scans = []
    load_before = [round(x, 2) for x in os.getloadavg()]
    qs = queries(args.queries, args.seed)
    for q in qs:
        c0 = time.process_time()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        scans.append((time.process_time() - c0) * 1e3)
    out = {"workdir": str(args.workdir), "queries": len(qs), "load_before": load_before,
           "similarities_calls_per_query": round(len(calls) / len(qs), 2),
           "similarities_cpu_ms_per_query": round(sum(calls) / len(qs), 4),
           "similarities_cpu_us_per_call_p50": round(statistics.median(calls) * 1e3, 1),
           "scan_cpu_p50_ms": round(statistics.median(scans), 3),
           "load_after": [round(x, 2) for x in os.getloadavg()]}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
