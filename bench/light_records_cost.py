"""What the light records (vault/light_records.py) cost and save, per call and per build.

    python bench/light_records_cost.py --workdir DIR [--queries 300] [--json out.json]

``DIR``: a ``bench/run.py`` build (``tiers/*.db``) whose mirror caches hold light records
(this checkout's cache version: the first open builds them). Two parts:

* **calls**: the scans of ``--queries`` bench queries record every ``TierStore.light_rows``
  call (store, ids); the calls are then replayed, warm, in one read scope, alternating
  rounds: from the records (``light_rows``), from SQL (``light_rows_texts``, the statement
  of before), and the records' parts (the slot look-up ``Postings.slots_of``). Median us a
  call and the sum a query.
* **build**: the team tier's rows read as a first build reads them, three rounds each:
  ``TierStore.rows_in_chunks`` (before) and ``light_feed.rows_with_records`` (the statement
  with the records' two values, each chunk added to the records), process CPU; a tier past
  ``light_feed.RECORDS_MAX_ROWS`` (the 1M bench tiers: ``--build-only``) is read without them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def calls(workdir: Path, n: int) -> dict[str, Any]:
    from tiervault.brain.brain import Brain
    from tiervault.vault.read_scope import read_scope
    from tiervault.vault.store import TierStore

    brain = Brain.open(write_config(workdir))
    seen: list[tuple[Any, list[str]]] = []
    real = TierStore.light_rows

    def recorded(self, ids, snippet_chars=120):
        seen.append((self, list(ids)))
        return real(self, ids, snippet_chars)

    TierStore.light_rows = recorded  # type: ignore[method-assign]
    try:
        for q in queries(n, 5):
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    finally:
        TierStore.light_rows = real  # type: ignore[method-assign]
    variants = {"records": lambda st, ids: real(st, ids),
                "sql": lambda st, ids: st.light_rows_texts(ids, None),
                "slots_of": lambda st, ids: st.postings().slots_of(ids)}
    times: dict[str, list[float]] = {k: [] for k in variants}
    totals: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(3):
        for name, fn in variants.items():
            ts = []
            with read_scope():
                for st, ids in seen:
                    t0 = time.perf_counter_ns()
                    fn(st, ids)
                    ts.append(time.perf_counter_ns() - t0)
            times[name].append(statistics.median(ts) / 1e3)
            totals[name].append(sum(ts) / n / 1e3)
    return {"calls": len(seen), "ids_a_call": round(statistics.mean(len(i) for _, i in seen), 2),
            **{name: {"us_a_call_p50": [round(x, 1) for x in times[name]],
                      "us_a_query": [round(x, 1) for x in totals[name]]} for name in variants}}


def build(workdir: Path, rounds: int = 3) -> dict[str, Any]:
    from tiervault.vault.light_feed import rows_with_records
    from tiervault.vault.store import TierStore

    out: dict[str, list[float]] = {"rows_in_chunks_ms": [], "rows_with_records_ms": []}
    with TierStore(workdir / "tiers" / "team.db", name="team") as st:
        for _ in range(rounds):
            c0 = time.process_time()
            with st.rows_in_chunks(20_000) as (_, chunks):
                rows = sum(len(c) for c in chunks)
            out["rows_in_chunks_ms"].append(round((time.process_time() - c0) * 1e3, 1))
            c0 = time.process_time()
            with rows_with_records(st, 20_000) as (_, chunks, records):
                sum(len(c) for c in chunks)
            out["rows_with_records_ms"].append(round((time.process_time() - c0) * 1e3, 1))
    return {"team_rows": rows, "records_built": records is not None, **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--build-only", action="store_true", help="the build part only (e.g. a 1M tier)")
    ap.add_argument("--rounds", type=int, default=3, help="build rounds")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    load = [round(x, 2) for x in __import__("os").getloadavg()]
    out = {"workdir": str(args.workdir), "queries": args.queries, "load_before": load,
           "calls": None if args.build_only else calls(args.workdir, args.queries),
           "build": build(args.workdir, args.rounds),
           "load_after": [round(x, 2) for x in __import__("os").getloadavg()]}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
