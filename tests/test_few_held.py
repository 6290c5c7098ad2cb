"""A table's ``held()`` of a handful of strings not all remembered, in plain Python
(vault/few_keys.py ``held_few``): the same answers as a scan of every string, each string
hashed once, the key filter read first, and no byte used before its block is verified."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest

from tiervault.vault import few_keys, string_table
from tiervault.vault.checked_array import CacheDamaged, CheckedArray, block_crcs
from tiervault.vault.few_keys import FEW
from tiervault.vault.hash_table import HashTable
from tiervault.vault.key_filter import KeyFilter
from tiervault.vault.string_table import StringColumn, StringTable, lookup_fingerprints

# strings of several lengths and scripts: empty, one byte, bench-like ids, longer than the
# fingerprints' plain-Python budget (128 characters), 2-, 3- and 4-byte UTF-8, duplicates
SPECIAL = ["", "a", "caf\u00e9", "\u03a9mega", "\u6771\u4eac", "\U0001f642 ok", "x" * 200,
           "dup", "dup", "y" * 129 + "\u00e9", "dup"]
STRINGS = [f"e{i:06d}-{i * 7919 % 1000}" for i in range(3000)] + SPECIAL
NEAR = ["cafe", "\u6771", "x" * 199, "x" * 201, "du", "dupp", " a", "A", "e000001-7919", "\U0001f642"]


def _truth(strings: list[str], ask: list[str]) -> dict[int, list[int]]:
    """{i: every slot holding ask[i]} by a scan of all strings (the oracle)."""
    out = {i: [j for j, s in enumerate(strings) if s == a] for i, a in enumerate(ask)}
    return {i: f for i, f in out.items() if f}


def _digest(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def _checked(table: StringTable) -> StringTable:
    """The same table with every array checked per block (as read from a cache file)."""
    arrays = table.arrays()
    return StringTable(*(CheckedArray(arrays[n], block_crcs(arrays[n]), n) for n in StringTable.ARRAYS))


def test_a_few_strings_held_are_every_slot_holding_them():
    shared = StringTable.build(STRINGS)  # one table asked again and again: its memo warms
    asks = [[s] for s in SPECIAL + NEAR] + [list(c) for c in itertools.combinations(SPECIAL[:6] + NEAR[:3], 3)]
    asks += [SPECIAL[:FEW], NEAR[:FEW], [STRINGS[0], STRINGS[2999], "dup", "missing", "dup"]]
    for ask in asks:
        assert len(ask) <= FEW
        want = _truth(STRINGS, ask)
        assert _checked(StringTable.build(STRINGS)).held(ask) == want, ask
        assert shared.held(ask) == want, ask
        assert shared.held(ask) == want, ask  # now from the memo
    assert shared.held(["dup"]) == {0: [3007, 3008, 3010]}  # ascending, every one


def test_a_shared_fingerprint_is_settled_by_the_bytes():
    built = StringTable.build(["alpha", "beta", "gamma", "beta"])
    fp = int(lookup_fingerprints(["beta"])[0])
    keys = np.full(4, fp, dtype=np.uint64)  # every slot claims beta's fingerprint
    table = StringTable(built.blob, built.offsets, CheckedArray(keys),
                        CheckedArray(np.array([3, 2, 1, 0], dtype=np.int32)))
    assert table.held(["beta"]) == {0: [1, 3]}
    assert table.held(["alpha", "gamma", "beta"]) == {2: [1, 3]}  # their own keys: in no slot
    fresh = StringTable(built.blob, built.offsets, CheckedArray(keys), CheckedArray(np.arange(4, dtype=np.int32)))
    assert fresh.held(["gamma", "beta", "delta"]) == {1: [1, 3]}


def test_each_string_is_hashed_once(monkeypatch):
    calls: list[list[str]] = []
    real = string_table.lookup_fingerprints

    def spy(strings):
        calls.append(list(strings))
        return real(strings)

    monkeypatch.setattr(string_table, "lookup_fingerprints", spy)
    table = StringTable.build(STRINGS)
    assert table.held([STRINGS[5], "nope", STRINGS[7]]) == {0: [5], 2: [7]}
    assert calls == [[STRINGS[5], "nope", STRINGS[7]]]  # one call: no second hashing in a find
    calls.clear()
    assert table.held([STRINGS[5], STRINGS[9]]) == {0: [5], 1: [9]}
    assert calls == [[STRINGS[9]]]  # the remembered one is not hashed again


def test_a_clear_filter_bit_ends_the_look_up(monkeypatch):
    table = StringTable.build(STRINGS)
    filt = KeyFilter(table.keys.all())
    candidates = [f"absent-{i}" for i in range(200)]
    clear = [s for s, k in zip(candidates, lookup_fingerprints(candidates).tolist()) if not filt.has(k)]
    assert len(clear) >= FEW
    searched: list[int] = []
    real = few_keys.bisect_left
    monkeypatch.setattr(few_keys, "bisect_left", lambda a, x: searched.append(x) or real(a, x))
    assert table.held(clear[:FEW]) == {}
    assert searched == []
    assert table.held([clear[0], STRINGS[42]]) == {1: [42]}
    assert searched == [int(lookup_fingerprints([STRINGS[42]])[0])]


def test_the_filter_bit_of_one_key_is_the_filters_answer():
    rng = np.random.default_rng(12)
    for n in (0, 1, 500, 40_000):
        keys = np.sort(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True))
        filt = KeyFilter(keys)
        want = np.concatenate([keys[:300], rng.integers(0, 2**64 - 1, 3000, dtype=np.uint64, endpoint=True),
                               np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)])
        assert [filt.has(k) for k in want.tolist()] == filt.maybe(want).tolist()
        assert all(filt.has(k) for k in keys.tolist())


@pytest.mark.parametrize("damaged", ["blob", "order"])
def test_a_damaged_block_is_still_found(damaged):
    strings = [f"s{i:05d}" for i in range(40_000)]  # several 64 KB blocks of each array
    arrays = StringTable.build(strings).arrays()
    crcs = {n: block_crcs(arrays[n]) for n in StringTable.ARRAYS}
    target = "s35000"
    slot = strings.index(target)
    raw = arrays[damaged].copy()
    if damaged == "blob":
        raw[int(arrays["offsets"][slot])] ^= 1  # the first byte of s35000
    else:
        raw[int(np.flatnonzero(arrays["order"] == slot)[0])] ^= 1  # its slot in key order
    arrays[damaged] = raw
    table = StringTable(*(CheckedArray(arrays[n], crcs[n], n) for n in StringTable.ARRAYS))
    # a string whose slot, key-order position and bytes all lie in other blocks: fine
    position = np.argsort(arrays["order"])  # slot -> its position in key order
    per = {"blob": 1 << 16, "order": 1 << 14}[damaged]
    at = (lambda i: int(arrays["offsets"][i])) if damaged == "blob" else (lambda i: int(position[i]))
    other = next(i for i in range(len(strings)) if at(i) // per != at(slot) // per)
    assert table.held([strings[other], "nope"]) == {0: [other]}
    with pytest.raises(CacheDamaged):
        table.held([target])


def test_a_few_digests_held_are_every_slot_holding_them():
    hexes = [_digest(str(i)) for i in range(3000)]
    twin = hexes[5][:16] + hexes[9][16:]  # hexes[5]'s 8-byte key, other bytes
    hexes += [hexes[5], twin]
    raw = np.frombuffer(bytes.fromhex("".join(hexes)), dtype=np.uint8).reshape(-1, 32)
    shared = HashTable.build(raw)
    not_digests = ["not a digest", hexes[7].upper(), "  " + hexes[7][2:], hexes[7][:63], hexes[7] + "0", ""]
    asks = [[hexes[5]], [twin], [hexes[5], twin, _digest("absent")], [hexes[2999], hexes[0]],
            not_digests, [hexes[7], *not_digests[:4]], [twin[:16] + "f" * 48]]
    for ask in asks:
        want = _truth(hexes, ask)
        assert HashTable.build(raw).held(ask) == want, ask
        assert shared.held(ask) == want, ask
        assert shared.held(ask) == want, ask
    assert shared.held([hexes[5]]) == {0: [5, 3000]}


def test_a_damaged_digest_is_still_found():
    hexes = [_digest(str(i)) for i in range(5000)]  # 160 KB of digests: three blocks
    raw = np.frombuffer(bytes.fromhex("".join(hexes)), dtype=np.uint8).copy()
    built = HashTable.build(raw.reshape(-1, 32))
    crcs = block_crcs(raw)
    raw[4500 * 32 + 31] ^= 1  # the last byte of hexes[4500]
    table = HashTable(CheckedArray(raw, crcs, "raw"), built.keys, built.order)
    assert table.held([hexes[3]]) == {0: [3]}
    with pytest.raises(CacheDamaged):
        table.held([hexes[4500]])


def test_a_column_adds_its_appended_strings_to_the_few_path():
    column = StringColumn(StringTable.build(STRINGS))
    column.extend(["new", "dup", "caf\u00e9"])
    n = len(STRINGS)
    assert column.held(["dup", "new", "nope", "caf\u00e9"]) == {0: [3007, 3008, 3010, n + 1], 1: [n],
                                                               3: [STRINGS.index("caf\u00e9"), n + 2]}


def test_held_looks_up_only_the_strings_not_remembered(monkeypatch):
    """A top k's ids are remembered by slot; a look-up of them with a few others (rows
    written since the base) fingerprints and searches the others only, and answers as a
    scan of every string does."""
    for table in (StringTable.build(STRINGS), _checked(StringTable.build(STRINGS))):
        table.held(STRINGS[:20])  # more than FEW: the NumPy path remembers all 20
        asked: list[str] = []
        real = string_table.lookup_fingerprints

        def recorded(strings):
            asked.extend(strings)
            return real(strings)
        monkeypatch.setattr(string_table, "lookup_fingerprints", recorded)
        for ask in (STRINGS[:20] + ["missing", STRINGS[2500], "dup"] + NEAR[:2],
                    ["dup", STRINGS[3], "missing2"] + STRINGS[5:15], STRINGS[:20]):
            assert table.held(ask) == _truth(STRINGS, ask)
        assert asked and not set(asked) & set(STRINGS[:20])
        monkeypatch.undo()
