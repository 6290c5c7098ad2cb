"""Which entry id owns which row of a :class:`~tiervault.embeddings.index.VectorIndex`.

:class:`RowIds` keeps the ids of the index's immutable base in a
:class:`~tiervault.vault.string_table.StringTable` (one UTF-8 blob, offsets and a
sorted 64-bit fingerprint index: ~38 MB of NumPy arrays at 1,000,000 ids of ~20
bytes, where a list of ``str``, an object array and a ``dict`` id -> row took
~150 MB of Python objects), and the ids of the small delta in a ``dict`` id ->
delta row. An id's current row (``row_of``):

* its delta row ``n_base + j`` when it is in the delta (an upsert of a base id
  tombstones the base row, so the delta copy is the live one);
* else its base row when that row is not tombstoned;
* else none.

Bulk look-ups (:meth:`RowIds.rows_of`, e.g. every id of a tier's search mirror
when the pre-filter's slot -> row map is rebuilt) are joins of two string tables
(:func:`slots_in`): fingerprints matched with one ``searchsorted``, then the
candidates' bytes compared with NumPy, so no Python object per id is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tiervault.embeddings.vector_delta import Tombstones
from tiervault.errors import ValidationError
from tiervault.vault.string_table import StringColumn, StringTable

__all__ = ["RowIds", "slots_in", "table_of_lines"]

# Pairs of strings compared at once by _same_strings: ~16K x ~20 bytes bounds its temporaries.
_PAIRS_PER_CHUNK = 16_384
# Up to this many ids, look-ups go through the table's own find (a remembered answer, a
# Python fingerprint each); above, a table of the wanted ids is built and joined.
_FIND_MAX = 32


class RowIds:
    """id -> row of one index (module docstring). Not thread-safe: the owning index
    holds its lock around every call that changes it."""

    def __init__(self, base: StringTable, dead: Tombstones) -> None:
        self.base = base
        self.dead = dead  # the index's tombstones over the base rows
        self._delta: dict[str, int] = {}  # id -> delta row (row n_base + j)
        # The delta's ids as a table and their rows, for joins; rebuilt after a change.
        self._delta_table: tuple[StringTable, np.ndarray] | None = None

    @classmethod
    def of(cls, ids: StringTable | Sequence[str] | np.ndarray, dead: Tombstones) -> RowIds:
        """The ids of a new base: a table as it is, else the strings' table. Refuses
        duplicates (one vector per (entry, model))."""
        table = ids if isinstance(ids, StringTable) else StringTable.build(
            [str(i) for i in (ids.tolist() if isinstance(ids, np.ndarray) else ids)])
        _refuse_duplicates(table)
        return cls(table, dead)

    @property
    def n_base(self) -> int:
        return len(self.base)

    # -- the delta's ids (the index moves rows, this map follows) --------------------------
    def delta_row(self, entry_id: str) -> int | None:
        """The delta row of ``entry_id`` (None: not in the delta)."""
        return self._delta.get(entry_id)

    def set_delta(self, entry_id: str, j: int) -> None:
        self._delta[entry_id] = j
        self._delta_table = None

    def drop_delta(self, entry_id: str) -> int | None:
        """Forget ``entry_id``'s delta row; returns it (None: it had none)."""
        j = self._delta.pop(entry_id, None)
        if j is not None:
            self._delta_table = None
        return j

    def row_of(self, entry_id: str) -> int | None:
        """The current row of ``entry_id`` (None: no live vector)."""
        row = int(self.rows_of([entry_id])[0])
        return row if row >= 0 else None

    def base_rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """The live base row of each id, -1 where none (the delta not consulted)."""
        if len(ids) > _FIND_MAX:
            return self._live(slots_in(self.base, StringTable.build(list(ids))))
        found = self.base.find(list(ids))
        return self._live(np.fromiter((f[0] if f else -1 for f in found), dtype=np.int64, count=len(ids)))

    def rows_of(self, ids: Iterable[str]) -> np.ndarray:
        """int64 row of each id, aligned with ``ids``; -1 where it has none. A
        mirror's :class:`StringColumn` is joined table to table (no string made)."""
        if isinstance(ids, StringColumn) and isinstance(ids.base, StringTable):
            head = self._table_rows(ids.base)
            tail = self.rows_of(ids.extra) if ids.extra else np.empty(0, dtype=np.int64)
            return np.concatenate([head, tail]) if tail.size else head
        ids = [str(i) for i in ids]
        if len(ids) > _FIND_MAX:
            return self._table_rows(StringTable.build(ids))
        out = self.base_rows_of(ids)
        if self._delta:
            get = self._delta.get
            for pos, entry_id in enumerate(ids):
                j = get(entry_id)
                if j is not None:
                    out[pos] = self.n_base + j
        return out

    def base_ids(self, rows: np.ndarray) -> np.ndarray:
        """The ids of base ``rows`` (an object array of ``str``)."""
        out = np.empty(len(rows), dtype=object)
        out[:] = self.base.take(np.asarray(rows, dtype=np.int64))
        return out

    def _live(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (base rows or -1) with the tombstoned ones set to -1, in place."""
        mask = self.dead.mask
        if mask is not None and rows.size:
            hit = np.flatnonzero(rows >= 0)
            rows[hit[mask[rows[hit]]]] = -1
        return rows

    def _table_rows(self, wanted: StringTable) -> np.ndarray:
        rows = self._live(slots_in(self.base, wanted))
        if self._delta:
            if self._delta_table is None:  # up to ~5 % of the base: built once per change
                self._delta_table = (StringTable.build(list(self._delta)),
                                     np.fromiter(self._delta.values(), dtype=np.int64, count=len(self._delta)))
            table, delta_rows = self._delta_table
            in_delta = slots_in(table, wanted)
            hit = np.flatnonzero(in_delta >= 0)
            rows[hit] = self.n_base + delta_rows[in_delta[hit]]
        return rows


def slots_in(table: StringTable, wanted: StringTable) -> np.ndarray:
    """For each string of ``wanted`` (in its slot order), the (lowest) slot of ``table``
    holding it, else -1 (int64). Fingerprints joined with ``searchsorted``, then the
    candidates' bytes compared, so a fingerprint collision never matches."""
    n = len(wanted)
    out = np.full(n, -1, dtype=np.int64)
    if not n or not len(table):
        return out
    # Searched in fingerprint order (``wanted.keys`` is sorted), then put in slot order:
    # sorted needles walk ``keys`` forward, ~13x faster at 500,000 ids than needles in
    # slot order, each a binary search of cache misses (issue 16, session 22).
    keys, at = table.keys.all(), wanted.order.all()
    lo, hi = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    lo[at] = np.searchsorted(keys, wanted.keys.all(), side="left")
    hi[at] = np.searchsorted(keys, wanted.keys.all(), side="right")
    order = table.order.all()
    pos = np.flatnonzero(hi - lo == 1)  # the usual case: one string of table has it
    cand = order[lo[pos]].astype(np.int64)
    same = _same_strings(table, cand, wanted, pos)
    out[pos[same]] = cand[same]
    for p in np.flatnonzero(hi - lo > 1).tolist():  # several share the fingerprint: each checked
        text = wanted[p]
        hits = [c for c in order[lo[p]:hi[p]].tolist() if table[c] == text]
        out[p] = min(hits) if hits else -1
    return out


def _same_strings(a: StringTable, ia: np.ndarray, b: StringTable, ib: np.ndarray) -> np.ndarray:
    """``a[ia[k]] == b[ib[k]]`` for each k, comparing bytes in chunks (bool array)."""
    ao, bo = a.offsets.all(), b.offsets.all()  # int32 where they fit: only the gathered widened
    a0, b0 = ao[ia].astype(np.int64), bo[ib].astype(np.int64)
    lens = ao[ia + 1] - a0
    same = lens == bo[ib + 1] - b0
    ablob, bblob = a.blob.all(), b.blob.all()
    todo = np.flatnonzero(same & (lens > 0))
    for s in range(0, todo.size, _PAIRS_PER_CHUNK):
        part = todo[s:s + _PAIRS_PER_CHUNK]
        ln = lens[part]
        owner = np.repeat(np.arange(part.size), ln)
        within = np.arange(owner.size) - np.repeat(np.cumsum(ln) - ln, ln)
        differ = ablob[a0[part][owner] + within] != bblob[b0[part][owner] + within]
        same[part[np.unique(owner[differ])]] = False
    return same


def table_of_lines(data: bytes, index: tuple[np.ndarray, np.ndarray] | None = None) -> StringTable:
    """The table of the ``\\n``-separated strings of ``data`` (empty: no string),
    split with NumPy: no Python string per line. ``index``: its (keys, order) as saved
    (``StringTable.with_index``), else computed."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if not raw.size:
        return StringTable.build([])
    ends = np.flatnonzero(raw == 10)
    n = ends.size + 1
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = ends - np.arange(ends.size)  # each separator removed before a string's end
    offsets[n] = raw.size - ends.size
    blob = raw[raw != 10] if ends.size else raw.copy()
    return StringTable.from_blob(blob, offsets) if index is None else StringTable.with_index(blob, offsets, *index)


def _refuse_duplicates(table: StringTable) -> None:
    """ValidationError when a string is in ``table`` twice (equal strings share a
    fingerprint, so only runs of equal keys are compared)."""
    keys = table.keys.all()
    starts = np.flatnonzero(np.diff(keys) == 0)
    if not starts.size:
        return
    order = table.order.all()
    for p in starts.tolist():
        run = order[p:int(np.searchsorted(keys, keys[p], side="right"))].tolist()
        texts = [table[c] for c in run]
        if len(set(texts)) < len(texts):
            twice = next(t for t in texts if texts.count(t) > 1)
            raise ValidationError("ids", f"contains duplicates ({twice!r} twice); one vector per (entry, model)")
