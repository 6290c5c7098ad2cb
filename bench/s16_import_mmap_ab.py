"""The JSONL import with new tier files mapped or not (issue 16 session 16), fresh processes alternating.

    python bench/s16_import_mmap_ab.py [--entries 100000] [--rounds 3] [--json out.json]

Session 16 maps a tier file of at most ``connection.TIER_MMAP_BYTES`` when opened, and an
import opens its tiers empty: its reads of the b-trees it writes then go through a
mapping (up to that size). Each round runs ``bench/jsonl_e2e.py``'s worker (the corpus
generated and alive, ``import_timing.time_jsonl_import`` timed) twice in fresh processes of
this checkout: ``off`` with ``TIER_MMAP_BYTES = 0`` (as before), ``on`` as is, the order
alternating by round. Reported: entries/s by wall and by process CPU, peak RSS (MB).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault
sys.path.append(str(Path(__file__).resolve().parent))  # import_timing, as jsonl_e2e's worker imports it

from bench.checkouts import load_avg  # noqa: E402
from bench.output import emit  # noqa: E402


def child(entries: int, seed: int, mapped: bool) -> dict[str, Any]:
    from bench.jsonl_e2e import worker
    from tiervault.vault import connection
    if not mapped:
        connection.TIER_MMAP_BYTES = 0
    work = Path(tempfile.mkdtemp(prefix="tiervault-s16-import-"))
    try:
        row = worker(entries, seed, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {**row, "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.entries, args.seed, args.child == "on")))
        return 0
    out: dict[str, Any] = {"entries": args.entries, "load_before": load_avg(), "runs": []}
    for r in range(args.rounds):
        for v in (("off", "on") if r % 2 == 0 else ("on", "off")):
            proc = subprocess.run([sys.executable, __file__, "--child", v, "--entries", str(args.entries),
                                   "--seed", str(args.seed)], capture_output=True, text=True, check=True)
            row = {"variant": v, "round": r, **json.loads(proc.stdout.strip().splitlines()[-1])}
            out["runs"].append(row)
            print(f"round {r} {v}: {row['rate']}/s, {row['cpu_rate']}/s CPU, peak RSS {row['peak_rss_mb']} MB",
                  file=sys.stderr, flush=True)
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
