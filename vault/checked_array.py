"""A read-only array from a cache file, verified block by block on first read.

Why: the search mirror's largest arrays (the postings' slots and weights, the
string tables) are memory-mapped from the cache file; checking every byte on
open would read the whole file (0.6+ s and every page resident at 1,000,000
entries) before the first query. Instead the writer stores a CRC-32 of each
``BLOCK_BYTES`` block, and :meth:`CheckedArray.get` checks the blocks covering a
range the first time that range is read. So **no byte is used before its block
matched the CRC written with it**: a bit flip, a truncated or overwritten block
is found the moment a query would read it, and raises :class:`CacheDamaged`
(the mirror then warns once and rebuilds from the tier). What it does not catch
is a change made to the file *after* a block was verified while this process
maps it (tiervault never writes a cache in place: saves are a new file renamed
over the old one, so a mapping never sees a later save).

A freshly built (in-memory) array is wrapped with ``crcs=None``: trusted, no checks.
"""

from __future__ import annotations

import mmap
import zlib

import numpy as np

__all__ = ["BLOCK_BYTES", "CacheDamaged", "CheckedArray", "block_crcs", "block_step"]

#: Bytes per checked block: small enough that a query verifies little more than it
#: reads (a 1M-row column of int32 slots is 64 blocks), big enough that the CRC
#: table stays small (1,000 entries per 64 MB).
BLOCK_BYTES = 1 << 16


class CacheDamaged(ValueError):
    """A block of a cache file does not match the CRC written with it."""


def block_step(itemsize: int) -> int:
    """Bytes per block for elements of ``itemsize`` bytes (whole elements per block)."""
    return max(1, BLOCK_BYTES // max(1, itemsize)) * max(1, itemsize)


def block_crcs(a: np.ndarray) -> list[int]:
    """CRC-32 of each block of ``a``'s buffer (the last block may be short)."""
    step = block_step(a.itemsize)
    raw = memoryview(np.ascontiguousarray(a)).cast("B")
    return [zlib.crc32(raw[i:i + step]) for i in range(0, len(raw), step)]


class CheckedArray:
    """``a`` (1-D) with per-block CRCs; :meth:`get` returns a verified slice."""

    __slots__ = ("a", "_crcs", "_ok", "_per_block", "name", "bounds", "_complete", "_mapping")

    def __init__(self, a: np.ndarray, crcs: np.ndarray | None = None, name: str = "",
                 bounds: tuple[int, int] | None = None,
                 mapping: tuple[mmap.mmap, int] | None = None) -> None:
        """``bounds`` = (lo, hi): every value of a checked block must lie in [lo, hi),
        e.g. slots inside the rows -- checked with the block's CRC, once.
        ``mapping`` = (the file's mmap, byte offset of ``a[0]`` in it): lets
        :meth:`release` drop pages of a mapped array."""
        if a.ndim != 1:
            raise ValueError(f"array {name} must be 1-D, got shape {a.shape}")
        self.a = a
        self.name = name
        self.bounds = bounds
        self._per_block = max(1, BLOCK_BYTES // max(1, a.itemsize))  # elements per block
        n_blocks = -(-a.size // self._per_block)
        if crcs is not None and len(crcs) != n_blocks:
            raise ValueError(f"array {name}: {len(crcs)} block CRCs for {n_blocks} blocks")
        self._crcs = None if crcs is None else [int(c) for c in crcs]
        # one byte per block, 1 once checked (all 1 when trusted); a bytearray because
        # ``find(0, lo, hi)`` answers "all checked?" in C without a NumPy call per query
        self._ok = bytearray(b"\1" * n_blocks if crcs is None else n_blocks)
        self._complete = crcs is None  # every block checked: get() skips the look-up
        self._mapping = mapping

    def __len__(self) -> int:
        return self.a.size

    @property
    def trusted(self) -> bool:
        return self._crcs is None

    @property
    def blocks_checked(self) -> int:
        """How many blocks have been verified so far (all of them when trusted)."""
        return self._ok.count(1)

    @property
    def blocks(self) -> int:
        return len(self._ok)

    def _verify(self, first: int, last: int) -> None:
        """Check blocks ``first..last`` (inclusive) not checked yet: each one's CRC-32,
        then the value bounds over the whole span at once (one min / max, not two
        NumPy calls per block: a 1M-row column is 64 blocks)."""
        if self._ok.find(0, first, last + 1) < 0:
            return
        assert self._crcs is not None
        raw = memoryview(self.a).cast("B")
        step = self._per_block * self.a.itemsize
        crcs = self._crcs
        todo = [b for b in range(first, last + 1) if not self._ok[b]]
        for b in todo:
            if zlib.crc32(raw[b * step:(b + 1) * step]) != crcs[b]:
                raise CacheDamaged(f"block {b} of array {self.name or '?'} fails its CRC-32")
        if self.bounds is not None:
            values = self.a[todo[0] * self._per_block:(todo[-1] + 1) * self._per_block]
            if values.size and (values.min() < self.bounds[0] or values.max() >= self.bounds[1]):
                raise CacheDamaged(f"array {self.name or '?'} holds values outside "
                                   f"{self.bounds[0]}..{self.bounds[1] - 1} in blocks {todo[0]}-{todo[-1]}")
        for b in todo:
            self._ok[b] = 1  # benign race: two threads may both check a block
        self._complete = self._ok.find(0) < 0

    def get(self, lo: int, hi: int) -> np.ndarray:
        """``a[lo:hi]``, its blocks verified first (``CacheDamaged`` if one fails)."""
        lo, hi = max(0, int(lo)), min(self.a.size, int(hi))
        if hi <= lo:
            return self.a[0:0]
        if not self._complete:
            self._verify(lo // self._per_block, (hi - 1) // self._per_block)
        return self.a[lo:hi]

    def check_ranges(self, starts: list[int], ends: list[int]) -> np.ndarray:
        """Verify the blocks of every ``[start, end)`` (in range); returns the raw array
        to slice them from (each range checked, nothing else promised)."""
        if not self._complete:
            per = self._per_block
            for lo, hi in zip(starts, ends):
                if hi > lo:
                    self._verify(lo // per, (hi - 1) // per)
        return self.a

    def release(self, lo: int, hi: int) -> None:
        """Drop this process's resident pages of ``a[lo:hi]`` (whole pages inside the
        range) when ``a`` is mapped from a file; the next read faults them in again
        from the page cache. For one pass over a large array (the latent model's fit
        reads every TF-IDF row once) that should not stay in the process's memory.
        Verified blocks stay verified: the file is never changed in place."""
        if self._mapping is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        mm, offset = self._mapping
        size = self.a.itemsize
        page = mmap.PAGESIZE
        start = offset + max(0, int(lo)) * size
        end = offset + min(self.a.size, int(hi)) * size
        start = -(-start // page) * page
        end = end // page * page
        if end > start:
            mm.madvise(mmap.MADV_DONTNEED, start, end - start)

    def all(self) -> np.ndarray:
        """The whole array, every block verified."""
        return self.get(0, self.a.size)

    def at(self, positions: np.ndarray) -> np.ndarray:
        """``a[positions]`` (in range, as the caller guarantees), the blocks holding
        them verified first."""
        positions = np.asarray(positions, dtype=np.int64)
        if not self._complete and positions.size:
            for b in set((positions // self._per_block).tolist()):
                self._verify(b, b)
        return self.a[positions]
