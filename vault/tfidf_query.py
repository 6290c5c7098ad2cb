"""The TF-IDF leg of a query: a query's l2 TF-IDF weights and their cosine with slots.

The Brain's semantic signal is the cosine between the query's TF-IDF row and each
entry's (scikit-learn's ``TfidfTransformer``: smooth idf, l2 norm, English stop
words removed; the model is fitted by the mirror, :mod:`postings`). Both rows are
l2-normalised, so the cosine is a dot product over the query's few terms.

These are pure functions over the mirror's named arrays: the fitted ``idf``, the
base postings ``W`` (each posting carries its TF-IDF count, :mod:`sparse_columns`),
the base TF-IDF rows ``T`` (counts + row norms, :mod:`tfidf_rows`) and the delta's
TF-IDF rows (CSR). The numbers are those of the matrix products, bit for bit.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from tiervault.vault.lazy_sparse import sp
from tiervault.vault.sparse_columns import Columns, gather
from tiervault.vault.vocabulary import Vocabulary
from tiervault.vault.tfidf_rows import TfidfRows
from tiervault.vault.tokenizer import STEMMER, STOP_WORDS

__all__ = ["FEW_PRODUCTS", "QueryWeights", "query_weights", "query_row", "dense_scores", "scores_at", "few_scores"]

#: :func:`scores_at` of at most this many (slot, query term) pairs -- a graph neighbour's
#: or a pool's few ids -- in plain Python floats (:func:`few_scores`): ~25 NumPy calls
#: on tiny arrays cost ~40 us in a scan where a binary search a pair costs ~1 us
#: (issue 16, session 20)
FEW_PRODUCTS = 28


class QueryWeights(NamedTuple):
    """A query's l2-normalised TF-IDF weights over fitted term ids (unpacks as a pair)."""

    tids: np.ndarray  # int64 term ids, in order of first appearance in the query
    weights: np.ndarray  # float64, l2 norm 1 (unless every idf was 0)


def query_weights(words: Sequence[str], vocab: Vocabulary, idf: np.ndarray,
                  fitted_terms: int, known: Mapping[str, int | None] | None = None
                  ) -> QueryWeights | None:
    """The query's l2-normalised TF-IDF weights (terms the model was fitted on only,
    stop words out); None if no known content word. ``known``: stems -> term ids of
    ``vocab`` looked up already (the query's BM25 did), used when it has every stem.

    The same numbers as :func:`~tiervault.vault.scoring.tfidf_rows` on the count
    row (tf * idf, then divided by its l2 norm), in plain NumPy: a scipy
    one-row product cost ~2.5 ms per tier per query (the profile in bench/README.md).
    """
    tids = None
    wanted = _content_stems(words)
    if known is not None and all(map(known.__contains__, wanted)):
        tids = list(map(known.__getitem__, wanted))
    counts: dict[int, float] = {}
    for tid in vocab.ids(wanted) if tids is None else tids:
        if tid is None or tid >= fitted_terms:
            continue
        counts[tid] = counts.get(tid, 0.0) + 1.0
    if not counts:
        return None
    # tf * idf in Python floats (the same float64 products as the arrays'), then one
    # array: the norm and the division stay NumPy's (np.dot's own summation order)
    x = np.array([c * float(idf[t]) for t, c in counts.items()], dtype=np.float64)
    norm = math.sqrt(float(np.dot(x, x)))  # sqrt is correctly rounded in both
    return QueryWeights(np.array(list(counts), dtype=np.int64), x / norm if norm > 0 else x)


#: The last query's content words' stems (stop words out), in the words' order: the
#: same for every tier's weights (only the term ids and idf differ), made once a query
_CONTENT: tuple[tuple, list[str]] = ((), [])


def _content_stems(words: Sequence[str]) -> list[str]:
    """The stems of ``words`` that are not stop words, in order (kept for the last words)."""
    global _CONTENT
    stop_words = STOP_WORDS.get()
    key = (tuple(words), id(stop_words))  # the stop words: loaded once, never replaced
    kept = _CONTENT
    if kept[0] == key:
        return kept[1]
    stems = STEMMER.stems(words)
    wanted = [stems[w] for w in words if w not in stop_words]
    _CONTENT = (key, wanted)  # replaced whole: safe across threads
    return wanted


def query_row(q: QueryWeights, fitted_terms: int) -> sp.csr_matrix:
    """``q`` as a CSR row of shape (1, fitted terms), indices sorted."""
    tids, weights = q
    order = np.argsort(tids)
    return sp.csr_matrix((weights[order], tids[order], np.array([0, tids.size])),
                         shape=(1, fitted_terms))


def dense_scores(q: QueryWeights | None, n_slots: int, n_terms: int, T: TfidfRows,
                 base_rows: int, delta_rows: sp.csr_matrix | None) -> np.ndarray:
    """Cosine of ``q`` with every slot's TF-IDF row (0 for every slot if ``q`` is None):
    base slots by the product with ``T``, slots after ``base_rows`` with ``delta_rows``.
    Reads every row (for evaluation and tests; queries use :func:`scores_at`)."""
    out = np.zeros(n_slots, dtype=np.float64)
    if q is None:
        return out
    qvec = np.zeros(n_terms, dtype=np.float64)
    qvec[q[0]] = q[1]
    if base_rows:
        out[:base_rows] = T.tocsr() @ qvec[:T.n_rows]
    if delta_rows is not None:
        out[base_rows:] = delta_rows @ qvec[:delta_rows.shape[1]]
    return out


def scores_at(q: QueryWeights, slots: np.ndarray, W: Columns, T: TfidfRows, base_rows: int,
              delta_rows: sp.csr_matrix | None,
              columns: dict[int, tuple[np.ndarray, np.ndarray]],
              read: Callable[[int], tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
    """:func:`dense_scores` at ``slots`` (int64) only, aligned with them.

    Base slots: each query term's column of ``W`` (sorted slots, the TF-IDF count of
    each posting) is searched for the slots, and a found count becomes the
    weight ``count * idf / norm(slot)`` (vault/tfidf_rows.py: the float32 number
    the TF-IDF matrix holds); delta slots: their rows of ``delta_rows``. Summed term by
    term in the query's order, so the numbers are the same bit for bit as a product
    with the matrix's rows. ``columns`` caches ``W.column_counts`` by term id (the
    caller keeps it for one query's words: a query asks twice); ``read(t)`` reads a
    column missing there (default ``W.column_counts``: the caller may hold its slots)."""
    if slots.size * q[0].size <= FEW_PRODUCTS and W.counts is not None and slots.size and (
            delta_rows is None or int(slots.max()) < base_rows):
        return few_scores(q, slots.tolist(), W, T, columns, read)
    out = None
    d_pos = d_tid = d_val = None
    base = None if delta_rows is None else slots < base_rows
    if base is None or base.all():  # every slot is a base slot (no delta, or none asked)
        b_pos, b_slots, base = None, slots, None
    else:
        b_pos = np.flatnonzero(base)
        b_slots = slots[b_pos]
    norms = T.norms.at(b_slots) if b_slots.size else None
    if base is not None:  # some slots in the delta: their rows
        rows = delta_rows
        d_pos, d_tid, d_val = gather(rows.indptr, rows.indices, rows.data,
                                     slots[~base] - base_rows, np.flatnonzero(~base))
    # Base slots: each term's column searched for the slots (one pass a term): its count
    # at each slot, 0 where the term is absent. Then the weights of every (term, slot)
    # at once, and each slot's sum run term by term in the query's order, as the matrix
    # product does: absent terms and postings without a TF-IDF count (the id column, a
    # stop word) weigh +0.0, and adding +0.0 to a sum >= +0.0 changes no bit (every
    # weight is >= 0). Fewer NumPy calls a term than picking the hits out first
    # (issue 16, session 12: no flatnonzero, no gather by hit, no np.add.at).
    weights = q[1]
    rows: list[np.ndarray] = []
    term_at: list[int] = []
    if norms is not None and W.counts is not None:
        for k, t in enumerate(q[0].tolist()):
            if t >= W.n_cols:
                continue
            col, counts = _column(t, W, columns, read)
            if not col.size:
                continue
            i = col.searchsorted(b_slots)
            c = counts.take(i, mode="clip")  # clipped: a slot past the last posting
            c[col.take(i, mode="clip") != b_slots] = 0
            rows.append(c)
            term_at.append(k)
    if rows:
        ks = np.array(term_at)
        cnt = (np.concatenate(rows) if len(rows) > 1 else rows[0]).reshape(len(rows), b_slots.size)
        # (terms, slots) at once, term ids and norms broadcast; weight stays float64 (a
        # Python float times a float32 array would be float32)
        w = weights[ks][:, None] * T.weights(q[0][ks][:, None], cnt, norms)
        acc = w[0]
        for r in range(1, len(rows)):
            acc += w[r]  # in place in w's first row: each slot's sum in term order
        if b_pos is None:
            out = acc
        else:
            out = np.zeros(slots.size, dtype=np.float64)
            out[b_pos] = acc
    if out is None:
        out = np.zeros(slots.size, dtype=np.float64)
    if d_pos is not None:
        for t, weight in zip(q[0].tolist(), weights):
            hit = d_tid == t  # a row holds a term at most once
            if hit.any():
                out[d_pos[hit]] += weight * d_val[hit]
    return out


def few_scores(q: QueryWeights, slots: list[int], W: Columns, T: TfidfRows,
                columns: dict[int, tuple[np.ndarray, np.ndarray]],
                read: Callable[[int], tuple[np.ndarray, np.ndarray]] | None) -> np.ndarray:
    """:func:`scores_at` at a few base slots, each (slot, term) in Python: the count by a
    binary search of the term's column, the weight ``float32(float32(count) * idf32) /
    norm`` rounded to float32 as :meth:`TfidfRows.weights` does, times the query's
    weight in float64, each slot's sum run term by term in the query's order from 0.0
    (every weight is >= +0.0: a term that is absent adds +0.0, which changes no bit).
    The same IEEE operations in the same order as the NumPy path: the same bits (tested)."""
    norms = T.norms.at(np.asarray(slots, dtype=np.int64)).tolist()
    out = [0.0] * len(slots)
    idf32 = T.idf32
    for t, weight in zip(q[0].tolist(), q[1].tolist()):
        if t >= W.n_cols:
            continue
        col, counts = _column(t, W, columns, read)
        n = col.size
        if not n:
            continue
        col_v = memoryview(np.ascontiguousarray(col))
        for j, slot in enumerate(slots):
            i = bisect_left(col_v, slot)
            if i < n and col_v[i] == slot:
                c = int(counts[i])
                if c:
                    norm = norms[j]
                    w32 = np.float32(float(np.float32(c) * idf32[t]) / (norm if norm > 0.0 else 1.0))
                    out[j] += weight * float(w32)
    return np.array(out, dtype=np.float64)


def _column(t: int, W: Columns, columns: dict[int, tuple[np.ndarray, np.ndarray]],
            read: Callable[[int], tuple[np.ndarray, np.ndarray]] | None) -> tuple[np.ndarray, np.ndarray]:
    """Term ``t``'s (sorted slots, TF-IDF counts): kept in ``columns`` for the query, else read."""
    got = columns.get(t)
    if got is None:
        got = columns[t] = W.column_counts(t) if read is None else read(t)
    return got
