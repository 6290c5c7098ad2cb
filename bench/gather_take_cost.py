"""A filtered view's int8 codes gathered by fancy indexing or by ``take``, on a tier's
memory-mapped codes file.

    python bench/gather_take_cost.py --workdir DIR [--tier team] [--rows 1675,8000] \
        [--reps 300] [--seed 3] [--json out.json]

Issue 16, session 12 (second wave) changed ``BaseScan._approx_at`` (``embeddings/
vector_base.py``) from ``codes[r]`` / ``bounds[:, r]`` to ``codes.take(r, axis=0)`` /
``bounds.take(r, axis=1)``: "the same rows, ~2x faster a gather (8,000 of 49,191 x 384
int8 codes: 185 -> 99 us)" -- a figure from an uncommitted probe. Here the codes and
bounds of ``DIR``'s ``--tier`` (a ``bench/run.py`` build with the hash embedder's vectors:
``tiers/<tier>.db.vec-*.i8.npy`` / ``.bounds.npy``, opened as the vault opens them,
``np.load(mmap_mode="r")``, warm in the page cache) are gathered at ``--rows`` sorted
random rows (1,675: the bench's filtered scans' mean; 8,000: the docstring's figure),
both ways alternating, ``--reps`` times, the copies compared; also the codes and the bounds
alone (``codes_*``, ``bounds_*``), all six in an order alternating rep by rep.
perf_counter; p50 / mean us.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: a checkout's own tiervault

from bench.checkouts import commit_of, load_avg  # noqa: E402
from bench.output import emit  # noqa: E402


def _fancy(codes: np.ndarray, bounds: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return codes[r], bounds[:, r]


def _take(codes: np.ndarray, bounds: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return codes.take(r, axis=0), bounds.take(r, axis=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--tier", default="team")
    ap.add_argument("--rows", default="1675,8000")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    found = sorted((args.workdir / "tiers").glob(f"{args.tier}.db.vec-*.i8.npy"))
    if not found:
        raise SystemExit(f"no int8 codes for tier {args.tier} under {args.workdir}/tiers: a build with vectors")
    codes = np.load(found[0], mmap_mode="r", allow_pickle=False)
    bounds = np.load(str(found[0]).removesuffix(".i8.npy") + ".bounds.npy", mmap_mode="r", allow_pickle=False)
    _ = int(np.asarray(codes).sum(dtype=np.int64)) + int(np.asarray(bounds).size)  # page cache warm
    out: dict[str, Any] = {"commit": commit_of(Path(__file__).resolve().parent.parent),
                           "codes": found[0].name, "codes_shape": list(codes.shape),
                           "bounds_shape": list(bounds.shape), "reps": args.reps, "load_before": load_avg()}
    rng = np.random.default_rng(args.seed)
    variants: tuple[tuple[str, Any], ...] = (
        ("fancy", _fancy), ("take", _take),
        ("codes_fancy", lambda c, b, r: c[r]), ("codes_take", lambda c, b, r: c.take(r, axis=0)),
        ("bounds_fancy", lambda c, b, r: b[:, r]), ("bounds_take", lambda c, b, r: b.take(r, axis=1)))
    for n in (int(x) for x in args.rows.split(",")):
        times: dict[str, list[float]] = {name: [] for name, _ in variants}
        for i in range(args.reps):
            r = np.sort(rng.choice(codes.shape[0], n, replace=False)).astype(np.intp)
            got = {}
            for name, fn in (variants if i % 2 == 0 else variants[::-1]):
                t0 = time.perf_counter()
                got[name] = fn(codes, bounds, r)
                times[name].append(time.perf_counter() - t0)
            if not all(np.array_equal(a, b) for a, b in zip(got["fancy"], got["take"])):
                raise SystemExit(f"{n} rows: the two gathers differ")
        out[f"rows_{n}"] = {name: {"p50_us": round(statistics.median(xs) * 1e6, 1),
                                   "mean_us": round(statistics.fmean(xs) * 1e6, 1)} for name, xs in times.items()}
        out[f"rows_{n}"]["equal"] = True
    out["load_after"] = load_avg()
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
