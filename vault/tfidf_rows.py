"""A search mirror's base TF-IDF matrix kept as term counts and row norms, by row.

Why: the TF-IDF matrix is read at a query's few candidate slots (a row each) and
once whole by the latent model (vault/latent.py). Stored as float32 weights and
int32 term ids it was 8 bytes a non-zero, 252 MB at 1,000,000 entries, nearly all
of it resident after a few hundred queries (bench/README.md, issue 16 round 2).
The weights are a function of small integers: keeping the counts (uint8, or
uint16 when a count passes 255) and one float64 norm per row makes it 5 bytes a
non-zero, and the weights come out **the same float32 numbers** as scikit-learn's
``TfidfTransformer(norm="l2", smooth_idf=True).fit_transform`` of float32 counts:

    x_j   = float32(c_j * idf_j)                   c_j: count, idf_j: float32 idf_
    n     = sqrt(sum_j float64(float32(x_j * x_j)))   summed in the row's order
    w_j   = float32(float64(x_j) / n)              (n = 0: w_j = x_j, an empty row)

which is, operation for operation, what scikit-learn's float32 path computes
(``X.data *= idf_[X.indices]``, then ``_inplace_csr_row_normalize_l2``: float
squares summed in a double, each value divided by the double). Tested bit for bit
against scikit-learn (tests/test_tfidf_rows.py).

Rows are held sorted by term id (as the float32 matrix was); the norm is taken in
the order of the count matrix the model was fitted on, which is the order
scikit-learn summed in.
"""

from __future__ import annotations

import numpy as np

from tiervault.vault.checked_array import CheckedArray
from tiervault.vault.lazy_sparse import sp

__all__ = ["TfidfRows", "count_dtype", "fit_tfidf", "row_norms"]


def count_dtype(top: float) -> type:
    """The smallest unsigned type holding counts up to ``top``."""
    return np.uint8 if top <= 255 else np.uint16 if top <= 65535 else np.uint32


def row_norms(x: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """``sqrt(sum float64(float32 x_j^2))`` of each CSR row, summed strictly left to
    right (as scikit-learn's Cython loop does; ``np.add.reduceat`` sums pairwise).

    The sums are SciPy's CSR matrix-vector product of the squares (one column, every
    entry in it) with a vector of ones: its C loop adds ``0.0 + s_0 * 1 + s_1 * 1 ...``
    row by row, and ``s * 1.0`` is ``s``, so the same doubles (tested). One pass: the
    NumPy loop over positions it replaces gathered every row's k-th square for each k
    (1M team tier: ~0.36 s CPU; issue 16, session 16)."""
    sq = (x * x).astype(np.float64)  # the square in float32, then widened
    rows = np.asarray(indptr).size - 1
    m = sp.csr_matrix((sq, np.zeros(sq.size, dtype=np.int32), indptr), shape=(rows, 1))
    return np.sqrt(m @ np.ones(1, dtype=np.float64))


def fit_tfidf(counts: sp.csr_matrix) -> tuple[np.ndarray, "TfidfRows"]:
    """Fit scikit-learn's TF-IDF model on float32 term counts: ``(idf_ as float64,
    the rows as counts + norms)``. The counts are handed over (sorted in place, their
    index arrays kept)."""
    from sklearn.feature_extraction.text import TfidfTransformer

    counts = sp.csr_matrix(counts, dtype=np.float32)
    model = TfidfTransformer(smooth_idf=True, norm="l2").fit(counts)
    idf32 = np.asarray(model.idf_, dtype=np.float32)
    x = counts.data * idf32[counts.indices]
    norms = row_norms(x, counts.indptr)
    # rows by term id (the norms above keep the fitted order), sorted in place: the counts
    # are handed over (a first build's are sorted already; a copy of its ~30M entries cost
    # ~0.1 s, issue 16, session 15)
    c = counts
    c.sort_indices()
    top = float(c.data.max()) if c.nnz else 0.0
    ctype = count_dtype(top)
    whole = c.data.astype(ctype)
    # whole and non-negative, and within ctype: the conversion gives back every count
    if not np.array_equal(whole, c.data):
        raise ValueError("TF-IDF counts must be whole numbers")
    ptr = np.int32 if c.nnz < 2**31 - 1 else np.int64
    rows = TfidfRows(c.indptr.astype(ptr, copy=False), CheckedArray(c.indices.astype(np.int32, copy=False)),
                     CheckedArray(whole), CheckedArray(norms), idf32, counts.shape[1])
    return np.asarray(idf32, dtype=np.float64), rows


class TfidfRows:
    """Rows of the l2 TF-IDF matrix (slots x terms) from counts, norms and idf.

    ``n_cols`` is the number of rows (slots) and ``n_rows`` the number of terms,
    as for :class:`~tiervault.vault.sparse_columns.Rows` (a row is a "major" slice);
    :attr:`shape` is (slots, terms). Mapped arrays are checked per block on first read.
    """

    ARRAYS = ("indptr", "indices", "counts", "norms")

    def __init__(self, indptr: np.ndarray, indices: CheckedArray, counts: CheckedArray,
                 norms: CheckedArray, idf32: np.ndarray, n_terms: int) -> None:
        if indptr.ndim != 1 or indptr.size < 1 or indptr.dtype.kind not in "iu":
            raise ValueError("TF-IDF indptr must be a 1-D integer array")
        if len(indices) != len(counts) or int(indptr[0]) != 0 or int(indptr[-1]) != len(indices):
            raise ValueError("TF-IDF indptr does not span the term ids")
        if indptr.size > 1 and np.any(np.diff(indptr) < 0):
            raise ValueError("TF-IDF indptr is not monotone")
        if len(norms) != indptr.size - 1 or norms.a.dtype != np.float64:
            raise ValueError("TF-IDF norms do not match the rows")
        if indices.a.dtype.kind not in "iu" or counts.a.dtype.kind != "u":
            raise ValueError("TF-IDF rows have the wrong dtypes")
        idf32 = np.asarray(idf32)
        if idf32.dtype != np.float32 or idf32.ndim != 1 or idf32.size < n_terms:
            raise ValueError("TF-IDF idf does not cover the terms")
        self.indptr = indptr
        self.indices = indices
        self.counts = counts
        self.norms = norms
        self.idf32 = idf32
        self.n_rows = int(n_terms)  # terms: the minor dimension
        self.n_cols = indptr.size - 1  # slots

    @classmethod
    def empty(cls) -> "TfidfRows":
        return cls(np.zeros(1, dtype=np.int32), CheckedArray(np.zeros(0, dtype=np.int32)),
                   CheckedArray(np.zeros(0, dtype=np.uint8)),
                   CheckedArray(np.zeros(0, dtype=np.float64)), np.zeros(0, dtype=np.float32), 0)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_cols, self.n_rows)

    @property
    def nnz(self) -> int:
        return len(self.indices)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"indptr": self.indptr, "indices": self.indices.a, "counts": self.counts.a,
                "norms": self.norms.a}

    def weights(self, tids: np.ndarray, counts: np.ndarray, norms: np.ndarray) -> np.ndarray:
        """float32 TF-IDF weights of entries (term id, count, its row's norm; the three
        arrays broadcast together): the formula of the module docstring."""
        x = counts.astype(np.float32) * self.idf32[tids]
        safe = np.where(norms > 0.0, norms, 1.0)
        return (x / safe).astype(np.float32)

    def rows(self, lo: int, hi: int) -> sp.csr_matrix:
        """Rows ``lo..hi-1`` as a float32 CSR matrix (their blocks verified)."""
        a, b = int(self.indptr[lo]), int(self.indptr[hi])
        ptr = np.asarray(self.indptr[lo:hi + 1], dtype=np.int64) - a
        tid = self.indices.get(a, b)
        cnt = self.counts.get(a, b)
        norms = np.repeat(self.norms.get(lo, hi), np.diff(ptr))
        return sp.csr_matrix((self.weights(tid, cnt, norms), tid.astype(np.int32), ptr),
                             shape=(hi - lo, self.n_rows))

    def take(self, slots: np.ndarray) -> sp.csr_matrix:
        """The rows ``slots`` (in that order) as a float32 CSR matrix: a read of each row
        (a query's few candidates; mapped from a cache file, ``pread`` per row)."""
        slots = np.asarray(slots, dtype=np.int64)
        starts = np.asarray(self.indptr[slots], dtype=np.int64)
        lengths = np.asarray(self.indptr[slots + 1], dtype=np.int64) - starts
        tids, cnts = [], []
        for a, n in zip(starts.tolist(), lengths.tolist()):
            tids.append(self.indices.get(a, a + n))
            cnts.append(self.counts.get(a, a + n))
        ptr = np.zeros(slots.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        if not ptr[-1]:
            return sp.csr_matrix((slots.size, self.n_rows), dtype=np.float32)
        tid, cnt = np.concatenate(tids), np.concatenate(cnts)
        norms = np.repeat(self.norms.at(slots), lengths)
        return sp.csr_matrix((self.weights(tid, cnt, norms), tid.astype(np.int32), ptr),
                             shape=(slots.size, self.n_rows))

    def sample(self, pick: np.ndarray, chunk: int = 65_536) -> sp.csr_matrix:
        """The rows ``pick`` (ascending) as one float32 CSR matrix, read ``chunk`` rows at
        a time in order (one sequential pass, not a read per row); the weights of the
        picked rows' entries only (the latent fit samples 50,000 rows of a 1M tier's
        ~500,000: weighing every row first cost ~0.2 s; issue 16, session 16)."""
        pick = np.asarray(pick, dtype=np.int64)
        tids, weights, lengths = [], [], []
        for lo in range(0, self.n_cols, chunk):
            hi = min(self.n_cols, lo + chunk)
            a, b = np.searchsorted(pick, [lo, hi])
            if b <= a:
                continue
            first = int(self.indptr[lo])
            ptr = np.asarray(self.indptr[lo:hi + 1], dtype=np.int64) - first
            tid = self.indices.get(first, int(self.indptr[hi]))
            cnt = self.counts.get(first, int(self.indptr[hi]))
            rows = pick[a:b] - lo
            starts, n = ptr[rows], ptr[rows + 1] - ptr[rows]
            # each picked row's entries, in order: its start repeated, plus 0, 1, ... n - 1
            ends = np.cumsum(n)
            at = np.repeat(starts - (ends - n), n) + np.arange(int(ends[-1]) if n.size else 0)
            tids.append(tid[at])
            weights.append(self.weights(tids[-1], cnt[at], np.repeat(self.norms.get(lo, hi)[rows], n)))
            lengths.append(n)
        if not tids:
            return sp.csr_matrix((0, self.n_rows), dtype=np.float32)
        n = np.concatenate(lengths)
        ptr = np.zeros(n.size + 1, dtype=np.int64)
        np.cumsum(n, out=ptr[1:])
        return sp.csr_matrix((np.concatenate(weights), np.concatenate(tids).astype(np.int32), ptr),
                             shape=(n.size, self.n_rows))

    def tocsr(self) -> sp.csr_matrix:
        """The whole matrix (slots x terms), a float32 copy with every block verified."""
        return self.rows(0, self.n_cols)

    def tocsc(self) -> sp.csc_matrix:
        return self.tocsr().tocsc()
