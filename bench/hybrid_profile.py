"""Where one hybrid scan spends its time: per-stage CPU and the cProfile top.

    python bench/hybrid_profile.py --workdir DIR [--queries 200] [--warmup 30] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase with vectors
(``agent-hybrid.yaml``, hash embedder). After ``--warmup`` untimed scans
(``search_intelligent(mode="scan")``, the bench queries of ``bench/corpus.py``),
``--queries`` scans run three times: plain (process CPU per query, the figure to
compare), with process-CPU wrappers around the stages of the hybrid path (vector
search, the vector hits' light rows and lexical evidence, cosines, term proximity
and its entry reads, ...), and under cProfile (top functions by own time). The
wrappers and the profiler add their own cost: compare stages with each other and
across commits (bench/README.md, issue 16 round 5). FTS-only: ``bench/scan_profile.py``.
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
from bench.phases import query_kwargs  # noqa: E402
from bench.profiling import profile_calls  # noqa: E402
from bench.scan_profile import StageClock  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain import evidence, pool, stages
    from tiervault.brain.brain import Brain

    brain = Brain.open(args.workdir / "agent-hybrid.yaml")
    if brain.vectors is None:
        raise SystemExit(f"{args.workdir}/agent-hybrid.yaml opens no vectors: build with them first")
    qs = queries(args.queries, args.seed)

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(args.warmup, args.seed + 1):
        scan(q)
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": len(qs),
                           "load_before": [round(x, 2) for x in os.getloadavg()]}
    cpu = []
    for q in qs:
        c0 = time.process_time()
        scan(q)
        cpu.append((time.process_time() - c0) * 1e3)
    out["plain"] = {"cpu_p50_ms": round(statistics.median(cpu), 3),
                    "cpu_mean_ms": round(statistics.fmean(cpu), 3)}
    clock = StageClock()

    def patch(owner: Any, attr: str, name: str) -> None:
        if getattr(owner, attr, None) is not None:
            setattr(owner, attr, clock.wrap(name, getattr(owner, attr)))

    manager, vectors = brain.manager, brain.vectors
    patch(manager, "search", "manager.search (lexical leg)")
    patch(manager, "lexical_scores", "manager.lexical_scores (added candidates)")
    patch(vectors, "search", "vectors.search")
    patch(vectors, "similarities", "vectors.similarities (cosines of other candidates)")
    patch(pool.Pool, "add_external", "pool.add_external (vector hits, graph)")
    patch(brain, "field_texts", "brain.field_texts (proximity reads)")
    patch(brain, "full_entries", "brain.full_entries")
    for name in ("cosines", "proximity", "proximities"):
        patch(evidence, name, f"evidence.{name}")
    patch(stages, "graph_hops", "stages.graph_hops")
    for t in manager.ordered():
        patch(t.store, "light_rows", "store.light_rows (SQL)")
    for st in ("gather", "expand", "score", "modulate", "rank", "render"):
        patch(stages, st, f"stage {st}")
    stages.STAGES = tuple(getattr(stages, s) for s in ("gather", "expand", "score", "modulate",
                                                        "rank", "render"))
    for q in qs:
        scan(q)
    n = len(qs)
    out["stages_cpu_ms_per_query"] = {k: round(v * 1e3 / n, 3) for k, v in clock.cpu.most_common()}
    out["stage_calls_per_query"] = {k: round(v / n, 2) for k, v in clock.calls.items()}
    out["profile"] = profile_calls(scan, qs[:100])
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
