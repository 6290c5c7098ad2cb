"""The reference TF-IDF sum the fused and batched paths are checked against: each query
term's hits weighted and added apart, in the query's order, its columns read afresh."""

from __future__ import annotations

import numpy as np

__all__ = ["scores_at_term_by_term"]


def scores_at_term_by_term(q, slots: np.ndarray, m) -> np.ndarray:
    """TF-IDF at base ``slots`` of mirror ``m`` for the query row ``q`` (term ids,
    weights): term by term, in the query's order."""
    out = np.zeros(slots.size, dtype=np.float64)
    norms = m.T.norms.at(slots)
    for t, weight in zip(q[0].tolist(), q[1]):
        if t >= m.W.n_cols:
            continue
        col, counts = m.W.column_counts(t)
        if not col.size:
            continue
        i = np.searchsorted(col, slots)
        i[i == col.size] = 0
        hit = (col[i] == slots) & (counts[i] > 0)
        if hit.any():
            out[hit] += weight * m.T.weights(np.full(hit.sum(), t), counts[i][hit], norms[hit])
    return out
