"""The vector hits' ids read by mirror slot (embeddings/slot_map.py) against the index's own
table, swapped query by query in one process, on queries never answered before.

    python bench/slot_ids_ab.py --workdir DIR [--queries 1000] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase with vectors (hash
embedder, ``--dim``-d). After 30 warm-up queries, each of ``--queries`` fresh bench queries
(:func:`bench.corpus.queries`, seed 23: none seen before, as ``bench/run.py``'s first hybrid
pass) is answered by ``search_intelligent(mode="scan")`` once, in the order A B B A A B B A
...: A reads the hits' ids from the index's own table (``VectorIndex.ids_at``, as before
``slot_map.ids_by_slot``), B by slot from the mirror's id column, which remembers them, so
the pool's look-up of the same ids (their lexical evidence) is a dict hit. Process CPU per
query of the scan, the vector leg (``vectors.search``) and the vector hits joining the pool
(``Pool.add_external`` via "vector"); means and medians per variant. The answers are the
same (tests/test_slot_map.py; ``bench/rank_compare.py --hybrid``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.pool import Pool
    from tiervault.embeddings import recall, slot_map

    brain = open_hybrid_brain(args.workdir, args.dim)
    variant = ["B"]

    def ids(slots: Any, index: Any, rows: Any) -> list[str]:
        if variant[0] == "B":
            return slot_map.ids_by_slot(slots, index, rows)
        return index.ids_at(rows).tolist()
    recall.ids_by_slot = ids  # type: ignore[attr-defined]
    spent: dict[str, int] = {}
    add_external, search = Pool.add_external, brain.vectors.search

    def timed_add(self: Any, manager: Any, hit_ids: Any, via: str, *a: Any, **k: Any) -> Any:
        c0 = time.process_time_ns()
        try:
            return add_external(self, manager, hit_ids, via, *a, **k)
        finally:
            if via == "vector":
                spent["add_external_vector"] = time.process_time_ns() - c0

    def timed_search(*a: Any, **k: Any) -> Any:
        c0 = time.process_time_ns()
        try:
            return search(*a, **k)
        finally:
            spent["vectors_search"] = time.process_time_ns() - c0
    Pool.add_external = timed_add  # type: ignore[method-assign]
    brain.vectors.search = timed_search  # a probe only: an instance attribute
    for q in queries(30, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    cpu: dict[str, dict[str, list[float]]] = {"A": defaultdict(list), "B": defaultdict(list)}
    load_before = [round(x, 2) for x in os.getloadavg()]
    for i, q in enumerate(queries(args.queries, 23)):
        variant[0] = "AB"[(i + i // 2) % 2]  # A B B A A B B A ...
        spent.clear()
        c0 = time.process_time_ns()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        spent["scan"] = time.process_time_ns() - c0
        for name, ns in spent.items():
            cpu[variant[0]][name].append(ns / 1e6)
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries,
                           "load_before": load_before,
                           "load_after": [round(x, 2) for x in os.getloadavg()]}
    for name, parts in cpu.items():
        out[name] = {part: {"cpu_mean_ms": round(statistics.fmean(v), 4),
                            "cpu_p50_ms": round(statistics.median(v), 4), "n": len(v)}
                     for part, v in parts.items()}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
