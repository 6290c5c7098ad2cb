"""A first mirror build reads an SQLite tier's rows a chunk at a time
(``TierStore.rows_in_chunks``, dropped once analysed): the mirror it saves equals the
one built from ``changes_since``'s whole list, array by array, and the chunks are one
snapshot -- a write committed by another connection between two chunks is not in them,
and the generation they report is the one before it."""

from __future__ import annotations

import shutil
from dataclasses import astuple
from pathlib import Path

import numpy as np

from tiervault.vault import array_file, postings
from tiervault.vault.entry import Entry
from tiervault.vault.rows import MirrorRowColumns, MirrorRow
from tiervault.vault.store import TierStore

WORDS = ["retry", "timeout", "cache", "error", "the", "naïve", "x1", "deployment", "w9"]


def _tier(path: Path, n: int) -> None:
    rng = np.random.default_rng(n)
    with TierStore(path, name="t") as st:
        st.capture_many([Entry.create(id=f"e-{i}", title=" ".join(rng.choice(WORDS, 3)),
                                      description=" ".join(rng.choice(WORDS, 12)), tags=[f"g{i % 4}"])
                         for i in range(n)])


def _arrays(path: Path) -> dict[str, bytes]:
    f = array_file.read(path)
    return {n: np.asarray(f.checked(n).all() if n in f.lazy_names() else f.array(n)).tobytes()
            for n in f.names()}


def test_a_build_from_chunks_equals_one_from_the_whole_list(tmp_path, monkeypatch):
    _tier(tmp_path / "a.db", 300)
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    monkeypatch.setattr(postings, "_CHUNK", 7)  # many chunks, the last one short
    seen = []
    real = TierStore.rows_in_chunks  # the chunks, with the light records (vault/light_feed.py)

    def counted(store, size):
        seen.append(size)
        return real(store, size)

    monkeypatch.setattr(TierStore, "rows_in_chunks", counted)
    with TierStore(tmp_path / "a.db", name="t") as st:
        assert st.postings().base_rows == 300
    assert seen == [7]
    monkeypatch.delattr(TierStore, "rows_in_chunks")  # the contract's path: changes_since(-1)
    with TierStore(tmp_path / "b.db", name="t") as st:
        assert st.postings().base_rows == 300
    a, b = _arrays(tmp_path / "a.db.postings.mirror"), _arrays(tmp_path / "b.db.postings.mirror")
    # the same mirror; only the SQLite feed's build keeps the light records
    assert {n for n in a if n.startswith("light_")} == {"light_index", "light_blob"}
    a = {n: v for n, v in a.items() if not n.startswith("light_")}
    assert a.keys() == b.keys() and len(a) > 10
    assert [n for n in a if a[n] != b[n]] == []


def test_the_chunks_are_one_snapshot(tmp_path):
    _tier(tmp_path / "a.db", 50)
    with TierStore(tmp_path / "a.db", name="t") as st, TierStore(tmp_path / "a.db", name="t") as other:
        gen_before = st.generation()
        with st.rows_in_chunks(20) as (gen, chunks, _records):
            first = next(chunks)
            other.capture_many([Entry.create(id="late", title="written between two chunks",
                                              description="a row the snapshot does not hold")])
            rest = list(chunks)
        assert gen == gen_before < st.generation()
        assert all(isinstance(c, MirrorRowColumns) for c in [first, *rest])
        # each chunk holds its rows by column: back to rows, the contract's MirrorRows
        rows = [MirrorRow(*r) for c in [first, *rest] for r in zip(*astuple(c))]
        assert [len(first), len(rows)] == [20, 50]
        assert "late" not in {r.id for r in rows}
        assert [r.key for r in rows] == sorted(r.key for r in rows)
        assert rows == st.changes_since(-1).rows[:50]
        assert MirrorRowColumns.of(rows[:20]) == first  # the same columns from MirrorRows
