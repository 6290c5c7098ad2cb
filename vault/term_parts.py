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
from typing import Callable

import numpy as np

from tiervault.vault.scoring import K1, first_passing
from tiervault.vault.term_matches import SPARSE_SHARE, scored_sparse, summed

__all__ = ["TermParts", "splits"]

#: Slack on the common words' bound and on the sums compared with it: float32 parts
#: round up by at most ~6e-8 each, float64 sums by ~1e-16 an addition (issue 16,
#: session 20): a margin far above both, far below any score difference that matters
#: (it only widens the set scored exactly).
_SLACK = 1e-6

#: :meth:`TermParts.at` of at most this many (slot, term) pairs (a graph neighbour's
#: few ids) in Python: ~6 NumPy calls a term cost ~50 us a call in a scan (session 20)
_FEW_PAIRS = 32

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
        if at.size * len(self.slots) <= _FEW_PAIRS:
            return self._few_at(at.tolist())
        out = np.zeros(at.size, dtype=np.float64)
        for slots, part in zip(self.slots, self.parts):
            if not slots.size:
                continue
            x = at.astype(slots.dtype, copy=False)  # a mixed-type search copies both
            pos = np.searchsorted(slots, x)
            pos[pos == slots.size] = 0
            found = slots[pos] == x
            out[found] += part[pos[found]]  # float32 -> float64, then one addition
        return out

    def _few_at(self, at: list[int]) -> np.ndarray:
        """:meth:`at` of a few slots in Python floats: each term's part found by a binary
        search of its slots and added from 0.0 in the query's order (the same float64
        additions as the NumPy path, so the same bits)."""
        out = [0.0] * len(at)
        for slots, part in zip(self.slots, self.parts):
            n = slots.size
            if not n:
                continue
            view = memoryview(np.ascontiguousarray(slots))
            for j, slot in enumerate(at):
                i = bisect_left(view, slot)
                if i < n and view[i] == slot:
                    out[j] += float(part[i])
        return np.array(out, dtype=np.float64)

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
