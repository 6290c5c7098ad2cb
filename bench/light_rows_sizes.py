"""What a light-row statement costs by its size, warm: ``TierStore.light_rows`` of 1 / 3 / 10
/ 30 random ids, and the plain SQLite statement empty, on cached rows and on random ones.

    python bench/light_rows_sizes.py --workdir DIR [--tier team] [--reps 300] [--seed 5] \
        [--json out.json]

Issue 16, session 12 (the pool's reads) read a light-row statement as ~2.4 us a row plus
~5 us a statement, not ~0.1 ms whatever its size, from an uncommitted probe (14 / 25 / 58
/ 158 us for 1 / 3 / 10 / 30 ids; plain SQLite 5 us empty, 8 us one cached row, 32 us 11
cached rows, 57 us 11 random ones). Here, in one process over ``DIR`` (a ``bench/run.py``
build; 30 warm-up scans first): ``--tier``'s ``TierStore.light_rows`` of new random ids
each call (``--reps`` calls a size), then on the tier file with plain ``sqlite3`` (the
tier's 8 MiB page cache): ``SELECT 1``, the light-row statement (``SELECT_LIGHT`` by
``e.id IN (json_each)``, as ``bench/light_rows_cost.py``) on 1 fixed id, on 11 fixed ids,
and on 11 new random ids each time. perf_counter; p50 / mean us a statement.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import commit_of, load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def _timed(fn: Callable[[], Any], reps: int) -> dict[str, float]:
    xs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return {"p50_us": round(statistics.median(xs) * 1e6, 1), "mean_us": round(statistics.fmean(xs) * 1e6, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--tier", default="team")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain.brain import Brain
    from tiervault.vault.entry_rows import SANE_TIMES
    from tiervault.vault.sqlite_sql import SELECT_LIGHT

    brain = Brain.open(write_config(args.workdir))
    for q in queries(30, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    tier = brain.manager.tiers[args.tier]
    ids = tier.store.postings().ids.base.tolist()
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"commit": commit_of(Path(__file__).resolve().parent.parent), "tier": args.tier,
                           "entries": len(ids), "reps": args.reps, "load_before": load_avg()}
    for n in (1, 3, 10, 30):
        out[f"light_rows_{n}_ids"] = _timed(lambda: tier.store.light_rows(rng.sample(ids, n)), args.reps)
    conn = sqlite3.connect(f"file:{args.workdir / 'tiers' / (args.tier + '.db')}?mode=ro", uri=True)
    conn.execute("PRAGMA cache_size = -8192")  # TIER_CACHE_KIB, as the tier's connections
    sql = f"SELECT {SELECT_LIGHT} FROM entries e WHERE e.id IN (SELECT value FROM json_each(?)) AND {SANE_TIMES}"
    one, eleven = json.dumps(ids[:1]), json.dumps(ids[100:111])
    out["sqlite_empty_statement"] = _timed(lambda: conn.execute("SELECT 1").fetchall(), args.reps)
    out["sqlite_1_cached_row"] = _timed(lambda: conn.execute(sql, (120, one)).fetchall(), args.reps)
    out["sqlite_11_cached_rows"] = _timed(lambda: conn.execute(sql, (120, eleven)).fetchall(), args.reps)
    out["sqlite_11_random_rows"] = _timed(
        lambda: conn.execute(sql, (120, json.dumps(rng.sample(ids, 11)))).fetchall(), args.reps)
    conn.close()
    out["load_after"] = load_avg()
    brain.close()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
