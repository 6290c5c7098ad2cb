"""The per-search generation check of a tier (``TierEpochs.versions``) in situ, two ways.

    python bench/s17_meta_check.py --workdir W --old CHECKOUT [--queries 800] [--json out.json]

A Brain on ``W`` (a copy of a ``bench/run.py`` 100K build) answers new bench queries
(``search_intelligent(mode="scan")``); query by query the check is made either with the
``meta`` statement every time (``statement``: ``OLD``'s function) or with
``PRAGMA data_version`` first and the ``meta`` statement only when another connection
committed since (``data_version``: this checkout). Every call of
``TierEpochs.versions`` is timed (``perf_counter_ns``; ``generation()`` calls it only when
the read scope's memo misses); the scans' process CPU too. Issue 16, session 17.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402
from bench.scan_swap_ab import Swap  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--old", type=Path, required=True, help="a checkout before session 17")
    ap.add_argument("--queries", type=int, default=800)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    from tiervault.brain.brain import Brain
    from tiervault.vault import sqlite_epochs

    # the code before session 17, loaded from OLD (bench/scan_swap_ab.py's Swap)
    swap = Swap(args.old, "vault/sqlite_epochs.py:TierEpochs.versions", 0)
    variants = {"statement": swap.old, "data_version": swap.new}
    calls: dict[str, list[int]] = {v: [] for v in variants}
    scans: dict[str, list[float]] = {v: [] for v in variants}
    current = ["statement"]

    def timed(self: sqlite_epochs.TierEpochs) -> tuple[int, int]:
        t0 = time.perf_counter_ns()
        out = variants[current[0]](self)
        calls[current[0]].append(time.perf_counter_ns() - t0)
        return out

    sqlite_epochs.TierEpochs.versions = timed  # type: ignore[method-assign]
    brain = Brain.open(write_config(args.workdir))
    for q in queries(30, args.seed + 1):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    load_before = load_avg()
    for i, q in enumerate(queries(args.queries, args.seed)):
        current[0] = ("statement", "data_version")[(i + i // 2) % 2]  # ABBA
        c0 = time.process_time()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        scans[current[0]].append((time.process_time() - c0) * 1e3)
    brain.close()
    out = {"workdir": str(args.workdir), "queries": args.queries, "load_before": load_before,
           "load_after": load_avg()}
    for v in variants:
        out[v] = {"check_us_p50": round(statistics.median(calls[v]) / 1e3, 2),
                  "check_us_mean": round(statistics.fmean(calls[v]) / 1e3, 2),
                  "checks_per_scan": round(len(calls[v]) / len(scans[v]), 2),
                  "scan_cpu_p50_ms": round(statistics.median(scans[v]), 3),
                  "scan_cpu_mean_ms": round(statistics.fmean(scans[v]), 3)}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
