"""How many of a scan's light rows an earlier query of the same process already read: what
keeping light rows across queries could save (counts, no timing).

    python bench/light_rows_reuse.py --workdir DIR [--queries 400] [--marks 100,200,400] \
        [--json out.json]

Issue 16, session 12 (the pool's reads) decided not to keep light rows across queries
on an uncommitted probe: over 100 / 200 / 400 bench queries 4.9 / 8.3 / 14.4 % of the
rows asked had been read before and 99 % of the statements would still be needed. Here
``TierStore.light_rows`` is wrapped to record each statement's tier and ids while this
checkout answers ``--queries`` bench scans (``search_intelligent(mode="scan")``, seed 7,
after 50 warm-up scans of other queries, as ``bench/light_rows_cost.py``); for the
first N queries (each of ``--marks``): the share of the ids asked that an earlier query
had asked of the same tier, and the share of statements holding at least one id not
asked before (those a cache of earlier rows would still have to run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import commit_of, load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def reuse(statements: list[tuple[int, str, list[str]]], n: int) -> dict[str, Any]:
    """Over the statements of queries ``0..n-1`` (query index, tier, ids): ids asked before
    (by an earlier query, same tier) and statements with an id not asked before."""
    seen: set[tuple[str, str]] = set()
    current: set[tuple[str, str]] = set()
    query = -1
    asked = before = needed = count = 0
    for q, tier, ids in statements:
        if q >= n:
            break
        if q != query:  # ids asked by this query count as "before" only for later queries
            seen |= current
            current = set()
            query = q
        keys = [(tier, i) for i in ids]
        old = sum(k in seen for k in keys)
        asked += len(keys)
        before += old
        needed += old < len(keys)
        count += 1
        current.update(keys)
    return {"queries": n, "statements": count, "ids_asked": asked,
            "ids_asked_before_share": round(before / asked, 4) if asked else None,
            "statements_still_needed_share": round(needed / count, 4) if count else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--marks", default="100,200,400")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import store as store_mod

    statements: list[tuple[int, str, list[str]]] = []
    at = [-1]
    light_rows = store_mod.TierStore.light_rows

    def recording(self: Any, ids: Any, *a: Any, **kw: Any) -> Any:
        if at[0] >= 0:
            statements.append((at[0], str(self.path), list(ids)))
        return light_rows(self, ids, *a, **kw)

    store_mod.TierStore.light_rows = recording  # type: ignore[method-assign]
    try:
        brain = Brain.open(write_config(args.workdir))
        for q in queries(50, 8):
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        for i, q in enumerate(queries(args.queries, 7)):
            at[0] = i
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    finally:
        store_mod.TierStore.light_rows = light_rows  # type: ignore[method-assign]
    out: dict[str, Any] = {"commit": commit_of(Path(__file__).resolve().parent.parent),
                           "workdir": str(args.workdir), "queries": args.queries,
                           "statements_per_scan": round(len(statements) / args.queries, 3),
                           "ids_per_statement": round(sum(len(s[2]) for s in statements) / max(len(statements), 1), 2),
                           "by_queries": [reuse(statements, int(n)) for n in args.marks.split(",")],
                           "load": load_avg()}
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
