"""Brute-force cosine index for one (tier, model): an immutable base plus a small delta.

:class:`VectorIndex` keeps the L2-normalised vectors of one tier and one model in
two parts:

* the **base**: an ``(n_base, dim)`` float32 matrix with the entry ids in a
  parallel array, built once from an ``(ids, matrix)`` pair handed over by the
  storage side -- typically a read-only memory map of the tier's vector cache
  file -- and **never written**: a process pays in memory only for the pages it
  reads, and no update copies it;
* the **delta** (:class:`~tiervault.embeddings.vector_delta.VectorDelta`): the
  rows upserted since, in a small in-memory matrix, plus a **tombstone** mask
  over the base rows deleted or replaced since.

Rows: base rows are ``0..n_base-1``, delta rows ``n_base + j``; ``row_count`` is
``n_base + n_delta`` (dead base rows keep their number, so ``allowed`` masks are
``row_count`` long and ``len(index)`` counts live rows only). An id lives in at
most one live row: upserting an id of the base tombstones its base row and
writes the vector into the delta.

A query scans the base (tombstoned and filtered-out rows set to ``-inf``; the rows
read planned by :mod:`.row_plan`; :meth:`VectorIndex.scan`, rescored by :mod:`.tier_scan`) and ``s' = D q`` over the
delta, each reduced to its own top k, then merged into one top k. When
``delta rows + tombstones > max(FOLD_MIN_ROWS, FOLD_FRACTION * n_base)``
(:attr:`VectorIndex.needs_fold`) the owner folds the live rows into a new base:
:meth:`VectorIndex.fold` in memory, or -- where the index is persisted -- by
writing them to a new file (:meth:`VectorIndex.export`) and building a new index
over its mapping (:mod:`tiervault.embeddings.recall`).

Storage modes of the base (``dtype``, :mod:`tiervault.embeddings.vector_base`):
``"float32"`` scores the f32 matrix; ``"int8"`` / ``"float16"`` scan a compressed
copy (int8 codes -- SimSIMD's kernels when the ``simd`` extra is installed --, or
half floats) and rescore a pool exactly in f32, widened by a proven error bound:
**the same answers as float32**. Codes may be handed to :meth:`VectorIndex.build`
(mapped from the cache file). The delta is always f32.

All the maths lives in small pure functions in :mod:`.vector_math` (re-exported
here); the ids of the rows in :class:`~tiervault.embeddings.vector_ids.RowIds` (a
string table for the base, no Python object per id); the class only manages
rows and locking.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import numpy as np

from tiervault.embeddings.row_plan import RowPlan, plan_rows
from tiervault.embeddings.tier_scan import TierScan
from tiervault.embeddings.vector_base import BaseScan
from tiervault.embeddings.vector_delta import Tombstones, VectorDelta
from tiervault.embeddings.vector_ids import RowIds
from tiervault.embeddings.vector_math import (
    Int8Codes,
    check_finite,
    cosine_scores,
    float16_scores,
    int8_scores,
    l2_normalize,
    quantize_int8,
    top_k,
    unit_query,
)
from tiervault.errors import ValidationError
from tiervault.vault.string_table import StringTable

__all__ = ["VectorIndex", "IndexDtype", "l2_normalize", "cosine_scores", "top_k", "quantize_int8",
           "int8_scores", "float16_scores", "DEFAULT_RESCORE_POOL", "FOLD_MIN_ROWS", "FOLD_FRACTION"]

IndexDtype = Literal["float32", "float16", "int8"]
# First pool of a compressed scan (at least k rows); exactness does not depend on it
# (vector_base.py), only how many rows the error bounds add to it.
DEFAULT_RESCORE_POOL = 1
# Below this fraction of allowed rows, gathering them beats scanning everything; a
# compressed base reads each gathered float32 row with a pread, so beyond a few hundred
# rows its own scan of the allowed rows' codes (then exact rescoring) is cheaper.
_GATHER_FRACTION = 0.25
_GATHER_ROWS_COMPRESSED = 256
# Fold bound: the delta is scanned exactly and tombstoned rows are scanned for nothing,
# so both are kept to ~5 % of the base (<= ~5 % extra scan time and delta memory);
# the floor keeps a small tier from rewriting its file on every few writes.
FOLD_MIN_ROWS = 4096
FOLD_FRACTION = 0.05
# Rows per block of export(): 8,192 x 384 x 4 B = 12 MB of copies at a time.
_EXPORT_ROWS = 8192

Sink = Callable[[np.ndarray, np.ndarray], None]
_SERIALS = itertools.count()


class VectorIndex:
    """Vectors of one (tier, model): ``search``, ``scores_for``, ``upsert``, ``remove``.

    Thread-safe: one lock serialises searches and updates (a search never sees a
    half-applied update). Delta rows move on ``remove`` (swap-remove): build
    ``allowed`` masks/row arrays with :meth:`rows_for` right before searching.
    """

    def __init__(
        self,
        dim: int,
        *,
        dtype: IndexDtype = "float32",
        model: str | None = None,
        tier: str | None = None,
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
        # Compressed scans convert in parallel; float32 relies on one einsum pass.
        self.threads = int(threads) if threads else (os.cpu_count() or 1)
        self._lock = threading.RLock()
        self.version = 0  # bumped by every upsert/remove/fold: lets callers cache id -> row maps
        self._serial = next(_SERIALS)  # this index among all (a RowPlan names both)
        self._base = np.zeros((0, dim), dtype=np.float32)
        self._base_owned = True  # False: a caller's (mapped) array, counted as not ours
        self._dead = Tombstones(0)
        self._delta = VectorDelta(self.dim)
        self._ids = RowIds(StringTable.build([]), self._dead)  # id <-> row (vector_ids)
        self._scan = BaseScan(self._base, dtype, rescore_pool=self.rescore_pool, threads=self.threads)

    @classmethod
    def build(
        cls,
        ids: Sequence[str] | np.ndarray | StringTable,
        matrix: np.ndarray,
        *,
        dtype: IndexDtype = "float32",
        model: str | None = None,
        tier: str | None = None,
        normalized: bool = False,
        rescore_pool: int = DEFAULT_RESCORE_POOL,
        threads: int | None = None,
        codes: Int8Codes | tuple[np.ndarray, np.ndarray] | None = None,
        row_crcs: np.ndarray | None = None,
    ) -> VectorIndex:
        """One index whose base is all vectors of a tier: ``ids[i]`` owns ``matrix[i]``.

        ``normalized=True`` promises unit rows (as stored by the pipeline): a
        C-contiguous float32 ``matrix`` (e.g. a read-only ``np.memmap``) is then
        the base itself, never copied nor written. Otherwise rows are normalised
        into a new array. Duplicate ids are refused. ``ids`` may be a
        :class:`~tiervault.vault.string_table.StringTable` (kept as the base's ids,
        e.g. read from the cache file). ``codes``: the int8 codes and bounds of those
        unit rows (:func:`~tiervault.embeddings.vector_math.int8_codes`, or an
        :class:`~tiervault.embeddings.vector_math.Int8Codes`), used as they are in
        ``"int8"`` mode (e.g. mapped from the cache file); ``row_crcs``: each row's
        CRC-32, when the cache file was not checked whole (vector_base.BaseScan).
        """
        matrix = np.asanyarray(matrix)  # keeps an np.memmap a memmap: its file is read with pread
        if matrix.ndim != 2:
            raise ValidationError("matrix", f"must be 2-D (n, dim), got shape {matrix.shape}")
        n, dim = matrix.shape
        if len(ids) != n:
            raise ValidationError("ids", f"has {len(ids)} ids for {n} rows")
        index = cls(dim, dtype=dtype, model=model, tier=tier, rescore_pool=rescore_pool, threads=threads)
        if normalized and matrix.dtype == np.float32 and matrix.flags.c_contiguous:
            # Trusted (the pipeline stores unit rows under a unique (entry, model)
            # key): no copy, no pass over the matrix.
            index._set_base(ids, matrix, owned=False, codes=codes, row_crcs=row_crcs)
        else:
            exact = l2_normalize(matrix)
            check_finite(exact)
            index._set_base(ids, exact, owned=True)
        return index

    # -- introspection -------------------------------------------------------------------
    def __len__(self) -> int:
        return self._base.shape[0] - len(self._dead) + self._delta.n

    def __contains__(self, entry_id: object) -> bool:
        with self._lock:
            return isinstance(entry_id, str) and self._ids.row_of(entry_id) is not None

    @property
    def row_count(self) -> int:
        """Size of the row space (base rows, dead ones included, then delta rows):
        the length of a boolean ``allowed`` mask."""
        return self._base.shape[0] + self._delta.n

    @property
    def plan_version(self) -> tuple[int, int]:
        """What a :class:`RowPlan` of this index is valid for: (this index, its version)."""
        return self._serial, self.version

    @property
    def delta_rows(self) -> int:
        """Rows in the delta plus tombstoned base rows: the work a fold removes."""
        return self._delta.n + len(self._dead)

    @property
    def needs_fold(self) -> bool:
        """``delta_rows > max(FOLD_MIN_ROWS, FOLD_FRACTION * n_base)``."""
        return self.delta_rows > max(FOLD_MIN_ROWS, FOLD_FRACTION * self._base.shape[0])

    @property
    def ids(self) -> np.ndarray:
        """The live ids in row order (a new object array of ``str``)."""
        with self._lock:
            return self._live_ids()

    def snapshot(self, *, copy: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, matrix)`` of the live rows, taken together under the lock.

        ``matrix`` is float32, L2-normalised, C-contiguous, ``matrix[i]`` belongs to
        ``ids[i]`` -- the pair :meth:`build` takes back (``normalized=True``).
        ``copy=False`` may return a view of the base (only when there is no delta
        and no tombstone), valid until the next update. For a large index prefer
        :meth:`export`, which never holds more than a block in memory.
        """
        with self._lock:
            ids = self._live_ids()
            if not copy and not self.delta_rows:
                return ids, self._base
            base = self._scan.block(0, self._base.shape[0])
            return ids, np.concatenate([base[self._dead.live()], self._delta.live()]).astype(np.float32, copy=False)

    def export(self, sink: Sink, block_rows: int = _EXPORT_ROWS) -> int:
        """Feed the live rows to ``sink(ids, matrix)`` block by block, in row order,
        under the lock (so ids and rows always match); returns the number of rows.
        The blocks are copies of at most ``block_rows`` rows."""
        with self._lock:
            total = 0
            nb = self._base.shape[0]
            for s in range(0, nb, block_rows):
                e = min(s + block_rows, nb)
                keep = None if self._dead.mask is None else ~self._dead.mask[s:e]
                ids = self._ids.base_ids(np.arange(s, e) if keep is None else np.arange(s, e)[keep])
                rows = self._scan.block(s, e) if keep is None else self._scan.block(s, e)[keep]
                if len(ids):
                    sink(ids, rows)
                    total += len(ids)
            if self._delta.n:
                sink(self._delta.ids[: self._delta.n].copy(), self._delta.live().copy())
                total += self._delta.n
            return total

    @property
    def capacity(self) -> int:
        """Rows allocated: the base's plus the delta's capacity."""
        return self._base.shape[0] + self._delta.capacity

    @property
    def mapped(self) -> bool:
        """Whether the base is a caller's array (e.g. a file mapping) the index never copied."""
        return not self._base_owned

    @property
    def nbytes(self) -> int:
        """Bytes of the numeric arrays (base, delta, compressed copy, scales, id table)."""
        total = self._ids_nbytes() + self._delta.nbytes + self._base.nbytes
        total += self._dead.nbytes
        return total + sum(a.nbytes for a in self._scan.arrays())

    @property
    def owned_bytes(self) -> int:
        """Bytes of memory this index allocated itself: everything except a mapped base."""
        total = self._ids_nbytes() + self._delta.nbytes
        total += self._base.nbytes if self._base_owned else 0
        total += self._dead.nbytes
        return total + (sum(a.nbytes for a in self._scan.arrays()) if self._scan.owned else 0)

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Row of each id, aligned with ``ids`` (-1 where the id has no vector). A
        search mirror's id column is joined as a table (:mod:`.vector_ids`)."""
        with self._lock:
            return self._ids.rows_of(ids)

    def vectors_for(self, ids: Sequence[str]) -> np.ndarray:
        """The stored float32 vectors of ``ids`` as an (n, dim) matrix aligned with
        ``ids``; a row of NaN where the id has no vector here."""
        rows = self.rows_of(ids)
        out = np.full((len(ids), self.dim), np.nan, dtype=np.float32)
        hit = rows >= 0
        with self._lock:
            out[hit] = self._vectors_at(rows[hit])
        return out

    def rows_for(self, ids: Iterable[str]) -> np.ndarray:
        """Current rows of ``ids`` (unknown ids skipped), for an ``allowed`` filter."""
        with self._lock:
            rows = self._ids.rows_of(list(ids))
        return rows[rows >= 0]

    # -- queries ---------------------------------------------------------------------------
    def search(
        self, query_vec: np.ndarray, k: int, *, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` live rows most similar to ``query_vec``: ``(ids, cosine scores)``, best first.

        ``allowed`` pre-filters: a boolean mask over the rows (length
        :attr:`row_count`) or an array of row numbers (from :meth:`rows_for`). Only
        allowed live rows compete, so a filter matching 1 % of the rows still
        returns its best k. A zero query has no direction and returns nothing.
        """
        with self._lock:  # rows are read as ids before an update moves them
            scan = self.scan(query_vec, k, allowed=allowed)
            scan.complete()
            rows, scores = scan.best()
            return self._ids_at(rows), scores

    def plan(self, allowed: np.ndarray | None) -> RowPlan:
        """The rows a scan with the pre-filter ``allowed`` reads (:mod:`.row_plan`), for
        :meth:`scan` while the index is unchanged (a filter view's, kept with it)."""
        with self._lock:  # at most this many allowed rows are scored exactly one by one
            live = len(self)
            limit = _GATHER_FRACTION * live if self.dtype == "float32" else \
                min(_GATHER_FRACTION * live, _GATHER_ROWS_COMPRESSED)
            return plan_rows(allowed, self._dead, n_base=self._base.shape[0], row_count=self.row_count,
                             live=live, gather_fraction=_GATHER_FRACTION, gather_limit=limit,
                             version=self.plan_version)

    def scan(self, query_vec: np.ndarray, k: int, *, allowed: np.ndarray | None = None,
             plan: RowPlan | None = None) -> TierScan:
        """:meth:`search` stopped before the rescoring of a compressed base
        (:mod:`.tier_scan`): finish it with ``complete()`` or with other indexes'
        scans (``rescore_federated``), then :meth:`ids_at` of its ``best()`` rows, the
        index unchanged meanwhile (the caller holds what serialises its updates).
        ``plan``: :meth:`plan` of ``allowed`` (used while the index is at its version)."""
        q = unit_query(query_vec, self.dim, self.model)
        if k < 0:
            raise ValidationError("k", f"must be >= 0, got {k}")
        with self._lock:
            live = len(self)
            nb = self._base.shape[0]
            if plan is None or plan.version != self.plan_version:
                plan = self.plan(allowed)
            if k == 0 or live == 0 or not q.any() or plan.count == 0:
                return TierScan(0)
            if (rows := plan.gather) is not None:
                # Few candidates: exact scores of just those rows, a block at a time
                # (a filter allowing 100K rows would otherwise copy 150 MB of them).
                scores = np.concatenate([cosine_scores(self._vectors_at(rows[s:s + _EXPORT_ROWS]), q)
                                         for s in range(0, rows.size, _EXPORT_ROWS)])
                return TierScan(k, base_rows=rows, base_scores=scores)
            scan = self._scan.scan(q, k, rows=plan.base_rows, dead=self._dead.rows(), mask=plan.base_mask,
                                   excluded=plan.excluded, count=plan.base_count)
            scan.k = k
            if self._delta.n and (plan.delta_rows is None or plan.delta_rows.size):
                if plan.delta_rows is None:  # every delta row: its view, not a copy of each row
                    drows = np.arange(self._delta.n)
                    ds = cosine_scores(self._delta.live(), q)
                else:
                    drows = plan.delta_rows
                    ds = cosine_scores(self._delta.matrix[drows], q)
                pick = top_k(ds, k)
                scan.add_tail(drows[pick] + nb, ds[pick])  # after the base's: ties keep row order
            return scan

    def prefetch_codes(self) -> np.ndarray | None:
        """The int8 codes :meth:`scan` reads whole, if another thread may (``threads`` > 1)."""
        with self._lock:
            return self._scan.codes if self.dtype == "int8" and self.threads > 1 else None

    def ids_at(self, rows: np.ndarray) -> np.ndarray:
        """The ids of ``rows`` (an object array of ``str``)."""
        with self._lock:
            return self._ids_at(rows)

    def scores_for(self, ids_or_rows: Sequence[str] | np.ndarray, query_vec: np.ndarray) -> np.ndarray:
        """Exact cosine of ``query_vec`` with each given id (or row number).

        float32 array aligned with the input; NaN for ids without a vector here
        (e.g. an entry whose embedding is still pending), so callers can tell
        "no vector" from "similarity 0".
        """
        q = unit_query(query_vec, self.dim, self.model)
        with self._lock:
            arr = np.asarray(ids_or_rows)
            if arr.size and np.issubdtype(arr.dtype, np.integer):
                rows = arr.astype(np.int64)
                bad = (rows < 0) | (rows >= self.row_count)
                if bad.any():
                    raise ValidationError("rows", f"row {int(rows[bad][0])} is outside 0..{self.row_count - 1}")
                return cosine_scores(self._vectors_at(rows), q)
            rows = self._ids.rows_of([str(i) for i in (arr.tolist() if arr.ndim else [arr.item()])])
            out = np.full(rows.shape[0], np.nan, dtype=np.float32)
            hit = rows >= 0
            if hit.any():
                out[hit] = cosine_scores(self._vectors_at(rows[hit]), q)
            return out

    # -- updates -----------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Insert or replace the vectors of ``ids`` (rows are L2-normalised here).

        Every write goes to the delta: an id of the delta is overwritten in place,
        an id of the base is tombstoned there and appended to the delta, a new id
        is appended. The base is never written. A repeated id keeps its last vector.
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
        check_finite(unit)
        with self._lock:
            row_ids = self._ids
            base_rows = row_ids.base_rows_of(ids).tolist()  # base rows never move
            drows = np.empty(len(ids), dtype=np.int64)
            for pos, entry_id in enumerate(ids):
                j = row_ids.delta_row(entry_id)
                if j is None:
                    if base_rows[pos] >= 0:
                        self._dead.kill(base_rows[pos])
                    j = self._delta.append(entry_id)
                    row_ids.set_delta(entry_id, j)
                drows[pos] = j
            self._delta.set_rows(drows, unit)
            self.version += 1

    def remove(self, ids: Iterable[str]) -> int:
        """Drop the vectors of ``ids``; unknown ids are ignored. Returns how many went.

        A base row is tombstoned; a delta row is swap-removed (the delta's last row
        moves into the hole).
        """
        removed = 0
        ids = list(dict.fromkeys(map(str, ids)))
        with self._lock:
            row_ids = self._ids
            base_rows = row_ids.base_rows_of(ids).tolist()  # base rows never move
            for entry_id, r in zip(ids, base_rows):
                j = row_ids.drop_delta(entry_id)
                if j is not None:  # a delta row (its base row, if any, is dead already)
                    moved = self._delta.remove(j)  # swap-remove: the last row moves into j
                    if moved is not None:
                        row_ids.set_delta(moved, j)
                elif r >= 0:
                    self._dead.kill(r)
                else:
                    continue
                removed += 1
            self.version += 1
        return removed

    def fold(self) -> None:
        """Make the live rows the new base, in memory (an owned copy), and empty the
        delta and the tombstones. A persisted index folds through a file instead
        (:meth:`export`, then :meth:`build` over the file's mapping)."""
        with self._lock:
            ids, matrix = self.snapshot(copy=True)
            self._set_base(ids, np.ascontiguousarray(matrix), owned=True)
            self.version += 1

    # -- internals -----------------------------------------------------------------------------
    def _set_base(self, ids: Sequence[str] | np.ndarray | StringTable, matrix: np.ndarray, *, owned: bool,
                  codes: Int8Codes | tuple[np.ndarray, np.ndarray] | None = None,
                  row_crcs: np.ndarray | None = None) -> None:
        dead = Tombstones(matrix.shape[0])
        self._ids = RowIds.of(ids, dead)  # refuses duplicates
        self._base, self._base_owned, self._dead = matrix, owned, dead
        self._delta.clear()
        self._scan = BaseScan(matrix, self.dtype, rescore_pool=self.rescore_pool, threads=self.threads,
                              codes=codes, row_crcs=row_crcs)

    def _ids_at(self, rows: np.ndarray) -> np.ndarray:
        nb = self._base.shape[0]
        out = np.empty(rows.shape[0], dtype=object)
        in_base = rows < nb
        out[in_base] = self._ids.base_ids(rows[in_base])
        out[~in_base] = self._delta.ids[rows[~in_base] - nb]
        return out

    def _live_ids(self) -> np.ndarray:
        """The live ids in row order: live base rows, then the delta's (the one place
        :attr:`ids`, :meth:`snapshot` and :meth:`fold` take them from)."""
        mask = self._dead.mask
        base_rows = np.arange(self._base.shape[0]) if mask is None else np.flatnonzero(~mask)
        return np.concatenate([self._ids.base_ids(base_rows), self._delta.ids[: self._delta.n]])

    def _ids_nbytes(self) -> int:
        return sum(a.nbytes for a in self._ids.base.arrays().values())

    def _vectors_at(self, rows: np.ndarray) -> np.ndarray:
        nb = self._base.shape[0]
        in_base = rows < nb
        if in_base.all():
            return self._scan.rows(rows)
        out = np.empty((rows.shape[0], self.dim), dtype=np.float32)
        out[in_base] = self._scan.rows(rows[in_base])
        out[~in_base] = self._delta.matrix[rows[~in_base] - nb]
        return out

    def __repr__(self) -> str:
        return (f"VectorIndex(tier={self.tier!r}, model={self.model!r}, n={len(self)}, dim={self.dim}, "
                f"dtype={self.dtype!r}, delta={self.delta_rows})")

