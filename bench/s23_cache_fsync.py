"""Wall and CPU of one mirror-cache-sized write through ``atomic_write``, durable (fsync of
the file and its folder) against not (``durable=False``, what ``array_file.write`` does since
session 23), alternating, in one process.

    flock /work/wt/bench.lock python bench/s23_cache_fsync.py [--mb 437] [--rounds 4] \\
        [--dir /tmp/x] [--json bench/results/s23-build-cache-fsync.json]

437 MB is the 1M bench team tier's mirror cache. The difference is the fsync's wait
(the written pages reach the disk; not CPU): what a first build idled per tier before
it returned (issue 16, session 23). Each write is followed by a 2 s pause and the file's
removal, so the next one does not wait on this one's write-back.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tiervault.vault.atomic_file import atomic_write  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=437)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    data = np.random.default_rng(0).integers(0, 2**31, size=args.mb * 10**6 // 4, dtype=np.int32)
    path = args.dir / "s23_cache_fsync.arrays"
    runs = []
    for r in range(args.rounds):
        for durable in (True, False):
            t, c = time.perf_counter(), _cpu()
            with atomic_write(path, binary=True, durable=durable) as fh:
                fh.write(memoryview(data).cast("B"))
            wall, cpu = time.perf_counter() - t, _cpu() - c
            runs.append({"round": r, "durable": durable, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                         "idle_s": round(wall - cpu, 3), "load": os.getloadavg()[0]})
            print(runs[-1], file=sys.stderr, flush=True)
            path.unlink()
            time.sleep(2)
    out = {"mb": args.mb, "rounds": args.rounds, "runs": runs}
    for durable in (True, False):
        walls = sorted(x["wall_s"] for x in runs if x["durable"] is durable)
        out[f"median_wall_s_{'durable' if durable else 'not_durable'}"] = walls[len(walls) // 2]
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
