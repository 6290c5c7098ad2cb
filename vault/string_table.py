"""Strings of a search mirror kept in NumPy arrays, not as millions of Python objects.

A :class:`StringTable` holds ``n`` strings as one UTF-8 blob plus ``n + 1``
offsets, and an index to find them: each string's 64-bit fingerprint, sorted
(``keys``), and the slots in that order (``order``). A look-up hashes the wanted
strings, binary-searches ``keys`` and compares the candidates' bytes (so a
fingerprint collision costs a comparison, never a wrong slot). At 1,000,000 ids
this is ~30 MB of arrays, memory-mapped from the cache file, where a list of
``str`` and a ``dict`` to slots took ~250 MB of heap and 0.3 s to build on load.

Fingerprint (:func:`fingerprints`): ``h = sum_j (b_j + 1) * P^j mod 2^64`` over
the string's bytes ``b_j``, xor its length times a constant, then the splitmix64
finaliser -- computed for all strings at once with NumPy (no Python loop per
string), and stable across processes (unlike ``hash()``).

:class:`StringColumn` (entry ids, content hashes) and
:class:`~tiervault.vault.vocabulary.Vocabulary` (the mirror's terms) add the
strings appended after the table was written (the delta segment of a mirror) in
plain Python containers.
"""

from __future__ import annotations

from operator import gt
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import numpy as np

from tiervault.vault.checked_array import CheckedArray
from tiervault.vault.few_keys import FEW, Probe, candidate_slots, held_few
from tiervault.vault.key_filter import KeyFilter, present
from tiervault.vault.string_memo import MEMO_MAX, held_through, memo_find

if TYPE_CHECKING:
    from tiervault.vault.hash_table import HashTable

__all__ = ["StringTable", "StringColumn", "fingerprints", "lookup_fingerprints"]

_P = np.uint64(0x100000001B3)
_LEN_MIX = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_CHUNK_BYTES = 1 << 20
# Fingerprints of a look-up in plain Python up to this many characters in all, else
# NumPy: Python costs ~1 us + ~0.13 us a byte per string, NumPy ~20 us a call. Measured
# on bench ids (18 characters): 8 strings 19.8 / 21.4 us, 30 strings 72 / 25 us (the
# earlier rule, 32 strings whatever their length, paid the Python price for the 30-60
# ids a federated dedup asks a tier about: issue 16).
_PY_CHARS = 128
#: Fingerprints of strings looked up lately, shared by every table of the process: a
#: federated search asks two other tiers about each top-k id (the dedup), then its own
#: tier (LSA, the pool); the fingerprint is the same in every table (issue 16, session 9).
_FP_MEMO: dict[str, int] = {}


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(30))
    h = h * _M1
    h = h ^ (h >> np.uint64(27))
    h = h * _M2
    return h ^ (h >> np.uint64(31))


_MASK = (1 << 64) - 1
_PY_POWERS: list[int] = [1]


def _py_mix(h: int) -> int:
    h ^= h >> 30
    h = (h * int(_M1)) & _MASK
    h ^= h >> 27
    h = (h * int(_M2)) & _MASK
    return h ^ (h >> 31)


def _py_fingerprint(data: bytes) -> int:
    """:func:`fingerprints` of one string in plain Python (a few look-ups per query:
    cheaper than a dozen NumPy calls on tiny arrays; the same numbers, tested)."""
    while len(_PY_POWERS) < len(data):
        _PY_POWERS.append((_PY_POWERS[-1] * int(_P)) & _MASK)
    h = sum(map(int.__mul__, map((1).__add__, data), _PY_POWERS)) & _MASK
    return _py_mix(h ^ ((len(data) * int(_LEN_MIX)) & _MASK))


def _powers(n: int) -> np.ndarray:
    """``P^j mod 2^64`` for j < n (kept: a look-up's strings are short)."""
    global _POWERS
    if _POWERS.size < n:
        p = np.ones(max(n, 2 * _POWERS.size), dtype=np.uint64)
        p[1:] = np.cumprod(np.full(p.size - 1, _P, dtype=np.uint64))
        _POWERS = p
    return _POWERS[:n]


_POWERS = np.ones(64, dtype=np.uint64)
_POWERS[1:] = np.cumprod(np.full(63, _P, dtype=np.uint64))
_SMALL = 1 << 16  # strings x longest length up to this: one padded matrix (512 KB at most)


def fingerprints(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """64-bit fingerprint of each string ``blob[offsets[i]:offsets[i + 1]]`` (formula above)."""
    n = offsets.size - 1
    out = np.empty(max(n, 0), dtype=np.uint64)
    if n <= 0:
        return out
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    longest = int(lengths.max())
    if n * longest <= _SMALL and blob.size:
        # A look-up's few strings (issue 16, session 10): one (n, longest) matrix of
        # b_j + 1, zero past each string's end, times P^j summed by row: ~15 NumPy
        # calls, not ~30 (44 -> 15 us for 40 ids); the sums wrap mod 2^64 as above.
        cols = np.arange(longest)
        vals = np.asarray(blob).take(offsets[:-1, None] + cols, mode="clip").astype(np.uint64)
        vals += np.uint64(1)
        vals *= cols < lengths[:, None]
        return _mix((vals * _powers(longest)).sum(axis=1, dtype=np.uint64)
                    ^ (lengths.astype(np.uint64) * _LEN_MIX))
    powers = np.ones(max(longest, 1), dtype=np.uint64)
    if longest > 1:
        powers[1:] = np.cumprod(np.full(longest - 1, _P, dtype=np.uint64))
    a = 0
    while a < n:  # chunks of ~1 MB of bytes bound the temporaries
        b = int(np.searchsorted(offsets, offsets[a] + _CHUNK_BYTES, side="right")) - 1
        b = min(max(b, a + 1), n)
        base = int(offsets[a])
        seg = np.asarray(blob[base:int(offsets[b])], dtype=np.uint64) + np.uint64(1)
        lens = lengths[a:b]
        starts = offsets[a:b] - base
        pos = np.arange(seg.size, dtype=np.int64) - np.repeat(starts, lens)
        sums = np.zeros(b - a, dtype=np.uint64)
        full = lens > 0
        if seg.size:
            sums[full] = np.add.reduceat(seg * powers[pos], starts[full])
        out[a:b] = _mix(sums ^ (lens.astype(np.uint64) * _LEN_MIX))
        a = b
    return out


def lookup_fingerprints(strings: Sequence[str]) -> np.ndarray:
    """:func:`fingerprints` of ``strings`` (uint64, aligned), through the process-wide
    memo: the strings not remembered are hashed (up to 8 of them, ``_PY_CHARS``
    characters in all: those in plain Python; else all of them with NumPy, whose cost
    hardly depends on the count); the memo is cleared past ``MEMO_MAX`` strings."""
    memo = _FP_MEMO
    known = list(map(memo.get, strings))
    if None in known:
        if len(memo) > MEMO_MAX:
            memo.clear()
        missing = [s for s, k in zip(strings, known) if k is None] if known.count(None) <= 8 else ()
        if missing and sum(map(len, missing)) <= _PY_CHARS:
            fresh = [_py_fingerprint(s.encode()) for s in missing]
            memo.update(zip(missing, fresh))
            it = iter(fresh)
            known = [k if k is not None else next(it) for k in known]
        else:  # NumPy's cost hardly depends on the count: all of them, nothing to merge
            out = fingerprints(*_encode(strings))
            memo.update(zip(strings, out.tolist()))
            return out
    return np.fromiter(known, dtype=np.uint64, count=len(known))


def _encode(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(blob, offsets) of ``strings``; one join when all are ASCII."""
    joined = "".join(strings)
    data = joined.encode()
    if len(data) == len(joined):  # ASCII: byte lengths are the str lengths
        lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    else:
        encoded = [s.encode() for s in strings]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(strings))
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.frombuffer(data, dtype=np.uint8), offsets


class StringTable:
    """Immutable strings with a fingerprint index (module docstring)."""

    ARRAYS = ("blob", "offsets", "keys", "order")

    def __init__(self, blob: CheckedArray, offsets: CheckedArray, keys: CheckedArray,
                 order: CheckedArray) -> None:
        if len(offsets) < 1 or len(keys) != len(offsets) - 1 or len(order) != len(keys):
            raise ValueError("string table arrays disagree in length")
        self.blob, self.offsets, self.keys, self.order = blob, offsets, keys, order
        self._n = len(keys)
        # The table never changes, so an answer stays true: queries repeat their words
        # (and a query asks each tier for the same ids), so most look-ups end here.
        self._memo: dict[str, list[int]] = {}
        self._filter: KeyFilter | None = None  # built by the first held()

    @classmethod
    def build(cls, strings: Sequence[str]) -> "StringTable":
        return cls.from_blob(*_encode(strings))

    @classmethod
    def from_blob(cls, blob: np.ndarray, offsets: np.ndarray) -> "StringTable":
        """The table of the strings ``blob[offsets[i]:offsets[i + 1]]`` (UTF-8 bytes,
        ``offsets`` int64 from 0 to ``blob.size``), its index computed here."""
        keys = fingerprints(blob, offsets)
        order = np.argsort(keys)  # ties: find() sorts its candidates
        # int32 where it fits: 4 bytes a string less in each of the two arrays
        order = order.astype(np.int32 if keys.size < 2**31 - 1 else np.int64)
        if blob.size < 2**31 - 1:
            offsets = offsets.astype(np.int32)
        return cls(CheckedArray(blob), CheckedArray(offsets), CheckedArray(keys[order]),
                   CheckedArray(order))

    @classmethod
    def with_index(cls, blob: np.ndarray, offsets: np.ndarray, keys: np.ndarray,
                   order: np.ndarray) -> "StringTable":
        """:meth:`from_blob`'s table with its index as saved beside the strings (``keys``:
        sorted fingerprints, ``order``: the slot of each), not recomputed (~0.15 s at
        500,000 strings). Refused (ValueError) unless sorted, in range, and the
        fingerprints of a few strings spread over the table are the saved ones."""
        n = offsets.size - 1
        if keys.dtype != np.uint64 or keys.shape != (n,) or order.shape != (n,) or order.dtype.kind != "i":
            raise ValueError("a saved string index of the wrong shape or type")
        if n and (bool(np.any(keys[1:] < keys[:-1])) or int(order.min()) < 0 or int(order.max()) >= n):
            raise ValueError("a saved string index out of order or out of range")
        at = np.unique(np.linspace(0, n - 1, num=min(n, 64)).astype(np.int64)) if n else np.zeros(0, np.int64)
        slots = order[at].astype(np.int64)
        starts = np.asarray(offsets, dtype=np.int64)
        for j, slot in zip(at.tolist(), slots.tolist()):
            if _py_fingerprint(blob[starts[slot]:starts[slot + 1]].tobytes()) != int(keys[j]):
                raise ValueError("a saved string index does not match its strings")
        order = order.astype(np.int32 if n < 2**31 - 1 else np.int64)
        if blob.size < 2**31 - 1:
            offsets = offsets.astype(np.int32)
        return cls(CheckedArray(blob), CheckedArray(offsets), CheckedArray(np.asarray(keys)),
                   CheckedArray(order))

    def arrays(self) -> dict[str, np.ndarray]:
        """The four arrays to save (raw, as held)."""
        return {name: getattr(self, name).a for name in self.ARRAYS}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:
        i = int(i)
        if not 0 <= i < self._n:
            raise IndexError(i)
        lo, hi = self.offsets.get(i, i + 2).tolist()
        if not 0 <= lo <= hi <= len(self.blob):
            raise ValueError("string table offsets point outside the blob")
        return self.blob.get(lo, hi).tobytes().decode()

    def _bytes(self, slot: int) -> bytes:
        """The bytes of the string at ``slot`` (in range), its blocks verified."""
        a, b = self.offsets.get(slot, slot + 2).tolist()
        if a < 0 or b > len(self.blob) or a > b:
            raise ValueError("string table offsets point outside the blob")
        return self.blob.get(a, b).tobytes()

    def take(self, slots: np.ndarray) -> list[str]:
        """The strings at ``slots`` (in range), offsets gathered at once."""
        slots = np.asarray(slots, dtype=np.int64)
        if not slots.size:
            return []
        if slots.size <= FEW:  # a handful: verified slices, no gathers (vault/few_keys.py)
            return [self._bytes(s).decode() for s in slots.tolist()]
        starts, ends = self.offsets.at(slots).tolist(), self.offsets.at(slots + 1).tolist()
        if min(starts) < 0 or max(ends) > len(self.blob) or any(map(gt, starts, ends)):
            raise ValueError("string table offsets point outside the blob")
        raw = memoryview(self.blob.check_ranges(starts, ends))  # not a NumPy view a string
        return [raw[a:b].tobytes().decode() for a, b in zip(starts, ends)]

    def tolist(self) -> list[str]:
        offsets = self.offsets.all()
        blob = self.blob.all()
        if self._n and (offsets[0] != 0 or offsets[-1] != blob.size or np.any(np.diff(offsets) < 0)):
            raise ValueError("string table offsets are not monotone")
        data = blob.tobytes()
        text = data.decode()
        if len(text) == len(data):  # ASCII: slice the str directly
            bounds = offsets.tolist()
            return [text[bounds[i]:bounds[i + 1]] for i in range(self._n)]
        bounds = offsets.tolist()
        return [data[bounds[i]:bounds[i + 1]].decode() for i in range(self._n)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def find(self, strings: Sequence[str]) -> list[list[int]]:
        """For each of ``strings``, the slots holding it, ascending."""
        if not strings or not self._n:
            return [[] for _ in strings]
        return memo_find(self._memo, strings, self._find)

    def remember(self, strings: Sequence[str], slots: Sequence[int]) -> None:
        """Seed the look-up memo: ``strings[i]`` is held at ``slots[i]`` and at no other
        slot. Only for a table of distinct strings (a mirror base's entry ids: ``id``
        is UNIQUE in a tier), whose strings were just read at those slots: a search
        reads its top k's ids by slot, then looks the same ids up (LSA, the pool)."""
        memo = self._memo
        if len(memo) > MEMO_MAX:
            memo.clear()
        for st, slot in zip(strings, slots):
            memo.setdefault(st, [slot])

    def held(self, strings: Sequence[str]) -> dict[int, list[int]]:
        """:meth:`find` for the strings held only: {position in ``strings``: its slots,
        ascending}. A string whose fingerprint is in no key is decided by one binary
        search over all of them (session 10: most dedup look-ups miss), most of them by a
        bit of the table's :class:`~tiervault.vault.key_filter.KeyFilter` first (session
        11); the others as :meth:`find`. At most ``FEW``: Python only (session 12)."""
        if not strings or not self._n:
            return {}
        got = list(map(self._memo.get, strings))
        if None not in got:  # every one remembered (held or not): held_remembered's answer
            return {i: k for i, k in enumerate(got) if k}
        fresh = [i for i, k in enumerate(got) if k is None]
        if len(fresh) < len(strings):
            # some remembered (a top k's ids read by slot; the few others, rows written
            # since the base, are new): only the others looked up (issue 16, session 20:
            # ~120 us a call through the fingerprints of all ~20, in a scan's LSA)
            found = self._held([strings[i] for i in fresh])
            for j, slots in found.items():
                got[fresh[j]] = slots
            return {i: k for i, k in enumerate(got) if k}
        return self._held(strings)

    def _held(self, strings: Sequence[str]) -> dict[int, list[int]]:
        """:meth:`held` through the key filter and the keys (none remembered, or not all)."""
        keys = self.keys.all()
        if self._filter is None:  # benign race: two threads may both build one
            self._filter = KeyFilter(keys)
        if len(strings) <= FEW:  # e.g. the graph neighbours' ids: vault/few_keys.py
            return held_few(self._memo, strings, self._filter, keys, self.order, self._probes, self._bytes)
        want = lookup_fingerprints(strings)
        return held_through(self._memo, strings, present(keys, self._filter, want), self._find)

    def _probes(self, strings: Sequence[str]) -> list[Probe]:
        """Each string's fingerprint and UTF-8 bytes (:func:`~tiervault.vault.few_keys.held_few`)."""
        return list(map(Probe, lookup_fingerprints(strings).tolist(), map(str.encode, strings)))

    def _find(self, strings: Sequence[str]) -> list[list[int]]:
        want = lookup_fingerprints(strings)
        keys = self.keys.all()  # a binary search reads scattered blocks: verify once
        if len(strings) <= FEW:  # a query's stems: vault/few_keys.py
            return [sorted(c for c in cands if self._bytes(c) == s.encode())
                    for s, cands in zip(strings, candidate_slots(keys, self.order, want))]
        lo_a = np.searchsorted(keys, want, side="left")
        n_cands = np.searchsorted(keys, want, side="right") - lo_a
        single = np.flatnonzero(n_cands == 1)  # the usual case: one candidate each (or none)
        out: list[list[int]] = [[] for _ in strings]
        if single.size:
            cands = self.order.at(lo_a[single])
            starts = self.offsets.at(cands).tolist()
            ends = self.offsets.at(cands + 1).tolist()
            if min(starts) < 0 or max(ends) > len(self.blob):
                raise ValueError("string table offsets point outside the blob")
            raw = self.blob.check_ranges(starts, ends)  # the blocks checked once, then sliced
            for i, c, a, b in zip(single.tolist(), cands.tolist(), starts, ends):
                if raw[a:b].tobytes() == strings[i].encode():
                    out[i] = [c]
        for i in np.flatnonzero(n_cands > 1).tolist():  # a shared fingerprint
            want = strings[i].encode()
            hits = []
            lo = int(lo_a[i])
            for c in self.order.get(lo, lo + int(n_cands[i])).tolist():
                a, b = self.offsets.get(c, c + 2).tolist()
                if self.blob.get(a, b).tobytes() == want:
                    hits.append(c)
            out[i] = sorted(hits)
        return out


class StringColumn(Sequence[str]):
    """A mirror's per-slot strings: a :class:`StringTable` base, then appended ones."""

    def __init__(self, base: "StringTable | HashTable | None" = None) -> None:
        self.base = base if base is not None else StringTable.build([])
        self.extra: list[str] = []
        # string -> its appended slots, indexed lazily: a first mirror build appends every
        # id and hash, then freezes them into a table, never looking one up in between.
        self._extra_slots: dict[str, list[int]] = {}
        self._indexed = 0  # how many of ``extra`` are in _extra_slots

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return self.tolist()[i]
        i = int(i)
        n = len(self.base)
        if i < 0:
            i += len(self)
        return self.base[i] if i < n else self.extra[i - n]

    def __iter__(self) -> Iterator[str]:
        yield from self.base.tolist()
        yield from self.extra

    def __contains__(self, s: object) -> bool:
        return isinstance(s, str) and bool(self.slots(s))

    def index(self, s: str, start: int = 0, stop: int | None = None) -> int:  # type: ignore[override]
        end = len(self) if stop is None else stop
        for slot in self.slots(s):
            if start <= slot < end:
                return slot
        raise ValueError(f"{s!r} is not in the column")

    def count(self, s: str) -> int:  # type: ignore[override]
        return len(self.slots(s))

    def tolist(self) -> list[str]:
        return self.base.tolist() + self.extra

    def take(self, slots: Sequence[int] | np.ndarray) -> list[str]:
        """The strings at ``slots`` (valid slots), base ones gathered at once."""
        if not self.extra:  # nothing appended (a mirror as built or loaded): base slots only
            return self.base.take(slots)
        slots = np.asarray(slots, dtype=np.int64)
        n = len(self.base)
        in_base = slots < n
        if in_base.all():
            return self.base.take(slots)
        got = iter(self.base.take(slots[in_base]))
        return [next(got) if b else self.extra[s - n] for s, b in zip(slots.tolist(), in_base.tolist())]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StringColumn, list, tuple)):
            return self.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def extend(self, strings: Iterable[str]) -> None:
        self.extra.extend(strings)

    def take_distinct(self, slots: np.ndarray) -> list[str]:
        """:meth:`take`, the base strings' slots remembered for later look-ups
        (:meth:`StringTable.remember`): for a column whose base strings are distinct."""
        out = self.take(slots)
        base = self.base
        if isinstance(base, StringTable):
            n = len(base)
            kept, at = out, slots.tolist()
            if at and max(at) >= n:  # appended strings too: the base ones only
                kept, at = [s for s, i in zip(out, at) if i < n], [i for i in at if i < n]
            base.remember(kept, at)
        return out

    def _index(self) -> dict[str, list[int]]:
        """The appended strings' slots, brought up to date."""
        if self._indexed < len(self.extra):
            slot = len(self.base) + self._indexed
            index = self._extra_slots
            for s in self.extra[self._indexed:]:
                index.setdefault(s, []).append(slot)
                slot += 1
            self._indexed = len(self.extra)
        return self._extra_slots

    def slots(self, s: str) -> list[int]:
        """Every slot holding ``s``, ascending (base first, then appended)."""
        return self.base.find([s])[0] + self._index().get(s, [])

    def held(self, strings: Sequence[str]) -> dict[int, list[int]]:
        """:meth:`slots_many` for the strings held only: {position: slots} (lists
        shared with the table's memo: read only)."""
        found = self.base.held(strings)
        index = self._index()
        if not index or index.keys().isdisjoint(strings):
            return found
        for i, s in enumerate(strings):
            if s in index:
                found[i] = found.get(i, []) + index[s]
        return found

    def slots_many(self, strings: Sequence[str]) -> list[list[int]]:
        """Every slot of each string (lists shared with the table's memo: read only)."""
        found = self.base.find(strings)
        index = self._index()
        if not index:  # no appended strings (a mirror's usual state): no per-string copy
            return found
        return [f + index.get(s, []) for f, s in zip(found, strings)]
