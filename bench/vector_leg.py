"""The vector leg of a hybrid query alone: federated rescoring against per-tier rescoring.

    python bench/vector_leg.py --workdir DIR [--queries 200] [--rounds 5] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase with vectors (hash
embedder, ``--dim``-d). In one process, over the same mapped indexes, each bench query's
vector (:func:`bench.corpus.queries`, with its filters) is searched for its top
``--k`` (the Brain's fetch: 30) by :meth:`VectorRecall.search` with ``federated`` on
and off in turn (alternating which goes first), inside a read scope as a search is;
CPU and wall time per call, medians per round, the rows each read (float32 rows
rescored, counted at ``TierScan.rescore``) and whether every answer is identical.
The ratio of the two in the same rounds is the figure to trust on a shared machine.
"""

from __future__ import annotations

import argparse
import json
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
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=30)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.embeddings import tier_scan
    from tiervault.vault.filters import Filters
    from tiervault.vault.read_scope import read_scope

    brain = open_hybrid_brain(args.workdir, args.dim)
    recall = brain.vectors.recall
    qs = queries(args.queries, args.seed)
    work = [(brain.vectors.embed_query(q["text"]), Filters.build(**query_kwargs(q))) for q in qs]
    read = {"rows": 0}
    rescore = tier_scan.TierScan.rescore

    def counted(self: Any, pos: Any) -> None:
        read["rows"] += len(pos)
        rescore(self, pos)

    tier_scan.TierScan.rescore = counted  # type: ignore[method-assign]  # a bench probe only

    def one(federated: bool, vec: Any, filters: Any) -> tuple[float, float, Any]:
        recall.federated = federated
        with read_scope():
            w0, c0 = time.perf_counter(), time.process_time()
            out = recall.search(vec, args.k, filters=filters)
            return (time.perf_counter() - w0) * 1e3, (time.process_time() - c0) * 1e3, out

    for vec, filters in work[:30]:  # warm-up: pages of the codes, the filter views
        one(True, vec, filters)
        one(False, vec, filters)
    result: dict[str, Any] = {"workdir": str(args.workdir), "queries": len(work), "k": args.k,
                              "load_before": [round(x, 2) for x in os.getloadavg()], "rounds": []}
    identical = True
    for r in range(args.rounds):
        times: dict[str, dict[str, list[float]]] = {m: {"wall": [], "cpu": []} for m in ("federated", "per_tier")}
        rows = {"federated": 0, "per_tier": 0}
        for i, (vec, filters) in enumerate(work):
            answers = {}
            order = (True, False) if (i + r) % 2 == 0 else (False, True)
            for fed in order:
                name = "federated" if fed else "per_tier"
                before = read["rows"]
                wall, cpu, answers[name] = one(fed, vec, filters)
                rows[name] += read["rows"] - before
                times[name]["wall"].append(wall)
                times[name]["cpu"].append(cpu)
            f, p = answers["federated"], answers["per_tier"]
            identical &= f[0] == p[0] and f[1] == p[1] and f[2].tobytes() == p[2].tobytes()
        row = {m: {"wall_p50_ms": round(statistics.median(t["wall"]), 4),
                   "cpu_p50_ms": round(statistics.median(t["cpu"]), 4),
                   "rows_read_per_query": round(rows[m] / len(work), 1)} for m, t in times.items()}
        row["cpu_ratio"] = round(row["federated"]["cpu_p50_ms"] / row["per_tier"]["cpu_p50_ms"], 3)
        result["rounds"].append(row)
        print(json.dumps(row), file=sys.stderr)
    result["identical"] = identical
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(result, args.json)
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
