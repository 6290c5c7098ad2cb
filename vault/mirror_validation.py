"""Validation of a search mirror loaded from its cache file (``<tier>.postings.mirror``).

A cache is disposable, but a damaged or hand-edited one must fail here -- with a
ValueError that makes :meth:`Postings.build` rebuild it -- never later inside a
query (an index out of range, a wrong shape). What is read whole on open is
checked here; the large arrays checked block by block on first read (postings'
slots and weights, string tables) are checked in :mod:`checked_array`, and their
lengths and ``indptr`` here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiervault.vault.entry import ENTRY_TYPES, ORIGINS, SEVERITIES

__all__ = ["validate_mirror"]


def validate_mirror(m: Any, n_terms: int, tag_indptr: np.ndarray, tag_slots: np.ndarray,
                    n_tags: int) -> None:
    """Raise ValueError unless the arrays of a loaded mirror are consistent: lengths,
    dtypes, index ranges (a damaged or hand-edited cache must fail here, not in a query)."""
    n = m.base_rows
    if n < 0 or m.gen < 0 or not 0 <= m.tfidf_terms <= n_terms:
        raise ValueError("bad header")
    if len(m.ids) != n or len(m.hashes) != n:
        raise ValueError(f"{len(m.ids)} ids / {len(m.hashes)} hashes for {n} rows")
    kinds = {"rowids": "i", "rowid_order": "i", "alive": "b", "doclen": "f", "type_code": "i",
             "severity_code": "i", "origin_code": "i", "domain_code": "i", "valid_from": "f",
             "valid_until": "f", "updated_at": "f"}
    for name, kind in kinds.items():
        arr = getattr(m, name)
        if arr.ndim != 1 or arr.shape[0] != n or arr.dtype.kind != kind:
            raise ValueError(f"array {name} has shape {arr.shape} / dtype {arr.dtype}, expected ({n},)")
    for name, limit in (("type_code", len(ENTRY_TYPES)), ("severity_code", len(SEVERITIES)),
                        ("origin_code", len(ORIGINS)), ("domain_code", len(m.domains)),
                        ("rowid_order", n)):
        arr = getattr(m, name)
        if arr.size and (arr.min() < 0 or arr.max() >= limit):
            raise ValueError(f"array {name} holds codes outside 0..{limit - 1}")
    if m.W.n_rows != n or m.W.n_cols > n_terms:  # W: a column per term
        raise ValueError(f"postings of shape {m.W.shape} for {n} rows, {n_terms} terms")
    if m.T.n_cols != n or m.T.n_rows > n_terms:  # T: a row per slot
        raise ValueError(f"TF-IDF matrix of shape {m.T.shape} for {n} rows, {n_terms} terms")
    if m.idf.ndim != 1 or m.idf.shape[0] != m.tfidf_terms \
            or m.idf.dtype.kind != "f":
        raise ValueError("TF-IDF model does not match the vocabulary")
    if tag_indptr.ndim != 1 or tag_indptr.shape[0] != n_tags + 1 or tag_indptr.dtype.kind != "i":
        raise ValueError("tag index has the wrong length")
    if tag_indptr.size and (tag_indptr[0] != 0 or tag_indptr[-1] != tag_slots.size
                            or np.any(np.diff(tag_indptr) < 0)):
        raise ValueError("tag index is not monotone")
    if tag_slots.ndim != 1 or (tag_slots.size and (tag_slots.dtype.kind != "i" or tag_slots.min() < 0
                                                   or tag_slots.max() >= n)):
        raise ValueError("tag slots point outside the rows")
