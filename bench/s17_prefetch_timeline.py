"""When each thread scans which tier's int8 codes in a 100K hybrid scan, and when the
vector leg asks for them: the timeline behind the prefetch's order (issue 16, session 17).

    python bench/s17_prefetch_timeline.py --workdir W [--queries 300] [--json out.json]

``W``: a ``bench/run.py`` work directory with vectors (``agent-hybrid.yaml``). After 30
warm-up scans, each of ``--queries`` scans is timed from its start (ms): ``start`` and
``end`` of every SimSIMD ``cdist`` call by thread (``pool`` / ``caller``) and base size
(rows; only calls over at least ``--min-rows`` rows: a tier's whole base, not the
rescoring's few rows), ``ask`` / ``got`` of the vector leg's :meth:`DotJob.result` by base size, and the
scan's end. The median of each over the queries that have it. Run it with a checkout's
own interpreter to see that checkout's order (``/work/wt/OLD/.venv/bin/python``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs  # noqa: E402
from bench.s16_read_paths_ab import HYBRID_DIM  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--min-rows", type=int, default=10_000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    import simsimd

    from tiervault.embeddings import dot_job

    brain = open_hybrid_brain(args.workdir, HYBRID_DIM)
    events: list[tuple[str, float]] = []
    cdist, result = simsimd.cdist, dot_job.DotJob.result
    main_thread = threading.main_thread()

    def timed_cdist(a: Any, b: Any, *rest: Any, **kw: Any) -> Any:
        if b.shape[0] < args.min_rows:
            return cdist(a, b, *rest, **kw)
        who = "caller" if threading.current_thread() is main_thread else "pool"
        events.append((f"{who} start {b.shape[0]}", time.perf_counter()))
        try:
            return cdist(a, b, *rest, **kw)
        finally:
            events.append((f"{who} end {b.shape[0]}", time.perf_counter()))

    def timed_result(self: Any) -> Any:
        events.append((f"ask {self.codes.shape[0]}", time.perf_counter()))
        try:
            return result(self)
        finally:
            events.append((f"got {self.codes.shape[0]}", time.perf_counter()))

    simsimd.cdist, dot_job.DotJob.result = timed_cdist, timed_result
    for q in queries(30, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    marks: dict[str, list[float]] = {}
    for q in queries(args.queries, 7):
        events.clear()
        t0 = time.perf_counter()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        seen = {"scan end": time.perf_counter() - t0}
        for name, t in events:
            seen.setdefault(name, t - t0)  # the first of each in this scan
        for name, t in seen.items():
            marks.setdefault(name, []).append(t * 1e3)
    timeline = sorted(({"event": k, "p50_ms": round(statistics.median(v), 3), "scans": len(v)}
                       for k, v in marks.items()), key=lambda r: r["p50_ms"])
    for r in timeline:
        print(f"{r['event']:22s} {r['p50_ms']:8.3f} ms  ({r['scans']} scans)", file=sys.stderr)
    emit({"workdir": str(args.workdir), "queries": args.queries, "min_rows": args.min_rows,
          "load": os.getloadavg(),
          "timeline": timeline}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
