"""Plain FTS-only scan CPU of several checkouts, fresh processes alternating.

    python bench/scan_plain_ab.py --workdir DIR --checkout M=/path/main --checkout B=/path/branch \
        [--rounds 3] [--queries 400] [--json out.json]

Each round runs every checkout once, in the order given, in its own process (its own
``.venv`` if present, ``PYTHONPATH`` = the checkout): 30 warm-up scans, then
``--queries`` new bench queries (``search_intelligent(mode="scan")``), process CPU per
query. ``DIR`` is one ``bench/run.py`` build (``--_phase build``) that every checkout
reads (checkouts with different mirror-cache versions rebuild it in turn: prime them or
use ``bench/ab_phases.py`` with a work directory each). Compare checkouts within a round;
the load moves between rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import checkout_env, load_avg, python_of  # noqa: E402
from bench.output import emit  # noqa: E402


def worker(workdir: Path, n: int) -> dict[str, Any]:
    from bench.corpus import queries
    from bench.phases import query_kwargs, write_config
    from tiervault.brain.brain import Brain

    brain = Brain.open(write_config(workdir))
    for q in queries(30, 8):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    cpu = []
    for q in queries(n, 9):
        c0 = time.process_time()
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        cpu.append((time.process_time() - c0) * 1e3)
    cpu.sort()
    return {"cpu_p50_ms": round(statistics.median(cpu), 3), "cpu_mean_ms": round(statistics.fmean(cpu), 3),
            "cpu_p95_ms": round(cpu[int(0.95 * len(cpu))], 3), "load": load_avg()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--checkout", action="append", default=[], help="NAME=PATH (repeat)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--_worker", dest="worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.workdir, args.queries)))
        return 0
    checkouts = dict(c.split("=", 1) for c in args.checkout)
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries,
                           "checkouts": checkouts, "runs": []}
    for r in range(args.rounds):
        for name, path in checkouts.items():
            cmd = [python_of(Path(path)), str(Path(__file__).resolve()), "--_worker",
                   "--workdir", str(args.workdir), "--queries", str(args.queries)]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True,
                                  env=checkout_env(Path(path)))
            row = {"round": r, "checkout": name, **json.loads(proc.stdout.strip().splitlines()[-1])}
            print(json.dumps(row), file=sys.stderr)
            out["runs"].append(row)
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
