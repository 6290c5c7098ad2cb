"""Which rows may hold a pair of query stems, read from a tier's search mirror.

Term proximity (``brain/proximity.py``) counts the query's word pairs ``(a, b)`` whose
words stand within a few positions inside one FTS5 field of an entry, each word split
and stemmed exactly as the mirror indexes it (:mod:`mirror_analysis`: the same five
columns id, title, description, context, tags, split by
:func:`~tiervault.vault.tokenizer.split_words`, stemmed by the same ``STEMMER``; stop
words kept). So a row whose slot holds neither stem of one pair in any column has no
such pair, and one that lacks one stem of every pair has a proximity of exactly 0: its
texts need not be read. The mirror's base postings are CSC columns, a column per
stem, its slots sorted: a stem's presence at a slot is one binary search.

Only what the mirror proves is used: a row the mirror does not hold in its base (a
delta slot: written after the build; an id it does not hold at all) may hold a pair,
and so does every row when a block of the cache file fails its check (the mirror is
then rebuilt at its next catch-up). A stem the mirror's vocabulary lacks is in none
of its base rows (a term seen only in the delta has no base column).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tiervault.vault.checked_array import CacheDamaged

__all__ = ["may_hold_pairs"]


def may_hold_pairs(p: Any, ids: Sequence[str], pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """For each id of ``ids``, False when mirror ``p`` (a
    :class:`~tiervault.vault.postings.Postings`, caught up by the caller) proves its row
    holds, for every pair of ``pairs``, at most one of the pair's two stems; True
    otherwise (the row may hold a pair: read it). No pairs: every answer False."""
    n = len(ids)
    if not pairs or not n:
        return [False] * n
    base = p.base_rows
    at = [-1 if s is None or s >= base else s for s in p.slots_of(ids)]
    if max(at) < 0:
        return [True] * n
    slots = np.array(at, dtype=np.int32)  # the columns' dtype: searchsorted casts neither
    try:
        held = {stem: _held(col, slots) for stem, col in _columns(p, pairs).items()}
    except CacheDamaged as exc:
        p.mark_damaged(exc)
        return [True] * n
    may = slots < 0
    for a, b in pairs:
        may |= held[a] & held[b]
    return may.tolist()


def _held(col: np.ndarray | None, slots: np.ndarray) -> np.ndarray:
    """``slots[i] in col`` for each i (``col``: a stem's sorted base slots; None: none)."""
    if col is None:
        return np.zeros(slots.size, dtype=bool)
    if col.dtype != slots.dtype:
        slots = slots.astype(col.dtype)
    # a slot past the last posting: its position clipped to the last (not it: False)
    return col.take(col.searchsorted(slots), mode="clip") == slots


def _columns(p: Any, pairs: Sequence[tuple[str, str]]) -> dict[str, np.ndarray | None]:
    """Each stem of ``pairs`` -> its sorted base slots in ``p`` (None: no base row holds it).
    The query's BM25 read them (``p.read_terms()``: the same column slices, verified) unless
    a stem was not its term: those of every stem then (the vocabulary and W looked up)."""
    stems = list(dict.fromkeys(st for pair in pairs for st in pair))
    tids, read = p.read_terms()
    if tids is not None and all(map(tids.__contains__, stems)):
        cols: dict[str, np.ndarray | None] = {}
        for stem in stems:
            tid = tids[stem]
            col = None if tid is None else read.get(tid)  # a delta-only term: no base column
            cols[stem] = col if col is not None and col.size else None
        return cols
    W = p.W
    cols = {}
    for stem, tid in zip(stems, p.vocab.ids(stems)):
        col = None
        if tid is not None and tid < W.n_cols:  # a term of the delta only: no base column
            col = W.indices.get(int(W.indptr[tid]), int(W.indptr[tid + 1]))
        cols[stem] = col if col is not None and col.size else None
    return cols
