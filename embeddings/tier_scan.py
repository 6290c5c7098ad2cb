"""One index's search stopped before its exact rescoring, and the rescoring of several at once.

A compressed base (int8 / float16) is scanned approximately: scores ``a_i`` with proven
error bounds ``eps_i >= |a_i - s_i|`` (:mod:`.vector_base`). :class:`TierScan` holds
those, the rows already scored exactly (``s_i = <x_i, q>`` in float32) and the exact
candidates that need no rescoring (the delta's top k, a gathered few rows, a float32
base's top k). Two ways to finish:

* :meth:`TierScan.complete`, one index alone (:meth:`VectorIndex.search`): the
  ``max(pool, k)`` best approximate rows are rescored, their k-th exact score ``s_k``
  found, then every row with ``a_i + eps_i >= s_k`` rescored too: the exact top k.
* :func:`rescore_federated`, the tiers of one federated search ranked by
  ``w_t * s_i`` (:mod:`.recall`): the k best rows by ``w_t * a_i`` over **all** tiers
  are rescored, ``S`` = the k-th largest ``w_t * s_i`` among every exact score known
  (k distinct rows reach it, so the k-th best row of all tiers does too), then in each
  tier the rows with ``a_i + eps_i >= S / w_t``. Every row whose weighted score reaches
  the global k-th is then exact, and a tier's answer is the top k of its exact rows.
  The rows scored are ~k plus a few over all tiers, not ~k plus a few per tier: with
  tier weights 1.0 / 0.8 / 0.6 the lower tiers rarely reach ``S`` at all.

The top k of the weighted union is then the per-tier answer's federated top k provided
no id of it is also held by a higher-priority tier (that tier's copy would shadow it
only if it were in that tier's own top k, which the federated rescoring does not
compute); :mod:`.recall` checks those few ids and otherwise completes every tier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tiervault.embeddings.vector_math import top_k

__all__ = ["TierScan", "Bound", "rescore_federated"]

# Below ``kth - cap`` no row can reach the k-th score; the slack keeps the float32 compare
# a superset of the per-row test (both sides carry the bound's rounding allowance too).
_SLACK = 1e-6
# S / w_t is rounded once more than w_t * s_i >= S: a margin far above that rounding.
_WEIGHT_MARGIN = 1e-9


class Bound(NamedTuple):
    """Error bounds of a compressed scan: ``cap >= eps_i`` for every row, ``at(pos)`` the
    bounds of the rows at ``pos`` (positions into the scores)."""

    cap: float
    at: Callable[[np.ndarray], np.ndarray | float]

    @classmethod
    def flat(cls, eps: float) -> Bound:
        return cls(eps, lambda at: eps)


_NO_ROWS = np.empty(0, dtype=np.int64)
_NO_SCORES = np.empty(0, dtype=np.float32)


class TierScan:
    """The state of one index's search between its scan and its answer.

    ``approx`` (float32, a new array owned here) holds the approximate score of each
    position of the base (``pos_rows[p]`` is its row, or ``p`` itself when None);
    excluded rows and rows already rescored are ``-inf``. ``base_k`` = min(k, allowed
    base rows); ``left`` = allowed base rows not rescored yet. ``exact_of(rows)`` gives
    the float32 exact scores of base rows. ``tail`` is the exact candidates scored
    without rescoring, ranked after the base's (ties keep base rows first).
    """

    def __init__(self, k: int, *, approx: np.ndarray | None = None, bound: Bound | None = None,
                 pos_rows: np.ndarray | None = None, base_k: int = 0, allowed: int = 0,
                 exact_of: Callable[[np.ndarray], np.ndarray] | None = None, pool: int = 1,
                 base_rows: np.ndarray = _NO_ROWS, base_scores: np.ndarray = _NO_SCORES) -> None:
        self.k = k
        self.approx, self.bound, self.pos_rows = approx, bound, pos_rows
        self.base_k, self.left, self.pool = base_k, allowed, pool
        self._exact_of = exact_of
        self._rows: list[np.ndarray] = [base_rows]
        self._scores: list[np.ndarray] = [base_scores]
        self.tail_rows, self.tail_scores = _NO_ROWS, _NO_SCORES
        # The positions of the last top_approx and the least approximate score among them
        # (every other position's is at most that): rescore_reaching's bound.
        self._picks: np.ndarray = _NO_ROWS
        self._floor = np.inf
        self.full_passes = 0  # rescore_reaching's compares over every position (tests, bench)

    @property
    def compressed(self) -> bool:
        """Whether rows remain to be rescored (an approximate base with allowed rows)."""
        return self.approx is not None and self.base_k > 0

    def add_tail(self, rows: np.ndarray, scores: np.ndarray) -> None:
        self.tail_rows = np.concatenate([self.tail_rows, rows])
        self.tail_scores = np.concatenate([self.tail_scores, scores])

    def exact_scores(self) -> np.ndarray:
        """Every exact score known so far (base rescored rows, then the tail)."""
        return np.concatenate([*self._scores, self.tail_scores])

    def top_approx(self, m: int) -> np.ndarray:
        """Positions of the ``m`` best approximate scores not rescored yet (best first)."""
        assert self.approx is not None
        pos = top_k(self.approx, min(m, self.left))
        self._picks = pos
        self._floor = float(self.approx[pos[-1]]) if pos.size else -np.inf
        return pos

    def rescore(self, pos: np.ndarray) -> None:
        """Score the rows at positions ``pos`` exactly; they leave the approximate scores."""
        if not pos.size:
            return
        assert self.approx is not None and self._exact_of is not None
        rows = pos if self.pos_rows is None else self.pos_rows[pos]
        self._rows.append(rows)
        self._scores.append(self._exact_of(rows))
        self.approx[pos] = -np.inf
        self.left -= pos.size

    def rescore_reaching(self, threshold: float) -> None:
        """Rescore every row not rescored yet with ``a_i + eps_i >= threshold``: first
        the rows within the largest bound of it (one compare over the scores), then
        each of those few against its own bound. When the least score of the last
        :meth:`top_approx` is below that first cut, no other position reaches it (each
        has at most that score): only those positions are compared, not every one."""
        assert self.approx is not None and self.bound is not None
        approx, bound = self.approx, self.bound
        cut = np.float32(threshold - bound.cap - _SLACK)
        if self._floor < cut:  # the same positions, ascending, as the compare over all
            picks = self._picks
            reach = np.sort(picks[approx[picks] >= cut])
        else:
            reach = np.flatnonzero(approx >= cut)
            self.full_passes += 1
        if reach.size:
            reach = reach[approx[reach] + bound.at(reach) >= threshold]
        self.rescore(reach)

    def complete(self) -> None:
        """Rescore until the base's exact top ``base_k`` is known (one index alone):
        the ``max(pool, k)`` best approximate rows, then every row that can reach
        their k-th exact score."""
        if not self.compressed:
            return
        self.rescore(self.top_approx(max(self.pool, self.base_k)))
        base = np.concatenate(self._scores)
        self.rescore_reaching(float(base[top_k(base, self.base_k)[-1]]))

    def best(self) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` of the exact rows: (rows, float32 scores), best first (ties:
        base rows in the order they were rescored, then the tail)."""
        rows = np.concatenate([*self._rows, self.tail_rows])
        scores = np.concatenate([*self._scores, self.tail_scores])
        pick = top_k(scores, self.k)
        return rows[pick], scores[pick]


def rescore_federated(scans: list[tuple[float, TierScan]], k: int) -> bool:
    """Rescore the tiers' scans for the federated top ``k`` by ``w_t * s_i`` (module
    docstring); ``scans`` are ``(w_t, scan)``. False (nothing decided: finish each scan
    with :meth:`TierScan.complete`) when there is no scan, fewer than ``k`` rows are
    allowed in all, or a weight is not positive."""
    if k <= 0 or not scans or any(w <= 0 for w, _ in scans):
        return False
    picks: list[tuple[int, np.ndarray]] = []
    weighted: list[np.ndarray] = []
    for t, (w, scan) in enumerate(scans):
        if scan.compressed:
            pos = scan.top_approx(k)
            picks.append((t, pos))
            weighted.append(scan.approx[pos].astype(np.float64) * w)  # type: ignore[index]
    if weighted:
        flat = np.concatenate(weighted)
        chosen = np.zeros(flat.size, dtype=bool)
        chosen[top_k(flat, k)] = True
        start = 0
        for t, pos in picks:  # in each tier, the chosen positions in approximate order
            scans[t][1].rescore(pos[chosen[start:start + pos.size]])
            start += pos.size
    known = np.concatenate([scan.exact_scores().astype(np.float64) * w for w, scan in scans])
    if known.size < k:
        return False
    s_k = float(known[top_k(known, k)[-1]])
    for w, scan in scans:
        if scan.compressed and scan.left:
            scan.rescore_reaching(s_k / w - _WEIGHT_MARGIN)
    return True
