"""Where a JSONL import's cost grows with the tier: per-batch CPU of the row inserts, the FTS5
indexing and the commit, and the bytes the commit writes, by position in the load.

One tier file of a JSONL corpus (``bench/write_ab.py`` writes one per tier, or
``bench.corpus.write_jsonl``) imported into a fresh tier in one thread (the writer thread
off, so each statement's CPU is this thread's), with every SQLite statement of the load
timed by a ``sqlite3.Connection`` subclass and the process's ``write_bytes``
(``/proc/self/io``) read around each ``COMMIT``. Prints JSON: the totals and, per tenth
of the batches, microseconds of CPU a row for ``insert`` / ``fts`` / ``commit`` and the
KB a row the commit wrote (WAL frames plus any checkpoint it ran)::

    python bench/import_growth.py DIR TIER [--batch 5000] [--pragmas "wal_autocheckpoint=32768"]

``--no-bulk``: without the bulk-load settings of ``vault/sqlite_bulk.py`` (what main
did before them); ``--pragmas``: extra PRAGMAs on the tier connection (probes).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_KEYS = {"INSERT INTO entries_fts(rowid": "fts", "COMMIT": "commit"}


def _written() -> int:
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["write_bytes"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("tier")
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--pragmas", default="")
    ap.add_argument("--no-bulk", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    import tiervault.vault.connection as connection
    import tiervault.vault.sqlite_bulk as sqlite_bulk
    import tiervault.vault.write_pipeline as write_pipeline
    from tiervault.vault.jsonl import import_lines
    from tiervault.vault.manager import VaultManager

    batches: list[dict[str, float]] = []
    current: dict[str, float] = collections.defaultdict(float)

    class Timed(sqlite3.Connection):
        def execute(self, sql: str, *params: Any) -> sqlite3.Cursor:
            key = next((v for p, v in _KEYS.items() if sql.startswith(p)), None)
            if key is None:
                return super().execute(sql, *params)
            cpu, before = time.thread_time(), _written()
            try:
                return super().execute(sql, *params)
            finally:
                current[key] += time.thread_time() - cpu
                if key == "commit":
                    current["commit_bytes"] = _written() - before
                    batches.append(dict(current))
                    current.clear()

        def executemany(self, sql: str, *params: Any) -> sqlite3.Cursor:
            cpu = time.thread_time()
            try:
                return super().executemany(sql, *params)
            finally:
                current["insert"] += time.thread_time() - cpu

    real_connect = sqlite3.connect

    def connect(*a: Any, **k: Any) -> sqlite3.Connection:
        conn = real_connect(*a, factory=Timed, **k)
        for pragma in filter(None, args.pragmas.split(";")):
            conn.execute("PRAGMA " + pragma)  # before the tier's own: those it sets win
        return conn

    proxy = type(sys)("sqlite3")  # the connection module's sqlite3, with connect timed
    proxy.__dict__.update(sqlite3.__dict__)
    proxy.connect = connect
    connection.sqlite3 = proxy
    write_pipeline.MIN_PIPELINED_BATCH = 10 ** 9  # one thread: the statements' CPU is ours
    if args.no_bulk:
        sqlite_bulk.BULK_CACHE_KIB, sqlite_bulk.BULK_WAL_PAGES = 65_536, 1_000
    work = Path(tempfile.mkdtemp(prefix="tiervault-import-growth-"))
    try:
        load = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        with VaultManager.at({args.tier: str(work / "t.db")}) as manager, \
                open(args.src / f"{args.tier}.jsonl", encoding="utf-8") as fh:
            report = import_lines(manager, args.tier, fh, batch_size=args.batch)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        size = (work / "t.db").stat().st_size
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [b for b in batches if "fts" in b]  # the load's batches (not the schema's commits)
    n, size_b = report.written, args.batch
    k = max(1, len(rows) // 10)
    out = {"rows": n, "batch": size_b, "pragmas": args.pragmas, "bulk_settings": not args.no_bulk,
           "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
           "load_avg": [round(load, 2), round(os.getloadavg()[0], 2)], "db_bytes": size,
           "commit_kb_per_row": round(sum(b["commit_bytes"] for b in rows) / n / 1024, 2),
           "tenths": [{"upto_rows": min(n, (i + k) * size_b),
                       **{f: round(sum(b.get(f, 0.0) for b in rows[i:i + k]) / (k * size_b) * 1e6, 2)
                          for f in ("insert", "fts", "commit")},
                       "commit_kb_per_row": round(sum(b["commit_bytes"] for b in rows[i:i + k])
                                                  / (k * size_b) / 1024, 2)}
                      for i in range(0, len(rows) - k + 1, k)]}
    text = json.dumps(out, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
