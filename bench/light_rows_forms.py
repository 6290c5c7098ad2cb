"""Probe (issue 16, session 13): what one light-row statement costs, by form and by cache state.

    python bench/light_rows_forms.py --workdir DIR [--tier project] [--ids 13] [--rounds 600]
        [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase; the tier's file is read
with plain ``sqlite3`` (WAL, the tiers' 8 MiB page cache), ``--ids`` ids a statement.

1. **forms**: the light-row statement (``SELECT_LIGHT ... AND SANE_TIMES``) by ``e.id IN
   (json_each)`` (before session 13), by bound ids ``e.id IN (?, ...)`` (session 13),
   ``UNION ALL`` of one ``e.id = ?`` select per id, one statement per id; and the same
   statement without ``SANE_TIMES``, without the ``length()`` sum, ids only (the id index
   alone), rowid and type (the index then the table); ``cached`` repeats 20 sets, ``random``
   draws a new set each time. All forms alternate statement by statement; the rows of the
   first four are checked equal.
2. **cold**: the json form after nothing (``quiet``), after touching 8 or 64 MiB of other
   memory (``thrash``: what the rest of a scan does to the CPU caches), after a 4 ms sleep
   (another process's turn on the core), alternating.
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

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.output import emit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--tier", default="project")
    ap.add_argument("--ids", type=int, default=13)
    ap.add_argument("--rounds", type=int, default=600)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.vault.sqlite_sql import SANE_TIMES, SELECT_LIGHT

    load_before = load_avg()
    c = sqlite3.connect(args.workdir / "tiers" / f"{args.tier}.db")
    c.execute("PRAGMA cache_size = -8192")
    c.execute("PRAGMA journal_mode = WAL")
    ids = [r[0] for r in c.execute("SELECT id FROM entries")]
    rnd = random.Random(1)
    light = f"SELECT {SELECT_LIGHT} FROM entries e WHERE "
    no_len = SELECT_LIGHT.split(", length(")[0] + ", 0, e.origin"
    forms = {
        "json_each": lambda s: c.execute(f"{light}e.id IN (SELECT value FROM json_each(?)) AND {SANE_TIMES}",
                                         (120, json.dumps(s))).fetchall(),
        "bound_ids": lambda s: c.execute(f"{light}e.id IN ({', '.join('?' * len(s))}) AND {SANE_TIMES}",
                                         (120, *s)).fetchall(),
        "union_all": lambda s: c.execute(" UNION ALL ".join([f"{light}e.id = ? AND {SANE_TIMES}"] * len(s)),
                                         [x for i in s for x in (120, i)]).fetchall(),
        "one_per_id": lambda s: [r for i in s for r in c.execute(f"{light}e.id = ? AND {SANE_TIMES}",
                                                                 (120, i)).fetchall()],
        "json_no_sane_times": lambda s: c.execute(
            f"{light}e.id IN (SELECT value FROM json_each(?))", (120, json.dumps(s))).fetchall(),
        "json_no_length_sum": lambda s: c.execute(
            f"SELECT {no_len} FROM entries e WHERE e.id IN (SELECT value FROM json_each(?)) AND {SANE_TIMES}",
            (120, json.dumps(s))).fetchall(),
        "json_ids_only": lambda s: c.execute(
            "SELECT e.id FROM entries e WHERE e.id IN (SELECT value FROM json_each(?))", (json.dumps(s),)).fetchall(),
        "json_rowid_type": lambda s: c.execute(
            "SELECT e.rowid, e.type FROM entries e WHERE e.id IN (SELECT value FROM json_each(?))",
            (json.dumps(s),)).fetchall(),
    }
    out: dict = {"workdir": str(args.workdir), "tier": args.tier, "ids": args.ids, "rounds": args.rounds,
                 "load_before": load_before}
    for mode in ("cached", "random"):
        fixed = [rnd.sample(ids, args.ids) for _ in range(20)]
        for s in fixed:
            want = sorted(forms["json_each"](s))
            assert all(sorted(forms[k](s)) == want for k in ("bound_ids", "union_all", "one_per_id"))
        spent: dict[str, list[float]] = {k: [] for k in forms}
        for r in range(args.rounds):
            for k, f in forms.items():
                s = fixed[r % 20] if mode == "cached" else rnd.sample(ids, args.ids)
                t = time.perf_counter()
                f(s)
                spent[k].append(time.perf_counter() - t)
        out[f"{mode}_us_p50"] = {k: round(statistics.median(v) * 1e6, 1) for k, v in spent.items()}
    cold: dict[str, list[float]] = {"quiet": [], "thrash_8MiB": [], "thrash_64MiB": [], "sleep_4ms": []}
    big = {"thrash_8MiB": np.ones((8 << 20) // 8), "thrash_64MiB": np.ones((64 << 20) // 8)}
    for r in range(args.rounds * 2):
        mode = list(cold)[r % 4]
        s = json.dumps(rnd.sample(ids, args.ids))
        if mode in big:
            big[mode].sum()
            big[mode][::8] += 1
        elif mode == "sleep_4ms":
            time.sleep(0.004)
        t = time.perf_counter()
        c.execute(f"{light}e.id IN (SELECT value FROM json_each(?)) AND {SANE_TIMES}", (120, s)).fetchall()
        cold[mode].append(time.perf_counter() - t)
    out["cold_us_p50"] = {k: round(statistics.median(v) * 1e6, 1) for k, v in cold.items()}
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
