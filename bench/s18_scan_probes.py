"""Two questions about the FTS-only scan at 100K, answered before building anything.

    python bench/s18_scan_probes.py --workdir DIR [--queries 400] [--json out.json]

1. ``syscalls``: what a system call costs in this guest (``os.fstat`` and ``fcntl(F_GETFL)``
   on a tier file, 20,000 calls each): session 17 counted 11.84 ``fcntl`` and 5.92
   ``newfstatat`` a scan (two locks and one ``fstat`` per SQLite statement); one read
   transaction a tier per search would save at most those.
2. ``slot_repeats``: of the slots whose ids (``StringColumn.take_distinct``) and hashes
   (``HashTable.take``) a scan reads, the share read by an earlier scan of the same
   process (``--queries`` bench queries after 50 warm-up scans): the hit rate a memo
   slot -> string (kept per table: the tables never change) could have.
Then, 3. ``calls``: Python function calls per scan by kind (cProfile over the same scans).

    python bench/s18_scan_probes.py --workdir FRESH-COPY --verify [--json out.json]

4. ``verify``: in a fresh process as run.py's search phase runs (30 scan + full pairs, then
   200 timed), the reads of the mirror's arrays that checked a block's CRC inside the timed
   pairs: what checking every block at open would move out of them.
"""

from __future__ import annotations

import argparse
import cProfile
import fcntl
import os
import pstats
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def syscalls(path: Path, n: int = 20_000) -> dict[str, float]:
    fd = os.open(path, os.O_RDONLY)
    try:
        t = time.perf_counter()
        for _ in range(n):
            os.fstat(fd)
        fstat = (time.perf_counter() - t) / n
        t = time.perf_counter()
        for _ in range(n):
            fcntl.fcntl(fd, fcntl.F_GETFL)
        getfl = (time.perf_counter() - t) / n
    finally:
        os.close(fd)
    return {"fstat_us": round(fstat * 1e6, 3), "fcntl_getfl_us": round(getfl * 1e6, 3)}


def slot_repeats(brain, n: int) -> dict[str, dict[str, float]]:
    from tiervault.vault import hash_table, string_table

    seen: dict[tuple[str, int], set[int]] = {}
    counts = {"ids": [0, 0], "hashes": [0, 0]}
    originals = (string_table.StringColumn.take_distinct, hash_table.HashTable.take)

    def counting(orig, label):
        def wrapped(self, slots, *a):
            held = seen.setdefault((label, id(self)), set())
            at = [int(s) for s in slots]
            counts[label][0] += len(at)
            counts[label][1] += sum(s in held for s in at)
            held.update(at)
            return orig(self, slots, *a)
        return wrapped

    string_table.StringColumn.take_distinct = counting(originals[0], "ids")
    hash_table.HashTable.take = counting(originals[1], "hashes")
    try:
        for q in queries(n, 7):
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    finally:
        string_table.StringColumn.take_distinct, hash_table.HashTable.take = originals
    return {k: {"slots_read": a, "read_before": b, "share": round(b / max(a, 1), 3)}
            for k, (a, b) in counts.items()}


def calls(brain, n: int) -> dict[str, float]:
    qs = list(queries(n, 11))
    prof = cProfile.Profile()
    prof.enable()
    for q in qs:
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    prof.disable()
    by: Counter[str] = Counter()
    for (f, _, name), (_, nc, _, _, _) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        kind = (("C: numpy" if "numpy" in name else "C: other") if f == "~" else
                "Python: numpy" if "numpy" in f else
                "Python: tiervault" if "tiervault" in f or "/wt/" in f or "/work/main" in f else "Python: other")
        by[kind] += nc
    out = {k: round(v / n, 1) for k, v in by.most_common()}
    out["all"] = round(sum(by.values()) / n, 1)
    return out


def verify_cost(brain) -> dict[str, float]:
    """The reads of ``CheckedArray`` (its public ``get`` / ``at`` / ``check_ranges`` /
    ``rows_at``) that checked a block: their count, blocks and time (the read included:
    an upper bound of the checks' cost)."""
    from tiervault.vault.checked_array import CheckedArray

    acc = {"s": 0.0, "blocks": 0, "calls": 0}
    names = ("get", "at", "check_ranges", "rows_at")
    originals = {n: getattr(CheckedArray, n) for n in names}

    def timed(orig):
        def read(self, *args):
            before, t = self.blocks_checked, time.perf_counter()
            try:
                return orig(self, *args)
            finally:
                if self.blocks_checked != before:
                    acc["s"] += time.perf_counter() - t
                    acc["calls"] += 1
                    acc["blocks"] += self.blocks_checked - before
        return read

    def pair(q):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        brain.search_intelligent(q["text"], mode="full", **query_kwargs(q))

    for n in names:
        setattr(CheckedArray, n, timed(originals[n]))
    try:
        for q in queries(30, 8):
            pair(q)
        acc.update(s=0.0, blocks=0, calls=0)
        for q in queries(200, 7):
            pair(q)
    finally:
        for n in names:
            setattr(CheckedArray, n, originals[n])
    return {"ms_per_pair": round(acc["s"] / 200 * 1e3, 4), "blocks_per_pair": acc["blocks"] / 200,
            "checking_reads_per_pair": acc["calls"] / 200}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--verify", action="store_true", help="only part 4, on a fresh copy")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    from tiervault.brain.brain import Brain

    if a.verify:
        brain = Brain.open(write_config(a.workdir))
        emit({"workdir": str(a.workdir), "load_before": load_avg(), "verify": verify_cost(brain),
              "load_after": load_avg()}, a.json)
        return

    out: dict = {"workdir": str(a.workdir), "load_before": load_avg(),
                 "syscalls": syscalls(a.workdir / "tiers" / "team.db")}
    brain = Brain.open(write_config(a.workdir))
    for q in queries(50, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    out["slot_repeats"] = slot_repeats(brain, a.queries)
    out["calls_per_scan"] = calls(brain, a.queries)
    out["load_after"] = load_avg()
    emit(out, a.json)


if __name__ == "__main__":
    main()
