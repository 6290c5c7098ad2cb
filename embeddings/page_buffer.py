"""Arrays read from a file into anonymous memory in 2 MiB pages, where the OS gives them.

The int8 scan (:func:`~tiervault.embeddings.vector_math.int8_approx`) reads every code of
a tier on every query: 384 MB at 1,000,000 rows of 384 components, memory-bound. Read
through a file mapping, those bytes sit in 4 KiB pages: ~94,000 TLB misses a scan, and
the hardware prefetcher restarts at each page. In anonymous memory asked for 2 MiB
pages (``MADV_HUGEPAGE``: Linux transparent huge pages, "madvise" mode or "always")
the same kernel ran 29.7 against 39.2 ms over the 1M bench build's three tiers here
(bench/README.md, issue 16 session 14). So a vector cache's codes and bounds are read
(:func:`read_resident`, the CRC-32 computed on the way, as the cache check did) rather
than mapped. The process's resident set is the same (the mapped pages were resident
after the first scan anyway). What it costs is the open: the pages are allocated,
zeroed and filled there, 1,034 against 249 ms median for 384 MB of codes on this
project's bench VM (``bench/codes_open_cost.py``), so a process gains after ~200 1M
hybrid queries and a one-shot query at 1M pays ~0.8 s more (bench/README.md, "where
every target stands (session 14)"). Where the OS has no such pages (another system,
THP "never": :func:`huge_pages`), the cache keeps its mapping, as before.
"""

from __future__ import annotations

import logging
import mmap
from pathlib import Path

import numpy as np

from tiervault.vault.checksum import crc32

__all__ = ["read_resident", "huge_pages", "HUGE_PAGE"]

log = logging.getLogger(__name__)

HUGE_PAGE = 2 << 20  # the start of the array is aligned to it (a huge page holds whole ones)
_CHUNK = 1 << 24  # bytes per read
_THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
_HUGE: bool | None = None  # huge_pages(), read once


def huge_pages() -> bool:
    """Whether anonymous memory asked with ``MADV_HUGEPAGE`` gets 2 MiB pages here (Linux
    transparent huge pages in "always" or "madvise" mode). Where not, the codes stay
    mapped (:mod:`.vector_cache`): anonymous 4 KiB pages were no faster than the mapping
    (``bench/codes_pages.py``: 43.1 against 38.6 ms at 1M, 4.65 against 3.47 at 100K)."""
    global _HUGE
    if _HUGE is None:
        try:
            mode = _THP.read_text()
        except OSError:
            mode = ""
        _HUGE = (getattr(mmap, "MADV_HUGEPAGE", None) is not None and getattr(mmap, "MAP_ANONYMOUS", None)
                 is not None and ("[always]" in mode or "[madvise]" in mode))
    return _HUGE


def read_resident(path: Path, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """The read-only array of ``dtype`` and ``shape`` stored in ``path`` from byte
    ``offset`` on, read into anonymous memory (2 MiB pages asked for), and the CRC-32
    of those bytes. Raises OSError when the file ends before the array does."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf, start = _anonymous(nbytes)
    if buf is not None:
        arr = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=start)
    else:  # no anonymous mappings here: ordinary memory
        arr = np.empty(nbytes, dtype=np.uint8)
    crc = 0
    with open(path, "rb", buffering=0) as fh, memoryview(arr) as view:
        fh.seek(offset)
        done = 0
        while done < nbytes:
            got = fh.readinto(view[done:min(done + _CHUNK, nbytes)])
            if not got:
                raise OSError(f"{path} ended after {offset + done} bytes, {offset + nbytes} expected")
            crc = crc32(view[done:done + got], crc)
            done += got
    arr = arr.view(dtype).reshape(shape)
    arr.flags.writeable = False
    return arr, crc


def _anonymous(nbytes: int) -> tuple[mmap.mmap | None, int]:
    """A private anonymous mapping holding ``nbytes`` from a 2 MiB boundary on (2 MiB
    pages asked for), and that start; (None, 0) where there is no such mapping."""
    flags = getattr(mmap, "MAP_PRIVATE", None), getattr(mmap, "MAP_ANONYMOUS", None)
    if nbytes == 0 or None in flags:
        return None, 0
    buf = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=flags[0] | flags[1])  # type: ignore[operator]
    probe = np.frombuffer(buf, dtype=np.uint8, count=1)
    start = -int(probe.ctypes.data) % HUGE_PAGE
    del probe
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            buf.madvise(advice, start, nbytes)
        except (OSError, ValueError) as exc:  # refused (THP off in this kernel): ordinary pages
            log.debug("2 MiB pages refused for %d bytes (%s): 4 KiB pages", nbytes, exc)
    return buf, start
