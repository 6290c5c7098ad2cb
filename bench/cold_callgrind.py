"""Simulated cache misses of FTS-only scans in one condition of ``bench/cold_scan.py``.

    valgrind --tool=callgrind --collect-atstart=no --cache-sim=yes \
        --D1=32768,8,64 --I1=32768,8,64 --LL=2097152,16,64 --callgrind-out-file=OUT \
        python bench/cold_callgrind.py --workdir DIR --condition warm|flush|fts5 [--queries 25]
    callgrind_annotate --inclusive=no OUT

What ``cold_scan.py`` times, under callgrind's cache simulator (LL = one core's 2 MiB
L2 here), counting only the timed scans: collection is toggled on and off around each
(``CALLGRIND_TOGGLE_COLLECT``, from a tiny C helper compiled with ``cc`` into a temporary
directory), while the simulated caches see everything (the previous scan, the flush, the
raw FTS5 query). Per-function D1 / LL misses of the interpreter, NumPy, SQLite, libc.
Not a timing: callgrind runs ~50x slower. Needs valgrind's headers
(``valgrind/callgrind.h``) and a C compiler.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (A/B: a checkout's own tiervault)

from bench.corpus import queries  # noqa: E402
from bench.phases import fts5_baseline, query_kwargs, write_config  # noqa: E402

_TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


def callgrind_toggle(tmp: Path) -> Any:
    """The compiled helper's ``cg_toggle`` (a no-op outside valgrind)."""
    src, lib = tmp / "cgtoggle.c", tmp / "libcgtoggle.so"
    src.write_text(_TOGGLE_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return ctypes.CDLL(str(lib)).cg_toggle


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--condition", choices=("warm", "flush", "fts5"), required=True)
    ap.add_argument("--queries", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    import numpy as np

    from tiervault.brain.brain import Brain

    with tempfile.TemporaryDirectory() as tmp:
        toggle = callgrind_toggle(Path(tmp))
        brain = Brain.open(write_config(args.workdir))
        baseline, close = fts5_baseline(args.workdir)
        buf = np.zeros((64 << 20) // 8, dtype=np.int64)

        def scan(q: dict[str, Any]) -> Any:
            return brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

        for q in queries(args.warmup, args.seed + 1):
            scan(q)
            brain.search_intelligent(q["text"], mode="full", **query_kwargs(q))
            baseline(q)
        prev = queries(1, args.seed + 2)[0]
        for q in queries(args.queries, args.seed):
            scan(prev)
            if args.condition == "flush":
                buf += 1
            elif args.condition == "fts5":
                baseline(prev)
            toggle()
            scan(q)
            toggle()
            prev = q
        close()
        brain.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
