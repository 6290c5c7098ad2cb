"""Probe (issue 16, session 13): a scan's light rows read by rowid, the rowids from the mirror.

    python bench/light_rows_rowid_ab.py --workdir DIR [--queries 1200] [--form json|bound|or]
        [--flip] [--json out.json]

``DIR`` is a work directory made by ``bench/run.py``'s build phase. One process answers
``--queries`` bench scans (after 100 untimed ones); on alternating pairs of queries
``TierStore.light_rows`` is this checkout's (by id) or a variant that maps each id the
mirror's string table remembers (its top k read it: ``held_remembered``' memo, one slot,
alive) to its rowid (``Postings.rowids``) and reads those rows by ``e.rowid``, the
others by ``e.id``, keeping only rows whose id was asked (a reused rowid holds another
id). ``--form``: ``json``: two selects by ``json_each`` arrays joined by ``UNION ALL``
(two fixed statement texts); ``bound``: the same with every id / rowid bound (one text
per pair of sizes: the driver's 128-statement cache is outgrown); ``or``: one select with
``e.rowid IN (...) OR e.id IN (...)`` bound (SQLite's MULTI-INDEX OR). ``Pool.read_rows``
is timed (wall) in each; 100 scans are then answered by both and compared (``==``,
``explain=True``). Reaches into the mirror's private members: a probe, not a design.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=1200)
    ap.add_argument("--form", choices=("json", "bound", "or"), default="json")
    ap.add_argument("--flip", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.brain import pool as pool_mod
    from tiervault.brain.brain import Brain
    from tiervault.vault import store as store_mod
    from tiervault.vault.rows import LightRow
    from tiervault.vault.sqlite_sql import SANE_TIMES, SELECT_LIGHT

    load_before = load_avg()
    by_id = store_mod.TierStore.light_rows
    sql: dict[tuple, str] = {}

    def statement(a: int, b: int) -> str:
        key = (bool(a), bool(b)) if args.form == "json" else (a, b)
        text = sql.get(key)
        if text is None:
            ids = (lambda n: "SELECT value FROM json_each(?)") if args.form == "json" \
                else (lambda n: ", ".join("?" * n))
            if args.form == "or":
                conds = ([f"e.rowid IN ({ids(a)})"] if a else []) + ([f"e.id IN ({ids(b)})"] if b else [])
                text = f"SELECT {SELECT_LIGHT} FROM entries e WHERE ({' OR '.join(conds)}) AND {SANE_TIMES}"
            else:
                parts = ([f"SELECT {SELECT_LIGHT} FROM entries e WHERE e.rowid IN ({ids(a)}) AND {SANE_TIMES}"]
                         if a else [])
                parts += ([f"SELECT {SELECT_LIGHT} FROM entries e WHERE e.id IN ({ids(b)}) AND {SANE_TIMES}"]
                          if b else [])
                text = " UNION ALL ".join(parts)
            sql[key] = text
        return text

    def by_rowid(self: Any, ids: Any, snippet_chars: int = 120) -> dict[str, LightRow]:
        p = self._mirror  # noqa: SLF001 -- a probe
        if p is None or not ids:
            return by_id(self, ids, snippet_chars)
        memo, rowids, alive = p.ids.base._memo, p.rowids, p.alive  # noqa: SLF001
        rids, rest = [], []
        for i in ids:
            k = memo.get(i)
            if k and len(k) == 1 and alive[k[0]]:
                rids.append(int(rowids[k[0]]))
            else:
                rest.append(i)
        if args.form == "json":
            params: tuple = ((snippet_chars, json.dumps(rids)) if rids else ()) + \
                ((snippet_chars, json.dumps(rest)) if rest else ())
        elif args.form == "or":
            params = (snippet_chars, *rids, *rest)
        else:
            params = ((snippet_chars, *rids) if rids else ()) + ((snippet_chars, *rest) if rest else ())
        rows = self.db.query(statement(len(rids), len(rest)), params)
        want = set(ids)
        return {row[0]: LightRow._make(row) for row in rows if row[0] in want}

    spent: dict[bool, list[float]] = {False: [], True: []}
    side = {"rowid": False, "timed": True}
    read_rows = pool_mod.Pool.read_rows

    def timed(self: Any, *a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return read_rows(self, *a, **kw)
        finally:
            if side["timed"]:
                spent[side["rowid"]].append(time.perf_counter() - t)

    pool_mod.Pool.read_rows = timed
    brain = Brain.open(write_config(args.workdir))
    qs = queries(args.queries + 100, seed=11)
    side["timed"] = False
    for q in qs[:100]:
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    side["timed"] = True
    for j, q in enumerate(qs[100:]):
        side["rowid"] = (j % 2 == 0) ^ args.flip ^ ((j // 2) % 2 == 1)
        store_mod.TierStore.light_rows = by_rowid if side["rowid"] else by_id
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    side["timed"] = False
    for q in qs[100:200]:
        store_mod.TierStore.light_rows = by_id
        a = brain.search_intelligent(q["text"], mode="scan", explain=True, **query_kwargs(q))
        store_mod.TierStore.light_rows = by_rowid
        b = brain.search_intelligent(q["text"], mode="scan", explain=True, **query_kwargs(q))
        assert a == b, q["text"]
    store_mod.TierStore.light_rows = by_id
    out = {"workdir": str(args.workdir), "form": args.form, "queries": args.queries, "flip": args.flip,
           "load_before": load_before,
           **{("by_rowid" if k else "by_id"): {"read_rows_ms_p50": round(statistics.median(v) * 1e3, 4),
                                               "read_rows_ms_mean": round(statistics.mean(v) * 1e3, 4),
                                               "n": len(v)} for k, v in spent.items()},
           "answers_equal": True, "load_after": load_avg()}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
