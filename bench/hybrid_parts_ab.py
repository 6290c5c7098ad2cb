"""A/B of the hybrid scan's parts between two checkouts, alternating fresh processes.

    python bench/hybrid_parts_ab.py --a A --b B --workdir-a WA --workdir-b WB \
        [--rounds 3] [--queries 200] [--json out.json]

``WA`` / ``WB``: copies of one work directory made by ``bench/run.py``'s build phase with
vectors (hash embedder, ``--dim``-d); each checkout runs over its own copy (a checkout's
cache format may differ). Each process (the checkout's own ``.venv`` interpreter,
:mod:`bench.checkouts`) answers 30 warm-up queries, then the ``--queries`` bench queries
(:func:`bench.corpus.queries`, ~25% with filters) by ``search_intelligent(mode="scan")``
twice: a **plain** pass (process CPU per scan: the figure to compare) and a pass with
process-CPU wrappers around the parts a hybrid scan adds to an FTS-only one -- the
vector leg (``vectors.search``), the candidates' cosines (``vectors.similarities``), the
pool's additions (``Pool.add_external``: vector hits and graph neighbours, their light
rows and lexical evidence) -- and the lexical leg (``manager.search``) and the pool's
candidates (``Pool.from_candidates``: their light rows; session 12 on ``Pool.read_rows``,
with the vector hits'). Both passes see
the queries' vectors cached (the embedder is not timed: ``embed_query`` keeps the last
256). ``--fresh``: every pass sees queries it has not answered yet (the warm-up 30 others,
the wrapper pass another ``--queries``), as ``bench/run.py``'s first hybrid pass does: the
ids' look-ups are not remembered yet and each query's vector is embedded (in both passes).
Rounds run A, B, A, B, ...; compare the two variants' medians of the same rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.checkouts import ab_parser, commit_of, load_avg, run_worker  # noqa: E402
from bench.output import emit  # noqa: E402

PARTS = ("vectors.search", "vectors.similarities", "Pool.add_external", "Pool.from_candidates",
         "Pool.read_rows", "manager.search")


def worker(workdir: Path, n_queries: int, seed: int, dim: int, fresh: bool = False) -> dict[str, Any]:
    from bench.corpus import queries
    from bench.phases import open_hybrid_brain, query_kwargs
    from tiervault.brain.pool import Pool

    brain = open_hybrid_brain(workdir, dim)
    qs = queries(n_queries, seed)

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, seed + 1) + ([] if fresh else qs):  # warm-up (every query's vector cached)
        scan(q)
    plain = []
    for q in qs:
        c0 = time.process_time_ns()
        scan(q)
        plain.append((time.process_time_ns() - c0) / 1e6)
    spent = dict.fromkeys(PARTS, 0.0)

    def wrap(fn: Any, name: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            c0 = time.process_time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += (time.process_time_ns() - c0) / 1e6
        return timed

    vectors, manager = brain.vectors, brain.manager
    vectors.search = wrap(vectors.search, "vectors.search")  # instance attributes: a probe only
    vectors.similarities = wrap(vectors.similarities, "vectors.similarities")
    manager.search = wrap(manager.search, "manager.search")
    Pool.add_external = wrap(Pool.add_external, "Pool.add_external")  # type: ignore[method-assign]
    Pool.from_candidates = classmethod(wrap(Pool.from_candidates.__func__,  # type: ignore[method-assign]
                                            "Pool.from_candidates"))
    if hasattr(Pool, "read_rows"):  # session 12 on: the candidates' rows with the vector hits'
        Pool.read_rows = wrap(Pool.read_rows, "Pool.read_rows")  # type: ignore[method-assign]
    wrapped = []
    for q in (queries(n_queries, seed + 2) if fresh else qs):
        c0 = time.process_time_ns()
        scan(q)
        wrapped.append((time.process_time_ns() - c0) / 1e6)
    return {"plain_cpu_p50_ms": round(statistics.median(plain), 3),
            "plain_cpu_mean_ms": round(statistics.fmean(plain), 3),
            "wrapped_cpu_mean_ms": round(statistics.fmean(wrapped), 3),
            "parts_cpu_ms_per_query": {k: round(v / len(qs), 3) for k, v in spent.items()}}


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        _, _, workdir, n, seed, dim, fresh = sys.argv
        print(json.dumps(worker(Path(workdir), int(n), int(seed), int(dim), fresh == "1")))
        return 0
    ap = ab_parser(__doc__)
    ap.add_argument("--workdir-a", type=Path, required=True)
    ap.add_argument("--workdir-b", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--fresh", action="store_true", help="no pass sees a query twice (docstring)")
    args = ap.parse_args(argv)
    variants = {"A": (args.a, args.workdir_a), "B": (args.b, args.workdir_b)}
    out: dict[str, Any] = {"queries": args.queries, "dim": args.dim, "fresh": args.fresh,
                           "checkouts": {k: str(v[0]) for k, v in variants.items()},
                           "commits": {"A": args.a_commit or commit_of(args.a),
                                       "B": args.b_commit or commit_of(args.b)}, "runs": []}
    script = str(Path(__file__).resolve())
    for r in range(args.rounds):
        for name, (checkout, workdir) in variants.items():
            before = load_avg()
            res = run_worker(checkout, script, [str(workdir), str(args.queries), str(args.seed),
                                                str(args.dim), "1" if args.fresh else "0"])
            out["runs"].append({"variant": name, "round": r, "load_avg_before": before,
                                "load_avg_after": load_avg(), **res})
            print(f"round {r} {name}: scan CPU p50 {res['plain_cpu_p50_ms']} ms, parts "
                  f"{res['parts_cpu_ms_per_query']}, load {before[0]}", file=sys.stderr)
    summary = {}
    for name in variants:
        runs = [x for x in out["runs"] if x["variant"] == name]
        summary[name] = {"plain_cpu_p50_ms": [x["plain_cpu_p50_ms"] for x in runs],
                         **{p: [x["parts_cpu_ms_per_query"][p] for x in runs] for p in PARTS}}
    out["summary"] = summary
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
