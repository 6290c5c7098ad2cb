"""vault/checksum.py: every cache's CRC-32 is zlib's, whoever computes it (ISA-L from the
[crc] extra, or zlib), so a cache written with one is read with the other."""

from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiervault.vault import checksum
from tiervault.vault import array_file


@pytest.fixture
def restore_default():
    yield
    checksum.use()


def test_isal_is_what_ci_installs(restore_default) -> None:
    """The [crc] extra is part of [all]: CI measures and tests the fast path."""
    assert checksum.use() == "isal"


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=5000), value=st.integers(0, 2**32 - 1), cut=st.integers(0, 5000))
def test_both_implementations_give_zlibs_values_running_or_not(data: bytes, value: int, cut: int) -> None:
    try:
        for name in ("isal", "zlib"):
            checksum.use(name)
            assert checksum.crc32(data) == zlib.crc32(data)
            assert checksum.crc32(data, value) == zlib.crc32(data, value)
            view = memoryview(data)
            assert checksum.crc32(view[cut:], checksum.crc32(view[:cut])) == zlib.crc32(data)
    finally:
        checksum.use()


def test_without_isal_zlib_computes_it(monkeypatch, restore_default) -> None:
    monkeypatch.setitem(sys.modules, "isal", None)  # the extra not installed
    assert checksum.use() == "zlib" and checksum.implementation() == "zlib"
    with pytest.raises(ImportError):
        checksum.use("isal")
    with pytest.raises(ValueError, match="use 'isal' or 'zlib'"):
        checksum.use("crc32c")


@pytest.mark.parametrize("writer,reader", [("isal", "zlib"), ("zlib", "isal")])
def test_a_cache_written_by_one_is_read_by_the_other(tmp_path, writer, reader, restore_default) -> None:
    rng = np.random.default_rng(1)
    arrays = {"whole": rng.standard_normal(5000).astype(np.float32),
              "blocks": rng.integers(0, 2**31, 300_000, dtype=np.int64)}
    checksum.use(writer)
    array_file.write(tmp_path / "c.arrays", {"n": 1}, arrays, lazy={"blocks"})
    checksum.use(reader)
    got = array_file.read(tmp_path / "c.arrays")
    assert np.array_equal(got.array("whole"), arrays["whole"])
    assert np.array_equal(got.checked("blocks").all(), arrays["blocks"])
    damaged = bytearray((tmp_path / "c.arrays").read_bytes())
    damaged[-9] ^= 0x10  # in the last block of "blocks"
    (tmp_path / "d.arrays").write_bytes(bytes(damaged))
    with pytest.raises(Exception, match="CRC-32"):
        array_file.read(tmp_path / "d.arrays").checked("blocks").all()
