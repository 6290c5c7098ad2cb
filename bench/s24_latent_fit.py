"""Issue 16, session 24: the latent fit (SVD) over every vocabulary column against the
fit over the sample's present columns (vault/latent.py), on tiers whose mirror cache exists.

    python bench/s24_latent_fit.py TIER_DB NAME [TIER_DB NAME ...] [--rounds 2] [--json out.json]

For each tier: its cached mirror is loaded (its TF-IDF rows; the cache is only read),
the fit's 50,000-row sample taken as ``fit_components`` takes it, then, alternating,
``rounds`` times: the old fit (scikit-learn's ``randomized_svd`` over every column, as
before this session) and ``latent.fit_components`` (the present columns), each timed
(process CPU and wall; the sample's read is in neither). Reported: the sample's shape and
present columns, the times, the largest |difference| of the new V_k from the old, and of
the old fit with one BLAS thread from the old fit with this process's threads (the size
of a rounding difference the old fit already had between machines), and whether the old
fit equals the V_k in the cache (the cache was written by the old code).
Run it with a build worker's environment (``OPENBLAS_THREAD_TIMEOUT=4``) to time as a
worker does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))
from bench.output import emit  # noqa: E402


def old_fit(fit: Any, k: int) -> np.ndarray:
    """V_k as ``fit_components`` computed it before session 24 (every column)."""
    from sklearn.utils.extmath import randomized_svd, svd_flip

    from tiervault.vault import latent

    with np.errstate(invalid="ignore", divide="ignore"):
        U, _, VT = randomized_svd(fit, k, n_oversamples=10, n_iter=5, power_iteration_normalizer="auto",
                                  transpose="auto", flip_sign=False, random_state=latent.SEED)
    _, VT = svd_flip(U, VT, u_based_decision=False)
    return np.ascontiguousarray(VT.T, dtype=np.float32)


def timed(fn: Any) -> tuple[Any, float, float]:
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


def one_tier(db: Path, name: str, rounds: int, k: int) -> dict[str, Any]:
    from threadpoolctl import threadpool_limits

    from tiervault.vault import latent, postings
    from tiervault.vault.store import TierStore

    with TierStore(db, name=name) as store:
        p = postings.Postings.load_cache(store)
    if p is None:
        raise SystemExit(f"{db}: no usable mirror cache")
    T, rows = p.T, p.T.shape[0]
    pick = np.arange(rows)
    if rows > latent.MAX_FIT_ROWS:
        pick = np.sort(np.random.default_rng(latent.SEED).choice(rows, latent.MAX_FIT_ROWS, replace=False))
    fit = T.sample(pick)
    present = int(np.count_nonzero(np.bincount(fit.indices, minlength=fit.shape[1])))
    runs: list[dict[str, float]] = []
    old = new = None
    for _ in range(rounds):
        old, oc, ow = timed(lambda: old_fit(fit, k))
        new, nc, nw = timed(lambda: latent.fit_components(fit, k))
        runs.append({"old_cpu_s": round(oc, 3), "old_wall_s": round(ow, 3),
                     "new_cpu_s": round(nc, 3), "new_wall_s": round(nw, 3)})
    with threadpool_limits(1):
        old_one = old_fit(fit, k)
    cached = p.latent_V  # an ndarray, or the cache file's rows (latent.MatrixRows)
    cached = None if cached is None else cached.whole() if hasattr(cached, "whole") else np.asarray(cached)
    assert old is not None and new is not None
    absent = ~new.any(axis=1)
    return {"tier": name, "rows": rows, "sample": list(fit.shape), "present_columns": present,
            "runs": runs,
            "new_vs_old_max_abs": float(np.abs(new - old).max()),
            "old_1_thread_vs_old_max_abs": float(np.abs(old_one - old).max()),
            "old_on_absent_columns_max_abs": float(np.abs(old[absent]).max()) if absent.any() else 0.0,
            "old_equals_cache": bool(cached is not None and cached.tobytes() == old.tobytes())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs="+", help="TIER_DB NAME ...")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if len(args.pairs) % 2:
        ap.error("give TIER_DB NAME pairs")
    out = {"load": [round(x, 2) for x in os.getloadavg()],
           "env": {k: os.environ.get(k) for k in ("OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_NUM_THREADS")},
           "tiers": [one_tier(Path(db), name, args.rounds, args.k)
                     for db, name in zip(args.pairs[0::2], args.pairs[1::2])]}
    emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
