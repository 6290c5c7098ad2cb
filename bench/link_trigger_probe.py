"""Per-link cost of a bulk link copy under three ways of counting link changes (one process).

    python bench/link_trigger_probe.py [--links 50000] [--rounds 3] [--json out.json]

A tier file of the current schema (``migrate`` on an empty file: v6's triggers) with
100,000 entries is made three times in a temporary directory, its links' triggers then
replaced by:

- ``none``: no trigger, one bump per transaction (what schema 5 did by hand);
- ``row``: schema v6's triggers as shipped (a row trigger per link row);
- ``update``: v6's triggers with a plain UPDATE of the count for the upsert (a count
  row deleted by outside SQL would then stay deleted: the count would stall);
- ``when``: the insert trigger guarded by ``WHEN NOT EXISTS (a 'links.bulk' row in
  meta)``: tiervault's bulk transaction would write that marker, insert without the
  trigger, delete the marker and bump once by the rows written (outside writers never
  see the marker, which is never committed);
- ``ddl``: v6's triggers, but tiervault's bulk transaction drops the insert trigger,
  inserts, creates it again and bumps once by the rows written (atomic: DDL is
  transactional in SQLite; every other connection re-reads the schema afterwards).

Each round copies ``--links`` links with ``SqlTransfer.put_links``'s statement in
transactions of 2,000 rows, variants alternating; process CPU per link.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH

PUT = ("INSERT INTO links (source_id, target_id, link_type, note, created_at) "
       "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM entries WHERE id = ?) "
       "ON CONFLICT (source_id, target_id, link_type) DO UPDATE SET note = excluded.note, "
       "created_at = excluded.created_at")
AI = ""  # schema v6's insert trigger (set in main)
BUMP = ("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + ? AS TEXT) WHERE key = 'links.changes'")


def tier(path: Path, variant: str) -> sqlite3.Connection:
    from tiervault.vault.schema import MIGRATIONS, migrate

    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO entries (id, type, domain, title, description, severity, origin, "
                     "created_at, updated_at, content_hash) VALUES (?, 'pattern', 'd', 't', 'x', "
                     "'suggestion', 'user', 0, 0, ?)", [(f"e{i:06d}", str(i)) for i in range(100_000)])
    conn.execute("COMMIT")
    if variant not in ("row", "update", "ddl"):
        for name in ("links_count_ai", "links_count_ad", "links_count_au"):
            conn.execute(f"DROP TRIGGER {name}")
    if variant == "update":
        for name, statement in zip(("links_count_ai", "links_count_ad", "links_count_au"), MIGRATIONS[5]):
            conn.execute(f"DROP TRIGGER {name}")
            plain = statement[:statement.index("BEGIN")] + "BEGIN " + BUMP.replace("?", "1") + "; END"
            conn.execute(plain)
    if variant == "when":
        ai = MIGRATIONS[5][0].replace("AFTER INSERT ON links BEGIN", "AFTER INSERT ON links WHEN NOT EXISTS "
                                      "(SELECT 1 FROM meta WHERE key = 'links.bulk') BEGIN")
        assert ai != MIGRATIONS[5][0]
        conn.execute(ai)
    return conn


def copy(conn: sqlite3.Connection, variant: str, rows: list[tuple]) -> float:
    c = time.process_time()
    for k in range(0, len(rows), 2000):
        conn.execute("BEGIN IMMEDIATE")
        if variant == "when":
            conn.execute("INSERT INTO meta (key, value) VALUES ('links.bulk', '1')")
        elif variant == "ddl":
            conn.execute("DROP TRIGGER links_count_ai")
        n = conn.executemany(PUT, rows[k:k + 2000]).rowcount
        if variant == "when":
            conn.execute("DELETE FROM meta WHERE key = 'links.bulk'")
        elif variant == "ddl":
            conn.execute(AI)
            conn.execute(BUMP, (n,))
        if variant in ("none", "when"):
            conn.execute(BUMP, (n if variant == "when" else 1,))
        conn.execute("COMMIT")
    spent = (time.process_time() - c) / len(rows) * 1e6
    count = int(conn.execute("SELECT value FROM meta WHERE key = 'links.changes'").fetchone()[0])
    assert count == (-(-len(rows) // 2000) if variant == "none" else len(rows)), (variant, count)
    return spent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    global AI
    from tiervault.vault.schema import MIGRATIONS

    AI = MIGRATIONS[5][0]
    variants = ("none", "row", "update", "when", "ddl")
    got: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            rng = random.Random(r)
            rows = []
            for i in range(args.links):
                src = f"e{rng.randrange(100_000):06d}"
                rows.append((src, f"b{i}", "supports", "", 0.0, src))
            for v in variants:
                path = Path(tmp) / f"{v}{r}.db"
                conn = tier(path, v)
                got[v].append(round(copy(conn, v, rows), 3))
                conn.close()
                os.remove(path)
                print(f"round {r} {v}: {got[v][-1]} us/link", file=sys.stderr)
    summary = {v: statistics.median(x) for v, x in got.items()}
    doc = {"command": " ".join(sys.argv), "load_avg": [round(x, 2) for x in os.getloadavg()],
           "links": args.links, "us_per_link_median": summary, "us_per_link": got}
    print(json.dumps(doc, indent=1))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
