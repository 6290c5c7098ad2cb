"""A handful of strings looked up by one binary search and a Python walk (vault/few_keys.py):
the same slots as the tables' NumPy path, through shared fingerprints and prefixes, and
no byte used before its block is verified."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tiervault.vault.checked_array import CacheDamaged, CheckedArray, block_crcs
from tiervault.vault.few_keys import FEW, candidate_slots
from tiervault.vault.hash_table import HashTable
from tiervault.vault.string_table import StringTable, lookup_fingerprints


def _many(table, strings: list[str]) -> list[list[int]]:
    """Each string's slots through the NumPy path: asked among more than FEW strings."""
    pad = [f"\x00pad{i}" for i in range(FEW + 1)]
    return table.find(strings + pad)[: len(strings)]


def test_candidate_slots_are_the_keys_equal_run_in_key_order():
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    raw[10:14] = raw[3]  # a run of five equal keys
    raw[-1] = 2**64 - 1  # a run at the very end of the sorted keys
    keys_order = np.argsort(raw, kind="stable")
    keys = raw[keys_order]
    order = CheckedArray(keys_order.astype(np.int32))
    want = np.array([raw[3], raw[20], 0, 2**64 - 1, raw[20] ^ np.uint64(1)], dtype=np.uint64)
    got = candidate_slots(keys, order, want)
    lo = np.searchsorted(keys, want, side="left")
    hi = np.searchsorted(keys, want, side="right")
    assert got == [keys_order[a:b].tolist() for a, b in zip(lo, hi)]
    assert sorted(got[0]) == [3, 10, 11, 12, 13]
    assert candidate_slots(keys[:0], order, want[:2]) == [[], []]


def test_a_few_strings_find_the_same_slots_as_the_numpy_path():
    strings = [f"stem{i}" for i in range(3000)] + ["dup", "", "dup", "caf\u00e9"]
    table = StringTable.build(strings)
    asks = [["stem7", "nope"], ["dup"], [""], ["caf\u00e9", "cafe", "stem2999"], ["stem0"] * 3,
            [f"stem{i}" for i in range(FEW)]]
    for ask in asks:
        assert StringTable.build(strings).find(ask) == _many(table, ask)
    fresh = StringTable.build(strings)
    assert fresh.find(["dup", "nope", "", "stem12"]) == [[3000, 3002], [], [3001], [12]]


def test_a_shared_fingerprint_is_settled_by_the_bytes_on_the_few_path():
    built = StringTable.build(["alpha", "beta", "gamma"])
    fp = int(lookup_fingerprints(["beta"])[0])
    keys = np.full(3, fp, dtype=np.uint64)  # every slot claims beta's fingerprint
    table = StringTable(built.blob, built.offsets, CheckedArray(keys), CheckedArray(np.arange(3, dtype=np.int32)))
    assert table.find(["beta"]) == [[1]]
    assert table.find(["alpha", "gamma"]) == [[], []]  # their own fingerprints are in no key


def _digest(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def test_a_few_digests_find_the_same_slots_as_the_numpy_path():
    hexes = [_digest(str(i)) for i in range(2000)]
    twin = hexes[5][:16] + hexes[9][16:]  # shares hexes[5]'s 8-byte key, not its bytes
    hexes += [hexes[5], twin]
    raw = np.frombuffer(bytes.fromhex("".join(hexes)), dtype=np.uint8).reshape(-1, 32)
    table = HashTable.build(raw)
    absent = _digest("absent")
    for ask in ([hexes[5]], [twin, absent], [hexes[1999], hexes[0], "not a digest"], [absent]):
        assert HashTable.build(raw).find(ask) == _many(table, ask)
    assert HashTable.build(raw).find([hexes[5], twin]) == [[5, 2000], [2001]]
    assert HashTable.build(raw).held([absent, twin, hexes[9]]) == {1: [2001], 2: [9]}


def test_the_few_path_verifies_the_blocks_it_reads():
    strings = [f"s{i:05d}" for i in range(20_000)]  # a blob of several 64 KB blocks
    built = StringTable.build(strings)
    arrays = built.arrays()
    blob = arrays["blob"].copy()
    at = int(arrays["offsets"][15_000])
    crcs = block_crcs(blob)
    blob[at] ^= 1  # the bytes of s15000, after the CRCs were taken
    table = StringTable(CheckedArray(blob, crcs, "blob"),
                        *(CheckedArray(arrays[n], block_crcs(arrays[n]), n) for n in ("offsets", "keys", "order")))
    assert table.find(["s00001"]) == [[1]]
    with pytest.raises(CacheDamaged):
        table.find(["s15000"])
