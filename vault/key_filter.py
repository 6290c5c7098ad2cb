"""A bitmap of the top bits of a key table's 64-bit keys: most absent keys decided by one bit.

The dedup of a federated search asks each tier's id and hash tables about ~40 strings a
round, and ~96% of them are held nowhere (issue 16, session 10). Deciding a miss by a
binary search of the sorted keys reads ~17 scattered lines of an 0.26-2.6 MB array a
key; in ``bench/run.py`` each scan starts 15-25 ms after the previous one and finds those
lines evicted (issue 16, session 11: ``bench/cold_scan.py``), so each read is a miss.

:class:`KeyFilter` keeps one bit per value of a key's top ``w`` bits,
``w = bit_length(n) + EXTRA_BITS`` (a bit is set when some key has that top): a key
whose bit is clear is not in the table (exact); a set bit sends the key on to the
binary search. With ``n`` keys at most ``n / 2^w <= 2^-EXTRA_BITS`` of the absent keys
find their bit set. Size: ``2^w / 8`` bytes, from 64 KB (33,000 keys) to 512 KB
(333,000 keys) a table.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KeyFilter", "EXTRA_BITS", "present"]

#: Bits of the filter beyond ``bit_length(n)``: at most 1/8 of absent keys pass it.
EXTRA_BITS = 3
_MIN_WIDTH, _MAX_WIDTH = 10, 32
_BIT = np.array([1 << b for b in range(8)], dtype=np.uint8)


class KeyFilter:
    """The set bits of the keys' top ``width`` bits (module docstring)."""

    __slots__ = ("width", "_shift", "_bits", "_down", "_view")

    def __init__(self, keys: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.uint64)
        self.width = min(max(int(keys.size).bit_length() + EXTRA_BITS, _MIN_WIDTH), _MAX_WIDTH)
        self._shift = np.uint64(64 - self.width)
        mark = np.zeros(1 << self.width, dtype=np.bool_)
        mark[(keys >> self._shift).astype(np.intp)] = True
        self._bits = np.packbits(mark, bitorder="little")
        self._down = 64 - self.width
        self._view = memoryview(self._bits)  # has(): one byte read, no NumPy call

    @property
    def nbytes(self) -> int:
        return self._bits.nbytes

    def maybe(self, want: np.ndarray) -> np.ndarray:
        """Bool, aligned with ``want`` (uint64): False where the key is surely absent."""
        top = (np.asarray(want, dtype=np.uint64) >> self._shift).astype(np.intp)
        return (self._bits[top >> 3] & _BIT[top & 7]) != 0

    def has(self, key: int) -> bool:
        """:meth:`maybe` of one key given as a Python int (``0 <= key < 2^64``): its bit
        ``top = key >> (64 - width)``, bit ``top mod 8`` of byte ``top div 8`` -- ~0.2 us,
        where :meth:`maybe` costs ~6 NumPy calls whatever the count (issue 16, session 12)."""
        top = key >> self._down
        return bool(self._view[top >> 3] >> (top & 7) & 1)


def present(keys: np.ndarray, key_filter: KeyFilter, want: np.ndarray) -> np.ndarray:
    """Bool, aligned with ``want``: True where the key is in ``keys`` (sorted; the filter
    built from them). The same answer as one binary search of every key,
    ``keys[searchsorted(keys, want)] == want``; only the keys the filter lets pass are
    searched."""
    out = key_filter.maybe(want)
    passed = out.nonzero()[0]
    if passed.size:
        sub = want[passed]
        out[passed] = keys.take(np.searchsorted(keys, sub, side="left"), mode="clip") == sub
    return out
