"""The scan of a :class:`~tiervault.embeddings.index.VectorIndex`'s immutable base.

:class:`BaseScan` holds the base matrix (float32 unit rows, often a read-only
file mapping) and, for the compressed modes, its compressed copy: int8 codes
with per-row scales (scanned by SimSIMD's integer kernels when installed,
:func:`~tiervault.embeddings.vector_math.int8_scan`) or half floats.

Exact top k from an approximate scan: let ``a_i`` be the approximate scores,
``eps >= |a_i - s_i|`` a bound on their error (vector_math), and ``P`` the
``rescore_pool`` rows of highest ``a_i``, rescored exactly (``s_i = <x_i, q>`` in
float32). A row outside ``P`` has ``s_i <= a_i + eps <= min_P a + eps``. If the
k-th exact score ``s_k`` of ``P`` exceeds that, the top k of ``P`` is the top k;
otherwise every row with ``a_i >= s_k - eps`` (a superset of the rows scoring
``>= s_k``) is rescored. So the answer equals a float32 scan's, and only the
rescored rows of the float32 matrix are read.
"""

from __future__ import annotations

import numpy as np

from tiervault.embeddings.vector_math import (
    cosine_scores,
    float16_error_bound,
    float16_scores,
    int8_scan,
    mask_outside,
    quantize_int8_blocks,
    top_k,
)
from tiervault.errors import ValidationError

__all__ = ["BaseScan"]

_EMPTY = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))


class BaseScan:
    """Top-k scans of one immutable matrix in a storage mode (float32 / int8 / float16)."""

    def __init__(self, matrix: np.ndarray, dtype: str, *, rescore_pool: int, threads: int,
                 codes: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.matrix = matrix
        self.dtype = dtype
        self.rescore_pool = rescore_pool
        self.threads = threads
        self.codes: np.ndarray | None = None
        self.scale: np.ndarray | None = None
        self.half: np.ndarray | None = None
        self.owned = codes is None  # False: the codes are a caller's (mapped) arrays
        if dtype == "int8" and codes is not None:
            self.codes, self.scale = codes
            if self.codes.shape != matrix.shape or self.scale.shape != (matrix.shape[0],):
                raise ValidationError("codes", f"shapes {self.codes.shape} / {self.scale.shape} do not "
                                      f"match the {matrix.shape} matrix")
        elif dtype == "int8":
            self.codes, self.scale = quantize_int8_blocks(matrix)
        elif dtype == "float16":
            self.half = np.empty(matrix.shape, dtype=np.float16)
            for s in range(0, matrix.shape[0], 65536):
                self.half[s:s + 65536] = matrix[s:s + 65536]

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The compressed copy's arrays (empty in float32 mode)."""
        return tuple(a for a in (self.codes, self.scale, self.half) if a is not None)

    def search(self, q: np.ndarray, k: int, *, rows: np.ndarray | None = None,
               dead: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows by exact cosine: among ``rows`` (sorted, live) when given,
        else among all rows but ``dead``. Returns (rows, float32 scores), best first."""
        n = self.matrix.shape[0]
        allowed = n - (0 if dead is None else dead.size) if rows is None else rows.size
        k = min(k, allowed)
        if k <= 0:
            return _EMPTY
        if self.dtype == "float32":
            scores = _excluded(cosine_scores(self.matrix, q), rows, dead)
            pick = top_k(scores, k)
            return pick, scores[pick]
        approx, eps = self._approx_scores(q)
        approx = _excluded(approx, rows, dead)
        pool = top_k(approx, min(max(self.rescore_pool, k), allowed))
        exact = cosine_scores(self.matrix[pool], q)
        best = top_k(exact, k)
        if pool.size < allowed and exact[best[-1]] <= approx[pool[-1]] + eps:
            # A row outside the pool might still beat the k-th: rescore all that can.
            pool = np.flatnonzero(approx >= exact[best[-1]] - eps)
            exact = cosine_scores(self.matrix[pool], q)
            best = top_k(exact, k)
        return pool[best], exact[best]

    def _approx_scores(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """Approximate scores of every row and a bound on their error."""
        if self.dtype == "int8":
            assert self.codes is not None and self.scale is not None
            return int8_scan(self.codes, self.scale, q, threads=self.threads)
        assert self.half is not None
        return float16_scores(self.half, q, threads=self.threads), float16_error_bound(q)


def _excluded(scores: np.ndarray, rows: np.ndarray | None, dead: np.ndarray | None) -> np.ndarray:
    """``scores`` with rows outside ``rows`` (or the ``dead`` rows) set to -inf."""
    if rows is not None:
        return mask_outside(scores, rows)
    if dead is not None and dead.size:
        scores[dead] = -np.inf
    return scores
