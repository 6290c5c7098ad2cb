"""The vector index's id <-> row map (embeddings/vector_ids.py) against plain dicts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiervault.embeddings import vector_ids
from tiervault.embeddings.index import VectorIndex
from tiervault.embeddings.vector_delta import Tombstones
from tiervault.embeddings.vector_ids import RowIds, slots_in, table_of_lines
from tiervault.errors import ValidationError
from tiervault.vault import string_table
from tiervault.vault.string_table import StringColumn, StringTable

IDS = st.text(alphabet=st.sampled_from("ab\u00e9\u4e2d-9"), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(have=st.lists(IDS, unique=True, max_size=60), want=st.lists(IDS, max_size=80))
def test_slots_in_is_a_dict_lookup(have, want) -> None:
    ref = {s: i for i, s in enumerate(have)}
    got = slots_in(StringTable.build(have), StringTable.build(want))
    assert got.tolist() == [ref.get(s, -1) for s in want]


def test_slots_in_and_duplicates_survive_shared_fingerprints(monkeypatch) -> None:
    """Every fingerprint reduced to 3 values: the bytes decide, never the key."""
    real = string_table.fingerprints
    monkeypatch.setattr(string_table, "fingerprints", lambda b, o: real(b, o) % np.uint64(3))
    have = [f"id{i}" for i in range(50)] + ["\u00e9t\u00e9", "x"]
    want = ["id7", "nope", "x", "id49", "\u00e9t\u00e9", "id7", "id"]
    got = slots_in(StringTable.build(have), StringTable.build(want))
    assert got.tolist() == [7, -1, 51, 49, 50, 7, -1]
    RowIds.of(have, Tombstones(len(have)))  # distinct strings sharing keys: accepted
    with pytest.raises(ValidationError, match="duplicates"):
        RowIds.of(have + ["id3"], Tombstones(len(have) + 1))


def test_table_of_lines_splits_like_str_split() -> None:
    for text in ["a", "a\nbb\n\u00e9\u4e2d", "x\ny\nz\nlonger-id-0001"]:
        assert table_of_lines(text.encode()).tolist() == text.split("\n")
    assert len(table_of_lines(b"")) == 0


def test_rows_of_a_mirror_column_with_delta_and_tombstones(monkeypatch) -> None:
    monkeypatch.setattr(vector_ids, "_FIND_MAX", 4)  # both the find and the join paths
    base = [f"e{i:03d}" for i in range(40)]
    m = np.eye(48, dtype=np.float32)[:40]
    index = VectorIndex.build(base, m, normalized=True)
    index.upsert(["e003", "new1", "new2"], np.eye(48)[40:43])  # e003 moves to the delta
    index.remove(["e005", "new1"])  # a base row dies; a delta row is swap-removed
    column = StringColumn(StringTable.build(["e005", "e003", "zz", "e039"]))
    column.extend(["new2", "e000", "new1"])
    truth = {i: r for r, i in enumerate(index.ids.tolist())}
    want = column.tolist()
    expect = []
    for i in want:
        expect.append(-1 if i not in truth else int(index.rows_of([i])[0]))
    assert index.rows_of(column).tolist() == expect == index.rows_of(want).tolist()
    assert expect[0] == -1 and expect[2] == -1 and expect[6] == -1
    assert expect[1] >= 40 and expect[4] >= 40 and expect[5] == 0 and expect[3] == 39
    rows = index.rows_of(["e003", "new2", "e000", "e039"])  # the rows hold the ids' vectors
    np.testing.assert_array_equal(index.vectors_for(["e003", "new2", "e000", "e039"]),
                                  np.eye(48, dtype=np.float32)[[40, 42, 0, 39]])
    assert len(set(rows.tolist())) == 4 and index.row_count == 42
    ids, _ = index.search(np.eye(48)[40], 1)
    assert ids.tolist() == ["e003"] and "e005" not in index and "e003" in index and "new1" not in index


def test_a_saved_fingerprint_index_is_used_as_saved_or_refused() -> None:
    """The vector cache saves the ids' (keys, order) beside them: read back, the table is
    the computed one; an index out of order, out of range or of other strings is refused
    (the cache is then rebuilt: disposable)."""
    ids = [f"id-{i:05d}-\u00e9" if i % 7 == 0 else f"id-{i:05d}" for i in range(3000)]
    body = "\n".join(ids).encode()
    computed = table_of_lines(body)
    keys, order = computed.keys.a.copy(), computed.order.a.astype(np.int64)
    saved = table_of_lines(body, (keys, order))
    assert saved.tolist() == ids and np.array_equal(saved.keys.a, computed.keys.a)
    assert np.array_equal(saved.order.a, computed.order.a) and saved.order.a.dtype == computed.order.a.dtype
    assert slots_in(saved, StringTable.build(["id-00008", "nope", "id-00014-\u00e9"])).tolist() == [8, -1, 14]
    swapped = order.copy()
    swapped[[0, -1]] = swapped[[-1, 0]]  # keys no longer match their slots
    for bad in ((keys[::-1].copy(), order), (keys, np.where(order == 0, 3000, order)), (keys, swapped)):
        with pytest.raises(ValueError, match="saved string index"):
            table_of_lines(body, bad)
    other = "\n".join(i + "x" for i in ids).encode()  # same lengths of index, other strings
    with pytest.raises(ValueError, match="does not match its strings"):
        table_of_lines(other, (keys, order))
