"""The scan of a :class:`~tiervault.embeddings.index.VectorIndex`'s immutable base.

:class:`BaseScan` holds the base matrix (float32 unit rows, often a read-only
file mapping) and, for the compressed modes, its compressed copy: int8 codes
with per-row scales and error bounds (scanned by SimSIMD's integer kernels when
installed, :func:`~tiervault.embeddings.vector_math.int8_scan`) or half floats.

Exact top k from an approximate scan: let ``a_i`` be the approximate scores and
``eps_i >= |a_i - s_i|`` bounds on their errors (vector_math). The ``pool`` rows
of highest ``a_i`` (at least k) are rescored exactly (``s_i = <x_i, q>``, float32)
and give a k-th score ``s_k``. Any row with ``s_i >= s_k`` has ``a_i + eps_i >= s_k``,
so the rows passing that test and not yet rescored are rescored too, and the top
k of all rescored rows is the float32 answer (ties aside). That rescoring is
:class:`~tiervault.embeddings.tier_scan.TierScan`'s (:meth:`BaseScan.scan` stops before
it, so a federated search rescores several tiers' scans at once). The test runs in two steps:
one compare of every ``a_i`` with ``s_k - max eps``, then the few rows passing it
against their own ``eps_i`` (the bound's full array is never built).

The float32 rows of a compressed base that is a large file mapping (over
``PREAD_ABOVE_BYTES``) are read with ``pread`` where they are rescored (and by
:meth:`BaseScan.rows`), each checked against its own CRC-32 when the cache file has
them (``row_crcs``: a damaged row raises :class:`VectorRowDamaged`), never through
the mapping: the process's resident set then holds the codes (1 byte a component),
not the float32 pages of every row ever rescored (at 1,000,000 rows most of 1.5 GB
after a few hundred queries). A small
file's rows are read through its mapping (a few hundred ``pread`` calls cost
~0.1-0.4 ms per query here); a float32 base keeps its mapping (it scans every page).
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from tiervault.embeddings.tier_scan import Bound, TierScan
from tiervault.embeddings.vector_math import (
    cosine_scores,
    float16_error_bound,
    float16_scores,
    Int8Codes,
    int8_approx,
    int8_approx_at,
    int8_codes,
    int8_error,
    int8_scan,
    mask_outside,
    top_k,
)
from tiervault.vault.checked_array import CacheDamaged
from tiervault.vault.checksum import crc32
from tiervault.errors import ValidationError

__all__ = ["BaseScan", "VectorRowDamaged", "check_rows"]

# A compressed scan restricted to ``rows`` scores only those when they are under 1/4 of
# the base (gathering codes costs more per row than a scan of them in place).
_GATHER_SHARE = 4
# Rows gathered at a time: 16,384 x 384 B of int8 codes = 6 MB of copies.
_GATHER_BLOCK = 16_384
#: A compressed base's float32 file of more than this many bytes is read with ``pread``
#: where rescored; one of at most this many through its mapping, with no system call a
#: row (negative: always ``pread``). Measured at 100,000 entries (issue 16 sessions 16
#: and 18, bench/README.md): ~100 system calls and 0.1-0.4 ms CPU less a hybrid scan, for
#: +146 MB of peak RSS: the rows rescored at random make the files resident, pages the
#: page cache holds anyway when they are read with ``pread`` (mapped, they count in the
#: process's RSS). A 1,000,000-entry vault's files are all larger (307-768 MB): ``pread``.
PREAD_ABOVE_BYTES = 128 << 20


class BaseScan:
    """Top-k scans of one immutable matrix in a storage mode (float32 / int8 / float16)."""

    def __init__(self, matrix: np.ndarray, dtype: str, *, rescore_pool: int, threads: int,
                 codes: Int8Codes | tuple[np.ndarray, np.ndarray] | None = None,
                 row_crcs: np.ndarray | None = None) -> None:
        """``row_crcs``: the CRC-32 of each float32 row of a ``matrix`` mapped from a cache
        file that was not checked whole: each row is checked where it is read (``pread``),
        or, where this base reads through the mapping, every row now."""
        self.matrix = matrix
        self.dtype = dtype
        self.rescore_pool = rescore_pool
        self.threads = threads
        self.codes: np.ndarray | None = None
        self.bounds: np.ndarray | None = None
        self.half: np.ndarray | None = None
        self.owned = codes is None  # False: the codes are a caller's (mapped) arrays
        self._bound_max: tuple[float, float] | None = None  # (max a_i, max l1_i), once
        n = matrix.shape[0]
        if dtype == "int8" and codes is not None:
            # Plain ndarray views of mapped codes: every slice of an np.memmap makes a
            # new memmap object (~10 us each, a dozen a search); same pages, no copy.
            self.codes, self.bounds = np.asarray(codes[0]), np.asarray(codes[1])
            if self.codes.shape != matrix.shape or self.bounds.shape != (2, n):
                raise ValidationError("codes", f"shapes {self.codes.shape} / {self.bounds.shape} do not "
                                      f"match the {matrix.shape} matrix")
        elif dtype == "int8":
            self.codes, self.bounds = int8_codes(matrix)
        elif dtype == "float16":
            self.half = np.empty(matrix.shape, dtype=np.float16)
            for s in range(0, n, 65536):
                self.half[s:s + 65536] = matrix[s:s + 65536]
        self._file = _RowFile.of(matrix, row_crcs) if dtype != "float32" else None
        if row_crcs is not None and self._file is None:
            check_rows(matrix, row_crcs, 0)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The compressed copy's arrays (empty in float32 mode)."""
        return tuple(a for a in (self.codes, self.bounds, self.half) if a is not None)

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """The float32 rows ``rows`` (a new array; read from the file when it is one)."""
        if self._file is not None:
            return self._file.read(rows)
        return np.asarray(self.matrix[rows], dtype=np.float32)

    def block(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start..stop`` as a new float32 array (one read when a file)."""
        if self._file is not None:
            return self._file.read_block(start, stop)
        return np.array(self.matrix[start:stop], dtype=np.float32)

    def search(self, q: np.ndarray, k: int, *, rows: np.ndarray | None = None,
               dead: np.ndarray | None = None, mask: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` rows by exact cosine: among ``rows`` (sorted, live) or the rows set
        in ``mask`` (live) when given, else among all rows but ``dead``. Returns
        (rows, float32 scores), best first."""
        scan = self.scan(q, k, rows=rows, dead=dead, mask=mask)
        scan.complete()
        return scan.best()

    def scan(self, q: np.ndarray, k: int, *, rows: np.ndarray | None = None,
             dead: np.ndarray | None = None, mask: np.ndarray | None = None,
             excluded: np.ndarray | None = None, count: int | None = None) -> TierScan:
        """:meth:`search` stopped before its rescoring (:class:`TierScan`: a float32
        base's exact top k, or a compressed base's approximate scores and bounds).
        With ``mask``: ``excluded`` (the rows it leaves out) and ``count`` (the rows it
        sets), when known, spare a pass over it each."""
        n = self.matrix.shape[0]
        if mask is not None:
            allowed = int(np.count_nonzero(mask)) if count is None else count
        else:
            allowed = n - (0 if dead is None else dead.size) if rows is None else rows.size
        k = min(k, allowed)
        if k <= 0:
            return TierScan(0)
        if self.dtype == "float32":
            scores = _excluded(cosine_scores(self.matrix, q), rows, dead, mask, excluded)
            pick = top_k(scores, k)
            return TierScan(k, base_rows=pick, base_scores=scores[pick])
        if rows is not None and rows.size * _GATHER_SHARE < n:
            # Few allowed rows: approximate scores of just those (their codes gathered
            # block by block), positions into ``rows``.
            approx, bound = self._approx_at(q, rows)
        else:
            approx, bound = self._approx_scores(q)
            approx, rows = _excluded(approx, rows, dead, mask, excluded), None
        return TierScan(k, approx=approx, bound=bound, pos_rows=rows, base_k=k, allowed=allowed,
                        exact_of=lambda at: cosine_scores(self.rows(at), q), pool=self.rescore_pool)

    def _approx_at(self, q: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, Bound]:
        """:meth:`_approx_scores` of ``rows`` only (aligned with them), gathered
        ``_GATHER_BLOCK`` rows at a time (a few MB of copies, not one per allowed row)."""
        if self.dtype == "float16":
            assert self.half is not None
            parts = [float16_scores(self.half.take(rows[s:s + _GATHER_BLOCK], axis=0), q)
                     for s in range(0, rows.size, _GATHER_BLOCK)]
            return np.concatenate(parts), Bound.flat(float16_error_bound(q))
        assert self.codes is not None and self.bounds is not None
        prefetched = int8_approx_at(self.codes, self.bounds[0], q, rows)
        if prefetched is not None:  # the scan pool's products of every row, written already
            approx, qc = prefetched
            eps = np.asarray(int8_error(self.bounds[0][rows], self.bounds[1][rows], qc), dtype=np.float32)
            return approx, Bound(float(eps.max(initial=0.0)), eps.__getitem__)
        # ``take``, not fancy indexing: the same rows, ~2x faster a gather (SIMD copies of
        # whole rows; 8,000 of 49,191 x 384 codes: 185 -> 99 us)
        scored = [int8_scan(self.codes.take(r, axis=0), self.bounds.take(r, axis=1), q)
                  for r in (rows[s:s + _GATHER_BLOCK] for s in range(0, rows.size, _GATHER_BLOCK))]
        eps = np.concatenate([e for _, e in scored])
        return np.concatenate([a for a, _ in scored]), Bound(float(eps.max(initial=0.0)), eps.__getitem__)

    def _approx_scores(self, q: np.ndarray) -> tuple[np.ndarray, Bound]:
        """Approximate scores of every row and bounds on their errors."""
        if self.dtype == "int8":
            assert self.codes is not None and self.bounds is not None
            scale, l1 = self.bounds[0], self.bounds[1]
            approx, qc = int8_approx(self.codes, scale, q, threads=self.threads)
            if self._bound_max is None:  # the base never changes: its largest a_i, l1_i once
                self._bound_max = (float(scale.max(initial=0.0)), float(l1.max(initial=0.0)))
            cap = float(int8_error(*self._bound_max, qc))
            return approx, Bound(cap, lambda at: int8_error(scale[at], l1[at], qc))
        assert self.half is not None
        return float16_scores(self.half, q, threads=self.threads), Bound.flat(float16_error_bound(q))


class VectorRowDamaged(CacheDamaged):
    """A float32 row of a vector cache file does not match its CRC-32 (``path``: the
    file; the tier's index is then rebuilt from the tier: embeddings/recall.py)."""

    def __init__(self, path: str, row: int) -> None:
        super().__init__(f"row {row} of the vector cache {path} fails its CRC-32")
        self.path = path


def check_rows(matrix: np.ndarray, crcs: np.ndarray, start: int, path: str | None = None) -> None:
    """Check ``matrix``'s rows (float32), rows ``start..`` of the file ``path`` (its own
    file when None), against ``crcs[start..]``."""
    raw = memoryview(np.ascontiguousarray(matrix)).cast("B")
    rb = matrix.shape[1] * matrix.itemsize
    for i, want in enumerate(crcs[start:start + matrix.shape[0]].tolist()):
        if crc32(raw[i * rb:(i + 1) * rb]) != want:
            raise VectorRowDamaged(path or str(getattr(matrix, "filename", None)), start + i)


class _RowFile:
    """Float32 rows of a mapped ``.npy`` file read with ``pread`` (not through the map),
    each checked against its CRC-32 when ``crcs`` are given (~0.5 us a row)."""

    def __init__(self, path: str, offset: int, shape: tuple[int, int], crcs: np.ndarray | None = None) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self.fd)
        self.path, self.offset, self.shape, self.crcs = path, offset, shape, crcs
        self.row_bytes = shape[1] * 4

    @classmethod
    def of(cls, matrix: np.ndarray, crcs: np.ndarray | None = None) -> _RowFile | None:
        """A reader when ``matrix`` is a C-ordered float32 ``np.memmap`` of a file larger
        than ``PREAD_ABOVE_BYTES`` (a smaller one is read through the mapping)."""
        if not (isinstance(matrix, np.memmap) and matrix.filename and matrix.dtype == np.float32
                and matrix.ndim == 2 and matrix.flags.c_contiguous and matrix.nbytes > PREAD_ABOVE_BYTES):
            return None
        return cls(str(matrix.filename), int(matrix.offset), matrix.shape, crcs)

    def read(self, rows: np.ndarray) -> np.ndarray:
        fd, off, rb = self.fd, self.offset, self.row_bytes
        at = rows.tolist()
        parts = [os.pread(fd, rb, off + r * rb) for r in at]
        if self.crcs is not None:
            for r, part, want in zip(at, parts, self.crcs[rows].tolist()):
                if crc32(part) != want:
                    raise VectorRowDamaged(self.path, r)
        return self._check(np.frombuffer(b"".join(parts), dtype=np.float32), len(rows))

    def read_block(self, start: int, stop: int) -> np.ndarray:
        data = os.pread(self.fd, (stop - start) * self.row_bytes, self.offset + start * self.row_bytes)
        block = self._check(np.frombuffer(data, dtype=np.float32).copy(), stop - start)
        if self.crcs is not None:
            check_rows(block, self.crcs, start, self.path)
        return block

    def _check(self, flat: np.ndarray, count: int) -> np.ndarray:
        if flat.size != count * self.shape[1]:  # a short read: the file changed under us
            raise OSError(f"read {flat.size * 4} bytes of float32 rows, expected {count * self.row_bytes}")
        return flat.reshape(count, self.shape[1])


def _excluded(scores: np.ndarray, rows: np.ndarray | None, dead: np.ndarray | None,
              mask: np.ndarray | None = None, excluded: np.ndarray | None = None) -> np.ndarray:
    """``scores`` with rows outside ``rows`` or ``mask`` (or the ``dead`` rows) set to -inf;
    ``excluded``: the rows outside ``mask``, when known."""
    if mask is not None:  # in place (the scans' scores are new arrays): a scatter to the few
        # rows out, ~3x faster than a masked copy
        scores[np.flatnonzero(~mask) if excluded is None else excluded] = -np.inf
        return scores
    if rows is not None:
        return mask_outside(scores, rows)
    if dead is not None and dead.size:
        scores[dead] = -np.inf
    return scores
