"""Upper bound of overlapping the int8 kernel with the lexical work: an FTS-only scan in
the calling thread while another thread scans the three tiers' int8 codes.

    python bench/overlap_probe.py --workdir DIR [--queries 200] [--json out.json]

``DIR``: a ``bench/run.py`` build with vectors (``*.i8.npy``). The codes are copied into
2 MiB pages as the library reads them (``bench/codes_pages.py``). Per bench query, in
rotating order, after run.py's NumPy eviction each time: ``scan`` (the FTS-only
``search_intelligent(mode="scan")``), ``kernel`` (SimSIMD ``cdist`` over the three
tiers, one thread), ``serial`` (scan, then kernel) and ``overlap`` (the kernel submitted
to a thread, which signals once it holds the GIL and is about to call SimSIMD; the
caller waits for that signal, runs the scan, then waits for the kernel). Wall p50 /
mean ms each, and the overlap's share of the serial time saved. Written for issue 16
session 16 (the 100K hybrid's 8 ms target).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.codes_pages import anon_copy  # noqa: E402
from bench.corpus import queries  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import query_kwargs, write_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import simsimd

    from tiervault.brain.brain import Brain

    files = sorted((args.workdir / "tiers").glob("*.vec-*.i8.npy"))
    codes = [anon_copy(np.load(f, mmap_mode="r"), True) for f in files]
    brain = Brain.open(write_config(args.workdir))
    rng = np.random.default_rng(1)
    m = rng.standard_normal((100_000, 384), dtype=np.float32)
    pool = ThreadPoolExecutor(max_workers=1)

    def qcode() -> np.ndarray:
        q = rng.standard_normal(384).astype(np.float32)
        return np.rint(q / (np.abs(q).max() / 127)).astype(np.int8)[None, :]

    def kernel(qc: np.ndarray, started: threading.Event | None = None) -> None:
        if started is not None:
            started.set()
        for c, _ in codes:
            np.asarray(simsimd.cdist(qc, c, metric="dot", out_dtype="float32"))

    def scan(q: dict) -> None:
        brain.search_intelligent(q["text"], mode="scan", **query_kwargs(q))

    def overlap(q: dict, qc: np.ndarray) -> None:
        started = threading.Event()
        f = pool.submit(kernel, qc, started)
        started.wait()
        scan(q)
        f.result()

    variants = {"scan": lambda q, qc: scan(q), "kernel": lambda q, qc: kernel(qc),
                "serial": lambda q, qc: (scan(q), kernel(qc)), "overlap": overlap}
    for q in queries(30, 8):
        scan(q)
    names = list(variants)
    times: dict[str, list[float]] = {k: [] for k in names}
    out = {"workdir": str(args.workdir), "load_before": load_avg()}
    for i, q in enumerate(queries(args.queries, 9)):
        qc = qcode()
        for name in names[i % 4:] + names[:i % 4]:
            np.einsum("ij,j->i", m, m[0])  # evict, as run.py's paired NumPy top-10
            t0 = time.perf_counter()
            variants[name](q, qc)
            times[name].append((time.perf_counter() - t0) * 1e3)
    out["wall_ms"] = {k: {"p50": round(statistics.median(v), 3), "mean": round(statistics.fmean(v), 3)}
                      for k, v in times.items()}
    ser, ov = out["wall_ms"]["serial"]["p50"], out["wall_ms"]["overlap"]["p50"]
    out["saved_p50_ms"] = round(ser - ov, 3)
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
