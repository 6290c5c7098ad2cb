"""A look-up of a handful of keys in a sorted key table: one binary search, then plain Python.

A query's stems (the vocabulary: 2-5 a tier, looked up once a tier a query -- the
second ask ends in the table's memo) and the few digests that pass a hash table's key
filter are looked up a handful at a time. Through NumPy that is ~12 calls on tiny
arrays (two binary searches, three gathers, their bounds, ...) at ~1-2 us each; here
one ``searchsorted`` finds each key's first position ``lo``, and the positions
``lo .. hi - 1`` whose key equals it are walked in Python (nearly always zero or one:
64-bit fingerprints seldom collide), their slots read as one verified slice of
``order``. Measured on the bench's 100K vocabularies (5 stems, warm): 22 -> 12 us a
look-up (issue 16, session 11, bench/README.md "the string tables").
"""

from __future__ import annotations

import numpy as np

from tiervault.vault.checked_array import CheckedArray

__all__ = ["FEW", "candidate_slots"]

#: Up to this many strings a look-up takes the Python walk (more: the tables' NumPy path,
#: whose cost hardly grows with the count; the dedup asks ~40-60 at once).
FEW = 8


def candidate_slots(keys: np.ndarray, order: CheckedArray, want: np.ndarray) -> list[list[int]]:
    """For each key of ``want`` (uint64), the slots ``order[lo:hi]`` whose key in
    ``keys`` (sorted, verified) equals it, in key order -- the candidates whose bytes
    the caller compares. The same candidates as two binary searches (left, right)."""
    n = keys.size
    out: list[list[int]] = []
    for w, lo in zip(want.tolist(), np.searchsorted(keys, want, side="left").tolist()):
        hi = lo
        while hi < n and int(keys[hi]) == w:
            hi += 1
        out.append(order.get(lo, hi).tolist() if hi > lo else [])
    return out
