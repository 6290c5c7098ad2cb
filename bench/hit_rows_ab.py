"""Each tier's top-k hits made into ``LexicalHit`` rows: an older checkout's row class
(called once a row) against this one's ``rows.hits_of``, on the columns of real scans.

    python bench/hit_rows_ab.py --old /path/to/old/checkout --workdir DIR \
        [--queries 300] [--seed 7] [--rounds 9] [--json out.json]

Issue 16, session 12 made ``LexicalHit`` a ``NamedTuple`` built in C from its columns
(``hits_of``: ``map(tuple.__new__, ...)``) where it was a frozen dataclass whose
``__init__`` set five fields through ``object.__setattr__``. Here this checkout answers
``--queries`` bench scans (``DIR``: a ``bench/run.py`` 100K build; 30 warm-up scans) with
``hits_of`` wrapped (in ``vault/lexicon.py``, which calls it by name) to record each call's
five columns (as lists); then ``--rounds`` rounds, the order alternating, make every
recorded call's rows with OLD's ``LexicalHit`` (``OLD/vault/rows.py`` loaded as a separate
module; ``list(map(LexicalHit, ids, hashes, scores, tfidf, passes))``, as OLD's
``lexical_top_k`` did) and with this checkout's ``hits_of``. The rows' fields are
compared (equal). Process CPU a round; medians: us a call, a row and a query.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import commit_of, load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402

FIELDS = ("id", "content_hash", "score", "tfidf", "passes")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault import lexicon, rows

    spec = importlib.util.spec_from_file_location("_old_rows", args.old / "vault" / "rows.py")
    assert spec is not None and spec.loader is not None
    old_rows = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old_rows  # a dataclass looks its module up while it is built
    spec.loader.exec_module(old_rows)
    OldHit = old_rows.LexicalHit
    brain = Brain.open(write_config(args.workdir))

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, 8):
        scan(q)
    calls: list[tuple[list[Any], ...]] = []
    hits_of = rows.hits_of

    def recording(*cols: Any) -> Any:
        cols = tuple(map(list, cols))  # a column may be an iterator (repeat(True, n))
        calls.append(cols)
        return hits_of(*cols)
    lexicon.hits_of = recording
    try:
        for q in queries(args.queries, args.seed):
            scan(q)
    finally:
        lexicon.hits_of = hits_of
    n_rows = sum(len(c[0]) for c in calls)

    def old(cols: tuple[list[Any], ...]) -> list[Any]:
        return list(map(OldHit, *cols))

    def new(cols: tuple[list[Any], ...]) -> list[Any]:
        return hits_of(*cols)

    equal = all([tuple(getattr(h, f) for f in FIELDS) for h in old(c)]
                == [tuple(getattr(h, f) for f in FIELDS) for h in new(c)] for c in calls)
    totals: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for name, fn in ((("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))):
            c0 = time.process_time()
            for c in calls:
                fn(c)
            totals[name].append(time.process_time() - c0)
    out: dict[str, Any] = {"old_checkout": str(args.old), "old_commit": commit_of(args.old),
                           "new_commit": commit_of(Path(__file__).resolve().parent.parent),
                           "queries": args.queries, "calls": len(calls), "rows": n_rows,
                           "rows_per_call_mean": round(n_rows / len(calls), 1),
                           "fields_equal": equal, "load": load_avg()}
    for name, ts in totals.items():
        med = statistics.median(ts)
        out[name] = {"rounds_ms_total": [round(t * 1e3, 3) for t in ts],
                     "us_per_call": round(med * 1e6 / len(calls), 2),
                     "us_per_row": round(med * 1e6 / n_rows, 3),
                     "ms_per_query": round(med * 1e3 / args.queries, 4)}
    out["new_over_old"] = round(out["new"]["us_per_call"] / out["old"]["us_per_call"], 3)
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
