"""A loop of hybrid scans to sample with a profiler (py-spy), nothing timed here.

    py-spy record --rate 1000 --native -o out.txt --format raw -- \
        python bench/hybrid_loop.py --workdir DIR [--queries 200] [--loops 3] [--cold]

``DIR``: a ``bench/run.py`` build with vectors (hash embedder). 30 warm-up scans, then
``--loops`` passes over ``--queries`` bench queries (``search_intelligent(mode="scan")``);
``--cold``: run.py's one-thread NumPy top-10 over 100K x 384 float32 before each scan
(as its paired pass), which a profile then shows as its own frames (``numpy_topk``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import queries  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--loops", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args(argv)
    brain = open_hybrid_brain(args.workdir, args.dim)
    qs = queries(args.queries, args.seed)
    for q in queries(30, args.seed + 1):
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    evict = numpy_topk(100_000, args.dim, args.seed, kernel="einsum") if args.cold else None
    for _ in range(args.loops):
        for q in qs:
            if evict is not None:
                evict(q)
            brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
    return 0


if __name__ == "__main__":
    sys.exit(main())
