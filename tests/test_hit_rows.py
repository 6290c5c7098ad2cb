"""A tier's top-k hits built from columns (session 12): ``rows.hits_of`` makes the rows
``LexicalHit(...)`` makes, each in C; ``CheckedArray.rows_at`` gathers whole rows of a
flat array, its blocks verified first until all are; ``HashTable.take`` reads digests
through it, the same hex as one digest at a time."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tiervault.vault.checked_array import BLOCK_BYTES, CacheDamaged, CheckedArray, block_crcs
from tiervault.vault.few_keys import FEW
from tiervault.vault.hash_table import DIGEST, HashTable, table_of
from tiervault.vault.rows import LexicalHit, hits_of

DIGESTS = [hashlib.sha256(f"entry {i}".encode()).hexdigest() for i in range(6000)]  # 3 blocks of raw


def test_hits_of_makes_the_rows_the_constructor_makes():
    ids, hashes = ["b", "a", "c", "a"], ["1" * 64, "2" * 64, "3" * 64, "2" * 64]
    scores, tfidf, passes = [3.5, 2.25, 2.25, 0.0], [0.5, 0.0, 1.0, 0.125], [True, False, True, True]
    got = hits_of(ids, hashes, scores, tfidf, passes)
    want = [LexicalHit(*row) for row in zip(ids, hashes, scores, tfidf, passes)]
    assert got == want
    assert all(type(h) is LexicalHit for h in got)
    assert [(h.id, h.content_hash, h.score, h.tfidf, h.passes) for h in got] == list(
        zip(ids, hashes, scores, tfidf, passes))
    assert hits_of([], [], [], [], []) == []
    # keyword construction and the defaults are the row type's
    assert LexicalHit(id="x", content_hash="h", score=1.0) == LexicalHit("x", "h", 1.0, 0.0, True)
    with pytest.raises(AttributeError):
        got[0].score = 9.0  # type: ignore[misc]  # rows are immutable


def _checked(a: np.ndarray) -> CheckedArray:
    return CheckedArray(a, block_crcs(a), "rows")


def test_rows_at_gathers_whole_rows_and_verifies_their_blocks_first():
    width = 32
    a = np.frombuffer(b"".join(bytes.fromhex(d) for d in DIGESTS), dtype=np.uint8).copy()
    rows = np.array([5, 0, 2047, 2048, 5, 7], dtype=np.int64)  # a block edge, a repeat; blocks 0-1
    want = a.reshape(-1, width)[rows]
    fresh = _checked(a)
    got = fresh.rows_at(rows, width)
    assert got.shape == (rows.size, width) and np.array_equal(got, want)
    per_block_rows = BLOCK_BYTES // width
    assert fresh.blocks_checked == len({int(r) // per_block_rows for r in rows}) < fresh.blocks
    # every block checked: the plain gather, same rows
    full = _checked(a)
    full.get(0, a.size)
    assert np.array_equal(full.rows_at(rows, width), want)
    assert np.array_equal(full.rows_at(np.array([5999, 4100]), width), a.reshape(-1, width)[[5999, 4100]])
    assert full.rows_at(np.zeros(0, dtype=np.int64), width).shape == (0, width)
    # a changed byte in a row's block is found by the read of that row, not of others
    bad = a.copy()
    bad[2 * BLOCK_BYTES + 5] ^= 1  # a byte of block 2
    damaged = CheckedArray(bad, block_crcs(a), "rows")
    assert np.array_equal(damaged.rows_at(np.array([0, 1]), width), a.reshape(-1, width)[[0, 1]])
    with pytest.raises(CacheDamaged):
        damaged.rows_at(np.array([1, (2 * BLOCK_BYTES + 5) // width]), width)


def test_hash_table_take_is_each_digest_read_alone():
    built = table_of(DIGESTS)
    assert isinstance(built, HashTable)
    arrays = {n: getattr(built, n).a for n in HashTable.ARRAYS}
    rng = np.random.default_rng(3)
    for table in (built, HashTable(*(_checked(arrays[n]) for n in HashTable.ARRAYS))):
        for size in (FEW + 1, 30, 300, len(DIGESTS)):
            slots = rng.choice(len(DIGESTS), size=size, replace=size > 1000)
            assert table.take(slots) == [DIGESTS[s] for s in slots.tolist()]
            assert table.take(slots[:FEW]) == [table[int(s)] for s in slots[:FEW]]
    assert len(DIGESTS[0]) == 2 * DIGEST
