"""Issue 16, session 15 probe: a tier's rows read whole (``changes_since``'s fetchall)
or 20,000 at a time (``fetchmany``), each chunk analysed and registered as a first build
does, then dropped: user / system CPU and minor faults of reading + analysis.

    python bench/s15_stream_rows.py TIER_DB MODE     (MODE: whole | chunks)
"""

from __future__ import annotations

import json
import resource
import sqlite3
import sys
from itertools import repeat

import sklearn.decomposition  # noqa: F401

from tiervault.vault import postings
from tiervault.vault.mirror_analysis import analyse_rows
from tiervault.vault.rows import MirrorRow
from tiervault.vault.tokenizer import STOP_WORDS
from tiervault.vault.word_codes import WordCodes

COLS = ("rowid, id, content_hash, type, domain, severity, origin, valid_from, "
        "valid_until, updated_at, title, description, context, tags")
CHUNK = 20_000


def main() -> int:
    db, mode = sys.argv[1], sys.argv[2]
    STOP_WORDS.get()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    p = postings.Postings()
    words = WordCodes()
    parts = []
    cur = conn.execute(f"SELECT {COLS} FROM entries ORDER BY rowid")
    if mode == "whole":
        rows = list(map(tuple.__new__, repeat(MirrorRow), cur.fetchall()))
        chunks = (rows[s:s + CHUNK] for s in range(0, len(rows), CHUNK))
    else:
        rows = None
        chunks = iter(lambda: list(map(tuple.__new__, repeat(MirrorRow), cur.fetchmany(CHUNK))), [])
    n = 0
    columns = []
    for chunk in chunks:
        blocks = analyse_rows(chunk, p.vocab, words)
        # as a first build registers its chunks since issue 16 session 16: the numeric slot
        # columns appended once at the end, no rowid index of the slots (delta=False)
        columns.append(p._register(chunk, blocks.doclen, False))
        parts.append(blocks)
        n += len(chunk)
    p._append_columns(columns)
    del rows, chunks
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"mode": mode, "rows": n, "user_s": round(r1.ru_utime - r0.ru_utime, 3),
                      "sys_s": round(r1.ru_stime - r0.ru_stime, 3), "minflt": r1.ru_minflt - r0.ru_minflt,
                      "maxrss_mb": round(r1.ru_maxrss / 1024)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
