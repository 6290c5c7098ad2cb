"""What the per-scan generation check costs alone: ``GEN_AND_LINK_CHANGES`` (one statement a
tier a search, vault/sqlite_epochs.py) against ``PRAGMA data_version`` and ``SELECT 1``.

    python bench/s15_meta_statement.py --db WORKDIR/tiers/project.db [--n 3000] [--json out.json]

Warm loop on one read-only connection, median us a statement, two passes. A probe for
the question "would a cheaper staleness check save a scan much?" (issue 16, session 15).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from tiervault.vault.schema import GEN_AND_LINK_CHANGES  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    conn = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    forms = {"gen_and_link_changes": GEN_AND_LINK_CHANGES, "pragma_data_version": "PRAGMA data_version",
             "select_1": "SELECT 1"}
    out: dict[str, list[float]] = {k: [] for k in forms}
    for _ in range(2):
        for name, sql in forms.items():
            xs = []
            for _ in range(a.n):
                t0 = time.perf_counter_ns()
                conn.execute(sql).fetchone()
                xs.append(time.perf_counter_ns() - t0)
            out[name].append(round(statistics.median(xs) / 1000, 3))
    res = {"db": str(a.db), "n": a.n, "us_p50_per_pass": out}
    print(json.dumps(res))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
