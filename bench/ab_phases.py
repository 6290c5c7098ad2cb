"""A/B of one ``bench/run.py`` phase between two checkouts, alternating fresh processes.

Why: on this shared 2-core machine the load changes by the minute, so a figure
is only comparable with another taken at the same time. This runs the
``search`` (FTS-only: cold open + first query, scan latencies, peak RSS) or the
``hybrid`` phase of ``bench/run.py`` from checkout A, then B, then A... each
over its own copy of the same built tier files (a checkout's cache format may
differ, and each phase writes its captures into its copy), and keeps every run.

    python bench/ab_phases.py --a /path/old --b /path/new \
        --workdir-a /tmp/wA --workdir-b /tmp/wB --entries 1000000 \
        --phase search --rounds 2 --json out.json

Each checkout runs with its own interpreter (``<checkout>/.venv/bin/python`` if
present) so it imports its own ``tiervault``. The work directories are made by
``bench/run.py``'s build phase (``--_phase build``), copied once per variant;
run one phase per variant first (untimed, ``--prime``) so that each has written
its mirror caches before the timed rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SUMMARY_KEYS = ("cold", "rss_mb", "scan_fts", "full_fts", "baseline_fts5", "scan_hybrid", "scan_hybrid_paired",
                "full_hybrid", "baseline_numpy_topk_1t", "capture")


def run(checkout: Path, workdir: Path, phase: str, params: dict[str, Any],
        extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    from bench.checkouts import python_of  # refuses an interpreter importing another checkout

    exe = python_of(checkout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["PYTHONPATH"] = str(checkout)
    env.update(extra_env or {})
    cmd = [exe, str(checkout / "bench" / "run.py"), "--_phase", phase,
           "--_params", json.dumps({**params, "workdir": str(workdir)})]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{phase} in {checkout} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (before)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (after)")
    ap.add_argument("--workdir-a", type=Path, required=True)
    ap.add_argument("--workdir-b", type=Path, required=True)
    ap.add_argument("--entries", type=int, required=True)
    ap.add_argument("--phase", choices=("search", "hybrid"), default="search")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--captures", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--prime", action="store_true", help="one untimed run per variant first")
    ap.add_argument("--env-b", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable of B's processes only (e.g. the same checkout "
                    "under GLIBC_TUNABLES=glibc.malloc.hugetlb=1 and PYTHONMALLOC=malloc)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.corpus import queries

    params = {"entries": args.entries, "seed": args.seed, "dim": args.dim,
              "queries": args.queries, "captures": args.captures, "warmup": args.warmup,
              "jsonl": False, "first_query": queries(1, args.seed)[0]}
    variants = {"A": (args.a, args.workdir_a), "B": (args.b, args.workdir_b)}
    envs = {"A": {}, "B": dict(kv.split("=", 1) for kv in args.env_b)}
    out: dict[str, Any] = {"phase": args.phase, "entries": args.entries, "params": params,
                           "checkouts": {k: str(v[0]) for k, v in variants.items()},
                           "env_b": envs["B"], "runs": []}
    if args.prime:
        for name, (checkout, workdir) in variants.items():
            t0 = time.perf_counter()
            run(checkout, workdir, args.phase, params, envs[name])
            print(f"primed {name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for r in range(args.rounds):
        for name, (checkout, workdir) in variants.items():
            before = [round(x, 2) for x in os.getloadavg()]
            result = run(checkout, workdir, args.phase, params, envs[name])
            after = [round(x, 2) for x in os.getloadavg()]
            row = {"variant": name, "round": r, "load_avg_before": before, "load_avg_after": after,
                   **{k: result[k] for k in SUMMARY_KEYS if k in result}}
            out["runs"].append(row)
            cold = result.get("cold", {}).get("total_ms")
            print(f"round {r} {name}: cold {cold} ms, rss {result.get('rss_mb')} MB, "
                  f"load {before[0]} -> {after[0]}", file=sys.stderr)
            if args.json:
                args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
