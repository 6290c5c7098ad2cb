"""The small in-memory part of a :class:`~tiervault.embeddings.index.VectorIndex`.

A :class:`VectorDelta` holds the rows written since the index's base was built:
a preallocated float32 matrix of unit rows with the entry ids in a parallel
array. Rows stay contiguous (swap-remove: the last row moves into a hole) and
the capacity grows by 1/8 when full (slack <= 12.5 %, amortised O(1) appends).
It knows nothing of ids outside itself: the index's
:class:`~tiervault.embeddings.vector_ids.RowIds` keeps the one id -> row map.
:class:`Tombstones` marks the base rows deleted or replaced since the base was
built (the other half of what a fold removes) and takes them out of a search's
``allowed`` filter.
"""

from __future__ import annotations

import numpy as np

from tiervault.errors import ValidationError

__all__ = ["Tombstones", "VectorDelta"]

_GROWTH = 1.125
_MIN_GROW = 1024


class VectorDelta:
    """Rows ``0..n-1`` of unit float32 vectors and their ids (not thread-safe: the
    owning index holds its lock around every call)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.n = 0
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.ids = np.empty(0, dtype=object)

    @property
    def capacity(self) -> int:
        return self.matrix.shape[0]

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes + self.ids.nbytes

    def live(self) -> np.ndarray:
        """The ``n`` used rows (a view)."""
        return self.matrix[: self.n]

    def append(self, entry_id: str) -> int:
        """A new row for ``entry_id`` (its vector is set by :meth:`set_rows`); its row."""
        self._reserve(self.n + 1)
        self.ids[self.n] = entry_id
        self.n += 1
        return self.n - 1

    def set_rows(self, rows: np.ndarray, unit: np.ndarray) -> None:
        self.matrix[rows] = unit

    def remove(self, row: int) -> str | None:
        """Drop ``row``; the last row moves into it. Returns the id that moved (None
        when ``row`` was the last one), whose row is now ``row``."""
        last = self.n - 1
        moved = None
        if row != last:
            moved = self.ids[last]
            self.ids[row] = moved
            self.matrix[row] = self.matrix[last]
        self.ids[last] = None
        self.n = last
        return moved

    def clear(self) -> None:
        self.n = 0
        self.matrix = np.zeros((0, self.dim), dtype=np.float32)
        self.ids = np.empty(0, dtype=object)

    def _reserve(self, needed: int) -> None:
        cap = self.capacity
        if needed <= cap:
            return
        new_cap = max(needed, int(cap * _GROWTH), cap + _MIN_GROW)
        matrix = np.zeros((new_cap, self.dim), dtype=np.float32)
        matrix[: self.n] = self.matrix[: self.n]
        ids = np.empty(new_cap, dtype=object)
        ids[: self.n] = self.ids[: self.n]
        self.matrix, self.ids = matrix, ids


class Tombstones:
    """The base rows deleted or replaced since the base was built (not thread-safe:
    the owning index holds its lock). A mask over the base rows, allocated on the
    first kill, plus the killed rows in kill order (what a scan skips)."""

    def __init__(self, n_base: int) -> None:
        self.n_base = n_base
        self.mask: np.ndarray | None = None  # True = dead; None while nothing died
        self._rows: list[int] = []
        self._sorted: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def nbytes(self) -> int:
        return 0 if self.mask is None else self.mask.nbytes

    def kill(self, row: int) -> None:
        """Mark base ``row`` dead (idempotent)."""
        if self.mask is None:
            self.mask = np.zeros(self.n_base, dtype=bool)
        if not self.mask[row]:
            self.mask[row] = True
            self._rows.append(row)
            self._sorted = None

    def rows(self) -> np.ndarray | None:
        """The dead rows as an int64 array (cached until the next kill); None if none."""
        if not self._rows:
            return None
        if self._sorted is None:
            self._sorted = np.asarray(self._rows, dtype=np.int64)
        return self._sorted

    def live(self) -> np.ndarray | slice:
        """An index selecting the live base rows (a slice of all while none died)."""
        return slice(None) if self.mask is None else ~self.mask

    def live_mask(self, allowed: np.ndarray, row_count: int) -> np.ndarray:
        """A search's boolean ``allowed`` mask over all ``row_count`` rows (base rows
        first) as a new array with the dead base rows cleared."""
        a = np.asarray(allowed)
        if a.shape != (row_count,):
            raise ValidationError("allowed", f"a boolean mask must have length {row_count} "
                                  f"(one per row), got {a.shape}")
        a = a.copy()
        if self.mask is not None:
            a[: self.n_base] &= ~self.mask
        return a

    def live_rows(self, allowed: np.ndarray, row_count: int) -> np.ndarray:
        """A search's ``allowed`` row numbers (in ``0..row_count-1``) sorted, unique,
        without the dead base rows (delta rows kept)."""
        a = np.asarray(allowed)
        if a.size == 0:
            return np.empty(0, dtype=np.int64)
        if not np.issubdtype(a.dtype, np.integer):
            raise ValidationError("allowed", f"must be a boolean mask or row numbers, got dtype {a.dtype}")
        rows = a.astype(np.int64, copy=False)
        if rows.size > 1 and not (rows[1:] > rows[:-1]).all():  # sorted and distinct already: kept
            rows = np.unique(rows)
        if rows[0] < 0 or rows[-1] >= row_count:
            raise ValidationError("allowed", f"row numbers must be in 0..{row_count - 1}")
        if self.mask is None or not self._rows:
            return rows
        cut = int(np.searchsorted(rows, self.n_base))
        return np.concatenate([rows[:cut][~self.mask[rows[:cut]]], rows[cut:]])
