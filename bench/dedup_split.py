"""Where the federated dedup's time goes inside plain scans, one process, this checkout.

    python bench/dedup_split.py --workdir DIR [--queries 600] [--json out.json]

``DIR`` from ``bench/run.py``'s build phase. After 30 warm-up scans
(``search_intelligent(mode="scan")``), ``perf_counter`` wrappers time, per query:
``dedup.holders`` as a whole; inside it, the pool's keys computed once
(``lookup_fingerprints`` of the ids, ``digest_keys`` of the hashes) and each tier's
``lexical_scores`` call, split into calls that found a copy (a hit: scores, filter
mask, ids and hashes read at the slots found) and calls that found none (the bulk
look-ups alone); and ``dedup.keep``. The rest of ``holders`` is its own Python (the
pool grouped by tier, the asks, the copies by id and by hash).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import dedup, lexicon

    times: dict[str, list[float]] = {k: [] for k in ("holders", "keys_once", "call_hit", "call_miss", "keep")}
    inside = [False]

    def timed(f: Callable[..., Any], key: str | None) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            if key != "holders" and key != "keep" and not inside[0]:
                return f(*a, **kw)
            if key == "holders":
                inside[0] = True
            t0 = time.perf_counter()
            try:
                out = f(*a, **kw)
            finally:
                dt = (time.perf_counter() - t0) * 1e6
                if key == "holders":
                    inside[0] = False
            times[key or ("call_hit" if out else "call_miss")].append(dt)
            return out
        return wrapper

    brain = Brain.open(write_config(args.workdir))

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, 8):
        scan(q)
    dedup.holders = timed(dedup.holders, "holders")
    dedup.keep = timed(dedup.keep, "keep")
    dedup.lookup_fingerprints = timed(dedup.lookup_fingerprints, "keys_once")
    dedup.digest_keys = timed(dedup.digest_keys, "keys_once")
    lexicon.MirrorLexicon.lexical_scores = timed(lexicon.MirrorLexicon.lexical_scores, None)
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries, "load_before": load_avg()}
    for q in queries(args.queries, args.seed):
        scan(q)
    n = args.queries
    out["per_query_us"] = {k: {"calls": round(len(xs) / n, 2), "p50": round(statistics.median(xs), 1),
                               "mean": round(statistics.fmean(xs), 1), "total": round(sum(xs) / n, 1)}
                           for k, xs in times.items() if xs}
    parts = sum(out["per_query_us"][k]["total"] for k in ("keys_once", "call_hit", "call_miss")
                if k in out["per_query_us"])
    out["per_query_us"]["holders_own_python"] = {"total": round(out["per_query_us"]["holders"]["total"] - parts, 1)}
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
