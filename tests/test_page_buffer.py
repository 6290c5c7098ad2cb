"""The vector cache's int8 codes and bounds read into anonymous memory (2 MiB pages asked
for) instead of mapped (embeddings/page_buffer.py, embeddings/vector_cache.py): the same
bytes, read-only, the CRC-32 of the file's bytes; a short file or a flipped byte fails."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from tiervault.embeddings.page_buffer import HUGE_PAGE, huge_pages, read_resident
from tiervault.embeddings.recall import VectorRecall, cache_paths, read_cache
from tiervault.embeddings.vector_math import int8_codes
from tiervault.vault.entry import Entry
from tiervault.vault.manager import VaultManager

MODEL = "test:random"


@pytest.mark.parametrize("shape, dtype", [((3000, 384), np.int8), ((2, 777), np.float32), ((0, 8), np.int8)])
def test_read_resident_holds_the_files_array_and_its_crc(tmp_path, shape, dtype) -> None:
    path = tmp_path / "a.npy"
    want = np.random.default_rng(1).integers(-127, 128, shape).astype(dtype)
    np.save(path, want)
    mapped = np.load(path, mmap_mode="r")
    got, crc = read_resident(path, mapped.offset, mapped.dtype, mapped.shape)
    assert not isinstance(got, np.memmap) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert crc == zlib.crc32(path.read_bytes()[mapped.offset:])
    assert not got.flags.writeable
    if got.size:
        assert got.ctypes.data % HUGE_PAGE == 0  # the array starts on a 2 MiB boundary
    with pytest.raises(ValueError):
        got[..., 0] = 1


def test_a_short_file_fails_to_read(tmp_path) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.ones((100, 16), dtype=np.int8))
    mapped = np.load(path, mmap_mode="r")
    offset, dtype = mapped.offset, mapped.dtype
    del mapped
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(OSError, match="ended after"):
        read_resident(path, offset, dtype, (100, 16))


@pytest.mark.parametrize("huge", [True, False])
def test_a_cache_opens_its_codes_in_memory_and_refuses_a_flipped_byte(tmp_path, monkeypatch, huge) -> None:
    """With 2 MiB pages, the codes and bounds are read into memory; without, mapped as
    before; the same arrays either way, and a flipped byte fails the CRC-32."""
    from tiervault.embeddings import vector_cache

    monkeypatch.setattr(vector_cache, "huge_pages", lambda: huge)
    rng = np.random.default_rng(4)
    with VaultManager.at({"agent": str(tmp_path / "agent.db")}) as vault:
        store = vault.store("agent")
        ids = [f"e{i:04d}" for i in range(500)]
        store.capture_many([Entry.create(id=i, title=f"t {i}", description="d") for i in ids])
        m = rng.standard_normal((500, 32)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        store.put_vectors(MODEL, [(i, "h", v) for i, v in zip(ids, m)])
        VectorRecall(vault, MODEL, dtype="int8").warm(["agent"])
        ids_path, _ = cache_paths(store, MODEL)
        cached = read_cache(store, ids_path, MODEL)
        assert cached is not None and cached.codes is not None
        assert isinstance(cached.matrix, np.memmap)  # the float32 rows stay mapped
        codes, bounds = cached.codes
        assert isinstance(codes, np.memmap) != huge and not codes.flags.writeable
        want_codes, want_bounds = int8_codes(np.asarray(cached.matrix))
        np.testing.assert_array_equal(codes, want_codes)
        np.testing.assert_array_equal(bounds, want_bounds)
        del cached, codes, bounds
        name = next(ids_path.parent.glob(ids_path.name.replace(".ids", "") + "-*.i8.npy"))
        data = bytearray(name.read_bytes())
        data[-5] ^= 1
        name.write_bytes(bytes(data))
        with pytest.raises(ValueError, match="fails its CRC-32"):
            read_cache(store, ids_path, MODEL)


def test_huge_pages_reads_the_systems_mode(tmp_path, monkeypatch) -> None:
    from tiervault.embeddings import page_buffer

    for text, want in (("always [madvise] never\n", True), ("[always] madvise never\n", True),
                       ("always madvise [never]\n", False)):
        (tmp_path / "enabled").write_text(text)
        monkeypatch.setattr(page_buffer, "_THP", tmp_path / "enabled")
        monkeypatch.setattr(page_buffer, "_HUGE", None)
        assert huge_pages() is want
    monkeypatch.setattr(page_buffer, "_THP", tmp_path / "missing")
    monkeypatch.setattr(page_buffer, "_HUGE", None)
    assert huge_pages() is False
