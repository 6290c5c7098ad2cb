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
gathering few rows beats masking every score. With a base mask the plan also holds the
base positions it leaves out (``excluded``, the scan's scores set to ``-inf`` there) and
how many base rows pass (``base_count``): a plan kept with its filter view
(:func:`~tiervault.embeddings.recall.allowed_rows`) costs a query none of those passes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tiervault.embeddings.vector_delta import Tombstones

__all__ = ["RowPlan", "plan_rows"]


class RowPlan(NamedTuple):
    """The rows a scan reads (see the module docstring); ``count`` is how many pass
    (None: no filter, every live row); ``version``: the index (its serial number and
    version) it was made for."""

    count: int | None
    gather: np.ndarray | None
    base_rows: np.ndarray | None
    base_mask: np.ndarray | None
    delta_rows: np.ndarray | None
    excluded: np.ndarray | None = None
    base_count: int | None = None
    version: tuple[int, int] = (-1, -1)


def plan_rows(allowed: np.ndarray | None, dead: Tombstones, *, n_base: int, row_count: int, live: int,
              gather_fraction: float, gather_limit: float,
              version: tuple[int, int] = (-1, -1)) -> RowPlan:
    """The :class:`RowPlan` of ``allowed`` (None: every live row) over an index of
    ``n_base`` base rows, ``row_count`` rows in all and ``live`` live rows, at ``version``."""
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
        return RowPlan(count, rows, None, None, None, version=version)
    if rows is not None:
        cut = int(np.searchsorted(rows, n_base))
        return RowPlan(count, None, rows[:cut], None, rows[cut:] - n_base, version=version)
    if mask is None:
        return RowPlan(count, None, None, None, None, version=version)
    base, delta_rows = mask[:n_base], np.flatnonzero(mask[n_base:])
    assert count is not None
    return RowPlan(count, None, None, base, delta_rows, np.flatnonzero(~base),
                   count - delta_rows.size, version)
