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

import os
from typing import BinaryIO

import numpy as np

from tiervault.vault.checksum import crc32

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
    return [crc32(raw[i:i + step]) for i in range(0, len(raw), step)]


class CheckedArray:
    """``a`` (1-D) with per-block CRCs; :meth:`get` returns a verified slice."""

    __slots__ = ("a", "_crcs", "_ok", "_per_block", "name", "bounds", "_complete", "_reader", "_advise")

    def __init__(self, a: np.ndarray, crcs: np.ndarray | None = None, name: str = "",
                 bounds: tuple[int, int] | None = None,
                 reader: tuple[BinaryIO, int] | None = None,
                 advise: tuple[BinaryIO, int] | None = None) -> None:
        """``bounds`` = (lo, hi): every value of a checked block must lie in [lo, hi),
        e.g. slots inside the rows -- checked with the block's CRC, once.
        ``reader`` = (the open file, byte offset of ``a[0]``): :meth:`get` and the block
        checks read with ``pread`` into a fresh buffer instead of through the mapping --
        for arrays read a range at a time (postings columns, TF-IDF rows): this kernel
        maps a file's page-cache folios up to 2 MB at a time (``FilePmdMapped``), so a
        few hundred queries left every column of every term resident (bench/README.md,
        issue 16 round 3). ``advise`` = (the open file, byte offset of ``a[0]``) of a
        mapped array: a block range about to be checked is first asked of the kernel in
        one request (``POSIX_FADV_WILLNEED``): a mapping advised ``MADV_RANDOM`` reads a
        page not in the OS cache 4 KiB at a time (a 64 KiB block: 16 reads; issue 16,
        session 22)."""
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
        self._reader = reader if reader is not None and hasattr(os, "preadv") else None
        self._advise = advise if advise is not None and hasattr(os, "posix_fadvise") else None

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

    def _read(self, lo: int, hi: int) -> np.ndarray:
        """``a[lo:hi]`` read from the file (``reader``) into a new array."""
        assert self._reader is not None
        fh, offset = self._reader
        out = np.empty(hi - lo, dtype=self.a.dtype)
        if out.nbytes:
            got = os.preadv(fh.fileno(), [memoryview(out).cast("B")],
                            offset + lo * self.a.itemsize)
            if got != out.nbytes:
                raise CacheDamaged(f"array {self.name or '?'}: short read at {lo}")
        return out

    def _verify(self, first: int, last: int, span: np.ndarray | None = None) -> None:
        """Check blocks ``first..last`` (inclusive) not checked yet: each one's CRC-32,
        then the value bounds over the whole span at once (one min / max, not two
        NumPy calls per block: a 1M-row column is 64 blocks). ``span``: those blocks'
        elements already read (from block ``first`` on), else the mapping is read."""
        if self._ok.find(0, first, last + 1) < 0:
            return
        assert self._crcs is not None
        per = self._per_block
        if span is None and self._reader is not None:
            span = self._read(first * per, min(self.a.size, (last + 1) * per))
        elif span is None and self._advise is not None:
            fh, offset = self._advise
            lo, hi = first * per * self.a.itemsize, min(self.a.size, (last + 1) * per) * self.a.itemsize
            os.posix_fadvise(fh.fileno(), offset + lo, hi - lo, os.POSIX_FADV_WILLNEED)
        view, base = (self.a, 0) if span is None else (span, first * per)
        raw = memoryview(view).cast("B")
        step = per * self.a.itemsize
        crcs = self._crcs
        todo = [b for b in range(first, last + 1) if not self._ok[b]]
        for b in todo:
            at = (b * per - base) * self.a.itemsize
            if crc32(raw[at:at + step]) != crcs[b]:
                raise CacheDamaged(f"block {b} of array {self.name or '?'} fails its CRC-32")
        if self.bounds is not None:
            values = view[todo[0] * per - base:(todo[-1] + 1) * per - base]
            if values.size and (values.min() < self.bounds[0] or values.max() >= self.bounds[1]):
                raise CacheDamaged(f"array {self.name or '?'} holds values outside "
                                   f"{self.bounds[0]}..{self.bounds[1] - 1} in blocks {todo[0]}-{todo[-1]}")
        for b in todo:
            self._ok[b] = 1  # benign race: two threads may both check a block
        self._complete = self._ok.find(0) < 0

    def get(self, lo: int, hi: int) -> np.ndarray:
        """``a[lo:hi]``, its blocks verified first (``CacheDamaged`` if one fails)."""
        lo, hi = int(lo), int(hi)
        if self._complete and self._reader is None and 0 <= lo < hi:
            return self.a[lo:hi]  # every block checked, mapped: the slice (hi past the end: to it)
        lo, hi = max(0, lo), min(self.a.size, hi)
        if hi <= lo:
            return self.a[0:0]
        if self._reader is not None:
            per = self._per_block
            first, last = lo // per, (hi - 1) // per
            if not self._complete and self._ok.find(0, first, last + 1) >= 0:
                span = self._read(first * per, min(self.a.size, (last + 1) * per))
                self._verify(first, last, span)
                return span[lo - first * per:hi - first * per]
            return self._read(lo, hi)
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

    def all(self) -> np.ndarray:
        """The whole array, every block verified."""
        return self.get(0, self.a.size)

    def rows_at(self, rows: np.ndarray, width: int) -> np.ndarray:
        """``a`` seen as rows of ``width`` items: the rows at ``rows`` (in range, as the
        caller guarantees), shape (len(rows), width), their blocks verified first. Once
        every block is checked, one gather of whole rows (no index per item)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self._complete:
            return self.at((rows[:, None] * width + np.arange(width)).ravel()).reshape(-1, width)
        return self.a.reshape(-1, width)[rows]

    def at(self, positions: np.ndarray) -> np.ndarray:
        """``a[positions]`` (in range, as the caller guarantees), the blocks holding
        them verified first."""
        positions = np.asarray(positions, dtype=np.int64)
        if not self._complete and positions.size:
            for b in set((positions // self._per_block).tolist()):
                self._verify(b, b)
        return self.a[positions]
