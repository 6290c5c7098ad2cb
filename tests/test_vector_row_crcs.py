"""A large int8 vector cache's float32 rows are checked a row at a time where they are
read (embeddings/vector_cache.py, vector_base.py), not read whole at open: a damaged row
is found when a search rescores it, the tier's cache is discarded and its index rebuilt
from the tier, and the answer is the undamaged one (embeddings/recall.py)."""

from __future__ import annotations

import builtins
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from test_recall import MODEL, fill, unit
from tiervault.embeddings import vector_base, vector_cache
from tiervault.embeddings.recall import VectorRecall, cache_paths
from tiervault.embeddings.vector_math import simd_available
from tiervault.vault.manager import VaultManager

pytestmark = pytest.mark.skipif(not simd_available(), reason="needs the simd extra (CI installs it)")


@pytest.fixture
def by_row(monkeypatch) -> list[str]:
    """Every float32 cache file counts as large (read with pread, by row); returns the
    names of the files whose CRC-32 is read whole at open."""
    monkeypatch.setattr(vector_base, "PREAD_ABOVE_BYTES", 0)
    read_whole: list[str] = []

    def spy(path, *args, **kwargs):  # the module's open(): the ids file and the CRCs' reads
        if str(path).endswith(".npy"):
            read_whole.append(Path(path).name)
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(vector_cache, "open", spy, raising=False)
    monkeypatch.setattr(vector_cache, "huge_pages", lambda: False)  # every file read by that CRC
    return read_whole


def _answers(recall: VectorRecall, queries: np.ndarray) -> list:
    out = []
    for q in queries:
        ids, tiers, cos = recall.search(q, 10)
        out.append((ids, tiers, cos.tolist()))
    return out


def test_rows_are_checked_where_read_and_a_damaged_row_rebuilds_the_index(tmp_path, by_row, caplog):
    rng = np.random.default_rng(3)
    with VaultManager.at({"agent": str(tmp_path / "agent.db")}) as m:
        fill(m.store("agent"), rng, 1_500, "e")
        queries = unit(rng, 8)
        want = _answers(VectorRecall(m, MODEL, persist=False, dtype="int8"), queries)
        VectorRecall(m, MODEL, dtype="int8").warm()  # writes the cache
        ids_path, base = cache_paths(m.store("agent"), MODEL)
        matrix = ids_path.parent / json.loads(ids_path.read_bytes().split(b"\n", 1)[0])["matrix"]

        by_row.clear()
        fresh = VectorRecall(m, MODEL, dtype="int8")
        assert _answers(fresh, queries) == want
        assert matrix.name not in by_row and any(n.endswith(".crc.npy") for n in by_row)

        # a bit flipped in every float32 row: whichever row a search rescores fails its CRC
        raw = bytearray(matrix.read_bytes())
        offset = np.load(matrix, mmap_mode="r").offset
        row_bytes = 4 * queries.shape[1]
        for at in range(offset + 5, len(raw), row_bytes):
            raw[at] ^= 0x04
        matrix.write_bytes(bytes(raw))
        damaged = VectorRecall(m, MODEL, dtype="int8")
        with caplog.at_level(logging.WARNING):
            assert _answers(damaged, queries) == want
        assert sum("rebuilding the index of tier 'agent'" in r.getMessage() for r in caplog.records) == 1
        assert ids_path.exists()  # the rebuilt index saved a new cache
        assert _answers(VectorRecall(m, MODEL, dtype="int8"), queries) == want


def test_a_base_read_through_its_mapping_checks_every_row_at_once(tmp_path, by_row):
    """A float32 base (no int8 scan) reads its rows through the mapping: a cache written
    with row CRCs is then checked whole when the index is built, and a damaged row is
    refused there (a warning, rebuilt from the tier: the cache is disposable)."""
    rng = np.random.default_rng(5)
    with VaultManager.at({"agent": str(tmp_path / "agent.db")}) as m:
        vecs = fill(m.store("agent"), rng, 400, "e")
        VectorRecall(m, MODEL, dtype="int8").warm()
        q = unit(rng, 1)[0]
        best = max(vecs, key=lambda i: float(vecs[i] @ q))
        ids, _, _ = VectorRecall(m, MODEL, dtype="float32").search(q, 1)
        assert ids == [best]
