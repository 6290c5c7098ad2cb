"""In-memory brute-force cosine index for one (tier, model).

:class:`VectorIndex` keeps the L2-normalised vectors of one tier and one model in
a preallocated matrix with the entry ids in a parallel array. It is built once
from an ``(ids, matrix)`` pair handed over by the storage side and then updated
incrementally (``upsert`` / ``remove``, swap-remove so the live rows stay
contiguous; capacity grows geometrically by 1/8, so the slack stays <= 12.5 %).
A query is one matrix-vector product over the live rows plus ``argpartition``.

Storage modes (``dtype``):

* ``"float32"`` (default) -- exact scores straight from the f32 matrix.
* ``"int8"`` / ``"float16"`` -- the scan reads a compressed copy (per-row scaled
  int8 codes, or half floats) converted to f32 block by block, keeps the best
  ``rescore_pool`` rows, and rescores those exactly against the f32 matrix. The
  results equal float32 mode whenever the true top-k lies inside the pool (pool
  4096 >> k; checked against an exact NumPy reference on random data). The
  f32 matrix is still kept (for the rescoring and :meth:`VectorIndex.scores_for`),
  so these modes cost *more* memory (1.25x / 1.5x); they only pay off where the
  scan is memory-bound and the conversion is cheap. Measured on the 2-core
  machine of this project (top-50, 384-d, interleaved runs; the machine was
  shared, so read the ratios): 100k rows f32 5.7 ms min / int8 12.4 ms / f16
  37 ms; 1M rows f32 ~111 ms min / int8 ~124 ms (two threads). numpy's int8 or
  f16 -> f32 conversion costs more than the bytes it saves, hence the float32
  default. A SIMD int8 kernel (not available in numpy) would change that.

All the maths lives in small pure functions in :mod:`.vector_math` (re-exported
here); the class only manages rows, ids and locking.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from tiervault.embeddings.vector_math import (
    cosine_scores,
    float16_scores,
    int8_scores,
    l2_normalize,
    quantize_int8,
    top_k,
)
from tiervault.errors import ValidationError

__all__ = [
    "VectorIndex",
    "IndexDtype",
    "l2_normalize",
    "cosine_scores",
    "top_k",
    "quantize_int8",
    "int8_scores",
    "float16_scores",
    "DEFAULT_RESCORE_POOL",
]

IndexDtype = Literal["float32", "float16", "int8"]
DEFAULT_RESCORE_POOL = 4096
# Below this fraction of allowed rows, gathering them beats scanning everything.
_GATHER_FRACTION = 0.25
_GROWTH = 1.125
_MIN_GROW = 1024


# -- the index -------------------------------------------------------------------------------


class VectorIndex:
    """Vectors of one (tier, model): ``search``, ``scores_for``, ``upsert``, ``remove``.

    Thread-safe: one lock serialises searches and updates (a search never sees a
    half-applied update). Rows are internal and move on ``remove`` (swap-remove):
    build ``allowed`` masks/row arrays with :meth:`rows_for` right before searching.
    """

    def __init__(
        self,
        dim: int,
        *,
        dtype: IndexDtype = "float32",
        model: str | None = None,
        tier: str | None = None,
        capacity: int = 0,
        rescore_pool: int = DEFAULT_RESCORE_POOL,
        threads: int | None = None,
    ) -> None:
        if dim < 1:
            raise ValidationError("dim", f"must be >= 1, got {dim}")
        if dtype not in ("float32", "float16", "int8"):
            raise ValidationError("dtype", f"must be 'float32', 'float16' or 'int8', got {dtype!r}")
        if rescore_pool < 1:
            raise ValidationError("rescore_pool", f"must be >= 1, got {rescore_pool}")
        self.dim = int(dim)
        self.dtype: IndexDtype = dtype
        self.model = model
        self.tier = tier
        self.rescore_pool = int(rescore_pool)
        # Compressed scans convert in parallel; float32 relies on BLAS's own threads.
        self.threads = int(threads) if threads else (os.cpu_count() or 1)
        self._lock = threading.RLock()
        self._n = 0
        self.version = 0  # bumped by every upsert/remove: lets callers cache id -> row maps
        self._exact = np.zeros((capacity, dim), dtype=np.float32)
        self._ids = np.empty(capacity, dtype=object)
        # id -> row; None until first needed after a trusted build (hashing 1M ids
        # costs ~0.2 s, which a search-only opening of a tier never pays).
        self._row_map: dict[str, int] | None = {}
        self._codes: np.ndarray | None = None
        self._scale: np.ndarray | None = None
        self._half: np.ndarray | None = None
        self._alloc_compressed(capacity)
        self._owned = True  # False while _exact is a caller's read-only array (copy on write)

    @classmethod
    def build(
        cls,
        ids: Sequence[str] | np.ndarray,
        matrix: np.ndarray,
        *,
        dtype: IndexDtype = "float32",
        model: str | None = None,
        tier: str | None = None,
        normalized: bool = False,
        rescore_pool: int = DEFAULT_RESCORE_POOL,
        threads: int | None = None,
    ) -> VectorIndex:
        """One index from all vectors of a tier: ``ids[i]`` owns ``matrix[i]``.

        ``normalized=True`` promises unit rows (as stored by the pipeline): a
        C-contiguous float32 ``matrix`` (e.g. a read-only ``np.memmap``) is then
        used without a copy until the first update. Otherwise rows are normalised
        into a new array. Duplicate ids are refused.
        """
        matrix = np.asarray(matrix)
        if matrix.ndim != 2:
            raise ValidationError("matrix", f"must be 2-D (n, dim), got shape {matrix.shape}")
        n, dim = matrix.shape
        if len(ids) != n:
            raise ValidationError("ids", f"has {len(ids)} ids for {n} rows")
        id_list = list(map(str, ids.tolist() if isinstance(ids, np.ndarray) else ids))
        id_arr = np.empty(n, dtype=object)
        id_arr[:] = id_list
        index = cls(dim, dtype=dtype, model=model, tier=tier, capacity=0, rescore_pool=rescore_pool, threads=threads)
        if normalized and matrix.dtype == np.float32 and matrix.flags.c_contiguous:
            # Trusted (the pipeline stores unit rows under a unique (entry, model)
            # key): no copy, no pass over the matrix, id map built on first use.
            exact, row = matrix, None
            index._owned = exact.flags.writeable
        else:
            exact = l2_normalize(matrix)
            _check_finite(exact)
            row = _id_map(id_list)
        index._exact, index._ids, index._row_map, index._n = exact, id_arr, row, n
        index._alloc_compressed(n)
        index._encode_rows(0, n)
        return index

    @property
    def _row(self) -> dict[str, int]:
        if self._row_map is None:
            with self._lock:
                if self._row_map is None:
                    self._row_map = _id_map(self._ids[: self._n].tolist())
        return self._row_map

    # -- introspection -------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._row

    @property
    def ids(self) -> np.ndarray:
        """The live ids in row order (a copy)."""
        with self._lock:
            return self._ids[: self._n].copy()

    def snapshot(self, *, copy: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, matrix)`` of the live rows, taken together under the lock.

        ``matrix`` is float32, L2-normalised, C-contiguous, ``matrix[i]`` belongs to
        ``ids[i]`` -- the pair :meth:`build` takes back (``normalized=True``), e.g. to
        persist the index. ``copy=False`` returns a view of the internal matrix:
        cheaper, but only valid until the next ``upsert``/``remove``.
        """
        with self._lock:
            ids = self._ids[: self._n].copy()
            m = self._exact[: self._n]
            return ids, (np.array(m, dtype=np.float32, copy=True) if copy else m)

    @property
    def capacity(self) -> int:
        return self._exact.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes of the numeric arrays (matrix, compressed copy, scales, id pointers)."""
        total = self._exact.nbytes + self._ids.nbytes
        for arr in (self._codes, self._scale, self._half):
            total += arr.nbytes if arr is not None else 0
        return total

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Row of each id, aligned with ``ids`` (-1 where the id has no vector)."""
        get = self._row.get
        with self._lock:
            return np.fromiter((get(i, -1) for i in ids), dtype=np.int64, count=len(ids))

    def vectors_for(self, ids: Sequence[str]) -> np.ndarray:
        """The stored float32 vectors of ``ids`` as an (n, dim) matrix aligned with
        ``ids``; a row of NaN where the id has no vector here."""
        rows = self.rows_of(ids)
        out = np.full((len(ids), self.dim), np.nan, dtype=np.float32)
        hit = rows >= 0
        with self._lock:
            out[hit] = self._exact[rows[hit]]
        return out

    def rows_for(self, ids: Iterable[str]) -> np.ndarray:
        """Current rows of ``ids`` (unknown ids skipped), for an ``allowed`` filter."""
        get = self._row.get
        with self._lock:
            rows = [r for r in map(get, ids) if r is not None]
        return np.asarray(rows, dtype=np.int64)

    # -- queries ---------------------------------------------------------------------------
    def search(
        self, query_vec: np.ndarray, k: int, *, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` rows most similar to ``query_vec``: ``(ids, cosine scores)``, best first.

        ``allowed`` pre-filters: a boolean mask over the rows (length ``len(self)``)
        or an array of row numbers (from :meth:`rows_for`). Only allowed rows
        compete, so a filter matching 1 % of the rows still returns its best k.
        A zero query has no direction and returns nothing.
        """
        q = self._query(query_vec)
        if k < 0:
            raise ValidationError("k", f"must be >= 0, got {k}")
        with self._lock:
            n = self._n
            rows = None if allowed is None else self._allowed_rows(allowed, n)
            if k == 0 or n == 0 or not q.any() or (rows is not None and rows.size == 0):
                return np.empty(0, dtype=object), np.empty(0, dtype=np.float32)
            if rows is not None and rows.size <= _GATHER_FRACTION * n:
                # Few candidates: exact scores of just those rows.
                scores = cosine_scores(self._exact[rows], q)
                order = top_k(scores, k)
                return self._ids[rows[order]], scores[order]
            if self.dtype == "float32":
                scores = cosine_scores(self._exact[:n], q)
                if rows is not None:
                    scores = _mask_outside(scores, rows)
                    k = min(k, rows.size)
                pick = top_k(scores, k)
                return self._ids[pick], scores[pick]
            approx = self._approx_scores(q, n)
            if rows is not None:
                approx = _mask_outside(approx, rows)
                k = min(k, rows.size)
            pool = top_k(approx, min(max(self.rescore_pool, k), rows.size if rows is not None else n))
            exact = cosine_scores(self._exact[pool], q)
            best = top_k(exact, k)
            return self._ids[pool[best]], exact[best]

    def scores_for(self, ids_or_rows: Sequence[str] | np.ndarray, query_vec: np.ndarray) -> np.ndarray:
        """Exact cosine of ``query_vec`` with each given id (or row number).

        float32 array aligned with the input; NaN for ids without a vector here
        (e.g. an entry whose embedding is still pending), so callers can tell
        "no vector" from "similarity 0".
        """
        q = self._query(query_vec)
        with self._lock:
            arr = np.asarray(ids_or_rows)
            if arr.size and np.issubdtype(arr.dtype, np.integer):
                rows = arr.astype(np.int64)
                bad = (rows < 0) | (rows >= self._n)
                if bad.any():
                    raise ValidationError("rows", f"row {int(rows[bad][0])} is outside 0..{self._n - 1}")
                return cosine_scores(self._exact[rows], q)
            get = self._row.get
            found = [get(str(i), -1) for i in (arr.tolist() if arr.ndim else [arr.item()])]
            rows = np.asarray(found, dtype=np.int64)
            out = np.full(rows.shape[0], np.nan, dtype=np.float32)
            hit = rows >= 0
            if hit.any():
                out[hit] = cosine_scores(self._exact[rows[hit]], q)
            return out

    # -- updates -----------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Insert or replace the vectors of ``ids`` (rows are L2-normalised here).

        Existing ids are overwritten in place; new ones are appended (amortised
        O(1): capacity grows by 1/8 when full). A repeated id keeps its last vector.
        """
        vecs = np.asarray(vectors)
        if vecs.ndim == 1:
            vecs = vecs[None, :]
        ids = [str(i) for i in ids]
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise ValidationError("vectors", f"must have shape (n, {self.dim}) for this index, got {vecs.shape}")
        if len(ids) != vecs.shape[0]:
            raise ValidationError("ids", f"has {len(ids)} ids for {vecs.shape[0]} vectors")
        last = {entry_id: pos for pos, entry_id in enumerate(ids)}  # a repeated id: last wins
        if len(last) != len(ids):
            ids, vecs = list(last), vecs[list(last.values())]
        unit = l2_normalize(vecs)
        _check_finite(unit)
        with self._lock:
            self._make_owned()
            row_of = self._row
            new = [i for i in ids if i not in row_of]
            self._reserve(self._n + len(new))
            for entry_id in new:
                row_of[entry_id] = self._n
                self._ids[self._n] = entry_id
                self._n += 1
            rows = np.fromiter((row_of[i] for i in ids), dtype=np.int64, count=len(ids))
            self._exact[rows] = unit
            self.version += 1
            self._encode_rows_at(rows, unit)

    def remove(self, ids: Iterable[str]) -> int:
        """Drop the vectors of ``ids``; unknown ids are ignored. Returns how many went.

        Swap-remove: the last live row moves into the hole, so rows stay dense.
        """
        removed = 0
        with self._lock:
            self._make_owned()
            row_of = self._row
            for entry_id in ids:
                r = row_of.pop(str(entry_id), None)
                if r is None:
                    continue
                last = self._n - 1
                if r != last:
                    moved = self._ids[last]
                    self._ids[r] = moved
                    row_of[moved] = r
                    self._exact[r] = self._exact[last]
                    self._copy_compressed(last, r)
                self._ids[last] = None
                self._n = last
                removed += 1
            self.version += 1
        return removed

    # -- internals -----------------------------------------------------------------------------
    def _query(self, query_vec: np.ndarray) -> np.ndarray:
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValidationError(
                "query_vec", f"has dimension {q.shape[0]} but this index ({self.model or 'model ?'}) holds {self.dim}"
            )
        if not np.isfinite(q).all():
            raise ValidationError("query_vec", "contains NaN or infinite values")
        norm = float(np.linalg.norm(q))
        return q / norm if norm > 0 else q

    def _allowed_rows(self, allowed: np.ndarray, n: int) -> np.ndarray:
        a = np.asarray(allowed)
        if a.dtype == bool:
            if a.shape != (n,):
                raise ValidationError("allowed", f"a boolean mask must have length {n} (one per row), got {a.shape}")
            return np.flatnonzero(a)
        if a.size == 0:
            return np.empty(0, dtype=np.int64)
        if not np.issubdtype(a.dtype, np.integer):
            raise ValidationError("allowed", f"must be a boolean mask or row numbers, got dtype {a.dtype}")
        rows = np.unique(a.astype(np.int64))
        if rows[0] < 0 or rows[-1] >= n:
            raise ValidationError("allowed", f"row numbers must be in 0..{n - 1}")
        return rows

    def _approx_scores(self, q: np.ndarray, n: int) -> np.ndarray:
        if self.dtype == "int8":
            assert self._codes is not None and self._scale is not None
            return int8_scores(self._codes[:n], self._scale[:n], q, threads=self.threads)
        assert self._half is not None
        return float16_scores(self._half[:n], q, threads=self.threads)

    def _alloc_compressed(self, capacity: int) -> None:
        if self.dtype == "int8":
            self._codes = np.zeros((capacity, self.dim), dtype=np.int8)
            self._scale = np.zeros(capacity, dtype=np.float32)
        elif self.dtype == "float16":
            self._half = np.zeros((capacity, self.dim), dtype=np.float16)

    def _encode_rows(self, start: int, stop: int) -> None:
        """Fill the compressed copy of rows start..stop from the f32 matrix (blockwise)."""
        step = 65536
        for s in range(start, stop, step):
            e = min(s + step, stop)
            self._encode_rows_at(np.arange(s, e), self._exact[s:e])

    def _encode_rows_at(self, rows: np.ndarray, unit: np.ndarray) -> None:
        if self.dtype == "int8":
            assert self._codes is not None and self._scale is not None
            codes, scale = quantize_int8(unit)
            self._codes[rows] = codes
            self._scale[rows] = scale
        elif self.dtype == "float16":
            assert self._half is not None
            self._half[rows] = unit.astype(np.float16)

    def _copy_compressed(self, src: int, dst: int) -> None:
        if self._codes is not None and self._scale is not None:
            self._codes[dst] = self._codes[src]
            self._scale[dst] = self._scale[src]
        if self._half is not None:
            self._half[dst] = self._half[src]

    def _make_owned(self) -> None:
        """Copy a caller's read-only matrix before the first write (copy on write)."""
        if not self._owned:
            self._exact = np.array(self._exact[: self._n], dtype=np.float32, copy=True)
            self._owned = True

    def _reserve(self, needed: int) -> None:
        cap = self._exact.shape[0]
        if needed <= cap:
            return
        new_cap = max(needed, int(cap * _GROWTH), cap + _MIN_GROW)
        n = self._n
        exact = np.zeros((new_cap, self.dim), dtype=np.float32)
        exact[:n] = self._exact[:n]
        ids = np.empty(new_cap, dtype=object)
        ids[:n] = self._ids[:n]
        old_codes, old_scale, old_half = self._codes, self._scale, self._half
        self._exact, self._ids = exact, ids
        self._alloc_compressed(new_cap)
        if old_codes is not None and old_scale is not None and self._codes is not None and self._scale is not None:
            self._codes[:n] = old_codes[:n]
            self._scale[:n] = old_scale[:n]
        if old_half is not None and self._half is not None:
            self._half[:n] = old_half[:n]

    def __repr__(self) -> str:
        return f"VectorIndex(tier={self.tier!r}, model={self.model!r}, n={self._n}, dim={self.dim}, dtype={self.dtype!r})"


def _id_map(ids: list[str]) -> dict[str, int]:
    """``{id: row}``; refuses duplicates (one vector per (entry, model))."""
    row = dict(zip(ids, range(len(ids))))
    if len(row) != len(ids):
        raise ValidationError("ids", "contains duplicates; one vector per (entry, model)")
    return row


def _mask_outside(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Scores with every row not in ``rows`` set to -inf (pre-filter on a full scan)."""
    masked = np.full_like(scores, -np.inf)
    masked[rows] = scores[rows]
    return masked


def _check_finite(m: np.ndarray) -> None:
    if m.size and not np.isfinite(m).all():
        raise ValidationError("vectors", "contain NaN or infinite values")
