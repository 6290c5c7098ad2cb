"""One cold start, as bench/run.py's search phase times it, in this fresh process.

    python bench/s22_cold_probe.py --workdir DIR [--hybrid] [--evict] [--json out.jsonl]

``DIR`` is a size directory made by ``bench/run.py --keep`` (``tiers/``, ``agent.yaml``,
``agent-hybrid.yaml``). Times the Brain's import, ``Brain.open`` and the first
``search_intelligent(mode="scan")`` of the bench's first query (``--hybrid``: with the
hybrid configuration, ``explain=True`` as run.py's hybrid phase), and reads the bytes this
process read from the disk (``/proc/self/io``). ``--evict`` first asks the kernel to drop
every tier file's pages from the OS cache (``POSIX_FADV_DONTNEED``): a start after the
files have left it (this machine's DAMON pages idle file pages out). Run it from each
checkout in turn (its own ``tiervault`` first on the path) on directories whose caches
that checkout wrote; the JSON line names the checkout by the file ``tiervault.vault``
was imported from. Remove the checkout's ``__pycache__`` first: the import is timed.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.corpus import queries  # noqa: E402
from bench.phases import query_kwargs  # noqa: E402


def evict(tiers: Path) -> None:
    for path in tiers.iterdir():
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--hybrid", action="store_true")
    ap.add_argument("--evict", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, help="append one JSON line")
    args = ap.parse_args()
    if args.evict:
        evict(args.workdir / "tiers")
    first = queries(1, args.seed)[0]
    t_imp = time.perf_counter()
    import tiervault.vault
    from tiervault.brain.brain import Brain

    t_open = time.perf_counter()
    brain = Brain.open(args.workdir / ("agent-hybrid.yaml" if args.hybrid else "agent.yaml"))
    t_query = time.perf_counter()
    hits = brain.search_intelligent(first["text"], mode="scan", explain=args.hybrid, **query_kwargs(first))
    t_end = time.perf_counter()
    io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines() if ": " in line)
    row = {"checkout": str(Path(tiervault.vault.__file__).resolve().parent.parent), "workdir": str(args.workdir),
           "hybrid": args.hybrid, "evicted": args.evict, "import_ms": round((t_open - t_imp) * 1e3, 1),
           "open_ms": round((t_query - t_open) * 1e3, 1), "first_query_ms": round((t_end - t_query) * 1e3, 1),
           "total_ms": round((t_end - _T0) * 1e3, 1), "hits": len(hits),
           "disk_read_mb": round(int(io.get("read_bytes", 0)) / 1e6, 1), "load": os.getloadavg()[0]}
    print(json.dumps(row))
    if args.json:
        with open(args.json, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    brain.close()


if __name__ == "__main__":
    main()
