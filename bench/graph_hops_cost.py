"""The graph hops of a scan, timed in one process: link graph vs SQL, interleaved.

    python bench/graph_hops_cost.py --workdir DIR [--queries 300] [--rounds 5] [--json out.json]

``DIR`` is a ``bench/run.py`` build (``tiers/*.db``). The seeds of ``--queries`` FTS-only
scans (``search_intelligent(mode="scan")``, the bench queries of ``bench/corpus.py``)
are recorded; then each query's ``graph_hops(manager, seeds)`` runs through the
manager's ``link_ends`` (a SQLite tier's memory-mapped link graph, vault/link_graph.py)
and through the same manager with ``link_ends`` answered by ``links_touching`` (the
six SQL statements of before), alternating per query inside one read scope per call
as a search has, ``--rounds`` times. Both answers must be equal (hops and
contradictions), or the script stops. Process-CPU per call: median and mean.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


class SqlLinks:
    """The manager with ``link_ends`` read by ``links_touching`` (the SQL path)."""

    def __init__(self, manager: Any) -> None:
        self.link_ends = manager.links_touching


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain import stages
    from tiervault.brain.brain import Brain
    from tiervault.brain.graph import graph_hops
    from tiervault.vault.read_scope import read_scope

    brain = Brain.open(write_config(args.workdir))
    seeds: list[list[str]] = []
    original = stages.graph_hops

    def record(manager: Any, s: Any) -> Any:
        seeds.append(list(s))
        return original(manager, s)

    stages.graph_hops = record
    for q in queries(args.queries, args.seed):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    stages.graph_hops = original
    manager = brain.manager
    paths = {"graph": manager, "sql": SqlLinks(manager)}
    cpu: dict[str, list[float]] = {k: [] for k in paths}
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": len(seeds),
                           "rounds": args.rounds, "load_before": [round(x, 2) for x in os.getloadavg()]}
    for r in range(args.rounds):
        for i, s in enumerate(seeds):
            order = ("graph", "sql") if (i + r) % 2 == 0 else ("sql", "graph")
            got = {}
            for name in order:
                with read_scope():
                    c0 = time.process_time()
                    got[name] = graph_hops(paths[name], s)
                    cpu[name].append(time.process_time() - c0)
            a, b = got["graph"], got["sql"]
            if a.hops != b.hops or {k: v for k, v in a.contradicts.items() if v} != \
                    {k: v for k, v in b.contradicts.items() if v}:
                raise SystemExit(f"query {i}: the link graph answers otherwise than SQL")
    out["cpu_us_per_call"] = {k: {"median": round(statistics.median(v) * 1e6, 1),
                                  "mean": round(statistics.fmean(v) * 1e6, 1)} for k, v in cpu.items()}
    out["ratio_median"] = round(statistics.median(cpu["graph"]) / statistics.median(cpu["sql"]), 3)
    out["seeds_per_query"] = round(statistics.fmean(map(len, seeds)), 2)
    out["answers_equal"] = True
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
