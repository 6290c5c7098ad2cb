"""What the FTS-only scan's light rows cost, and what reading them by rowid would save.

    python bench/light_rows_cost.py --workdir DIR [--queries 300] [--ids 13] [--sets 400]

``DIR`` is a work directory made by ``bench/run.py``'s build phase (``tiers/*.db``).

1. In a scan: ``search_intelligent(mode="scan")`` over the bench queries (after 50 untimed
   ones), with ``TierStore.light_rows`` and ``Pool.read_rows`` wrapped by a wall clock:
   statements a scan, ids asked and rows found, ms a scan in each.
2. On each tier file (plain ``sqlite3``, the tier's own 8 MiB page cache): the light-row
   statement (``SELECT_LIGHT ... AND SANE_TIMES``) for ``--sets`` random sets of ``--ids``
   entries, by ``e.id IN (json_each)`` (what ``light_rows`` runs: the id index's probe, then
   the table's) and by ``e.rowid IN (json_each)`` (the table's probe only), in alternating
   order, different random sets each round (neither variant warms the other's pages).
   Both return the same rows (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (A/B: a checkout's own tiervault)

from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def in_scan(workdir: Path, n: int) -> dict:
    from tiervault.brain import pool as pool_mod
    from tiervault.brain.brain import Brain
    from tiervault.vault import store as store_mod

    clock = {"light_rows": 0.0, "read_rows": 0.0}
    asked: list[tuple[int, int]] = []
    light_rows, read_rows = store_mod.TierStore.light_rows, pool_mod.Pool.read_rows

    def timed_light_rows(self, ids, snippet_chars=120):
        t = time.perf_counter()
        got = light_rows(self, ids, snippet_chars)
        clock["light_rows"] += time.perf_counter() - t
        asked.append((len(ids), len(got)))
        return got

    def timed_read_rows(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return read_rows(self, *args, **kwargs)
        finally:
            clock["read_rows"] += time.perf_counter() - t

    store_mod.TierStore.light_rows, pool_mod.Pool.read_rows = timed_light_rows, timed_read_rows
    try:
        brain = Brain.open(write_config(workdir))
        for q in queries(50, 8):
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        clock.update(light_rows=0.0, read_rows=0.0)
        asked.clear()
        t0 = time.perf_counter()
        for q in queries(n, 7):
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        total = time.perf_counter() - t0
    finally:
        store_mod.TierStore.light_rows, pool_mod.Pool.read_rows = light_rows, read_rows
    return {"queries": n, "scan_wall_ms_mean": round(total / n * 1e3, 4),
            "light_rows_ms_per_scan": round(clock["light_rows"] / n * 1e3, 4),
            "read_rows_ms_per_scan": round(clock["read_rows"] / n * 1e3, 4),
            "statements_per_scan": round(len(asked) / n, 3),
            "ids_asked_per_scan": round(sum(a for a, _ in asked) / n, 2),
            "rows_found_per_scan": round(sum(b for _, b in asked) / n, 2)}


def by_key(db: Path, n_ids: int, sets: int, rounds: int) -> dict:
    from tiervault.vault.entry_rows import SANE_TIMES
    from tiervault.vault.sqlite_sql import SELECT_LIGHT

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.execute("PRAGMA cache_size = -8192")  # TIER_CACHE_KIB, as the tier's connections
    keys = conn.execute("SELECT rowid, id FROM entries").fetchall()
    sql = {"id": (1, f"SELECT {SELECT_LIGHT} FROM entries e WHERE e.id IN "
                     f"(SELECT value FROM json_each(?)) AND {SANE_TIMES}"),
           "rowid": (0, f"SELECT {SELECT_LIGHT} FROM entries e WHERE e.rowid IN "
                        f"(SELECT value FROM json_each(?)) AND {SANE_TIMES}")}
    us: dict[str, list[float]] = {"id": [], "rowid": []}
    for r in range(rounds):
        for name in (("id", "rowid") if r % 2 else ("rowid", "id")):
            col, q = sql[name]
            rng = random.Random(r * 10 + col + 100)
            total = 0.0
            for _ in range(sets):
                pick = rng.sample(keys, n_ids)
                param = json.dumps([k[col] for k in pick])
                t = time.perf_counter()
                rows = conn.execute(q, (120, param)).fetchall()
                total += time.perf_counter() - t
                if sorted(x[0] for x in rows) != sorted(k[1] for k in pick):
                    raise SystemExit(f"{db.name}: the {name} statement returned other rows")
            us[name].append(total / sets * 1e6)
    conn.close()
    return {"entries": len(keys), "us_per_statement_by_round": {k: [round(x, 1) for x in v]
                                                               for k, v in us.items()},
            "us_median_id": round(statistics.median(us["id"]), 1),
            "us_median_rowid": round(statistics.median(us["rowid"]), 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--ids", type=int, default=13, help="ids a statement (a scan: ~13 a tier)")
    ap.add_argument("--sets", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out: dict = {"workdir": str(args.workdir), "load_before": [round(x, 2) for x in os.getloadavg()]}
    out["in_scan"] = in_scan(args.workdir, args.queries)
    out["by_key"] = {db.stem: by_key(db, args.ids, args.sets, args.rounds)
                     for db in sorted((args.workdir / "tiers").glob("*.db"))}
    out["ids_per_statement"] = args.ids
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
