"""Issue 16, session 17 probe: what a first build's reading of a tier's rows costs per
step, 20,000 rows at a time (CPU s over the whole tier, one process).

    python bench/s17_chunk_costs.py TIER_DB

Steps: the driver's ``fetchmany`` (a tuple a row, a Python object a value); the rows
made ``MirrorRow`` s (the contract's chunks until this session); ``zip(*rows)`` of all 14
fields (``slot_columns`` took the rows apart so); an ``itemgetter`` map per text field
(``analyse_rows``). Since this session a chunk is one ``zip`` of the driver's tuples
(``MirrorColumns.of``), read by both.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import sys
import time
from itertools import repeat
from operator import itemgetter

from tiervault.vault.rows import MirrorRow


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    columns = ", ".join("rowid" if f == "key" else f for f in MirrorRow._fields)
    conn = sqlite3.connect(f"file:{argv[0]}?mode=ro", uri=True)
    gc.disable()
    costs: dict[str, float] = {}

    def tick(step: str, t0: float) -> float:
        t = time.process_time()
        costs[step] = costs.get(step, 0.0) + t - t0
        return t

    text_at = [MirrorRow._fields.index(f) for f in ("id", "title", "description", "context", "tags")]
    cur = conn.execute(f"SELECT {columns} FROM entries ORDER BY rowid")
    while True:
        t = time.process_time()
        raw = cur.fetchmany(20_000)
        t = tick("fetchmany", t)
        if not raw:
            break
        rows = list(map(tuple.__new__, repeat(MirrorRow), raw))
        t = tick("MirrorRow per row", t)
        by_field = list(zip(*rows))
        t = tick("zip(*rows), 14 fields", t)
        texts = [list(map(itemgetter(i), rows)) for i in text_at]
        t = tick("itemgetter, 5 text fields", t)
        del raw, rows, by_field, texts
    print(json.dumps({"db": argv[0], "cpu_s": {k: round(v, 3) for k, v in costs.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
