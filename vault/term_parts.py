"""One query's BM25 in one tier kept as its terms' parts (:class:`TermParts`): the
score at any slots and the top k without summing every slot a common word holds.

A query with a common word (``the``, ``of``: in most rows of a tier; FTS5's idf of a
term in half the rows or more is floored at 1e-6) scored every slot holding it: a
``bincount`` over ~45K postings, a pass over the sums and a top k over them, ~0.15 ms
a tier at 100K for a word whose part of any score is at most ``idf * (k1 + 1)``
(issue 16, session 20). Here the terms are split: the *common* ones (postings in at
least 1/:data:`SPARSE_SHARE` of the slots) and the others. The others' sums are
made at their own postings; their ``head``-th largest, ``v``, is above every score
of a slot holding only common words (their bound, checked) when the top k is
decided here, so the slots scoring ``>= v`` -- a prefix of the order (score
descending, slot ascending) holding ``head`` slots or more -- are among those whose
other terms' sum reaches ``v`` less the common words' bound. Those are scored
exactly (every term in the query's order, the sum :func:`term_matches.summed`
makes), the filters read at them, and the top k taken from the prefix as
:func:`scoring.top_k_from_head` takes it: the same hits in the same order, the same
float64 scores bit for bit, or None (a tie at the cut, too few passing, a common
word's bound not below ``v``: the caller computes every slot's score then).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable, NamedTuple, Sequence

import numpy as np

from tiervault.vault.scoring import K1, first_passing
from tiervault.vault.term_matches import SPARSE_SHARE, scored_sparse, summed

__all__ = ["SlotScores", "TermParts", "splits", "sums_at"]

#: Slack on the common words' bound and on the sums compared with it: float32 parts
#: round up by at most ~6e-8 each, float64 sums by ~1e-16 an addition (issue 16,
#: session 20): a margin far above both, far below any score difference that matters
#: (it only widens the set scored exactly).
_SLACK = 1e-6

#: :meth:`TermParts.at` of at most this many (slot, term) pairs (a graph neighbour's
#: few ids) in Python: ~6 NumPy calls a term cost ~50 us a call in a scan (session 20)
_FEW_PAIRS = 32
#: :meth:`SlotScores.at` of at most this many slots in Python (~6 NumPy calls: ~13 us in a scan)
_FEW_AT = 8

#: A term in many slots counts as common when its idf is at most this (FTS5 floors the
#: idf of a term in half the rows or more at 1e-6): its part of any score is then
#: below ``_COMMON_IDF * (k1 + 1)``, so few slots lie within that of the head's cut.
_COMMON_IDF = 0.05


class TermParts:
    """A query's BM25 parts in one tier: per term, its live slots (sorted) and its
    BM25 there (float32, :meth:`TermMatches.terms_bm25`), with its idf; ``n`` slots.
    Read only; kept for the query by the lexicon."""

    __slots__ = ("slots", "parts", "idf", "n")

    def __init__(self, slots: list[np.ndarray], parts: list[np.ndarray], idf: list[float], n: int) -> None:
        self.slots, self.parts, self.idf, self.n = slots, parts, idf, n

    def at(self, at: np.ndarray) -> np.ndarray:
        """The query's BM25 at the distinct slots ``at`` (any order; 0.0 where no term
        occurs): each term's part added in the query's order from 0.0, as the dense
        sum adds them, so the same float64 bits."""
        return sums_at(self.slots, self.parts, at, _FEW_PAIRS)

    def top_k(self, k: int, head: int,
              passes: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
        """(the top ``k``'s slots, their BM25), best first -- ``top_k(scores, k,
        mask & (scores > 0))`` over every slot, ``passes(slots)`` the mask at sorted
        slots -- from the other terms' best ``head`` or so sums; None when these do
        not decide it (the caller then scores every slot)."""
        common = _common(self.slots, self.idf, self.n)
        if not any(common) or all(common) or k <= 0 or head <= k:
            return None
        rare = [t for t, c in enumerate(common) if not c]
        where, parts = [self.slots[t] for t in rare], [self.parts[t] for t in rare]
        if sum(map(len, where)) * SPARSE_SHARE < self.n:
            slots, sums = scored_sparse(where, parts)
        else:
            dense = summed(where, parts, self.n)
            slots = np.flatnonzero(dense > 0)
            sums = dense[slots]
        if sums.size < head:
            return None  # the prefix would reach slots holding common words only
        v = float(np.partition(sums, sums.size - head)[sums.size - head])
        bound = sum(self.idf[t] for t, c in enumerate(common) if c) * (K1 + 1.0) * (1.0 + _SLACK)
        if not v > bound * (1.0 + _SLACK):
            return None  # a slot holding common words only may reach v
        # every slot scoring >= v: its other terms' sum is >= v - bound (within slack)
        near = slots[sums >= (v - bound) - _SLACK * (v + bound)]
        scores = self.at(near)
        prefix = scores >= v
        idx, values = near[prefix], scores[prefix]
        pick = first_passing(idx, values, passes(idx), k)
        return None if pick is None else (idx[pick], values[pick])



class SlotScores(NamedTuple):
    """BM25 of one query in one tier at the slots holding a query term: ``slots``
    sorted and distinct, ``scores`` aligned (every other slot scores 0)."""

    slots: np.ndarray
    scores: np.ndarray

    def at(self, slots: np.ndarray) -> np.ndarray:
        """The score of each of ``slots`` (0.0 where no query term occurs): one column
        of :func:`sums_at` (a score is > 0, and 0.0 + x is x: the same bits)."""
        return sums_at((self.slots,), (self.scores,), slots, _FEW_AT)


def sums_at(columns: Sequence[np.ndarray], values: Sequence[np.ndarray], at: np.ndarray,
            few: int) -> np.ndarray:
    """``out[j] = sum over c of values[c][i]`` where ``columns[c][i] == at[j]`` (each
    column sorted and distinct, ``values`` aligned), added in the columns' order from
    0.0 (float64): :meth:`TermParts.at` (a column a term) and :meth:`SlotScores.at`
    (one column). At most ``few`` (slot, column) pairs: a binary search a pair in
    Python (a graph neighbour's few ids: ~6 NumPy calls a column cost ~13-50 us in a
    scan, session 20); else a ``searchsorted`` a column. The same float64 additions in
    the same order either way: the same bits."""
    if at.size * len(columns) <= few:
        return _few_sums(columns, values, at.tolist())
    out = np.zeros(at.size, dtype=np.float64)
    for slots, part in zip(columns, values):
        if not slots.size:
            continue
        x = at.astype(slots.dtype, copy=False)  # a mixed-type search copies both
        pos = np.searchsorted(slots, x)
        pos[pos == slots.size] = 0
        found = slots[pos] == x
        out[found] += part[pos[found]]  # float32 -> float64, then one addition
    return out


def _few_sums(columns: Sequence[np.ndarray], values: Sequence[np.ndarray], at: list[int]) -> np.ndarray:
    """:func:`sums_at` of a few slots in Python floats."""
    out = [0.0] * len(at)
    for slots, part in zip(columns, values):
        n = slots.size
        if not n:
            continue
        view = memoryview(np.ascontiguousarray(slots))
        for j, slot in enumerate(at):
            i = bisect_left(view, slot)
            if i < n and view[i] == slot:
                out[j] += float(part[i])
    return np.array(out, dtype=np.float64)


def _common(slots: list[np.ndarray], idf: list[float], n: int) -> list[bool]:
    """Per term: common (in 1/:data:`SPARSE_SHARE` of the ``n`` slots or more, idf at
    most :data:`_COMMON_IDF`)."""
    return [s.size * SPARSE_SHARE >= n and i <= _COMMON_IDF for s, i in zip(slots, idf)]


def splits(slots: list[np.ndarray], idf: list[float], n: int) -> bool:
    """Whether :meth:`TermParts.top_k` may decide a query whose terms' live slots are
    ``slots`` (under ``idf``) in a tier of ``n`` slots: some of its terms are common,
    not all (else the caller scores every slot at once, without the parts)."""
    common = _common(slots, idf, n)
    return any(common) and not all(common)
