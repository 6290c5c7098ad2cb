"""The vector scan's kernels side by side (not a test): which storage to scan.

    python bench/vector_kernels.py [--rows 100000] [--dim 384] [--repeat 30] [--json out.json]

Times, on one thread, one query against ``--rows`` random unit rows: numpy's
float32 ``einsum`` (the float32 index), numpy's blocked float16 and int8
conversions (``float16_scores`` / ``int8_scores``), SimSIMD's float16 and int8
dot products (extra ``simd``), and the index's whole int8 path
(``int8_scan`` + per-row bounds + top 50 + exact rescoring). Minimum and median
of ``--repeat`` runs after one warm-up; the load average is recorded: read the
ratios, not the milliseconds, on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.vector_math import float16_scores, int8_codes, int8_scores, simd_available


def timed(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1e3)
    return {"min_ms": round(min(runs), 3), "median_ms": round(statistics.median(runs), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(1)
    m = rng.standard_normal((args.rows, args.dim), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q = rng.standard_normal(args.dim).astype(np.float32)
    q /= np.linalg.norm(q)
    half = m.astype(np.float16)
    codes, bounds = int8_codes(m)
    out: dict[str, Any] = {"rows": args.rows, "dim": args.dim, "load_avg_before": list(os.getloadavg())}
    k: dict[str, Any] = {
        "numpy_einsum_f32": timed(lambda: np.einsum("ij,j->i", m, q), args.repeat),
        "numpy_blocked_f16": timed(lambda: float16_scores(half, q), args.repeat),
        "numpy_blocked_int8": timed(lambda: int8_scores(codes, bounds[0], q), args.repeat),
    }
    if simd_available():
        import simsimd

        qh = q.astype(np.float16)[None]
        qc = codes[:1]  # any int8 row of the right width
        # No out=: SimSIMD 6.5's cdist(out=...) returns None without its own reference
        # (embeddings/vector_math.int8_scan).
        k["simsimd_f16"] = timed(lambda: simsimd.cdist(qh, half, metric="dot", out_dtype="float32"),
                                 args.repeat)
        k["simsimd_int8"] = timed(lambda: simsimd.cdist(qc, codes, metric="dot", out_dtype="float32"),
                                  args.repeat)
    ids = [str(i) for i in range(args.rows)]
    f32 = VectorIndex.build(ids, m, normalized=True, dtype="float32")
    i8 = VectorIndex.build(ids, m, normalized=True, dtype="int8", codes=(codes, bounds))
    assert f32.search(q, 50)[0].tolist() == i8.search(q, 50)[0].tolist()
    k["index_top50_float32"] = timed(lambda: f32.search(q, 50), args.repeat)
    k["index_top50_int8"] = timed(lambda: i8.search(q, 50), args.repeat)
    base = k["numpy_einsum_f32"]["min_ms"]
    out["kernels"] = k
    out["ratio_to_einsum_f32_min"] = {name: round(v["min_ms"] / base, 2) for name, v in k.items()}
    out["load_avg_after"] = list(os.getloadavg())
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
