"""A scan's ``tfidf_query.scores_at`` calls replayed in isolation: this checkout's and a
candidate file's, bit for bit and timed.

    python bench/s18_tfidf_replay.py --workdir DIR --candidate FILE [--queries 200] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase with vectors
(``agent-hybrid.yaml``). After 30 warm-up hybrid scans, ``--queries`` scans run with
every ``scores_at`` call recorded (its arguments and answer; the query's column memo
copied after the call). Then each call is replayed by this checkout's ``scores_at``
and by ``FILE``'s (a copy of vault/tfidf_query.py with a change, loaded as its own
module), three passes each (a candidate keeping something in the column memo meets
it on the second pass), every answer compared byte for byte with the recorded one;
the best pass's us a call. In isolation: no pool thread beside it, warm caches (a
scan's own calls cost ~2x: issue 16, session 18, "lexical look-ups").
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import open_hybrid_brain, query_kwargs  # noqa: E402
from bench.s16_read_paths_ab import HYBRID_DIM  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.vault import postings, tfidf_query

    brain = open_hybrid_brain(args.workdir, HYBRID_DIM)

    def scan(q: dict[str, Any]) -> Any:
        return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    for q in queries(30, args.seed + 1):
        scan(q)
    own = tfidf_query.scores_at
    calls: list[tuple[tuple, Any]] = []

    def recorded(q, slots, W, T, base_rows, delta_rows, columns, read=None):  # type: ignore[no-untyped-def]
        got = own(q, slots, W, T, base_rows, delta_rows, columns, read)
        calls.append(((q, slots.copy(), W, T, base_rows, delta_rows, dict(columns)), got))
        return got

    postings.scores_at = recorded
    for q in queries(args.queries, args.seed):
        scan(q)
    postings.scores_at = own
    spec = importlib.util.spec_from_file_location("candidate_tfidf_query", args.candidate)
    assert spec is not None and spec.loader is not None
    candidate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(candidate)

    def best_us(fn: Callable[..., Any]) -> float:
        passes = []
        for _ in range(3):
            t0 = time.perf_counter()
            for a, want in calls:
                got = fn(*a)
                if got.dtype != want.dtype or got.tobytes() != want.tobytes():
                    raise SystemExit(f"{fn.__module__}.scores_at answers otherwise than recorded")
            passes.append((time.perf_counter() - t0) / len(calls) * 1e6)
        return round(min(passes), 2)

    out = {"workdir": str(args.workdir), "candidate": str(args.candidate), "calls": len(calls),
           "load_before": [round(x, 2) for x in os.getloadavg()],
           "this_checkout_us_per_call": best_us(own), "candidate_us_per_call": best_us(candidate.scores_at),
           "identical": True, "load_after": [round(x, 2) for x in os.getloadavg()]}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
