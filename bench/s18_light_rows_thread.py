"""Could the FTS-only scan's light rows be read on a second thread? The hand-off and the GIL.

    python bench/s18_light_rows_thread.py --workdir DIR [--queries 200] [--busy-us 350] [--json out.json]

``DIR``: a work directory made by ``bench/run.py``'s build phase. The light-row statements of
``--queries`` scans (``TierStore.light_rows``: ids asked, tier by tier) are recorded, then
replayed in one process, each form alternating by scan:

- ``main``: the statements on the calling thread, then ``--busy-us`` of pure-Python work
  (a stand-in for the LSA and graph hops a worker would overlap);
- ``thread``: the statements handed to a one-thread pool as the busy work starts, the
  result waited for after it (the design the session-18 brief proposed);
- ``thread_json``: the same with each tier's rows as ONE result row (``json_group_array``):
  one ``sqlite3_step`` a statement, so the worker needs the GIL once, not once a row;
- ``handoff``: an empty task handed over and waited for (the futex wake-up's cost).

Wall ms a scan (median). What a thread gains is ``main - thread``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def record(brain, n: int) -> list[list[tuple]]:
    """Each scan's light-row calls: (store, ids)."""
    from tiervault.vault import store as store_mod

    calls: list[tuple] = []
    orig = store_mod.TierStore.light_rows

    def rec(self, ids, snippet_chars=120):
        calls.append((self, list(ids)))
        return orig(self, ids, snippet_chars)

    store_mod.TierStore.light_rows = rec
    scans = []
    try:
        for q in queries(n, 7):
            calls.clear()
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
            scans.append(list(calls))
    finally:
        store_mod.TierStore.light_rows = orig
    return scans


def busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    x = 0
    while time.perf_counter() < end:
        x += 1


def json_rows(store, ids):
    from tiervault.vault.entry_rows import SANE_TIMES
    from tiervault.vault.sqlite_sql import SELECT_LIGHT
    cols = SELECT_LIGHT
    sql = (f"SELECT json_group_array(json_array({cols})) FROM entries e "
           f"WHERE e.id IN (SELECT value FROM json_each(?)) AND {SANE_TIMES}")
    text = store.db.query(sql, (120, json.dumps(ids)))[0][0]
    return json.loads(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--busy-us", type=float, default=350.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(a.workdir))
    for q in queries(50, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    scans = [s for s in record(brain, a.queries) if s]
    pool = ThreadPoolExecutor(max_workers=1)
    pool.submit(lambda: None).result()

    def read(calls):
        return [st.light_rows(ids) for st, ids in calls]

    def read_json(calls):
        return [json_rows(st, ids) for st, ids in calls]

    def f_main(calls):
        read(calls)
        busy(a.busy_us)

    def f_thread(calls):
        fut = pool.submit(read, calls)
        busy(a.busy_us)
        fut.result()

    def f_thread_json(calls):
        fut = pool.submit(read_json, calls)
        busy(a.busy_us)
        fut.result()

    def f_main_json(calls):
        read_json(calls)
        busy(a.busy_us)

    def f_handoff(calls):
        pool.submit(lambda: None).result()

    def f_read_only(calls):
        read(calls)

    forms = {"main": f_main, "thread": f_thread, "main_json": f_main_json,
             "thread_json": f_thread_json, "handoff": f_handoff, "read_only": f_read_only}
    times: dict[str, list[float]] = {k: [] for k in forms}
    for _ in range(a.rounds):
        for calls in scans:
            for name, f in forms.items():
                t = time.perf_counter()
                f(calls)
                times[name].append((time.perf_counter() - t) * 1e3)
    out = {"workdir": str(a.workdir), "scans": len(scans), "busy_us": a.busy_us,
           "statements_per_scan": round(statistics.mean(len(s) for s in scans), 2),
           "ids_per_scan": round(statistics.mean(sum(len(i) for _, i in s) for s in scans), 1),
           "switchinterval_s": sys.getswitchinterval(),
           "wall_ms_p50": {k: round(statistics.median(v), 4) for k, v in times.items()},
           "wall_ms_mean": {k: round(statistics.mean(v), 4) for k, v in times.items()}}
    pool.shutdown()
    emit(out, a.json)


if __name__ == "__main__":
    main()
