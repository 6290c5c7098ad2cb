"""The federated dedup's index: the entry ids and content hashes held by more than one tier.

:func:`~tiervault.vault.dedup.holders` asks each tier about the other tiers' top-k ids
and hashes (a copy of the same entry, or of the same content, in another tier). On the
bench pools ~96% of the pooled hits have an id and a hash that only their own tier
holds, yet each tier was asked (3 contract calls a query, ~0.2 ms of ~0.5 for the
dedup: issue 16, session 12). A tier T can hold a copy of another tier's pooled id
``x`` only if ``x`` is held by T and by that other tier; so T needs to be asked only
about the pooled ids and hashes in ``held_elsewhere(T)`` = the strings T holds that
another indexed tier holds too. This module keeps those sets; with them a search
usually asks no tier at all.

Exactness. A superset is still exact (a string in it is asked, as before; a string
not in it is held by one tier only), so every slot a mirror ever had counts, dead
ones too (a delete or an update leaves its slot: the set only grows within a
build). Each tier's keys come through the contract
(:meth:`~tiervault.vault.backend.TierBackend.key_columns`: its mirror's id and
hash columns, the mirror's build number and slot count), read once a search:

* slots appended within a build (a write of this or another process, caught up):
  only the new slots' strings are looked up in the other tiers' columns
  (``StringColumn.held``, exact) and added;
* a new build of a tier (a rebuilt or reloaded mirror: slots renumbered) whose slots
  are few (:data:`REINDEX_SLOTS`, :data:`LOOKUP_COST`): every one
  of its strings is looked up in the other tiers' columns, as if appended. Its own
  sets start empty; the other tiers' sets keep what they held (a superset). A small
  tier's mirror is rebuilt on every write (``SMALL_TIER_ROWS``): an agent tier of a
  few hundred entries beside a 1M team tier must not cost every column again per write;
* a new build of a larger tier, a tier added or removed: the sets are computed again
  from every column (below);
* a tier without key columns (a remote tier): its hits' ids and hashes are asked of
  every other tier, and it is asked about everything, as before.

One index is kept per tier set searched (``tiers=``; up to :data:`KEEP_SETS`, least
recently used dropped): each is exact for its own tiers.

A search uses the sets only if every indexed tier's build is the one the index had
*before* the search's top k (:meth:`SharedKeys.before`): a pooled hit then comes
from a state whose slots the index holds (same build, slots only appended). After
a rebuild between the two (a write of this process on another thread), the search
takes the full look-ups once.

Full computation, per column kind (ids, hashes): each tier's slot keys (64-bit:
an id's fingerprint, :func:`~tiervault.vault.string_table.fingerprints`; a hash's
first 8 bytes, or its fingerprint when it is not a hex digest), distinct per tier;
the keys present in more than one tier (one stable sort of the tiers' sorted runs);
the strings at the slots with such a key (a fingerprint collision only adds a
candidate); their exact intersection across tiers. ~10 ms for 100,000 entries.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from tiervault.vault.checked_array import CacheDamaged
from tiervault.vault.hash_table import HashTable, table_of
from tiervault.vault.rows import KeyColumns
from tiervault.vault.string_table import StringTable, lookup_fingerprints

__all__ = ["SharedKeys", "Shared", "REINDEX_SLOTS", "LOOKUP_COST", "KEEP_SETS"]

#: Rebuilt tiers of at most this many slots in all are indexed again by looking their
#: strings up in the other tiers (~1 ms: a small tier, ``SMALL_TIER_ROWS``, is rebuilt
#: on every write) ...
REINDEX_SLOTS = 1_000
#: ... and so are rebuilt tiers of at most 1/LOOKUP_COST of all tiers' slots: a slot
#: looked up costs ~1.0 us, a slot of the full computation ~0.08 us (the 100,000-entry
#: bench build, 3 tiers of 20,742 / 30,107 / 49,191 slots: full 7.9 ms, a tier looked
#: up 21 / 33 / 48 ms; session 12), so past it every column is read again instead.
LOOKUP_COST = 16



class Shared(dict):
    """Per tier name: (its ids held by another tier too, its hashes held by another tier
    too); ``ids`` / ``hashes``: the union over the tiers (a pooled hit whose id and hash
    are in neither is held by its own tier only); ``slots``, per tier name: the slots of
    its mirror whose id or hash is in its sets (a superset, as the sets are): a top-k
    hit at another slot is held by its own tier only, known before its id and hash are
    read (:func:`~tiervault.vault.dedup.kept_of_tops`)."""

    __slots__ = ("ids", "hashes", "slots")

    def __init__(self, sets: Mapping[str, tuple[frozenset[str], frozenset[str]]],
                 slots: Mapping[str, frozenset[int]] | None = None) -> None:
        super().__init__(sets)
        self.ids: frozenset[str] = frozenset().union(*(i for i, _ in sets.values()))
        self.hashes: frozenset[str] = frozenset().union(*(h for _, h in sets.values()))
        self.slots: dict[str, frozenset[int]] = dict(slots or {})

_HEX = frozenset("0123456789abcdef")


class _Tier(NamedTuple):
    """One tier's part of the index: the columns read, up to ``slots``."""

    build: int
    ids: Any  # the mirror's StringColumn of ids
    hashes: Any  # ... of content hashes
    slots: int


class _State(NamedTuple):
    tiers: Mapping[str, _Tier]
    shared: Shared

    def builds(self) -> dict[str, int]:
        return {name: t.build for name, t in self.tiers.items()}


#: Tier sets indexed at once: a search may name a subset of the tiers (``tiers=``), and
#: an agent alternating two sets must not compute every column again at each switch.
KEEP_SETS = 4

#: :meth:`SharedKeys.before`'s answer: per indexed tier set, its tiers' builds.
Before = Mapping[frozenset, Mapping[str, int]]


class SharedKeys:
    """The index of one manager's tiers, per tier set searched (thread-safe; module
    docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[frozenset, _State] = {}  # per tier set, least recently used first
        self._seen: dict[frozenset, dict[str, int]] = {}  # builds of a set's call without a state

    def before(self) -> Before:
        """The builds the index holds now, per tier set: taken before a search's top k."""
        with self._lock:
            return {key: state.builds() for key, state in self._states.items()}

    def shared(self, columns: Mapping[str, KeyColumns], before: Before | None) -> Shared | None:
        """The index of the tier set of ``columns`` brought to them (each tier's key
        columns now); its sets when usable for a search whose top k ran after
        :meth:`before` answered ``before``, else None (ask every tier about everything,
        once)."""
        builds = {name: c.build for name, c in columns.items()}
        key = frozenset(builds)
        with self._lock:
            state = self._states.pop(key, None)
            try:
                rebuilt = _rebuilt(state, columns)
                if rebuilt:
                    state = _grown(state, columns, rebuilt)  # type: ignore[arg-type]
                elif state is None or state.builds() != builds:
                    if self._seen.pop(key, None) != builds:
                        # computed when the same builds are seen twice: not in a cold
                        # process's first search (~20-120 ms at 100,000 entries), nor
                        # after each rebuild of a large tier while it settles
                        self._seen[key] = builds
                        _bound(self._seen)
                        return None
                    state = _full(columns)
                else:
                    state = _grown(state, columns)
            except CacheDamaged:  # a block of a cache file failed its check: the look-ups
                return None  # read it too and rebuild that mirror; index it then
            self._states[key] = state
            _bound(self._states)
        if before is None or before.get(key) != builds:
            return None
        return state.shared


def _bound(kept: dict) -> None:
    """Drop the least recently used entries past :data:`KEEP_SETS`."""
    while len(kept) > KEEP_SETS:
        del kept[next(iter(kept))]


def _full(columns: Mapping[str, KeyColumns]) -> _State:
    """The sets computed from every column (module docstring)."""
    tiers = {name: _Tier(c.build, c.ids, c.hashes, c.slots) for name, c in columns.items()}
    names = list(tiers)
    ids, id_slots = _held_twice([tiers[n].ids for n in names], [tiers[n].slots for n in names], False)
    hashes, hash_slots = _held_twice([tiers[n].hashes for n in names], [tiers[n].slots for n in names],
                                     True)
    return _State(tiers, Shared({n: (i, h) for n, i, h in zip(names, ids, hashes)},
                                {n: frozenset(np.union1d(a, b).tolist())
                                 for n, a, b in zip(names, id_slots, hash_slots)}))


def _rebuilt(state: _State | None, columns: Mapping[str, KeyColumns]) -> frozenset[str]:
    """The tiers of ``state`` with a new build, when they are few enough to index again by
    look-ups (module docstring); empty when there are none, or when every column must be
    read again (no state, a tier added or removed, a large tier rebuilt)."""
    if state is None or set(state.tiers) != set(columns):
        return frozenset()
    rebuilt = frozenset(n for n, c in columns.items() if c.build != state.tiers[n].build)
    slots = sum(columns[n].slots for n in rebuilt)
    total = sum(c.slots for c in columns.values())
    return rebuilt if slots <= REINDEX_SLOTS or slots * LOOKUP_COST <= total else frozenset()


def _grown(state: _State, columns: Mapping[str, KeyColumns],
           rebuilt: frozenset[str] = frozenset()) -> _State:
    """``state`` with each tier's slots appended since (same builds), and every slot of
    each ``rebuilt`` tier (its own sets found again): those strings looked up in every
    other tier's column, as it is now."""
    start = {n: 0 if n in rebuilt else state.tiers[n].slots for n in columns}
    grown = [n for n, c in columns.items() if c.slots > start[n]]
    if not grown and not rebuilt:
        return state
    shared = {n: (set(), set()) if n in rebuilt else (set(i), set(h))
              for n, (i, h) in state.shared.items()}
    # each tier's shared slots: kept (the same set while nothing is added), but a rebuilt
    # tier's (its slots renumbered)
    kept = state.shared.slots
    slots: dict[str, set[int] | None] = {n: set() if n in rebuilt else None for n in columns}

    def add(tier: str, found: Iterable[int]) -> None:
        mine = slots[tier]
        if mine is None:
            mine = slots[tier] = set(kept.get(tier, ()))
        mine.update(found)

    for name in grown:
        old, now = start[name], columns[name]
        new = np.arange(old, now.slots, dtype=np.int64)
        for kind, column in ((0, now.ids), (1, now.hashes)):
            strings = column.take(new)
            for other, c in columns.items():
                if other == name:
                    continue
                found = (c.ids if kind == 0 else c.hashes).held(strings)
                both = [strings[i] for i in found]
                shared[name][kind].update(both)
                shared[other][kind].update(both)
                if found:  # (a tier's set copied only when it gains slots)
                    add(name, new[list(found)].tolist())
                    for held in found.values():
                        add(other, held)
    tiers = {n: _Tier(c.build, c.ids, c.hashes, c.slots) for n, c in columns.items()}
    return _State(tiers, Shared({n: (frozenset(i), frozenset(h)) for n, (i, h) in shared.items()},
                                {n: kept.get(n, frozenset()) if s is None else frozenset(s)
                                 for n, s in slots.items()}))


_NONE = np.zeros(0, dtype=np.int64)


def _held_twice(columns: Sequence[Any], slots: Sequence[int], digests: bool
                ) -> tuple[list[frozenset[str]], list[np.ndarray]]:
    """For each column (its first ``slots[i]`` slots): the strings another column holds
    too, and the slots holding them (sorted, int64)."""
    keyed = [_keys(c, n, digests) for c, n in zip(columns, slots)]  # (slot keys, slots) each
    if len(keyed) < 2:
        return [frozenset() for _ in keyed], [_NONE for _ in keyed]
    # a table's keys come sorted, the appended slots' after them: a stable sort (a merge of
    # sorted runs) is ~linear where np.unique's sort was not (~4x at 100,000 keys)
    distinct = [_distinct(np.sort(k, kind="stable")) for k, _ in keyed]
    allk = np.sort(np.concatenate(distinct), kind="stable")
    twice = _distinct(allk[1:][allk[1:] == allk[:-1]])
    cands: list[list[str]] = []
    at_of: list[np.ndarray] = []
    for (keys, at), column in zip(keyed, columns):
        hit = _in_sorted(keys, twice)
        at_of.append(at[hit] if hit.any() else _NONE)
        cands.append(column.take(at_of[-1]) if hit.any() else [])
    out, out_slots = [], []
    for i, strings in enumerate(cands):
        others: set[str] = set().union(*(c for j, c in enumerate(cands) if j != i))
        mine = frozenset(strings) & others
        out.append(mine)
        keep = np.fromiter(map(mine.__contains__, strings), dtype=bool, count=len(strings))
        out_slots.append(np.unique(at_of[i][keep]) if keep.any() else _NONE)
    return out, out_slots


def _keys(column: Any, n: int, digests: bool) -> tuple[np.ndarray, np.ndarray]:
    """(keys, slots) of the column's first ``n`` slots, aligned (any order)."""
    base = column.base
    nb = min(len(base), n)
    parts_k, parts_s = [], []
    if nb:
        if nb == len(base) and ((digests and isinstance(base, HashTable))
                                or (not digests and isinstance(base, StringTable))):
            parts_k.append(base.keys.all())  # sorted; the slots in that order
            parts_s.append(np.asarray(base.order.all(), dtype=np.int64))
        else:  # another kind of table: its strings keyed here
            parts_k.append(_string_keys(base.take(np.arange(nb)), digests))
            parts_s.append(np.arange(nb, dtype=np.int64))
    if n > nb:
        parts_k.append(_string_keys(column.take(np.arange(nb, n)), digests))
        parts_s.append(np.arange(nb, n, dtype=np.int64))
    if not parts_k:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    return np.concatenate(parts_k).astype(np.uint64, copy=False), np.concatenate(parts_s)


def _string_keys(strings: list[str], digests: bool) -> np.ndarray:
    """Each string's key, aligned: its fingerprint (an id), or for a content hash its
    first 8 bytes when it is a lowercase 64-character hex digest (a HashTable's key),
    else its fingerprint -- a function of the string alone, whatever table holds it."""
    if not strings:
        return np.zeros(0, dtype=np.uint64)
    if not digests:
        return _fingerprints(strings)
    table = table_of(strings)
    if isinstance(table, HashTable):  # every one a digest
        out = np.empty(len(strings), dtype=np.uint64)
        out[np.asarray(table.order.all(), dtype=np.int64)] = table.keys.all()
        return out
    hexes = [len(s) == 64 and _HEX.issuperset(s) for s in strings]
    fp = _fingerprints(strings)
    return np.fromiter((int(s[:16], 16) if d else int(f) for s, d, f in zip(strings, hexes, fp.tolist())),
                       dtype=np.uint64, count=len(strings))


def _fingerprints(strings: list[str]) -> np.ndarray:
    """:func:`~tiervault.vault.string_table.fingerprints` of ``strings``, aligned (a
    table built for them: many strings, no process-wide memo)."""
    if len(strings) <= 64:
        return lookup_fingerprints(strings)
    table = StringTable.build(strings)
    out = np.empty(len(strings), dtype=np.uint64)
    out[np.asarray(table.order.all(), dtype=np.int64)] = table.keys.all()
    return out


def _distinct(sorted_keys: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array."""
    if sorted_keys.size < 2:
        return sorted_keys
    return sorted_keys[np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1]))]


def _in_sorted(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Bool, aligned with ``keys``: True where the key is in ``sorted_keys``."""
    if not sorted_keys.size:
        return np.zeros(keys.size, dtype=bool)
    return sorted_keys.take(np.searchsorted(sorted_keys, keys), mode="clip") == keys
