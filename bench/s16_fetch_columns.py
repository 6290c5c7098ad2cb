"""Issue 16, session 16 probe: the CPU of reading a tier's mirror columns with
``fetchmany(20000)`` (plain tuples, as MirrorRows, and column subsets), twice.

    python bench/s16_fetch_columns.py TIER_DB
"""
import sqlite3, sys, time, gc
from itertools import repeat
from tiervault.vault.rows import MirrorRow
gc.disable()
conn = sqlite3.connect(sys.argv[1])
COLS = ("rowid, id, content_hash, type, domain, severity, origin, valid_from, "
        "valid_until, updated_at, title, description, context, tags")
def run(conv, cols=COLS):
    t = time.process_time()
    cur = conn.execute(f"SELECT {cols} FROM entries ORDER BY rowid")
    n = 0
    while True:
        rows = cur.fetchmany(20000)
        if not rows: break
        if conv: rows = list(map(tuple.__new__, repeat(MirrorRow), rows))
        n += len(rows)
    return round(time.process_time() - t, 3)
for rep in range(2):
    print("plain", run(False), "mirrorrow", run(True), "rowid only", run(False, "rowid"), "no texts", run(False, "rowid, id, content_hash, type, domain, severity, origin, valid_from, valid_until, updated_at"), "tags only", run(False, "rowid, tags"), "title,desc,ctx", run(False, "title, description, context"))
