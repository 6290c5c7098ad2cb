"""A query's postings in one tier (:class:`TermMatches`) and BM25 over them.

For each query term, the live slots holding it and their column-weighted term
frequencies ``wtf``. A slot's BM25 is FTS5's ``bm25()`` (:func:`scoring.bm25_term`)::

    score(slot) = sum over terms t holding it of
                  idf_t * wtf * (k1 + 1) / (wtf + k1 * (1 - b + b * doclen / avglen))

with the statistics given (the federated ones in a search). It is computed either
densely over every slot (:meth:`TermMatches.bm25`) or at the slots holding a query
term only (:meth:`TermMatches.union`, :meth:`TermMatches.bm25_at`): the same terms
added in the same order, so the same numbers bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tiervault.vault.lazy_sparse import sp
from tiervault.vault.scoring import bm25_norm, bm25_of_norm, bm25_term
from tiervault.vault.sparse_columns import Columns

__all__ = ["TermMatches", "TermScores", "SPARSE_SHARE", "scored_sparse", "summed", "term_postings"]

#: A term's weights at its live slots, or a function reading them when first needed
Weights = np.ndarray | Callable[[], np.ndarray]

#: A query whose matching slots are fewer than 1/SPARSE_SHARE of the tier's is scored
#: and masked at those slots only; above, by dense passes over every slot (cheaper
#: than a binary search per posting). Measured on the bench corpus at 100K and 1M
#: (issue 16: half the queries match under 7% of a tier, a tenth over 90%).
SPARSE_SHARE = 8

#: A tier of at most this many slots sums a query's BM25 densely (:meth:`TermMatches.bm25_at`)
#: whatever the share: with the terms added by one ``np.bincount`` the dense sum beat the
#: binary search per posting at every union share on the bench tiers of 20.7K / 30.1K /
#: 49.2K rows (300 queries, issue 16 session 10: team tier, unions of 1/64-1/8 of the
#: slots 22-65 us sparse, 10-19 us dense; under 1/64 8.1 vs 7.3). Above it (the 1M
#: bench's 207K-492K-row tiers) the sparse path as measured in round 4 stays.
DENSE_SLOTS = 1 << 16

#: A tier of at most this many slots keeps every slot's BM25 length norm for the last
#: average length (:meth:`TermScores.norms`): a term whose BM25 is not kept gathers its
#: slots' norms (one pass) instead of computing them (five; issue 16, session 20)
NORM_SLOTS = 1 << 17


class TermScores:
    """Terms' BM25 at their postings by (stem, idf, avglen), at most ``limit`` postings
    in all (past it, dropped whole): one tier's, valid while its postings are unchanged
    (the owner replaces it when the mirror changes). The arrays are read only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: dict[tuple[str, float, float], np.ndarray] = {}
        self.size = 0
        self._norms: tuple[float, np.ndarray | None, np.ndarray | None] = (float("nan"), None, None)

    def norms(self, doclen: np.ndarray, avglen: float) -> np.ndarray | None:
        """:func:`scoring.bm25_norm` of every slot's length ``doclen`` under ``avglen`` (the
        last ones kept), for a tier of at most :data:`NORM_SLOTS` slots; None above (a new
        average length, after each write, would cost a pass over every slot)."""
        if len(doclen) > NORM_SLOTS:
            return None
        kept = self._norms
        if kept[0] != avglen or kept[1] is not doclen:  # the lengths held: their id is not reused
            kept = self._norms = (avglen, doclen, bm25_norm(doclen, avglen))  # replaced whole
        return kept[2]

    def get(self, key: tuple[str, float, float]) -> np.ndarray | None:
        return self.held.get(key)

    def put(self, key: tuple[str, float, float], scores: np.ndarray) -> None:
        if scores.size > self.limit:
            return
        if self.size + scores.size > self.limit:
            self.held, self.size = {}, 0  # replaced, not cleared: a reader keeps its dict
        scores.flags.writeable = False
        self.held[key] = scores
        self.size += scores.size


@dataclass(slots=True)
class TermMatches:
    """Per query term: the live slots holding it and their weights (read when first
    needed: a term whose BM25 is kept needs none, :meth:`terms_bm25`)."""

    stems: list[str]
    slots: list[np.ndarray]
    wtf: list[Weights]

    @property
    def df(self) -> np.ndarray:
        return np.array([s.size for s in self.slots], dtype=np.float64)

    def terms_bm25(self, doclen: np.ndarray, idf: np.ndarray, avglen: float,
                   memo: TermScores | None = None) -> list[np.ndarray]:
        """Each term's BM25 at its slots (``bm25_term``, float32, aligned with
        ``slots``). ``memo`` keeps them by (stem, idf, avglen) across queries: the same
        postings under the same statistics give the same numbers, and a common word's
        are the costly ones (a pass per operation over its postings); the caller
        keeps ``memo`` for one state of the mirror (its postings unchanged)."""
        out = []
        norms = None
        for t, (stem, slots, wtf, term_idf) in enumerate(zip(self.stems, self.slots, self.wtf,
                                                             idf.tolist())):
            key = (stem, term_idf, avglen)
            got = memo.get(key) if memo is not None else None
            if got is None:
                if callable(wtf):
                    wtf = self.wtf[t] = wtf()
                if norms is None and memo is not None:
                    norms = memo.norms(doclen, avglen)
                # the slots' norms read from the tier's (kept): 4 passes fewer a term
                got = bm25_term(wtf, doclen[slots], avglen, term_idf) if norms is None else \
                    bm25_of_norm(wtf, norms[slots], term_idf)
                if memo is not None and slots.size:
                    memo.put(key, got)
            out.append(got)
        return out

    def bm25(self, doclen: np.ndarray, idf: np.ndarray, avglen: float,
             memo: TermScores | None = None) -> np.ndarray:
        """Dense BM25 score per slot of a tier whose slots' lengths are ``doclen``
        (0 where no query term occurs); ``memo``: :meth:`terms_bm25`'s."""
        return summed(self.slots, self.terms_bm25(doclen, idf, avglen, memo), len(doclen))

    def union(self, n_slots: int) -> np.ndarray:
        """Sorted distinct slots holding any of the query's terms (the only slots
        :meth:`bm25` scores above 0) in a tier of ``n_slots``: a merge of the postings
        when they are few, else a mark over every slot (the same answer either way)."""
        parts = [s for s in self.slots if s.size]
        if not parts:
            return np.zeros(0, dtype=np.int32)
        total = sum(s.size for s in parts)
        if total * SPARSE_SHARE < n_slots:
            # each column is sorted already: a stable sort (timsort) merges the runs in
            # near-linear time (np.unique hashes first: ~1 ms a call at 1M)
            x = np.sort(np.concatenate(parts).astype(np.int32, copy=False), kind="stable")
            return x[np.concatenate(([True], x[1:] != x[:-1]))] if x.size > 1 else x
        marked = np.zeros(n_slots, dtype=bool)
        for s in parts:
            marked[s] = True
        return np.flatnonzero(marked).astype(np.int32)  # int32: kept for the query

    def scored(self, doclen: np.ndarray, idf: np.ndarray, avglen: float,
               memo: TermScores | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(the slots scoring > 0, sorted; their BM25) from one dense sum (:meth:`bm25`)
        in a tier of at most :data:`DENSE_SLOTS` slots, where the sum is dense whatever
        the union's size (:meth:`bm25_at`); None in a larger tier. The slots are the
        :meth:`union`'s less any slot scoring 0: a top k never picks one (it keeps
        scores > 0) and a score look-up answers 0.0 for it either way; reading them off
        the sum skips the union's marks or merge (issue 16 session 11: ~28 -> ~12 us a
        tier call, the bench's mean). Postings under 1/:data:`SPARSE_SHARE` of the
        slots are summed at their own slots (:func:`scored_sparse`): the same answer
        without the dense array."""
        if len(doclen) > DENSE_SLOTS:
            return None
        if sum(map(len, self.slots)) * SPARSE_SHARE < len(doclen):  # 1-D: len = size
            return scored_sparse(self.slots, self.terms_bm25(doclen, idf, avglen, memo))
        dense = self.bm25(doclen, idf, avglen, memo)
        slots = np.flatnonzero(dense > 0)
        return slots, dense[slots]

    def bm25_at(self, doclen: np.ndarray, idf: np.ndarray, avglen: float,
                at: np.ndarray, memo: TermScores | None = None) -> np.ndarray:
        """:meth:`bm25` at the slots ``at`` only (sorted, distinct, holding every match:
        :meth:`union`), aligned with them. The same terms are added in the same order, so
        the numbers are :meth:`bm25`'s bit for bit; a query at 1M rows no longer writes
        and scans a dense array of every slot per tier (issue 16)."""
        if at.size * SPARSE_SHARE >= len(doclen) or len(doclen) <= DENSE_SLOTS:
            # many matches, or a small tier: one dense pass costs less than a binary
            # search per posting
            return self.bm25(doclen, idf, avglen, memo)[at]
        parts = self.terms_bm25(doclen, idf, avglen, memo)
        where = [np.searchsorted(at, s.astype(at.dtype, copy=False)) for s in self.slots]
        return summed(where, parts, at.size)


def summed(where: list[np.ndarray], parts: list[np.ndarray], n: int) -> np.ndarray:
    """``out[where[t]] += parts[t]`` for each term t in order over ``out = zeros(n)``
    (float64; each ``where[t]`` distinct). One ``np.bincount`` over the terms' postings
    in term order: it adds its weights one by one in input order into zeros, so each
    slot's sum runs term by term as the loop's does (bit for bit, tested), in one C
    loop instead of a gather, an add and a scatter a term."""
    keep = [t for t in range(len(where)) if where[t].size]
    if not keep:
        return np.zeros(n, dtype=np.float64)
    if len(keep) == 1:
        return np.bincount(where[keep[0]], weights=parts[keep[0]], minlength=n)
    # joined straight into the types bincount reads (intp, float64): no second copy
    # inside it (issue 16 session 13: ~-10% a dense sum over many postings)
    return np.bincount(np.concatenate([where[t] for t in keep], dtype=np.intp),
                       weights=np.concatenate([parts[t] for t in keep], dtype=np.float64),
                       minlength=n)


def scored_sparse(where: list[np.ndarray], parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the slots scoring > 0, sorted, int64; their sums) of ``summed(where, parts, n)``
    without its dense array of every slot, for postings under 1/SPARSE_SHARE of a
    tier's slots (issue 16 session 13: most queries' postings are ~2K of a 20-49K-slot
    tier; the dense sum zeroes, compares and scans every slot). The slots are the
    postings' distinct ones (one stable sort); each slot's sum is one ``np.bincount``
    over the postings in term order at the slot's rank among them, so it runs term by
    term from 0.0 as the dense sum's does: the same numbers bit for bit."""
    keep = [t for t in range(len(where)) if where[t].size]
    if not keep:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    if len(keep) == 1:  # one term's slots are distinct already
        slots, sums = where[keep[0]].astype(np.int64), parts[keep[0]].astype(np.float64)
    else:
        x = np.concatenate([where[t] for t in keep])
        order = np.argsort(x, kind="stable")
        xs = x[order]
        first = np.empty(xs.size, dtype=bool)  # each distinct slot's first posting
        first[0] = True
        np.not_equal(xs[1:], xs[:-1], out=first[1:])
        rank = np.empty(xs.size, dtype=np.intp)
        rank[order] = np.cumsum(first) - 1
        slots = xs[first].astype(np.int64)
        sums = np.bincount(rank, weights=np.concatenate([parts[t] for t in keep]),
                           minlength=slots.size)
    ok = sums > 0
    return (slots, sums) if ok.all() else (slots[ok], sums[ok])


def term_postings(tid: int, base: Columns, delta: sp.csc_matrix | None, base_rows: int,
                  alive: np.ndarray | None) -> tuple[np.ndarray, Weights, np.ndarray | None]:
    """(term ``tid``'s live slots, base then delta; their weights, as a function reading
    them; the base column's slots as read). ``alive``: None when every slot is alive.
    The weights are read only for a term whose BM25 is not kept (issue 16, session 12:
    about half a query's terms; a ``pread`` each), the slots always (document
    frequency, union)."""
    parts: list[np.ndarray] = []
    lo = hi = d_lo = d_hi = 0
    base_slots = None
    if tid < base.n_cols:
        lo, hi = int(base.indptr[tid]), int(base.indptr[tid + 1])
        base_slots = base.indices.get(lo, hi)
        parts.append(base_slots)
    in_delta = delta is not None and tid < delta.shape[1]
    if in_delta:
        d_lo, d_hi = delta.indptr[tid], delta.indptr[tid + 1]
        parts.append(delta.indices[d_lo:d_hi] + base_rows)
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), None
    slots = np.concatenate(parts) if len(parts) > 1 else parts[0]
    live = None if alive is None else alive[slots]
    if live is not None and live.all():
        live = None

    def weights() -> np.ndarray:
        vals = [base.data.get(lo, hi)] if base_slots is not None else []
        if in_delta:
            vals.append(delta.data[d_lo:d_hi])
        v = np.concatenate(vals) if len(vals) > 1 else vals[0]
        return v if live is None else v[live]
    return (slots if live is None else slots[live]), weights, base_slots
