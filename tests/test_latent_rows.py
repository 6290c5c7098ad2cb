"""vault/latent.py + vault/mirror_cache.py: a large base saves its rows' latent vectors
with V_k, and a search process reads both a row at a time (pread) from a large cache
file, never through the mapping: at 1,000,000 entries the mapped V_k was 71 MB resident
(bench/README.md, issue 16 round 6); from a small one (``PREAD_ABOVE_BYTES``) through
the mapping, with no system call (issue 16 session 16). The numbers are the ones
projected from T in the building process."""

from __future__ import annotations

import json
import logging
import os
import struct

import numpy as np

from tiervault.vault import latent as vlatent
from tiervault.vault import mirror_cache
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager
from tiervault.vault.tfidf_rows import TfidfRows

K = vlatent.DEFAULT_COMPONENTS
_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_pages(a: np.ndarray) -> int:
    """Pages of ``a``'s memory present in this process (/proc/self/pagemap bit 63)."""
    first = a.ctypes.data // _PAGE
    last = (a.ctypes.data + a.nbytes - 1) // _PAGE
    with open("/proc/self/pagemap", "rb") as fh:
        fh.seek(first * 8)
        entries = np.frombuffer(fh.read((last - first + 1) * 8), dtype=np.uint64)
    return int(np.count_nonzero(entries >> np.uint64(63)))


def build(db, monkeypatch) -> tuple[list[str], list[float | None], list[float | None]]:
    """A 2,000-entry tier over 3,000 words whose base counts as large; the LSA scores of
    a few entries for two queries as the building process computes them (projected from
    T in memory)."""
    monkeypatch.setattr(vlatent, "MAX_FIT_ROWS", 1000)
    monkeypatch.setattr(vlatent, "EAGER_BASE_BYTES", 1024)
    rng = np.random.default_rng(11)
    words = [f"q{i}z" for i in range(3000)]
    entries = [Entry.create(id=f"e{i}", title=" ".join(rng.choice(words, 4)),
                            description=" ".join(rng.choice(words, 30))) for i in range(2000)]
    with VaultManager.at({"agent": str(db)}) as m:
        m.store("agent").capture_many(entries)
        p = m.store("agent").postings()
        assert isinstance(p.latent_V, np.ndarray) and p.latent_rows is None  # dropped after the save
        store = m.store("agent")
        return words, store.latent_scores(words[:5], IDS, K), store.latent_scores(words[5:9], IDS[:3], K)


IDS = ["e0", "e5", "e1999", "e1234", "nope"]


def test_a_large_base_saves_its_latent_rows_and_a_search_reads_rows_not_the_mapping(
        tmp_path, monkeypatch):
    db = tmp_path / "agent.db"
    words, want, want_other = build(db, monkeypatch)
    monkeypatch.setattr(mirror_cache, "PREAD_ABOVE_BYTES", 0)  # every cache file counts as large
    assert sum(s is not None and s > 0 for s in want) >= 2
    with VaultManager.at({"agent": str(db)}) as m:
        p = m.store("agent").postings()
        assert isinstance(p.latent_rows, vlatent.MatrixRows) and p.latent_rows.shape == (2000, K)
        assert isinstance(p.latent_V, vlatent.MatrixRows) and p.latent_V.shape == (p.tfidf_terms, K)

        def no_rows(*args, **kwargs):
            raise AssertionError("a candidate's latent vector was projected from T")

        monkeypatch.setattr(TfidfRows, "take", no_rows)
        assert m.store("agent").latent_scores(words[:5], IDS, K) == want  # bit for bit
        assert m.store("agent").latent_scores(words[5:9], IDS[:3], K) == want_other  # another query
        # neither matrix was read through the mapping (V was checked whole on open before)
        assert resident_pages(p.latent_V.data.a) == 0
        assert resident_pages(p.latent_rows.data.a) == 0


def test_a_small_cache_file_is_read_through_its_mapping_with_the_same_answers(tmp_path, monkeypatch):
    db = tmp_path / "agent.db"
    words, want, want_other = build(db, monkeypatch)
    assert (tmp_path / "agent.db.postings.mirror").stat().st_size <= mirror_cache.PREAD_ABOVE_BYTES

    def no_pread(*args, **kwargs):
        raise AssertionError("a small cache file was read with a system call")

    monkeypatch.setattr(os, "preadv", no_pread)
    with VaultManager.at({"agent": str(db)}) as m:
        p = m.store("agent").postings()
        assert isinstance(p.latent_rows, vlatent.MatrixRows) and isinstance(p.latent_V, vlatent.MatrixRows)
        assert m.store("agent").latent_scores(words[:5], IDS, K) == want  # bit for bit
        assert m.store("agent").latent_scores(words[5:9], IDS[:3], K) == want_other
        hits = m.store("agent").lexical_top_k(*_query(m, words[:3]), 10)  # postings columns too
        assert hits and resident_pages(p.latent_V.data.a) > 0
        assert resident_pages(p.W.indices.a) > 0


def _query(m: VaultManager, words: list[str]) -> tuple:
    from tiervault.vault.filters import Filters
    lq = m.lexical_query(" ".join(words))
    return lq.stems, lq.stats, Filters()


def test_a_damaged_block_of_the_saved_latent_rows_rebuilds_the_mirror(tmp_path, monkeypatch, caplog):
    db = tmp_path / "agent.db"
    words, want, _ = build(db, monkeypatch)
    cache = tmp_path / "agent.db.postings.mirror"
    data = bytearray(cache.read_bytes())
    length = struct.unpack("<8sIIQ", bytes(data[:24]))[3]
    at = json.loads(bytes(data[24:24 + length]))["arrays"]["latent_rows"]["offset"] + 4 * K * 5
    data[at] ^= 0x10  # row 5 of the base: e5 is asked for
    cache.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING), VaultManager.at({"agent": str(db)}) as m:
        assert m.store("agent").latent_scores(words[:5], IDS, K) == want
    assert sum("search cache" in r.message for r in caplog.records) == 1


def test_matrix_rows_read_from_an_array_or_a_file_alike(tmp_path):
    from tiervault.vault import array_file

    a = np.arange(60, dtype=np.float32).reshape(20, 3) / 7
    array_file.write(tmp_path / "x", {}, {"m": a}, {"m"})
    f = array_file.read(tmp_path / "x")
    on_file = vlatent.MatrixRows(f.checked("m", read=True), 3)
    in_memory = vlatent.MatrixRows(a.reshape(-1), 3)
    rows = np.array([19, 0, 7, 7])
    assert np.array_equal(on_file.take(rows), a[rows]) and np.array_equal(in_memory.take(rows), a[rows])
    assert np.array_equal(on_file.whole(), a) and on_file.shape == (20, 3)
