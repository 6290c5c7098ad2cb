"""In one process, a 100K hybrid scan with the prefetched bases scaled in the pool's claims
(on) against raw products scaled by the caller (off), alternated query by query in
run.py's pairing (issue 16, session 24).

    python bench/s24_hyb_scale_ab.py --workdir W [--queries 300] [--warm] [--json out.json]

``W``: a ``bench/run.py`` work directory with vectors (``agent-hybrid.yaml`` is written
afresh). Each bench query is scanned twice (``search_intelligent(mode="scan")``, its
filters), once each way, the first way alternating; before each scan the one-thread NumPy
top-10 of ``bench/run.py``'s hybrid phase runs (cold caches, as the target's figure is
taken) unless ``--warm``. "off" passes no scales to ``vector_math.prefetch_int8`` (the
start's raw products, multiplied by ``int8_approx``). Reports each way's wall and caller
CPU p50 / mean and in how many queries "on" was faster. The same answers both ways
(checked: ids and scores of every pair).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk, open_hybrid_brain, query_kwargs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from tiervault.embeddings import recall

    real = recall.prefetch_int8
    ways = {"on": real, "off": lambda q, bases, scales=None: real(q, bases, None)}
    brain = open_hybrid_brain(args.workdir, 384)
    top = numpy_topk(100_000, 384, args.seed, kernel="einsum")

    def scan(q: dict, way: str) -> tuple[float, float, Any]:
        recall.prefetch_int8 = ways[way]
        if not args.warm:
            top(q)
        t0, c0 = time.perf_counter(), time.thread_time()
        got = brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))
        return (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3, got

    for q in queries(30, args.seed + 1):
        scan(q, "on")
        scan(q, "off")
    load_before = load_avg()
    wall: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    for n, q in enumerate(queries(args.queries, args.seed)):
        answers = {}
        for way in (("on", "off") if n % 2 else ("off", "on")):
            w, c, answers[way] = scan(q, way)
            wall[way].append(w)
            cpu[way].append(c)
        if repr(answers["on"]) != repr(answers["off"]):
            raise SystemExit(f"query {n}: the two ways answered differently")
    recall.prefetch_int8 = real
    out: dict[str, Any] = {"warm": args.warm, "n": args.queries, "load_before": load_before}
    for way in ("off", "on"):
        out[way] = {"wall_p50_ms": round(statistics.median(wall[way]), 3),
                    "wall_mean_ms": round(statistics.fmean(wall[way]), 3),
                    "cpu_p50_ms": round(statistics.median(cpu[way]), 3)}
    out["on_faster_in"] = sum(a < b for a, b in zip(wall["on"], wall["off"]))
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
