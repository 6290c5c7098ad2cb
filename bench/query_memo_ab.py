"""The last query's unit vector and int8 code kept (embeddings/vector_math.py) against
computed at every call, swapped query by query in one process.

    python bench/query_memo_ab.py --workdir DIR [--queries 200] [--rounds 3] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase with vectors (hash
embedder, ``--dim``-d). After the warm-up (30 other queries, then the bench queries once:
their vectors cached), each bench query is answered by ``search_intelligent(mode="scan")``
twice in a row, once as it runs ("kept") and once with the kept values dropped before each
``unit_query`` / ``int8_approx`` call ("computed", what every tier and every cosines call
did before); which goes first alternates. Process CPU of the scan, of the vector leg
(``vectors.search``) and of the candidates' cosines (``vectors.similarities``) per call;
the medians of each variant over all rounds. Both answer the same (bit for bit: the same
bytes give the same values).
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
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.embeddings import index, vector_base, vector_math

    brain = open_hybrid_brain(args.workdir, args.dim)
    qs = queries(args.queries, args.seed)

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, args.seed + 1) + qs:
        scan(q)
    kept_unit, kept_code = vector_math.unit_query, vector_base.int8_approx

    def computed_unit(*a: Any, **k: Any) -> Any:
        vector_math.forget_query()
        return kept_unit(*a, **k)

    def computed_code(*a: Any, **k: Any) -> Any:
        vector_math.forget_query()
        return kept_code(*a, **k)

    spent = {"vectors.search": 0, "vectors.similarities": 0}
    runtime = brain.vectors

    def wrap(fn: Any, name: str) -> Any:
        def timed(*a: Any, **k: Any) -> Any:
            c0 = time.process_time_ns()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.process_time_ns() - c0
        return timed

    runtime.search = wrap(runtime.search, "vectors.search")  # instance attributes: a probe only
    runtime.similarities = wrap(runtime.similarities, "vectors.similarities")
    variants = {"kept": (kept_unit, kept_code), "computed": (computed_unit, computed_code)}
    times: dict[str, dict[str, list[float]]] = {v: {"scan": [], **{p: [] for p in spent}} for v in variants}
    identical = True
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": len(qs), "rounds": args.rounds,
                           "load_before": [round(x, 2) for x in os.getloadavg()]}
    for r in range(args.rounds):
        for i, q in enumerate(qs):
            answers = {}
            for name in (("kept", "computed") if (i + r) % 2 == 0 else ("computed", "kept")):
                # the module attributes the index and the base scan call (a probe only)
                index.unit_query, vector_base.int8_approx = variants[name]
                spent.update(dict.fromkeys(spent, 0))
                c0 = time.process_time_ns()
                answers[name] = scan(q)
                times[name]["scan"].append((time.process_time_ns() - c0) / 1e6)
                for p, ns in spent.items():
                    times[name][p].append(ns / 1e6)
            identical &= answers["kept"] == answers["computed"]
    index.unit_query, vector_base.int8_approx = kept_unit, kept_code
    out["cpu_p50_ms"] = {v: {k: round(statistics.median(x), 4) for k, x in t.items()} for v, t in times.items()}
    out["cpu_mean_ms"] = {v: {k: round(statistics.fmean(x), 4) for k, x in t.items()} for v, t in times.items()}
    out["identical"] = identical
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
