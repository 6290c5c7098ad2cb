"""Cold open + first query of two checkouts, alternating fresh processes, over one work
directory whose mirrors are caught up (nothing is written: each run checks that).

    python bench/cold_import_ab.py --a OLD --b NEW --workdir W --rounds 8 [--json out.json]
    python bench/cold_import_ab.py --a C --b C --crc-a zlib --crc-b isal --workdir W

``--crc-a`` / ``--crc-b``: the CRC-32 implementation of that side's processes
(``vault/checksum.use``, chosen before the open: the same values either way).

``W``: a ``bench/run.py`` work directory (``agent.yaml``) whose mirror caches match its
tiers (as ``bench/run.py``'s search phase finds them right after its build). Each run is
``bench/run.py``'s cold start: the clock starts before ``tiervault`` is imported; import,
``Brain.open`` and the first scan are timed apart, and the run says whether SciPy was
imported by the end. ``bench/ab_phases.py`` cannot show this: its search phase writes
captures, so every later cold open there catches a delta up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.output import emit  # noqa: E402

CHILD = """
import time
t0 = time.perf_counter()
import json, sys
from tiervault.brain.brain import Brain
if len(sys.argv) > 3:
    from tiervault.vault import checksum
    checksum.use(sys.argv[3])
t1 = time.perf_counter()
brain = Brain.open(sys.argv[1])
t2 = time.perf_counter()
hits = brain.search_intelligent(sys.argv[2], mode="scan")
t3 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "open_ms": (t2 - t1) * 1e3,
                  "first_query_ms": (t3 - t2) * 1e3, "total_ms": (t3 - t0) * 1e3,
                  "hits": len(hits), "scipy": "scipy" in sys.modules}))
"""


def tier_state(workdir: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted((workdir / "tiers").iterdir())}


def one(checkout: Path, workdir: Path, query: str, crc: str | None = None) -> dict[str, Any]:
    from bench.checkouts import python_of

    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERVAULT_")}
    env["PYTHONPATH"] = str(checkout)
    out = subprocess.run([python_of(checkout), "-c", CHILD, str(workdir / "agent.yaml"), query,
                          *([crc] if crc else [])],
                         stdout=subprocess.PIPE, text=True, env=env, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--query", default="retry backoff for flaky network calls")
    ap.add_argument("--crc-a", choices=("isal", "zlib"))
    ap.add_argument("--crc-b", choices=("isal", "zlib"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    before = tier_state(args.workdir)
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for r in range(args.rounds):
        for v in ("AB" if r % 2 == 0 else "BA"):
            got = one(args.a if v == "A" else args.b, args.workdir, args.query,
                      args.crc_a if v == "A" else args.crc_b)
            got["load"] = os.getloadavg()[0]
            runs[v].append(got)
            print(f"round {r} {v}: " + ", ".join(f"{k} {got[k]:.1f}" for k in
                  ("import_ms", "open_ms", "first_query_ms", "total_ms")) + f", scipy {got['scipy']}",
                  file=sys.stderr)
    if tier_state(args.workdir) != before:
        raise SystemExit(f"{args.workdir}: a run wrote to the tiers; the runs did not see the same files")
    summary = {v: {k: round(statistics.median(x[k] for x in rs), 1)
                   for k in ("import_ms", "open_ms", "first_query_ms", "total_ms")}
               for v, rs in runs.items()}
    emit({"a": str(args.a), "b": str(args.b), "crc_a": args.crc_a, "crc_b": args.crc_b, "workdir": str(args.workdir), "rounds": args.rounds,
          "query": args.query, "median": summary, "runs": runs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
