"""A search mirror's content hashes kept as 32 raw bytes each, not 64 hex characters.

Every entry's content hash is a SHA-256 hex digest (``vault/entry.py``). As strings in a
:class:`~tiervault.vault.string_table.StringTable` they took 64 bytes of blob plus a
4-byte offset a row, all of it resident after a few hundred queries at 1,000,000
entries (61 MB: queries read the hashes of their candidates at scattered slots).
Here: ``raw`` (n x 32 bytes, fixed width: no offsets), and the index to find a hash
-- ``keys``, the first 8 bytes of each digest as a big-endian integer, sorted, and
``order``, the slots in that order (a look-up binary-searches ``keys`` and compares
the candidates' 32 bytes, so a shared prefix never returns a wrong slot).

Only a column of lowercase 64-character hex strings is stored this way
(:func:`table_of`); anything else stays a StringTable.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from tiervault.vault.checked_array import CheckedArray
from tiervault.vault.few_keys import FEW, Probe, candidate_slots, held_few
from tiervault.vault.key_filter import KeyFilter, present
from tiervault.vault.string_memo import MEMO_MAX, held_remembered, held_through, memo_find
from tiervault.vault.string_table import StringTable

__all__ = ["DIGEST", "HashTable", "table_of", "digest_keys"]

DIGEST = 32  # bytes of a SHA-256 digest
_HEX = 2 * DIGEST


def _digests(strings: Sequence[str]) -> np.ndarray | None:
    """(n, 32) uint8 of ``strings`` if every one is a lowercase 64-character hex digest."""
    joined = "".join(strings)
    if len(joined) != _HEX * len(strings) or joined.lower() != joined:
        return None
    if strings and max(map(len, strings)) != _HEX:  # with the total above: every one is 64
        return None
    try:
        raw = bytes.fromhex(joined)
    except ValueError:
        return None
    if len(raw) != DIGEST * len(strings):  # fromhex skips whitespace
        return None
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(strings), DIGEST)


def _digest_of(s: str) -> bytes | None:
    """The 32 bytes of ``s`` if it is a lowercase 64-character hex digest, else None."""
    if len(s) != _HEX or s.lower() != s:
        return None
    try:
        raw = bytes.fromhex(s)
    except ValueError:
        return None
    return raw if len(raw) == DIGEST else None  # fromhex skips whitespace: "  " + 62 digits


def _probes(strings: Sequence[str]) -> list[Probe | None]:
    """Each digest's key (its first 8 bytes, big-endian) and bytes; None: not a digest
    (:func:`~tiervault.vault.few_keys.held_few`; the same keys as :func:`digest_keys`)."""
    raws = map(_digest_of, strings)
    return [None if r is None else Probe(int.from_bytes(r[:8], "big"), r) for r in raws]


#: The key (first 8 bytes, big-endian) of digests looked up lately, shared by every table
#: of the process: the dedup asks two tiers about each pooled hash (session 10). Only
#: valid digests are remembered, so a string found here is one.
_KEY_MEMO: dict[str, int] = {}


def digest_keys(strings: Sequence[str]) -> np.ndarray | None:
    """The uint64 key of each of ``strings`` (aligned), or None unless every one is a
    lowercase 64-character hex digest; through the memo above (cleared past
    ``MEMO_MAX`` strings)."""
    memo = _KEY_MEMO
    known = list(map(memo.get, strings))
    if None not in known:
        return np.fromiter(known, dtype=np.uint64, count=len(known))
    raw = _digests(strings)
    if raw is None:
        return None
    out = raw.view(">u8")[:, 0].astype(np.uint64)
    if len(memo) > MEMO_MAX:
        memo.clear()
    memo.update(zip(strings, out.tolist()))
    return out


def table_of(strings: Sequence[str]) -> "HashTable | StringTable":
    """A HashTable when every string is a hex digest, else a StringTable."""
    raw = _digests(strings)
    return StringTable.build(strings) if raw is None or not len(strings) else HashTable.build(raw)


class HashTable:
    """Immutable hex digests as raw bytes, with a prefix index (module docstring)."""

    ARRAYS = ("raw", "keys", "order")

    def __init__(self, raw: CheckedArray, keys: CheckedArray, order: CheckedArray) -> None:
        if len(raw) != DIGEST * len(keys) or len(order) != len(keys):
            raise ValueError("hash table arrays disagree in length")
        if raw.a.dtype != np.uint8 or keys.a.dtype != np.uint64 or order.a.dtype.kind != "i":
            raise ValueError("hash table arrays have the wrong dtypes")
        self.raw, self.keys, self.order = raw, keys, order
        self._n = len(keys)
        self._memo: dict[str, list[int]] = {}
        self._filter: KeyFilter | None = None  # built by the first held()

    @classmethod
    def build(cls, raw: np.ndarray) -> "HashTable":
        """From an (n, 32) uint8 array of digests."""
        raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, DIGEST)
        keys = raw[:, :8].copy().view(">u8").ravel().astype(np.uint64)
        order = np.argsort(keys, kind="stable")
        order = order.astype(np.int32 if raw.shape[0] < 2**31 - 1 else np.int64)
        return cls(CheckedArray(raw.reshape(-1)), CheckedArray(keys[order]), CheckedArray(order))

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name).a for name in self.ARRAYS}

    def __len__(self) -> int:
        return self._n

    def _rows(self, slots: np.ndarray) -> np.ndarray:
        """(len(slots), 32) bytes of the digests at ``slots`` (in range), blocks verified."""
        return self.raw.rows_at(slots, DIGEST)

    def __getitem__(self, i: int) -> str:
        i = int(i)
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self.raw.get(i * DIGEST, (i + 1) * DIGEST).tobytes().hex()

    def take(self, slots: np.ndarray) -> list[str]:
        slots = np.asarray(slots, dtype=np.int64)
        if not slots.size:
            return []
        if slots.size <= FEW:  # a handful: verified slices, no gathers (vault/few_keys.py)
            if int(slots.min()) < 0 or int(slots.max()) >= self._n:
                raise IndexError(f"hash table slots outside 0..{self._n - 1}")
            return [self.raw.get(s * DIGEST, (s + 1) * DIGEST).tobytes().hex() for s in slots.tolist()]
        text = self._rows(slots).tobytes().hex()  # one hex string, cut in 64 characters
        return [text[i:i + 2 * DIGEST] for i in range(0, len(text), 2 * DIGEST)]

    def tolist(self) -> list[str]:
        data = self.raw.all().tobytes()
        return [data[i:i + DIGEST].hex() for i in range(0, len(data), DIGEST)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def find(self, strings: Sequence[str]) -> list[list[int]]:
        """For each of ``strings``, the slots holding it, ascending."""
        if not strings or not self._n:
            return [[] for _ in strings]
        return memo_find(self._memo, strings, self._find)

    def held(self, strings: Sequence[str]) -> dict[int, list[int]]:
        """:meth:`find` for the strings held only: {position: slots, ascending}. When
        every string is a digest, their 8-byte prefixes decide the misses (no Python per
        string): most by one bit of the table's
        :class:`~tiervault.vault.key_filter.KeyFilter`, the rest by a binary search
        (session 11); the others as :meth:`find`."""
        if not strings or not self._n:
            return {}
        if len(strings) <= FEW:  # the few (a pooled entry's hash): vault/few_keys.py
            if (known := held_remembered(self._memo, strings)) is not None:
                return known
            return held_few(self._memo, strings, self._key_filter(), self.keys.all(), self.order,
                            _probes, self._digest)
        prefix = digest_keys(strings)
        if prefix is None:  # not all digests: the per-string path
            return {i: f for i, f in enumerate(self.find(strings)) if f}
        keys = self.keys.all()
        return held_through(self._memo, strings, present(keys, self._key_filter(), prefix), self._find)

    def _key_filter(self) -> KeyFilter:
        if self._filter is None:  # benign race: two threads may both build one
            self._filter = KeyFilter(self.keys.all())
        return self._filter

    def _digest(self, slot: int) -> bytes:
        """The 32 bytes at ``slot`` (in range), verified."""
        return self.raw.get(slot * DIGEST, (slot + 1) * DIGEST).tobytes()

    def _find(self, strings: Sequence[str]) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in strings]
        # The usual ask, every string a digest: validated and decoded in one join
        # (issue 16, session 9: a loop per string was ~half of a 55-hash miss).
        want = _digests(strings)
        idx: Sequence[int] = range(len(strings))
        if want is None:
            idx, raws = [], []
            for i, s in enumerate(strings):
                if (raw := _digest_of(s)) is not None:
                    raws.append(raw)
                    idx.append(i)
            if not idx:
                return out
            want = np.frombuffer(b"".join(raws), dtype=np.uint8).reshape(-1, DIGEST)
        prefix = want.view(">u8")[:, 0].astype(np.uint64)
        keys = self.keys.all()  # a binary search reads scattered blocks: verify once
        if len(idx) <= FEW:  # the few digests past the key filter: vault/few_keys.py
            for o, cands in enumerate(candidate_slots(keys, self.order, prefix)):
                row = want[o].tobytes()
                out[idx[o]] = sorted(c for c in cands
                                     if self.raw.get(c * DIGEST, (c + 1) * DIGEST).tobytes() == row)
            return out
        lo = np.searchsorted(keys, prefix, side="left")
        counts = np.searchsorted(keys, prefix, side="right") - lo
        if not counts.any():
            return out
        owner = np.repeat(np.arange(len(idx)), counts)
        pos = np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
        cands = self.order.at(pos)
        same = (self._rows(cands) == want[owner]).all(axis=1)  # all 32 bytes, not the prefix
        for o, c in zip(owner[same].tolist(), cands[same].tolist()):
            out[idx[o]].append(c)
        return [x if len(x) < 2 else sorted(x) for x in out]
