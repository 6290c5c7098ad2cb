"""The federated dedup's two steps timed old against new, query by query, in ONE process.

    python bench/dedup_ab.py --old /path/to/old/checkout --workdir DIR [--queries 800] \
        [--flip] [--json out.json]

What is timed: ``dedup.holders`` (the look-ups: each tier asked about the other tiers'
pooled ids and hashes) and ``dedup.keep`` (the copy kept of each pooled hit), with
``perf_counter`` wrappers around each call, inside plain scans
(``search_intelligent(mode="scan")`` on ``DIR`` from ``bench/run.py``'s build phase,
after 30 warm-up scans), plus each scan's process CPU. Even queries run the functions
of ``--swap`` taken from ``OLD`` (bench/scan_swap_ab.py's ``Swap``: the file loaded as a
separate module, its attribute set in place of this checkout's), odd ones this
checkout's, pairs in alternating order (``--flip``: the other way round); both variants
see the same load and warm caches. The default swaps are session 10's dedup changes
(issue 16) with ``VaultManager._search``, whose call of ``keep`` changed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402
from bench.scan_swap_ab import Swap  # noqa: E402

DEFAULT_SWAPS = ("vault/dedup.py:holders", "vault/dedup.py:keep", "vault/manager.py:VaultManager._search",
                 "vault/lexicon.py:MirrorLexicon._scores", "vault/postings.py:Postings.slots_of",
                 "vault/postings.py:Postings.slots_by_hash", "vault/string_table.py:fingerprints",
                 "vault/string_table.py:lookup_fingerprints", "vault/hash_table.py:_digests")
TIMED = ("holders", "keep")


def _timed(swap: Swap, acc: dict[str, float], key: str) -> None:
    """Both of ``swap``'s values wrapped: their wall time added to ``acc[key]``."""
    for variant in ("old", "new"):
        f = getattr(swap, variant)

        def wrapper(*a: Any, _f: Any = f, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _f(*a, **kw)
            finally:
                acc[key] += time.perf_counter() - t0
        setattr(swap, variant, wrapper)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--swap", action="append", default=[], help="FILE:ATTR (default: session 10's)")
    ap.add_argument("--queries", type=int, default=800)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--flip", action="store_true", help="the other assignment of queries to variants")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import manager

    swaps = [Swap(args.old, s, i) for i, s in enumerate(args.swap or DEFAULT_SWAPS)]
    acc = {k: 0.0 for k in TIMED}
    for s in swaps:
        name = s.spec.split(":")[1]
        if s.spec.startswith("vault/dedup.py:") and name in TIMED:
            _timed(s, acc, name)
    brain = Brain.open(write_config(args.workdir))

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, 8):
        scan(q)
    out: dict[str, Any] = {"old": str(args.old), "swaps": [s.spec for s in swaps], "queries": args.queries,
                           "flip": args.flip, "load_before": load_avg()}
    runs: dict[str, dict[str, list[float]]] = {v: {"holders_us": [], "keep_us": [], "both_us": [],
                                                   "scan_cpu_ms": []} for v in ("old", "new")}
    for i, q in enumerate(queries(args.queries, args.seed)):
        old = ((i % 2 == 0) != ((i // 2) % 2 == 1)) != args.flip
        for s in swaps:
            s.use(old, [manager])
        for k in acc:
            acc[k] = 0.0
        c0 = time.process_time()
        scan(q)
        r = runs["old" if old else "new"]
        r["scan_cpu_ms"].append((time.process_time() - c0) * 1e3)
        r["holders_us"].append(acc["holders"] * 1e6)
        r["keep_us"].append(acc["keep"] * 1e6)
        r["both_us"].append((acc["holders"] + acc["keep"]) * 1e6)
    for s in swaps:
        s.use(False, [manager])
    for variant, r in runs.items():
        out[variant] = {k: {"p50": round(statistics.median(xs), 2), "mean": round(statistics.fmean(xs), 2),
                            "n": len(xs)} for k, xs in r.items()}
    out["new_over_old_p50"] = {k: round(out["new"][k]["p50"] / out["old"][k]["p50"], 3)
                               for k in runs["new"]}
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
