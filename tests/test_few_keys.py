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
from tiervault.vault.string_table import StringColumn, StringTable, lookup_fingerprints


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


def test_a_few_takes_read_the_same_strings_as_a_gather():
    strings = [f"id-{i}" for i in range(5000)] + ["", "caf\u00e9"]
    table = StringTable.build(strings)
    for slots in ([0], [5001, 5000, 17], list(range(4990, 4990 + FEW)), [3, 3]):
        assert table.take(np.array(slots)) == [strings[s] for s in slots]
        assert table.take(np.array(slots * (FEW + 1)))[: len(slots)] == [strings[s] for s in slots]
    hexes = [_digest(str(i)) for i in range(3000)]
    hashes = HashTable.build(np.frombuffer(bytes.fromhex("".join(hexes)), dtype=np.uint8).reshape(-1, 32))
    for slots in ([2999], [7, 0, 7]):
        assert hashes.take(np.array(slots)) == [hexes[s] for s in slots]
        assert hashes.take(np.array(slots * (FEW + 1)))[: len(slots)] == [hexes[s] for s in slots]
    with pytest.raises(IndexError):
        hashes.take(np.array([3000]))


def test_a_few_takes_refuse_offsets_outside_the_blob():
    built = StringTable.build(["ab", "cd", "ef"])
    offsets = built.offsets.a.copy()
    offsets[2] = 99  # "cd" would end past the blob, "ef" start there
    table = StringTable(built.blob, CheckedArray(offsets), built.keys, built.order)
    assert table.take(np.array([0])) == ["ab"]
    for slots in ([1], [2]):
        with pytest.raises(ValueError):
            table.take(np.array(slots))


def test_remembered_ids_answer_held_as_the_full_look_up():
    ids = [f"entry-{i:05d}" for i in range(4000)]
    column = StringColumn(StringTable.build(ids))
    slots = np.array([10, 3999, 250])
    assert column.take_distinct(slots) == [ids[10], ids[3999], ids[250]]  # remembered
    ask = [ids[250], "entry-99999", ids[10]]
    assert column.held(ask) == StringColumn(StringTable.build(ids)).held(ask) == {0: [250], 2: [10]}
    assert column.held([ids[3999]]) == {0: [3999]}
    column.base.find(["entry-99999"])  # a miss remembered too: still no answer
    assert column.held(["entry-99999", ids[10]]) == {1: [10]}
    column.extend([ids[10], "new"])  # a write appends: the appended slots join the base one
    assert column.held([ids[10], "new"]) == {0: [10, 4000], 1: [4001]}
    hexes = [_digest(str(i)) for i in range(500)]
    raw = np.frombuffer(bytes.fromhex("".join(hexes)), dtype=np.uint8).reshape(-1, 32)
    hashes = HashTable.build(raw)
    hashes.find([hexes[4], _digest("gone")])  # both answers remembered
    assert hashes.held([_digest("gone"), hexes[4]]) == HashTable.build(raw).held(
        [_digest("gone"), hexes[4]]) == {1: [4]}
