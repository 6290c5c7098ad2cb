"""The key filter before a table's binary search (vault/key_filter.py): the same answers as
a binary search of every key, and most absent keys never reach the search."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tiervault.vault import key_filter
from tiervault.vault.hash_table import HashTable, table_of
from tiervault.vault.key_filter import EXTRA_BITS, KeyFilter, present
from tiervault.vault.string_table import StringColumn, StringTable


def _searched(monkeypatch) -> list[int]:
    """The number of keys of each binary search made through numpy from here on."""
    sizes: list[int] = []
    real = np.searchsorted

    def spy(a, v, *args, **kw):
        sizes.append(int(np.size(v)))
        return real(a, v, *args, **kw)

    monkeypatch.setattr(np, "searchsorted", spy)
    return sizes


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 40_000])
def test_present_is_exact_membership(n):
    rng = np.random.default_rng(n)
    keys = np.sort(np.concatenate([rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True),
                                   np.array([0, 2**64 - 1], dtype=np.uint64)[: min(n, 2)]]))
    if n > 3:
        keys[3] = keys[2]  # a shared key
    filt = KeyFilter(keys)
    held = rng.choice(keys, min(n, 300)) if n else np.zeros(0, dtype=np.uint64)
    near = held ^ np.uint64(1)  # same top bits as a held key: passes the filter, absent (mostly)
    absent = rng.integers(0, 2**64 - 1, 2000, dtype=np.uint64, endpoint=True)
    extremes = np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)
    want = np.concatenate([held, near, absent, extremes])
    assert present(keys, filt, want).tolist() == np.isin(want, keys).tolist()
    assert not filt.maybe(absent[~np.isin(absent, keys)]).all() or n > 2**20


def test_most_absent_keys_are_decided_by_the_filter():
    rng = np.random.default_rng(3)
    keys = np.sort(rng.integers(0, 2**64 - 1, 30_000, dtype=np.uint64, endpoint=True))
    filt = KeyFilter(keys)
    absent = rng.integers(0, 2**64 - 1, 20_000, dtype=np.uint64, endpoint=True)
    absent = absent[~np.isin(absent, keys)]
    passed = filt.maybe(absent).mean()
    assert passed <= 2.0 ** -EXTRA_BITS  # n / 2^width, width = bit_length(n) + EXTRA_BITS
    assert filt.nbytes == 2 ** (30_000 .bit_length() + EXTRA_BITS) // 8
    assert filt.maybe(keys).all()


def test_string_table_held_answers_as_find_and_searches_few(monkeypatch):
    ids = [f"e{i:06d}-{i * 7919 % 1000}" for i in range(5000)] + ["dup", "dup"]
    table = StringTable.build(ids)
    asked = [f"e{i:06d}-{i * 7919 % 1000}" for i in range(0, 5000, 97)] + ["dup"]
    asked += [f"other-{i}" for i in range(400)] + ["é-non-ascii", ""]
    expected = {i: f for i, f in enumerate(StringTable.build(ids).find(asked)) if f}
    misses = [f"miss-{i}" for i in range(400)]
    sizes = _searched(monkeypatch)
    assert table.held(misses) == {}
    assert sum(sizes) <= len(misses) // 4  # without the filter: one search of all 400
    assert table.held(asked) == expected
    assert expected[len(asked) - 403] == [5000, 5001]  # "dup" at both slots
    column = StringColumn(table)
    column.extend(["other-3"])
    got = column.held(asked)
    assert got[asked.index("other-3")] == [5002]


def test_hash_table_held_answers_as_find_and_searches_few(monkeypatch):
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3000)]
    table = table_of(digests)
    assert isinstance(table, HashTable)
    asked = digests[::53] + [hashlib.sha256(f"x{i}".encode()).hexdigest() for i in range(300)]
    # the same 8-byte prefix as a held digest, another tail: passes the filter, not held
    asked.append(digests[5][:16] + "0" * 48)
    expected = {i: f for i, f in enumerate(table_of(digests).find(asked)) if f}
    assert len(expected) == len(digests[::53])
    misses = [hashlib.sha256(f"m{i}".encode()).hexdigest() for i in range(400)]
    sizes = _searched(monkeypatch)
    assert table.held(misses) == {}
    assert sum(sizes) <= len(misses) // 4
    assert table.held(asked) == expected
    assert table.held(["not a digest", digests[7]]) == {1: [7]}


def test_the_module_names_its_parts():
    assert set(key_filter.__all__) == {"KeyFilter", "EXTRA_BITS", "present"}
