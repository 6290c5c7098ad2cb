"""What reading int8 codes into 2 MiB anonymous pages costs at open, against mapping them.

    python bench/codes_open_cost.py --workdir DIR [--rows 1000000] [--rounds 5] [--json out.json]

Session 14 moved a vector cache's int8 codes from a file mapping into anonymous memory in
2 MiB pages (``embeddings/page_buffer.py``): the kernel runs a fifth faster at 1M, but the
open now allocates, zeroes and fills those pages. This times that open alone, in fresh
processes alternating (``mapped`` first each round), on one file of ``rows`` x 384 random
int8 codes (written once into ``DIR``, then read once so both sides find it in the page cache):

- ``mapped``: the old open -- the file read in 16 MiB chunks for its CRC-32 (one reused
  buffer), then mapped;
- ``resident``: ``page_buffer.read_resident`` (the CRC computed while the bytes are copied).

Then each process sums every code twice (its first touch, then again): the mapping's page
faults land in the first touch. The kernel's own gain is ``bench/codes_pages.py``'s. Per
round: open / first touch / second pass in ms, process CPU s, the 2 MiB pages the kernel
handed out (``thp_fault_alloc``) and its compaction stalls (``compact_stall``, /proc/vmstat).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.output import emit  # noqa: E402

DIM = 384

_CHILD = r"""
import json, mmap, sys, time, zlib
from pathlib import Path
import numpy as np
path, mode, dim = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rows = path.stat().st_size // dim
t0, c0 = time.perf_counter(), time.process_time()
if mode == "resident":
    from tiervault.embeddings.page_buffer import read_resident
    arr, crc = read_resident(path, 0, np.int8, (rows, dim))
else:
    crc, buf = 0, bytearray(1 << 24)
    with open(path, "rb", buffering=0) as fh, memoryview(buf) as view:
        while (got := fh.readinto(view)):
            crc = zlib.crc32(view[:got], crc)
    fh = open(path, "rb")
    arr = np.frombuffer(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), dtype=np.int8).reshape(rows, dim)
t1 = time.perf_counter()
arr.sum(dtype=np.int64)
t2 = time.perf_counter()
arr.sum(dtype=np.int64)
t3 = time.perf_counter()
print(json.dumps({"open_ms": (t1 - t0) * 1e3, "first_touch_ms": (t2 - t1) * 1e3,
                  "second_ms": (t3 - t2) * 1e3, "cpu_s": time.process_time() - c0, "crc": crc}))
"""


def _vmstat() -> dict[str, int]:
    keep = ("thp_fault_alloc", "thp_fault_fallback", "compact_stall")
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name in keep:
            out[name] = int(value)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"codes-{args.rows}x{DIM}.i8"
    if not path.exists() or path.stat().st_size != args.rows * DIM:
        rng = np.random.default_rng(1)
        rng.integers(-127, 128, size=(args.rows, DIM), dtype=np.int8).tofile(path)
    path.read_bytes()  # into the page cache: both sides read it from memory
    runs: list[dict] = []
    load_before = load_avg()
    for r in range(args.rounds):
        for mode in ("mapped", "resident"):
            before = _vmstat()
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _CHILD, str(path), mode, str(DIM)],
                                  check=True, capture_output=True, text=True)
            row = json.loads(done.stdout)
            after = _vmstat()
            row.update(mode=mode, round=r, process_s=time.perf_counter() - t0,
                       **{k: after[k] - before.get(k, 0) for k in after})
            runs.append(row)
            print(f"round {r} {mode}: open {row['open_ms']:.1f} ms, first touch "
                  f"{row['first_touch_ms']:.1f}, 2 MiB pages {row.get('thp_fault_alloc')}", file=sys.stderr)
    crcs = {row["crc"] for row in runs}
    summary = {}
    for mode in ("mapped", "resident"):
        mine = [row for row in runs if row["mode"] == mode]
        summary[mode] = {k: round(statistics.median(row[k] for row in mine), 1)
                         for k in ("open_ms", "first_touch_ms", "second_ms")}
        summary[mode]["open_ms_range"] = [round(min(r["open_ms"] for r in mine), 1),
                                          round(max(r["open_ms"] for r in mine), 1)]
    emit({"rows": args.rows, "dim": DIM, "rounds": args.rounds, "same_crc": len(crcs) == 1,
          "summary": summary, "runs": runs, "load_avg_before": load_before,
          "load_avg_after": load_avg()}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
