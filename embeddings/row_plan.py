"""Which rows one scan of a :class:`~tiervault.embeddings.index.VectorIndex` reads.

A search's pre-filter ``allowed`` is a boolean mask over the index's ``row_count``
rows (base rows ``0..n_base-1``, then the delta's) or an array of row numbers; dead
(tombstoned) base rows never pass (:class:`~tiervault.embeddings.vector_delta.Tombstones`).
:func:`plan_rows` turns it into a :class:`RowPlan`:

* ``gather``: at most ``gather_limit`` passing rows -- their exact scores one block at
  a time, no scan at all;
* else the base's scan over ``base_rows`` (sorted row numbers ``< n_base``) or under
  ``base_mask`` (the mask's first ``n_base`` entries), and the delta's ``delta_rows``
  (numbered from 0 in the delta; None: every delta row).

A mask passing at most ``gather_fraction * live`` rows becomes row numbers first:
gathering few rows beats masking every score.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tiervault.embeddings.vector_delta import Tombstones

__all__ = ["RowPlan", "plan_rows"]


class RowPlan(NamedTuple):
    """The rows a scan reads (see the module docstring); ``count`` is how many pass
    (None: no filter, every live row)."""

    count: int | None
    gather: np.ndarray | None
    base_rows: np.ndarray | None
    base_mask: np.ndarray | None
    delta_rows: np.ndarray | None


def plan_rows(allowed: np.ndarray | None, dead: Tombstones, *, n_base: int, row_count: int, live: int,
              gather_fraction: float, gather_limit: float) -> RowPlan:
    """The :class:`RowPlan` of ``allowed`` (None: every live row) over an index of
    ``n_base`` base rows, ``row_count`` rows in all and ``live`` live rows."""
    mask = rows = None
    count: int | None = None
    if allowed is not None and np.asarray(allowed).dtype == bool:
        mask = dead.live_mask(allowed, row_count)  # a mask stays a mask: no rows
        count = int(np.count_nonzero(mask))
        if count <= gather_fraction * live:
            rows, mask = np.flatnonzero(mask), None
    elif allowed is not None:
        rows = dead.live_rows(allowed, row_count)
        count = rows.size
    if rows is not None and rows.size <= gather_limit:
        return RowPlan(count, rows, None, None, None)
    base_rows = delta_rows = None
    if rows is not None:
        cut = int(np.searchsorted(rows, n_base))
        base_rows, delta_rows = rows[:cut], rows[cut:] - n_base
    elif mask is not None:
        delta_rows = np.flatnonzero(mask[n_base:])
    return RowPlan(count, None, base_rows, None if mask is None else mask[:n_base], delta_rows)
