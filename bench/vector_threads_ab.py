"""The int8 scan of each tier on one thread or split over two (issue 16, session 12: not kept).

    python bench/vector_threads_ab.py --workdir DIR [--queries 150] [--gap-us 300] [--json out.json]

``DIR``: a ``bench/run.py`` build with vectors (the vector cache files ``tiers/*.i8.npy``
and ``*.bounds.npy`` of the hash embedder's 384-d codes). For each tier and each query
(random unit vectors), the scan's approximate scores (:func:`int8_approx`: SimSIMD's
``cdist`` and the two float32 multiplies) are computed

* ``one``: on the calling thread, as the index does;
* ``two``: split in chunks of ``--chunk`` rows claimed in turn by the calling thread
  and one helper thread (a ``ThreadPoolExecutor`` made once; the caller never waits for
  a helper that has not started: its task is cancelled) -- SimSIMD and NumPy's ufuncs
  release the GIL, and the rows' scores are bit for bit those of ``one`` (checked).

Conditions, each its own pass: ``warm`` (the scans back to back, after ``--gap-us`` of
busy Python on the calling thread, as a search's other work between two tier scans) and
``cold`` (``bench/run.py``'s one-thread NumPy top-10 over 100K x 384 float32 rows before
each scan, as its paired pass). The variants alternate query by query (order flipped
every other query). Wall (``perf_counter``) and process CPU per tier scan: p50 and mean.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.output import emit  # noqa: E402
from bench.phases import numpy_topk  # noqa: E402


def tier_codes(workdir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each tier's mapped int8 codes and their scales (the vector cache's files)."""
    out = {}
    for codes_path in sorted((workdir / "tiers").glob("*.i8.npy")):
        bounds = np.load(str(codes_path).replace(".i8.npy", ".bounds.npy"), mmap_mode="r")
        out[codes_path.name.split(".")[0]] = (np.asarray(np.load(codes_path, mmap_mode="r")), np.asarray(bounds[0]))
    if not out:
        raise SystemExit(f"{workdir}/tiers holds no int8 vector cache: build with vectors first")
    return out


def split_scan(pool: ThreadPoolExecutor, chunk: int) -> Callable[..., np.ndarray]:
    """``int8_approx``'s scores with the rows in chunks claimed by two threads."""
    from tiervault.embeddings.vector_math import int8_approx

    def scan(codes: np.ndarray, scale: np.ndarray, q: np.ndarray) -> np.ndarray:
        n = codes.shape[0]
        out = np.empty(n, dtype=np.float32)
        claims = itertools.count()

        def run() -> None:
            while (lo := next(claims) * chunk) < n:
                hi = min(lo + chunk, n)
                out[lo:hi] = int8_approx(codes[lo:hi], scale[lo:hi], q)[0]

        future = pool.submit(run)
        run()
        if not future.cancel():
            future.result()
        return out

    return scan


def measure(tiers: dict[str, tuple[np.ndarray, np.ndarray]], n_queries: int, cold: bool, gap_us: int,
            chunk: int, seed: int) -> dict[str, Any]:
    from tiervault.embeddings.vector_math import int8_approx

    rng = np.random.default_rng(seed)
    qs = rng.standard_normal((n_queries, 384)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-scan")
    variants = {"one": lambda c, s, q: int8_approx(c, s, q)[0], "two": split_scan(pool, chunk)}
    evict = numpy_topk(100_000, 384, seed, kernel="einsum") if cold else None
    wall: dict[tuple[str, str], list[int]] = {}
    cpu: dict[tuple[str, str], list[int]] = {}
    for i, q in enumerate(qs):
        order = ["one", "two"] if i % 2 == 0 else ["two", "one"]
        got = {}
        for name in order:
            for tier, (codes, scale) in tiers.items():
                if evict is not None:
                    evict({"text": str(i)})
                end = time.perf_counter_ns() + gap_us * 1000
                while time.perf_counter_ns() < end:
                    pass
                c0, t0 = time.process_time_ns(), time.perf_counter_ns()
                got[(name, tier)] = variants[name](codes, scale, q)
                wall.setdefault((name, tier), []).append(time.perf_counter_ns() - t0)
                cpu.setdefault((name, tier), []).append(time.process_time_ns() - c0)
        for tier in tiers:
            if not np.array_equal(got[("one", tier)], got[("two", tier)]):
                raise SystemExit(f"the split scan of {tier} differs from the one-thread scan")
    pool.shutdown()

    def ms(xs: list[int]) -> dict[str, float]:
        return {"p50": round(statistics.median(xs) / 1e6, 3), "mean": round(statistics.fmean(xs) / 1e6, 3)}

    return {f"{name}/{tier}": {"rows": tiers[tier][0].shape[0], "wall_ms": ms(wall[(name, tier)]),
                               "cpu_ms": ms(cpu[(name, tier)])}
            for name in ("one", "two") for tier in tiers}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--gap-us", type=int, default=300)
    ap.add_argument("--chunk", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--conditions", default="warm,cold")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tiers = tier_codes(args.workdir)
    out: dict[str, Any] = {"workdir": str(args.workdir), "queries": args.queries, "gap_us": args.gap_us,
                           "chunk_rows": args.chunk, "load_before": load_avg(), "conditions": {}}
    for cond in args.conditions.split(","):
        out["conditions"][cond] = measure(tiers, args.queries, cond == "cold", args.gap_us, args.chunk, args.seed)
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
