"""What binding None costs the sqlite3 driver, against a float or a NULL in the SQL text.

    python bench/s14_bind_none.py [--rows 200000] [--json out.json]

``executemany`` of 6-column rows into an in-memory table, CPU seconds (best of 3) a row:
two None parameters a row, two floats, and the same rows with ``NULL`` written in the
statement. The driver binds an exact str / int / float directly; every other value (None
too) goes through its adapter look-up (``microprotocols_adapt``). A NaN bound as a double
is stored as NULL (checked here too), which ``entry_rows.insert_row`` uses.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time


def _run(rows: list[tuple], sql: str) -> float:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b, c REAL, d REAL, e, f)")
    start = time.process_time()
    conn.executemany(sql, rows)
    return time.process_time() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--json")
    args = ap.parse_args()
    n = args.rows
    nan = float("nan")
    cases = {
        "two None": ([("x" * 20, 1.5, None, None, "y", 3)] * n, "INSERT INTO t VALUES (?,?,?,?,?,?)"),
        "two NaN (stored NULL)": ([("x" * 20, 1.5, nan, nan, "y", 3)] * n, "INSERT INTO t VALUES (?,?,?,?,?,?)"),
        "two floats": ([("x" * 20, 1.5, 2.5, 2.5, "y", 3)] * n, "INSERT INTO t VALUES (?,?,?,?,?,?)"),
        "NULL in the SQL": ([("x" * 20, 1.5, "y", 3)] * n, "INSERT INTO t VALUES (?,?,NULL,NULL,?,?)"),
    }
    out = {"rows": n, "sqlite": sqlite3.sqlite_version, "load": os.getloadavg()[0],
           "us_a_row": {k: round(min(_run(r, s) for _ in range(3)) / n * 1e6, 3)
                        for k, (r, s) in cases.items()}}
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (v REAL)")
    conn.execute("INSERT INTO t VALUES (?)", (nan,))
    out["nan_stored_as"] = conn.execute("SELECT typeof(v) FROM t").fetchone()[0]
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
