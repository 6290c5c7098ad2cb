"""The base segment of a search mirror's postings: the columns of a CSC matrix
(one column per term, one row per slot) over :class:`CheckedArray` s -- or, built
with :meth:`Columns.from_csr`, the rows of a matrix (TF-IDF: one row per slot,
read at a query's candidate slots only).

Built in memory (trusted) or memory-mapped from the cache file (each block of
``indices`` / ``data`` checked against its CRC-32 and its slots against the row
count the first time a query reads it, :mod:`checked_array`). ``indptr`` is small
(one entry per term) and checked whole on load: monotone, from 0 to ``nnz``.
Slots are int32 and weights float32 (``int64`` indices only past 2^31 rows).
"""

from __future__ import annotations

import numpy as np

from tiervault.vault.checked_array import CheckedArray
from tiervault.vault.lazy_sparse import sp

__all__ = ["Columns", "Rows", "gather"]


class Columns:
    """``column(t)``: the (sorted slots, weights) of term ``t``."""

    ARRAYS = ("indptr", "indices", "data")

    def __init__(self, indptr: np.ndarray, indices: CheckedArray, data: CheckedArray,
                 n_rows: int, counts: CheckedArray | None = None) -> None:
        """``counts``: optional whole numbers aligned with ``indices`` (the mirror's W
        carries each posting's TF-IDF term count there, 0 where it has none)."""
        if indptr.ndim != 1 or indptr.size < 1 or indptr.dtype.kind not in "iu":
            raise ValueError("postings indptr must be a 1-D integer array")
        if len(indices) != len(data) or int(indptr[0]) != 0 or int(indptr[-1]) != len(indices):
            raise ValueError("postings indptr does not span the indices")
        if indptr.size > 1 and np.any(np.diff(indptr) < 0):
            raise ValueError("postings indptr is not monotone")
        if indices.a.dtype.kind not in "iu" or data.a.dtype.kind != "f":
            raise ValueError("postings have the wrong dtypes")
        if counts is not None and (len(counts) != len(indices) or counts.a.dtype.kind != "u"):
            raise ValueError("posting counts do not match the postings")
        self.counts = counts
        self.indptr = indptr
        self.indices = indices
        self.data = data
        self.n_rows = int(n_rows)
        self.n_cols = indptr.size - 1

    @classmethod
    def empty(cls) -> "Columns":
        """No term, no row (a mirror before its first build; SciPy not imported)."""
        return cls(np.zeros(1, dtype=np.int32), CheckedArray(np.zeros(0, dtype=np.int32)),
                   CheckedArray(np.zeros(0, dtype=np.float32)), 0)

    @classmethod
    def from_csc(cls, m: sp.csc_matrix, counts: np.ndarray | None = None) -> "Columns":
        """Trusted columns of a matrix built in this process (sorted, compact dtypes);
        ``counts`` aligned with the sorted entries. The matrix is handed over: its arrays
        are taken as they are when their dtypes fit (a first build's postings: ~30M
        entries in the 1M team tier, 240 MB copied for nothing before; issue 16, session 15)."""
        m = sp.csc_matrix(m)
        m.sort_indices()
        idx = np.int32 if m.shape[0] < 2**31 - 1 else np.int64
        ptr = np.int32 if m.nnz < 2**31 - 1 else np.int64
        return cls(m.indptr.astype(ptr, copy=False), CheckedArray(m.indices.astype(idx, copy=False)),
                   CheckedArray(m.data.astype(np.float32, copy=False)), m.shape[0],
                   None if counts is None else CheckedArray(counts))

    @classmethod
    def from_csr(cls, m: sp.csr_matrix) -> "Rows":
        """Trusted *rows* of a matrix (:class:`Rows`), for data read a row at a time."""
        c = Columns.from_csc(sp.csc_matrix(sp.csr_matrix(m).T))
        return Rows(c.indptr, c.indices, c.data, c.n_rows)

    def tocsr(self) -> sp.csr_matrix:
        """The transpose seen as CSR (every block verified)."""
        return sp.csr_matrix((self.data.all(), self.indices.all(), self.indptr),
                             shape=(self.n_cols, self.n_rows))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_rows, self.n_cols)

    @property
    def nnz(self) -> int:
        return len(self.indices)

    def column(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = int(self.indptr[tid]), int(self.indptr[tid + 1])
        return self.indices.get(lo, hi), self.data.get(lo, hi)

    def column_counts(self, tid: int, slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The (sorted slots, counts) of term ``tid`` (``counts`` must be present);
        ``slots``: the column's slots read already (``column(tid)[0]``), not read again."""
        assert self.counts is not None
        lo, hi = int(self.indptr[tid]), int(self.indptr[tid + 1])
        return self.indices.get(lo, hi) if slots is None else slots, self.counts.get(lo, hi)

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"indptr": self.indptr, "indices": self.indices.a, "data": self.data.a}
        if self.counts is not None:
            out["counts"] = self.counts.a
        return out

    def tocsc(self) -> sp.csc_matrix:
        """A SciPy copy (every block verified): for tests and tools, not queries."""
        return sp.csc_matrix((self.data.all(), self.indices.all(), self.indptr),
                             shape=self.shape)


class Rows(Columns):
    """The same arrays read the other way: ``column(i)`` is row ``i`` (its minor
    indices and values), and :attr:`shape` / :meth:`tocsc` describe the matrix
    itself, rows x columns -- the TF-IDF matrix of a mirror, slots x terms."""

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_cols, self.n_rows)

    def tocsc(self) -> sp.csc_matrix:
        """The matrix (rows x columns) as CSC, a copy with every block verified."""
        return self.tocsr().tocsc()


def gather(indptr: np.ndarray, indices: "CheckedArray | np.ndarray", data: "CheckedArray | np.ndarray",
           majors: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of the major slices ``majors`` (rows of a CSR, columns of a CSC)
    flattened with NumPy, no Python loop per slice: ``(owner, minor index, value)``
    per entry, ``owner`` taken from ``owners`` (aligned with ``majors``).

    Entry k of the gather is ``starts[i] + k - first[i]`` where row i starts at
    ``starts[i]`` and its first output entry is ``first[i] = sum(lengths[:i])``.
    Mapped arrays (:class:`CheckedArray`) have the blocks of those ranges verified first.
    """
    majors = np.asarray(majors, dtype=np.int64)
    starts = np.asarray(indptr[majors], dtype=np.int64)
    lengths = np.asarray(indptr[majors + 1], dtype=np.int64) - starts
    total = int(lengths.sum()) if lengths.size else 0
    if not total:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    first = np.cumsum(lengths) - lengths
    idx = np.arange(total, dtype=np.int64) - np.repeat(first - starts, lengths)
    if isinstance(indices, CheckedArray):
        begin, end = starts.tolist(), (starts + lengths).tolist()
        indices = indices.check_ranges(begin, end)
    if isinstance(data, CheckedArray):
        begin, end = starts.tolist(), (starts + lengths).tolist()
        data = data.check_ranges(begin, end)
    return np.repeat(np.asarray(owners, dtype=np.int64), lengths), indices[idx], data[idx]
