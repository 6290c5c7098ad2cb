"""The instants at which a search mirror's validity filter can change its answer.

A filter judges validity at an instant ``now`` (``Filters.moment``): a slot is
expired when ``valid_until <= now`` and not yet valid when ``valid_from > now``
(``filter_compile.mirror_mask``). Let ``E`` be the sorted distinct non-NaN values of
both columns (the *edges*). Both tests flip only where ``now`` reaches an edge, so
two instants ``t1 < t2`` give every slot the same validity exactly when no edge
``e`` has ``t1 < e <= t2``, i.e. when

    bucket(t) = #{e in E : e <= t}        (``searchsorted(E, t, side="right")``)

is the same for both. A dense filter mask can then be kept across queries (each
query names a new ``now``) under the key ``(mirror version, bucket, the filters
without now)``: the validity mask changes only when an edge passes (on the clock
or by a write, which moves the mirror's version anyway).

Kept per mirror build and grown by the slots appended since, read from the
columns' tails; a mirror loaded from its cache starts from the base's edges saved with it
(:func:`edges_of` at the save: the sort of 2 x 1,000,000 values was ~0.06 s of a 1M cold
first query; issue 16, session 22) (a mirror only appends slots, ``Postings._append_rows``: a slot's values
never change; a dead slot's edges stay: a superset of the edges splits the instants
more finely and is still exact). No column is held, so a replaced one is freed. A NaN ``now`` has no bucket (its
comparisons are all false): :meth:`ValidityEdges.bucket` answers None, and the
caller computes the mask.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["ValidityEdges", "edges_of"]


def edges_of(until: np.ndarray, since: np.ndarray) -> np.ndarray:
    """``E`` of the slots of two aligned validity columns: the sorted distinct non-NaN
    values of both (float64)."""
    both = np.concatenate([until, since]).astype(np.float64)
    return np.unique(both[~np.isnan(both)])


class ValidityEdges:
    """The sorted distinct validity edges of one mirror (module docstring)."""

    def __init__(self) -> None:
        self._build: tuple[int, int] | None = None  # (id(mirror), mirror.build_id)
        self._covered = 0  # slots whose edges are in ``_edges``
        self._edges = np.zeros(0, dtype=np.float64)
        self._lock = threading.Lock()

    def bucket(self, p: Any, now: float) -> int | None:
        """How many of the mirror ``p``'s edges are ``<= now`` (None for a NaN ``now``)."""
        if now != now:
            return None
        with self._lock:
            edges = self._edges_of(p)
        return int(np.searchsorted(edges, now, side="right"))

    def window(self, p: Any, now: float) -> tuple[float, float] | None:
        """The instants ``[lo, hi)`` around ``now`` sharing its bucket (the edges on
        either side of it; -inf / +inf past the ends), so a later instant inside them
        needs no search; None for a NaN ``now``."""
        if now != now:
            return None
        with self._lock:
            edges = self._edges_of(p)
        b = int(np.searchsorted(edges, now, side="right"))
        return (float(edges[b - 1]) if b else float("-inf"),
                float(edges[b]) if b < edges.size else float("inf"))

    def _edges_of(self, p: Any) -> np.ndarray:
        until, since = p.valid_until, p.valid_from
        build = (id(p), p.build_id)
        n = min(until.size, since.size)
        if build != self._build or n < self._covered:
            saved = getattr(p, "validity_edges", None)  # the base's, from the cache file
            covered = p.base_rows if saved is not None and p.base_rows <= n else 0
            self._build, self._covered = build, covered
            self._edges = saved if covered else np.zeros(0, dtype=np.float64)
        if n > self._covered:
            new = edges_of(until[self._covered:n], since[self._covered:n])
            if self._edges.size and new.size:
                # two sorted runs: a stable sort merges them in linear time
                merged = np.concatenate([self._edges, new])
                merged.sort(kind="stable")
                keep = np.ones(merged.size, dtype=bool)
                keep[1:] = merged[1:] != merged[:-1]
                new = merged[keep]
            elif self._edges.size:
                new = self._edges
            self._edges = new
            self._edges.flags.writeable = False
            self._covered = n
        return self._edges
