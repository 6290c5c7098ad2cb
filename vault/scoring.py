"""Lexical scoring maths as small pure numpy functions (BM25 as FTS5 defines it).

FTS5's ``bm25()`` (``fts5_aux.c``) scores a row for phrases ``q_i`` as

    score = sum_i idf_i * f_i * (k1 + 1) / (f_i + k1 * (1 - b + b * len / avglen))

with ``f_i = sum_c w_c * tf(q_i, c)`` (column-weighted term frequency),
``len`` the row's token count over all columns, ``avglen`` the mean of that
over all rows, ``k1 = 1.2``, ``b = 0.75`` and

    idf_i = ln((N - n_i + 0.5) / (n_i + 0.5)), replaced by 1e-6 when <= 0,

where ``N`` is the number of rows and ``n_i`` the rows containing ``q_i``.
These functions reproduce it exactly, so the in-memory mirror ranks as FTS5 does.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tiervault.vault.lazy_sparse import sp

__all__ = ["K1", "B", "FTS_COLUMNS", "FTS_WEIGHTS", "fts5_idf", "fts5_idf_of", "bm25_term", "bm25_norm", "bm25_of_norm",
           "bm25_upper_bound", "top_k",
           "top_k_from_head", "first_passing", "tfidf_rows"]

K1 = 1.2
B = 0.75
#: The indexed columns, in FTS order, and their weights (the reference design:
#: title 10, id 5, description 3, tags 2, context 1). Every backend scores with these.
FTS_COLUMNS = ("id", "title", "description", "context", "tags")
FTS_WEIGHTS = (5.0, 10.0, 3.0, 1.0, 2.0)


def fts5_idf(n_rows: float, df: np.ndarray) -> np.ndarray:
    """idf = ln((N - df + 0.5) / (df + 0.5)), floored at 1e-6 as FTS5 does."""
    df = np.asarray(df, dtype=np.float64)
    idf = np.log((n_rows - df + 0.5) / (df + 0.5))
    return np.where(idf <= 0.0, 1e-6, idf)


_IDF_KEPT: tuple[tuple[int, tuple[int, ...]], np.ndarray] = ((-1, ()), np.zeros(0))


def fts5_idf_of(n_rows: int, df: tuple[int, ...]) -> np.ndarray:
    """:func:`fts5_idf` of whole-number statistics (a ``TermStats``' ``n_docs`` and
    ``df``), the last answer kept: a search asks for it once for its bound and once a
    tier, with the same federated statistics. Read only."""
    global _IDF_KEPT
    key = (n_rows, df)
    kept = _IDF_KEPT
    if kept[0] == key:
        return kept[1]
    idf = fts5_idf(n_rows, np.asarray(df, dtype=np.float64))
    idf.flags.writeable = False
    _IDF_KEPT = (key, idf)  # replaced whole: safe across threads
    return idf


def bm25_term(wtf: np.ndarray, doclen: np.ndarray, avglen: float, idf: float) -> np.ndarray:
    """One term's contribution: idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avglen))."""
    return bm25_of_norm(wtf, bm25_norm(doclen, avglen), idf)


def bm25_norm(doclen: np.ndarray, avglen: float) -> np.ndarray:
    """``k1 * (1 - b + b * len / avglen)`` of each length (float32 lengths: float32, each
    element the same number whether computed over a tier's every slot or a term's)."""
    return K1 * (1.0 - B + B * doclen / max(avglen, 1e-9))


def bm25_of_norm(wtf: np.ndarray, norm: np.ndarray, idf: float) -> np.ndarray:
    """:func:`bm25_term` from the slots' :func:`bm25_norm` (the same operations)."""
    return idf * wtf * (K1 + 1.0) / (wtf + norm)


def bm25_upper_bound(idf: np.ndarray) -> float:
    """sum_i idf_i * (k1 + 1): the limit of the score as every f_i grows without bound.

    Dividing by it maps a query's BM25 scores into [0, 1) with one scale for
    every tier that shares the same statistics.
    """
    return float(np.sum(idf) * (K1 + 1.0))


def top_k(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Indices of the k largest ``scores`` (where ``mask``), best first; O(n + k log k)."""
    candidates = np.flatnonzero(mask) if mask is not None else np.arange(scores.size)
    if candidates.size == 0 or k <= 0:
        return candidates[:0]
    values = scores[candidates]
    if candidates.size > k:
        part = np.argpartition(-values, k - 1)[:k]
        candidates, values = candidates[part], values[part]
    # Ties broken by position (older rows first) so results are deterministic.
    order = np.lexsort((candidates, -values))
    return candidates[order]


def top_k_from_head(scores: np.ndarray, k: int, passes: Callable[[np.ndarray], np.ndarray],
                    head: int) -> np.ndarray | None:
    """``top_k(scores, k, passes(every index) & (scores > 0))``, the mask read at the
    best ``head`` or so indices only; None when they do not decide the answer (the
    caller then masks every index and calls :func:`top_k`).

    ``passes(idx)`` is the mask at the sorted indices ``idx``, aligned with them. The
    indices with a score >= the ``head``-th largest are a prefix of the order
    (score descending, index ascending), so the first passing ones among them are the
    first passing overall. When more than ``k`` of them pass and the ``k``-th and
    ``k+1``-th passing scores differ, :func:`top_k` picks exactly those ``k`` (its
    ``argpartition`` has no tie to break at the cut) in the same order; with a tie at
    the cut :func:`top_k`'s choice among the tied is ``argpartition``'s, so None.
    (A query's filter mask at the thousands of slots matching a common word cost
    more than its BM25 there: issue 16, session 10.)"""
    n = scores.size
    if k <= 0 or head <= k or 2 * head >= n:
        return None
    idx = None
    step = n // (8 * head)
    if step >= 2:
        # a cut from every step-th score (a partition of ~8 * head, not of n): the
        # j-th largest of them has ~2 * head scores at or above it; any cut gives a
        # prefix of the order, so only its size matters, checked below
        sample = scores[::step]
        j = 2 * head // step + 1
        idx = np.flatnonzero(scores >= np.partition(sample, sample.size - j)[sample.size - j])
        if idx.size < head:
            idx = None
    if idx is None:
        v = np.partition(scores, n - head)[n - head]  # the head-th largest score
        idx = np.flatnonzero(scores >= v)
    if 2 * idx.size >= n:  # ties everywhere: the head is most of the array
        return None
    values = scores[idx]
    pick = first_passing(idx, values, passes(idx), k)
    return None if pick is None else idx[pick]


def first_passing(idx: np.ndarray, values: np.ndarray, ok: np.ndarray, k: int) -> np.ndarray | None:
    """The positions of the first ``k`` of ``idx`` (sorted, distinct indices; ``values``
    aligned) passing ``ok`` with a value > 0 in the order value descending, index
    ascending -- :func:`top_k`'s answer when ``idx`` is a prefix of that order over every
    index -- or None when fewer than ``k + 1`` pass or the ``k``-th and ``k+1``-th tie
    (:func:`top_k` then decides among the tied). ``ok`` is and-ed in place."""
    ok &= values > 0
    order = np.lexsort((idx, -values))
    first = order[ok[order]]
    if first.size <= k or values[first[k - 1]] == values[first[k]]:
        return None
    return first[:k]


def tfidf_rows(counts: sp.spmatrix, idf: np.ndarray) -> sp.csr_matrix:
    """Apply a fitted TF-IDF model: x = tf * idf, then x / ||x||_2 per row.

    This is what scikit-learn's ``TfidfTransformer.transform`` computes with
    ``norm="l2"`` (a test checks equality); ``idf`` is that model's ``idf_``.
    Done directly so a one-row query costs microseconds, not sklearn's
    per-call validation (~1 ms), and so searching needs no sklearn import.
    """
    x = sp.csr_matrix(counts, dtype=np.float64) @ sp.diags(np.asarray(idf, dtype=np.float64))
    x = sp.csr_matrix(x)
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    norms[norms == 0.0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ x)
