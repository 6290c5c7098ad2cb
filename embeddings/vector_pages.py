"""A read-only mapped ``.npy`` matrix whose pages a scan hands back after reading them.

Why: a scan of the int8 codes of a vector index reads every row on every query,
so a plain mapping keeps the whole file resident in the searching process (366 MB
at 1,000,000 x 384) although the bytes already sit in the OS page cache, shared
and reclaimable. :meth:`MappedRows.release` drops this process's page-table
entries of a row range (``madvise(MADV_DONTNEED)``, which on a read-only shared
file mapping unmaps the pages and keeps them in the page cache): a scan that
releases each block after reading it never holds more than about one block of
the file (12 MB at 32,768 rows of 384), and mapping the block again at the next
query is a handful of minor faults (the kernel maps page-cache folios of up to
2 MB at once here). Measured on a 1M x 384 file, one query, SimSIMD int8 dot:
13.1 ms whole-file, 13.6 ms in 32,768-row blocks with release, process RSS
414 -> 51 MB (bench/README.md, issue 16 round 2).

Nothing is ever written through the mapping (``ACCESS_READ``), so dropping its
pages loses nothing: the next read maps the same bytes again from the page cache
(or the file).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

__all__ = ["MappedRows"]

_PAGE = mmap.PAGESIZE


class MappedRows:
    """Rows ``array[i]`` of a 2-D C-ordered ``.npy`` file, mapped read-only."""

    def __init__(self, path: str | Path, offset: int, dtype: np.dtype, shape: tuple[int, int]) -> None:
        """``offset``: where the data starts (after the ``.npy`` header); the caller has
        checked ``dtype`` / ``shape`` against the file's header and size."""
        n, d = shape
        self.row_bytes = d * np.dtype(dtype).itemsize
        self.offset = int(offset)
        self._end = self.offset + n * self.row_bytes
        fd = os.open(path, os.O_RDONLY)
        try:
            # A zero-length mapping is an error: an empty matrix maps nothing.
            self._mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if n * d else None
        finally:
            os.close(fd)  # the mapping keeps the file open
        if self._mm is None:
            self.array = np.zeros(shape, dtype=dtype)
        else:
            self.array = np.frombuffer(self._mm, dtype=dtype, count=n * d, offset=self.offset).reshape(shape)
        self.array.flags.writeable = False

    def release(self, start: int, stop: int) -> None:
        """Hand the pages of rows ``start..stop`` back to the page cache (this process
        unmaps them; the next read maps them again). Pages shared with the rows
        around are dropped too: they are mapped again when read."""
        if self._mm is None or stop <= start:
            return
        lo = (self.offset + start * self.row_bytes) // _PAGE * _PAGE
        hi = min(-(-(self.offset + stop * self.row_bytes) // _PAGE) * _PAGE, len(self._mm))
        if hi > lo:
            self._mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
