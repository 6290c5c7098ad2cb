"""In-process A/B of a hybrid scan's early evidence (issue 16, session 23): ``brain.evidence.early``
on and off (a no-op: every candidate's evidence read after the vector leg), alternated query by
query, with the int8 scan's timeline.

    python bench/s23_hyb_early_ab.py --workdir DIR [--queries 300] [--numpy] [--json out.json]

``DIR``: a ``bench/run.py --keep`` size directory with vectors (``agent-hybrid.yaml``, hash
embedder; opened read-only but for the mirrors' caches). After 50 warm-up scans, each bench
query without filters (``search_intelligent(mode="scan")``) runs once with each variant, the
order rotated, twice over. ``--numpy``: run.py's one-thread NumPy top-10 before each scan, as
run.py's hybrid phase pairs them (the caches then cold). Per variant the medians and means of:
the scan's wall ms, the calling thread's CPU ms, where the lexical leg ends and the vector leg
starts and ends (ms from the scan's start), where the last SimSIMD call ends (``cd_end``), the
caller's own SimSIMD ms (``main_cd``), and the share of scans whose prefetch was still running
when the caller came (``early`` taken).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk, query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--numpy", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import simsimd

    from tiervault.brain import evidence
    from tiervault.brain.brain import Brain
    from tiervault.embeddings import dot_job

    log: list[tuple[bool, float, float]] = []

    class Timed:  # SimSIMD's cdist, timed (who, start, end)
        def cdist(self, q: Any, c: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            r = simsimd.cdist(q, c, **kw)
            log.append((threading.current_thread() is threading.main_thread(), t0, time.perf_counter()))
            return r

    timed, init = Timed(), dot_job.DotJob.__init__
    dot_job.DotJob.__init__ = lambda self, simd, *a, **k: init(self, timed, *a, **k)  # type: ignore[method-assign]
    early = evidence.early
    taken: list[bool] = []

    def counted(brain: Any, ctx: Any) -> None:
        taken.append(True)
        early(brain, ctx)

    brain = Brain.open(args.workdir / "agent-hybrid.yaml")
    for q in queries(50, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    marks: dict[str, tuple[float, float]] = {}
    for owner, name, key in ((brain.manager, "search", "lex"), (brain.vectors, "search", "vec")):
        def wrapped(*a: Any, _f: Any = getattr(owner, name), _k: str = key, **kw: Any) -> Any:
            t0 = time.perf_counter()
            r = _f(*a, **kw)
            marks[_k] = (t0, time.perf_counter())
            return r
        setattr(owner, name, wrapped)
    top = numpy_topk(100_000, 384, 7, kernel="einsum") if args.numpy else None
    variants = {"early_off": lambda b, c: None, "early_on": counted}
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    qs = [q for q in queries(args.queries, 7) if not query_kwargs(q)]
    load_before = load_avg()
    for r in range(2):
        for qi, q in enumerate(qs):
            names = list(variants)
            k = (qi + r) % len(names)
            for v in names[k:] + names[:k]:
                evidence.early = variants[v]
                if top is not None:
                    top(q)
                log.clear()
                marks.clear()
                taken.clear()
                t0, c0 = time.perf_counter(), time.thread_time()
                brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
                t1, c1 = time.perf_counter(), time.thread_time()
                ms = lambda t: (t - t0) * 1e3  # noqa: E731
                rows[v].append({"total": ms(t1), "cpu": (c1 - c0) * 1e3, "lex_end": ms(marks["lex"][1]),
                                "vec_start": ms(marks["vec"][0]), "vec_end": ms(marks["vec"][1]),
                                "cd_end": max((ms(e) for *_, e in log), default=0.0),
                                "main_cd": sum(e - s for m, s, e in log if m) * 1e3,
                                "early": float(bool(taken))})
    evidence.early = early
    out: dict[str, Any] = {"workdir": str(args.workdir), "numpy": args.numpy, "load_before": load_before}
    for v, got in rows.items():
        out[v] = {"n": len(got), **{f"{key}_p50": round(statistics.median(x[key] for x in got), 3)
                                    for key in got[0]},
                  **{f"{key}_mean": round(statistics.fmean(x[key] for x in got), 3) for key in got[0]}}
    out["load_after"] = load_avg()
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
