"""The look-up memo of an immutable string table (StringTable, HashTable): string -> the
slots holding it. A table never changes, so an answer stays true; queries repeat their
words and a federated search asks each tier about the same ids, so most look-ups of a
held string end in the memo.

:func:`held_through` (issue 16, session 10) serves the dedup's look-ups, ~96% of which
miss: the table decides the misses in bulk first (one binary search of every key), and
only the strings whose key is present go through the memo and the bytes.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["MEMO_MAX", "memo_find", "held_through", "held_remembered"]

MEMO_MAX = 50_000  # remembered look-ups per table (a few MB at most)


def memo_find(memo: dict[str, list[int]], strings: Sequence[str],
              find: Callable[[Sequence[str]], list[list[int]]]) -> list[list[int]]:
    """``find(strings)`` through ``memo`` (string -> its slots): only the strings not
    remembered are looked up; the memo is cleared past ``MEMO_MAX`` strings. The
    lists returned are the memo's own (read only). Shared by StringTable and
    HashTable (vault/hash_table.py)."""
    known = [memo.get(s) for s in strings]
    missing = [s for s, k in zip(strings, known) if k is None]
    if not missing:
        return known  # type: ignore[return-value]
    if len(memo) > MEMO_MAX:
        memo.clear()
    found = dict(zip(missing, find(missing)))
    memo.update(found)
    return [k if k is not None else found[s] for s, k in zip(strings, known)]


def held_through(memo: dict[str, list[int]], strings: Sequence[str], present: np.ndarray,
                 find: Callable[[Sequence[str]], list[list[int]]]) -> dict[int, list[int]]:
    """{i: slots of ``strings[i]``} for the strings held, ``present`` (bool, aligned)
    marking the only ones that may be (their key is in the index: a wider set than
    the held ones, never narrower); those go through ``memo`` as :func:`memo_find`.
    Shared by StringTable and HashTable (vault/hash_table.py)."""
    out: dict[int, list[int]] = {}
    fresh: list[int] = []
    for i in present.nonzero()[0].tolist():
        k = memo.get(strings[i])
        if k is None:
            fresh.append(i)
        elif k:
            out[i] = k
    if fresh:
        if len(memo) > MEMO_MAX:
            memo.clear()
        for i, k in zip(fresh, find([strings[i] for i in fresh])):
            memo[strings[i]] = k
            if k:
                out[i] = k
    return out


def held_remembered(memo: dict[str, list[int]], strings: Sequence[str]) -> dict[int, list[int]] | None:
    """The answer of ``held(strings)`` when ``memo`` remembers every one of ``strings``
    (the table never changes: a remembered answer, held or not, stays true), else None.
    The pool and LSA ask a tier about the ids its top k just read
    (``StringColumn.take_distinct`` remembered them), and this skips their fingerprints,
    the key filter and the binary search (~8 NumPy calls; issue 16, session 11, for a
    handful of strings; session 12, any number: ~90 us for 9-30 ids). The first string
    not remembered ends the look-up (the dedup's strings are mostly new: one dict miss)."""
    known = []
    for s in strings:
        k = memo.get(s)
        if k is None:
            return None
        known.append(k)
    return {i: k for i, k in enumerate(known) if k}
