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

:func:`held_few` answers a table's ``held()`` of a handful of strings not all in its memo
(the graph neighbours' ids a scan scores, 1-7 a call: issue 16, session 12) in plain
Python: each string's fingerprint computed once, its bit in the table's key filter
read first (``KeyFilter.has``), the binary search a ``bisect`` over the sorted keys
seen as a ``memoryview`` of uint64 (~1 us, where ``np.searchsorted`` on a tiny array is ~2
us a call and every NumPy call on the way ~1-2 us more), the candidates' bytes compared.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable, NamedTuple, Sequence

import numpy as np

from tiervault.vault.checked_array import CheckedArray
from tiervault.vault.key_filter import KeyFilter
from tiervault.vault.string_memo import MEMO_MAX

__all__ = ["FEW", "Probe", "candidate_slots", "held_few"]

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


class Probe(NamedTuple):
    """A string looked up: its key in the table (``keys``' kind) and the bytes a slot must hold."""

    key: int
    data: bytes


def held_few(memo: dict[str, list[int]], strings: Sequence[str], key_filter: KeyFilter,
             keys: np.ndarray, order: CheckedArray,
             probes: Callable[[Sequence[str]], Sequence[Probe | None]],
             read: Callable[[int], bytes]) -> dict[int, list[int]]:
    """A table's ``held(strings)`` (at most :data:`FEW`): {i: slots of ``strings[i]``,
    ascending} for the strings held. ``memo`` answers the strings it remembers; each other
    one is probed once (``probes``: its key and bytes, None when the table cannot hold
    it), dropped when its key's bit in ``key_filter`` is clear (exact: not in ``keys``),
    else its key's run ``lo .. hi - 1`` in ``keys`` (sorted, verified) is found by
    ``bisect`` and its slots ``order[lo:hi]`` kept where ``read(slot)`` (verified bytes)
    equals its bytes; the memo learns every string whose key run was searched (held or
    not), as :func:`~tiervault.vault.string_memo.held_through`; a string the filter or
    ``probes`` ruled out is not remembered (deciding it again costs one bit)."""
    out: dict[int, list[int]] = {}
    fresh: list[int] = []
    for i, s in enumerate(strings):
        k = memo.get(s)
        if k is None:
            fresh.append(i)
        elif k:
            out[i] = k
    if not fresh:
        return out
    if len(memo) > MEMO_MAX:
        memo.clear()
    # uint64 as Python ints, no copy for the tables' own (native, contiguous) keys
    sorted_keys = memoryview(np.ascontiguousarray(keys, dtype=np.uint64)).cast("B").cast("Q")
    n = len(sorted_keys)
    for i, probe in zip(fresh, probes([strings[i] for i in fresh])):
        if probe is None or not key_filter.has(probe.key):
            continue
        lo = hi = bisect_left(sorted_keys, probe.key)
        while hi < n and sorted_keys[hi] == probe.key:
            hi += 1
        slots = sorted(c for c in order.get(lo, hi).tolist() if read(c) == probe.data) if hi > lo else []
        memo[strings[i]] = slots
        if slots:
            out[i] = slots
    return out
