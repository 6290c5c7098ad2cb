"""NOT KEPT (issue 16 session 14, bench/README.md): the int8 scan of a base kept to the
rows that can reach its exact top k, chunk by chunk. Measured wired into
``BaseScan.scan`` (int8 mode, not gathered: ``candidate_scan(codes, bounds[0], q, k,
bound_max=..., rows=, dead=, mask=, excluded=)``, its rows as the ``TierScan``'s
``pos_rows``, ``allowed = rows.size``, bounds ``int8_error`` at ``rows[pos]``) with
``bench/vector_leg_swap.py``: rankings identical, the 1M vector leg 0.2-0.8 ms slower in
unfiltered queries. Kept here as the record of what was measured; nothing imports it.

The int8 scan of a base kept to the rows that can reach its exact top k.

A compressed scan (:class:`~tiervault.embeddings.vector_base.BaseScan`) gives every
allowed row an approximate score ``a_i`` with a proven bound ``eps_i >= |a_i - s_i|``
on its error (``s_i`` the exact float32 cosine), and ``cap >= eps_i`` for every row.
Let ``t`` be the k-th largest ``a_i`` of the allowed rows. The k rows at or above it have
``s_j >= a_j - eps_j >= t - cap``, so the base's k-th largest exact score ``s_(k)`` is at
least ``t - cap``. A row with ``a_i < t - 2 cap`` has ``s_i <= a_i + cap < t - cap <=
s_(k)``: strictly below the k-th, it is in no top k of this base, whatever the order of
ties, and in no answer made of the bases' own top k (:mod:`.recall`: the federated
answer is each tier's top k ranked by weight; a row under its own tier's k-th is under
the answer's k-th too). Such rows need no approximate score kept and no rescoring.

The scan runs in chunks of ``CHUNK_ROWS`` rows: the kernel's scores of a chunk stay in
the cache while the rows outside the filter are set to ``-inf``, the chunk's own k-th
largest score is found (a lower bound of ``t``: the largest of them so far is used) and
the rows at or above ``bound - 2 cap`` are kept; once k rows are kept, the k-th largest
of them is the k-th of every row scored so far (every row at or above it was kept),
which cuts the chunks to come. At 1,000,000 rows the scan then never
holds one score a row: its later passes (the top picks, the reaching tests, the rescored
rows set to ``-inf``) run over the few thousand rows kept, not over every row.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tiervault.embeddings.vector_math import QueryCode, int8_approx, int8_error, top_k

__all__ = ["Candidates", "candidate_scan", "CHUNK_ROWS"]

# Rows scored at a time: 131,072 x 4 B of scores (512 KB) stay in L2 between the kernel
# and the passes that keep the candidates; 8 kernel calls at 1,000,000 rows.
CHUNK_ROWS = 262_144
# The float32 cut is rounded once from a double: far above that rounding (~6e-8 at 1).
_SLACK = 1e-6


class Candidates(NamedTuple):
    """The rows of a chunked scan that can reach the base's top k (ascending), their
    approximate scores (float32, a new array) and the query's code (for the bounds)."""

    rows: np.ndarray
    approx: np.ndarray
    qc: QueryCode
    cap: float


def candidate_scan(codes: np.ndarray, scale: np.ndarray, q: np.ndarray, k: int, *,
                   bound_max: tuple[float, float], rows: np.ndarray | None = None,
                   dead: np.ndarray | None = None, mask: np.ndarray | None = None,
                   excluded: np.ndarray | None = None, threads: int = 1,
                   chunk_rows: int = CHUNK_ROWS) -> Candidates:
    """The candidates (module docstring) of the top ``k`` among the allowed rows: those
    in ``rows`` (sorted) or set in ``mask`` (``excluded``: the rows it leaves out, sorted,
    when known), else every row but ``dead``. ``bound_max``: the base's largest ``a_i``
    and ``||a_i c_i||_1`` (:func:`~tiervault.embeddings.vector_math.int8_error`'s cap)."""
    n = codes.shape[0]
    dead_sorted = np.sort(dead) if dead is not None and dead.size else None
    kept_rows: list[np.ndarray] = []
    kept_scores: list[np.ndarray] = []
    kept = 0
    cap = 0.0
    cut: np.float32 | None = None  # rows under it cannot reach the top k (None: not known yet)
    qc = None
    for s in range(0, max(n, 1), chunk_rows):
        e = min(s + chunk_rows, n)
        a, qc = int8_approx(codes[s:e], scale[s:e], q, threads=threads)
        if s == 0:
            cap = float(int8_error(*bound_max, qc))
        _exclude(a, s, e, rows=rows, dead=dead_sorted, mask=mask, excluded=excluded)
        if cut is None and (kth := kth_largest(a, k)) > -np.inf:
            cut = _cut(kth, cap)  # the chunk's own k-th: at most the k-th of every row
        keep = np.flatnonzero(a >= cut) if cut is not None else np.flatnonzero(a > -np.inf)
        if keep.size:
            kept_rows.append(keep + s)
            kept_scores.append(a[keep])
            kept += keep.size
            if kept >= k and e < n:
                # every row seen at or above their k-th largest score is kept: that k-th
                # is the k-th of every row seen, a tighter cut for the chunks to come
                cut = max(cut if cut is not None else -np.inf,
                          _cut(kth_largest(np.concatenate(kept_scores), k), cap))
    assert qc is not None
    rows_out = np.concatenate(kept_rows) if kept_rows else np.empty(0, dtype=np.int64)
    approx = np.concatenate(kept_scores) if kept_scores else np.empty(0, dtype=np.float32)
    if kept >= k:  # the final cut (the k-th of every row) for the rows kept under earlier ones
        final = approx >= _cut(kth_largest(approx, k), cap)
        if not final.all():
            rows_out, approx = rows_out[final], approx[final]
    return Candidates(rows_out, approx, qc, cap)


def kth_largest(scores: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``scores`` (``-inf`` when there are fewer than ``k``)."""
    if k <= 0 or scores.shape[0] < k:
        return -np.inf
    return float(scores[top_k(scores, k)[-1]])


def _cut(kth: float, cap: float) -> np.float32:
    """The least approximate score a row that can reach the top k has, given ``kth`` (at
    most the k-th largest approximate score) and the bound cap (module docstring)."""
    return np.float32(kth - 2 * cap - _SLACK)


def _exclude(a: np.ndarray, s: int, e: int, *, rows: np.ndarray | None, dead: np.ndarray | None,
             mask: np.ndarray | None, excluded: np.ndarray | None) -> None:
    """Set ``a`` (the scores of rows ``s..e-1``) to ``-inf`` at the rows not allowed."""
    if mask is not None:
        if excluded is not None:
            lo, hi = np.searchsorted(excluded, (s, e))
            a[excluded[lo:hi] - s] = -np.inf
        else:
            a[~mask[s:e]] = -np.inf
        return
    if rows is not None:
        lo, hi = np.searchsorted(rows, (s, e))
        keep = rows[lo:hi] - s
        kept = a[keep]
        a.fill(-np.inf)
        a[keep] = kept
        return
    if dead is not None:
        lo, hi = np.searchsorted(dead, (s, e))
        a[dead[lo:hi] - s] = -np.inf
