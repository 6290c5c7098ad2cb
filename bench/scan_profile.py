"""Where one FTS-only scan spends its time: per-stage CPU, SQL statements, cProfile top.

    python bench/scan_profile.py --workdir DIR [--queries 100] [--warmup 30] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase (``tiers/*.db``).
After ``--warmup`` untimed scans (``search_intelligent(mode="scan")``, the bench
queries of ``bench/corpus.py``), ``--queries`` scans are run three times:

1. plain, with process-CPU per query (the figure to compare);
2. with process-CPU wrappers around the named stages (``manager.search``, light rows,
   PRF expansion, graph hops, LSA, feedback nudges, ...) and a trace callback on every
   tier connection counting SQL statements per query, by their first words;
3. under cProfile (the top functions by own time).

The wrappers and the profiler add their own cost: compare the stages with each other
and the plain CPU figure across commits, not the profile's seconds with wall time.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (A/B: a checkout's own tiervault)

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402
from bench.profiling import profile_calls  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


class StageClock:
    """Process-CPU seconds per named stage, summed over a run."""

    def __init__(self) -> None:
        self.cpu: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.depth = 0

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            c0 = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                self.cpu[name] += time.process_time() - c0
                self.calls[name] += 1
        return timed


def _statement_kind(sql: str) -> str:
    """A short label of one SQL statement: its first words and the tables it reads."""
    s = " ".join(sql.split())
    tables = sorted(set(re.findall(r"\bFROM\s+(\w+)", s, re.I)))
    return f"{s.split(' ')[0].upper()} {','.join(tables)}"[:60]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain import brain as brain_mod, latent, pool, stages
    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(args.workdir))
    qs = queries(args.queries, args.seed)
    warm = queries(args.warmup, args.seed + 1)

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in warm:
        scan(q)
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": len(qs),
                           "load_before": [round(x, 2) for x in os.getloadavg()]}
    # 1. plain
    cpu = []
    wall = []
    for q in qs:
        c0, t0 = time.process_time(), time.perf_counter()
        scan(q)
        cpu.append((time.process_time() - c0) * 1e3)
        wall.append((time.perf_counter() - t0) * 1e3)
    out["plain"] = {"cpu_p50_ms": round(statistics.median(cpu), 3),
                    "cpu_p95_ms": round(_pct(cpu, 0.95), 3),
                    "cpu_mean_ms": round(statistics.fmean(cpu), 3),
                    "wall_p50_ms": round(statistics.median(wall), 3),
                    "wall_p95_ms": round(_pct(wall, 0.95), 3)}
    # 2. stages + SQL
    clock = StageClock()
    manager = brain.manager
    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, attr: str, name: str) -> None:
        patched.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, clock.wrap(name, getattr(owner, attr)))

    patch(manager, "search", "manager.search")
    patch(pool.Pool, "from_candidates", "pool.from_candidates (light rows)")
    patch(pool.Pool, "add_external", "pool.add_external (graph: light rows + lexical)")
    if hasattr(pool.Pool, "read_rows"):  # session 12 on: the candidates' rows with the others'
        patch(pool.Pool, "read_rows", "pool.read_rows (light rows: candidates + neighbours)")
    patch(stages, "expand_query", "PRF expand_query")
    patch(stages, "expansion_scores", "PRF expansion_scores")
    patch(stages, "graph_hops", "graph_hops (links)")
    patch(latent, "scores", "latent.scores (LSA)")
    patch(brain, "nudges", "brain.nudges (feedback)")
    patch(brain, "full_entries", "brain.full_entries (proximity / full)")
    for st in ("gather", "expand", "score", "modulate", "rank", "render"):
        patch(stages, st, f"stage {st}")
    stages.STAGES = tuple(getattr(stages, s) for s in ("gather", "expand", "score", "modulate",
                                                        "rank", "render"))
    sql: Counter[str] = Counter()
    for t in manager.ordered():
        db = getattr(t.store, "db", None)
        if db is not None:
            db.conn.set_trace_callback(lambda s, tier=t.name: sql.update([f"{tier}: {_statement_kind(s)}"]))
    for q in queries(args.queries, args.seed + 2):
        c0 = time.process_time()
        scan(q)
        clock.cpu["search_intelligent"] += time.process_time() - c0
    n = len(qs)
    out["stages_cpu_ms_per_query"] = {k: round(v * 1e3 / n, 3) for k, v in clock.cpu.most_common()}
    out["stage_calls_per_query"] = {k: round(v / n, 2) for k, v in clock.calls.items()}
    out["sql_per_query"] = {k: round(v / n, 2) for k, v in sql.most_common()}
    out["sql_statements_per_query"] = round(sum(sql.values()) / n, 2)
    for t in manager.ordered():
        db = getattr(t.store, "db", None)
        if db is not None:
            db.conn.set_trace_callback(None)
    for owner, attr, orig in reversed(patched):
        setattr(owner, attr, orig)
    stages.STAGES = (stages.gather, stages.expand, stages.score, stages.modulate, stages.rank,
                     stages.render)
    _ = brain_mod
    # 3. cProfile
    out["profile_top"] = profile_calls(scan, queries(args.queries, args.seed + 3), top=25)
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
