"""The maps between a tier's search-mirror slots and its vector index's rows.

A tier's filter view (``TierBackend.filter_mask``: an
:class:`~tiervault.vault.rows.IdMask`) says which mirror slots pass a query's
filters; the vector index scores rows. :class:`SlotMap` keeps, per tier:

* ``slot_rows[s]``: the index row of the id at slot ``s`` (-1: no vector), made by
  one join of the two id tables (``VectorIndex.rows_of``) and kept while the view's
  positions and the index are unchanged (the key ``(view.version, index.version,
  len(index))``);
* the row masks (and the index's :class:`~tiervault.embeddings.row_plan.RowPlan`)
  of the last few filter views (:func:`allowed_rows`, :func:`kept_plan`);
* ``row_slots[r]``: a slot holding the id of row ``r`` (-1: none), the inverse of
  ``slot_rows``, made at the first use after the key changes (:func:`ids_by_slot`).

Both directions spare fingerprinting ids: the candidates' cosines find their rows
through the slots the lexical leg just read (:func:`rows_by_slot`), and the vector
hits' ids are read by slot from the mirror's id column, which then remembers them
(``StringColumn.take_distinct``), so the pool's look-ups of the same ids in that
tier (their lexical evidence, ``VaultManager.lexical_scores``) are dict hits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.row_plan import RowPlan
from tiervault.vault.rows import IdMask
from tiervault.vault.string_table import StringColumn

__all__ = ["SlotMap", "allowed_rows", "kept_plan", "rows_by_slot", "ids_by_slot", "RECENT_VIEWS",
           "SPARSE_SHARE"]

# Filter views whose row masks a tier keeps (allowed_rows): the unfiltered view stays
# among them between a few filtered queries.
RECENT_VIEWS = 4
# A filter view passing at most one slot in this many is turned into row numbers (the
# passing slots' rows), not into a row mask (a gather over every row).
SPARSE_SHARE = 4


@dataclass
class SlotMap:
    """One tier's slot <-> row maps (module docstring), cached until their key moves."""

    slot_rows: np.ndarray | None = None  # index row of each mirror slot (-1: none)
    key: tuple | None = None  # (view.version, index.version, len(index)) of slot_rows
    has_row: np.ndarray | None = None  # slot_rows >= 0, cached with it
    slot_ids: Any = None  # the view's id column slot_rows was made of
    # The last few filter views' masks, the row masks (or rows) made of them (read-only
    # for searches), the index's RowPlan of each (made at its first scan) and the count of
    # positions each passes, most recent first.
    recent: list[list[Any]] = field(default_factory=list)
    row_slots: np.ndarray | None = None  # a slot of each index row (-1: none), of slot_rows
    row_slots_key: tuple | None = None
    gather: "_RowGather | None" = None  # slot_rows inverted for allowed_rows, made with it


@dataclass(frozen=True)
class _RowGather:
    """``slot_rows`` inverted for :func:`allowed_rows`: a row held by one slot reads that
    slot's mask bit (a gather over the rows, not a scatter of the passing slots); the
    few rows held by several slots (an updated entry's old and new positions, until the
    mirror is rebuilt) pass when any of their slots does."""

    slot: np.ndarray  # the one slot of each row (0 where not single: masked by ``single``)
    single: np.ndarray  # bool per row: exactly one slot maps to it
    multi_slots: np.ndarray  # the slots of the rows held by several
    multi_rows: np.ndarray  # their rows, aligned

    @classmethod
    def of(cls, slot_rows: np.ndarray, has_row: np.ndarray, row_count: int) -> "_RowGather":
        mapped = np.flatnonzero(has_row)
        rows = slot_rows[mapped]
        count = np.bincount(rows, minlength=row_count)
        one = count[rows] == 1
        slot = np.zeros(row_count, dtype=np.intp)
        slot[rows[one]] = mapped[one]
        return cls(slot, count == 1, mapped[~one], rows[~one])

    def rows(self, mask: np.ndarray) -> np.ndarray:
        """Bool per row: some slot of the row is set in ``mask``."""
        out = mask[self.slot]
        out &= self.single
        if self.multi_slots.size:
            out[self.multi_rows[mask[self.multi_slots]]] = True
        return out


def allowed_rows(view: IdMask, index: VectorIndex, slots: SlotMap | None = None) -> np.ndarray | None:
    """The pre-filter for ``index``: a boolean row mask, or sorted distinct row numbers
    when at most one slot in ``SPARSE_SHARE`` passes, or None when every row passes.

    The tier's filter view says which entry positions pass; the position -> row map
    turns it into rows. That map is cached in ``slots`` until the view's positions or
    the index change, so a query costs a few vector operations, not id look-ups; so
    are the answers of the last ``RECENT_VIEWS`` views (a query whose filters pass
    the same positions as one of them -- the usual unfiltered one, whose default
    filters drop the expired entries -- costs a comparison of the masks, not a pass
    over every row; only views passing as many positions are compared). A view passing
    few positions maps just those to rows (a filter such as one tag or one type and
    domain: no pass over every row, and the scan then reads those rows only). The
    returned array is shared: read it, never write it.
    """
    key = (view.version, index.version, len(index))
    mask = view.mask
    if slots is not None and slots.key == key:
        recent = slots.recent
        for pos, seen in enumerate(recent):
            # the lexicon keeps a view's mask across queries, read-only: the very array
            if seen[0] is mask:
                recent.insert(0, recent.pop(pos))
                return seen[1]
        count = int(np.count_nonzero(mask))
        for pos, seen in enumerate(recent):  # a filter view seen lately: the same rows
            if seen[3] == count and np.array_equal(mask, seen[0]):
                recent.insert(0, recent.pop(pos))
                return seen[1]
        gather, slot_rows = slots.gather, slots.slot_rows
    else:
        slot_rows = index.rows_of(view.ids)
        gather = _RowGather.of(slot_rows, slot_rows >= 0, index.row_count)
        count = int(np.count_nonzero(mask))
        if slots is not None:
            slots.slot_rows, slots.has_row, slots.key = slot_rows, slot_rows >= 0, key
            slots.slot_ids, slots.gather = view.ids, gather
            slots.recent.clear()
    assert gather is not None and slot_rows is not None
    allowed: np.ndarray | None
    if count * SPARSE_SHARE <= mask.size:
        # the rows of the passing slots, sorted and once each (an id held by several
        # slots): a scatter to a row mask, not a sort (np.unique of 12,000 rows: ~1 ms)
        rows = slot_rows[np.flatnonzero(mask[:slot_rows.size])]
        hit = np.zeros(index.row_count, dtype=bool)
        hit[rows[rows >= 0]] = True
        allowed = np.flatnonzero(hit)
        passing = allowed.size
    else:
        allowed = gather.rows(mask)
        passing = int(np.count_nonzero(allowed))
    if passing == len(index):
        allowed = None  # every vector passes (len(index): the live rows)
    if slots is not None:
        # a read-only mask owning its data is kept as it is (its identity answers the
        # next query); any other is copied, as its owner may change it
        kept = mask if mask.flags.owndata and not mask.flags.writeable else mask.copy()
        slots.recent.insert(0, [kept, allowed, None, count])
        del slots.recent[RECENT_VIEWS:]
    return allowed


def kept_plan(slots: SlotMap, index: VectorIndex, allowed: np.ndarray | None) -> RowPlan | None:
    """The index's :meth:`~VectorIndex.plan` of ``allowed``, kept with the filter view
    :func:`allowed_rows` just answered it from (the first of the recent views), so a
    query of a view seen lately makes no pass over its masks."""
    recent = slots.recent
    if not recent or recent[0][1] is not allowed:
        return None
    plan = recent[0][2]
    if plan is None or plan.version != index.plan_version:
        plan = recent[0][2] = index.plan(allowed)
    return plan


def _current(slots: SlotMap, index: VectorIndex) -> bool:
    """Whether ``slots`` holds a slot -> row map made for ``index`` as it is now (its
    version and size), of a mirror id column."""
    key = slots.key
    return (slots.slot_rows is not None and key is not None and key[1:] == (index.version, len(index))
            and isinstance(slots.slot_ids, StringColumn))


def rows_by_slot(slots: SlotMap, index: VectorIndex, ids: Sequence[str]) -> np.ndarray | None:
    """The index row of each id (-1: no vector) through the last filter view's slot -> row
    map, or None when there is none for this index (its version moved since).

    The ids a search's candidates are scored for are the search mirror's, whose id column
    remembers the slots it just read (``StringTable.remember``): a slot look-up is a dict
    hit where the index's own table would fingerprint each id (~40% of the cosines of a
    hybrid query's lexical candidates). The map was made by id, so any slot of an id
    gives its row; a column only grows (an id it does not hold yet: the index's table)."""
    if not _current(slots, index):
        return None
    column, slot_rows = slots.slot_ids, slots.slot_rows
    assert slot_rows is not None
    rows = np.full(len(ids), -1, dtype=np.int64)
    missing: list[int] = []
    for i, found in enumerate(column.slots_many(list(ids))):
        if found and found[0] < slot_rows.size:
            rows[i] = slot_rows[found[0]]
        else:
            missing.append(i)
    if missing:
        rows[missing] = index.rows_of([ids[i] for i in missing])
    return rows


def ids_by_slot(slots: SlotMap, index: VectorIndex, rows: np.ndarray) -> list[str]:
    """The ids of index ``rows``, read by slot from the mirror's id column where the
    slot -> row map is current (the column remembers them, ``take_distinct``), else
    from the index's own table. The same strings either way: ``slot_rows`` was made by
    id, so a slot mapped to row ``r`` holds row ``r``'s id."""
    if not rows.size or not _current(slots, index):
        return index.ids_at(rows).tolist()
    if slots.row_slots_key != slots.key:
        slot_rows = slots.slot_rows
        assert slot_rows is not None and slots.has_row is not None
        mapped = np.flatnonzero(slots.has_row)
        inverse = np.full(index.row_count, -1, dtype=np.int32 if slot_rows.size < 2**31 else np.int64)
        inverse[slot_rows[mapped]] = mapped  # an id at several slots: any of them holds it
        slots.row_slots, slots.row_slots_key = inverse, slots.key
    inverse = slots.row_slots
    assert inverse is not None
    at = inverse[rows] if int(rows.max()) < inverse.size else np.full(rows.size, -1)
    if (at < 0).any():
        return index.ids_at(rows).tolist()
    return slots.slot_ids.take_distinct(at.astype(np.int64))
