"""Two probes of the JSONL import (issue 16, session 22), each alternating its variants in
one process and reporting the CPU of the measured step (``time.thread_time``)::

    python bench/s22_jsonl_probes.py groups --src DIR [--rounds 9] [--sizes 2000,500] [--json OUT]
    python bench/s22_jsonl_probes.py fts --src DIR VARIANT [--json OUT]

``groups``: ``parse_lines`` over the team tier's lines (read into memory first), with the
module's group size set to each of ``--sizes`` in turn, round after round: CPU us a line
(the decode and the bulk validation of a group touch each record a dozen times; whether a
group stays in the core's L2 cache shows here, not in instruction counts).

``fts``: the team tier's FTS5 columns into a bare external-content FTS5 table like a tier's
(same tokenizer, WAL, the bulk load's cache and checkpoint settings), 5,000-row transactions
with 'automerge' 0 around each ``INSERT ... SELECT``, as ``sqlite_writer.index_fts`` does;
VARIANT ``base`` (FTS5's 1 MiB pending-terms hash), ``hashN`` ('hashsize' N MiB for the
statement), ``nocrisis`` ('crisismerge' 2000), ``nocrisis_opt`` (the same plus an
'optimize' at the end). Prints CPU us a row of the FTS5 statements and the commits, the
segments left and the time of five queries. Run it under ``valgrind --tool=callgrind``
for load-independent instruction counts (one variant a process).

``DIR`` holds ``team.jsonl`` (``bench.corpus.write_jsonl``; ``bench/s14_jsonl_profile.py
--src DIR`` writes all three tiers).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def groups(src: Path, sizes: list[int], rounds: int) -> dict[str, Any]:
    import tiervault.vault.jsonl as jsonl

    lines = (src / "team.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    out: dict[str, list[float]] = {str(s): [] for s in sizes}
    gc.disable()
    for _ in range(rounds):
        for size in sizes:
            setattr(jsonl, "_GROUP", size)  # the probe's variable (module constant)
            cpu = time.thread_time()
            parsed = list(jsonl.parse_lines(iter(lines)))
            out[str(size)].append(round((time.thread_time() - cpu) / len(parsed) * 1e6, 2))
            del parsed
    return {"lines": len(lines), "cpu_us_a_line": out, "load_avg": os.getloadavg()[0]}


def fts(src: Path, variant: str) -> dict[str, Any]:
    rows = []
    with open(src / "team.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            rows.append((r["id"], r["title"], r["description"], r.get("context", ""),
                         " ".join(r.get("tags", []))))
    path = Path(tempfile.mkdtemp(prefix="s22-fts-")) / "x.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "cache_size=-262144",
                   "wal_autocheckpoint=32768"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute("CREATE TABLE entries(rowid INTEGER PRIMARY KEY, id TEXT, title TEXT, "
                 "description TEXT, context TEXT, tags TEXT, gen INT)")
    conn.execute("CREATE INDEX entries_gen ON entries(gen)")
    conn.execute("CREATE VIRTUAL TABLE entries_fts USING fts5(id, title, description, context, "
                 "tags, content='entries', content_rowid='rowid', tokenize='porter unicode61')")
    setting = "INSERT INTO entries_fts(entries_fts, rank) VALUES (?, ?)"
    index = commit = 0.0
    for gen, start in enumerate(range(0, len(rows), 5_000), 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO entries(id, title, description, context, tags, gen) "
                         f"VALUES (?, ?, ?, ?, ?, {gen})", rows[start:start + 5_000])
        cpu = time.thread_time()
        conn.execute(setting, ("automerge", 0))
        if variant.startswith("nocrisis"):
            conn.execute(setting, ("crisismerge", 2_000))
        if variant.startswith("hash"):
            conn.execute(setting, ("hashsize", int(variant[4:]) << 20))
        conn.execute("INSERT INTO entries_fts(rowid, id, title, description, context, tags) "
                     "SELECT rowid, id, title, description, context, tags FROM entries WHERE gen = ?",
                     (gen,))
        conn.execute(setting, ("automerge", 4))
        if variant.startswith("hash"):
            conn.execute(setting, ("hashsize", 1 << 20))
        index += time.thread_time() - cpu
        cpu = time.thread_time()
        conn.execute("COMMIT")
        commit += time.thread_time() - cpu
    cpu = time.thread_time()
    if variant == "nocrisis_opt":
        conn.execute("INSERT INTO entries_fts(entries_fts) VALUES ('optimize')")
    optimize = time.thread_time() - cpu
    segments = conn.execute("SELECT count(DISTINCT segid) FROM entries_fts_idx").fetchone()[0]
    wall = time.perf_counter()
    for q in ("the", "index", "policy", "mooka", "sluclio OR token"):
        conn.execute("SELECT rowid, bm25(entries_fts) FROM entries_fts WHERE entries_fts MATCH ? "
                     "ORDER BY 2 LIMIT 30", (q,)).fetchall()
    n = len(rows)
    return {"variant": variant, "rows": n, "fts_us_a_row": round(index / n * 1e6, 2),
            "commit_us_a_row": round(commit / n * 1e6, 2), "optimize_us_a_row": round(optimize / n * 1e6, 2),
            "segments": segments, "five_queries_ms": round((time.perf_counter() - wall) * 1e3, 1),
            "file_bytes": path.stat().st_size, "load_avg": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("probe", choices=("groups", "fts"))
    ap.add_argument("variant", nargs="?", default="base")
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--sizes", default="2000,750,500,375,250")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out = (groups(args.src, [int(s) for s in args.sizes.split(",")], args.rounds)
           if args.probe == "groups" else fts(args.src, args.variant))
    text = json.dumps(out)
    print(text)
    if args.json:
        with args.json.open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
