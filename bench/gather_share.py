"""A filtered int8 scan: the allowed rows' codes gathered, or every row scanned and masked.

    python bench/gather_share.py --workdir DIR [--reps 60] [--json out.json]

``DIR``: a ``bench/run.py`` build with vectors (``tiers/*.i8.npy`` / ``*.bounds.npy``).
``BaseScan.scan`` (embeddings/vector_base.py) gathers the codes of the allowed rows when
they are under ``1 / _GATHER_SHARE`` of a tier (``int8_scan`` of ``codes[rows]``: the
scores and the per-row bounds of those rows), else scans every row and sets the others
to -inf (``int8_approx`` and a scatter). For each tier and each share of allowed rows
(random rows, sorted), both ways are timed (wall p50 of ``--reps``, the best of two
alternating passes), ``warm`` (the tier's codes scanned back to back: they stay in
cache) and ``cold`` (160 MB streamed before each scan, as ``bench/run.py``'s paired
NumPy top-10 does).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.checkouts import load_avg  # noqa: E402
from bench.output import emit  # noqa: E402

SHARES = (0.025, 0.05, 0.08, 0.1, 0.125, 0.15, 0.2, 0.25)


def main(argv: list[str] | None = None) -> int:
    from tiervault.embeddings.vector_math import int8_approx, int8_scan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"workdir": str(args.workdir), "reps": args.reps, "load_before": load_avg(),
                           "us_p50": {}}
    evict = np.ones(20_000_000)  # 160 MB
    for codes_path in sorted((args.workdir / "tiers").glob("*.i8.npy")):
        tier = codes_path.name.split(".")[0]
        codes = np.asarray(np.load(codes_path, mmap_mode="r"))
        bounds = np.asarray(np.load(str(codes_path).replace(".i8.npy", ".bounds.npy"), mmap_mode="r"))
        n = codes.shape[0]
        rng = np.random.default_rng(0)
        q = rng.standard_normal(codes.shape[1]).astype(np.float32)
        q /= np.linalg.norm(q)

        def full(rows: np.ndarray) -> None:
            approx, _ = int8_approx(codes, bounds[0], q)
            out_mask = np.ones(n, dtype=bool)
            out_mask[rows] = False
            approx[np.flatnonzero(out_mask)] = -np.inf

        def gather(rows: np.ndarray) -> None:
            int8_scan(codes[rows], bounds[:, rows], q)

        for cond in ("warm", "cold"):
            row: dict[str, dict[str, float]] = {}
            for share in SHARES:
                rows = np.sort(rng.choice(n, int(n * share), replace=False))
                best: dict[str, float] = {}
                for name, fn in (("gather", gather), ("full", full)) * 2:
                    ts = []
                    for _ in range(args.reps):
                        if cond == "cold":
                            evict.sum()
                        t0 = time.perf_counter_ns()
                        fn(rows)
                        ts.append(time.perf_counter_ns() - t0)
                    best[name] = min(best.get(name, float("inf")), statistics.median(ts) / 1e3)
                row[str(share)] = {k: round(v, 1) for k, v in best.items()}
            out["us_p50"][f"{tier} ({n} rows), {cond}"] = row
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
