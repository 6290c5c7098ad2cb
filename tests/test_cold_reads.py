"""Cache files read from a cold OS cache (vault/array_file.py, vault/checked_array.py):
the arrays checked at open, and a mapped block range about to be checked, are asked of
the kernel in one request each (``POSIX_FADV_WILLNEED``) before their CRCs read them
through a mapping advised ``MADV_RANDOM`` (one 4 KiB read per page otherwise); a range
read with ``pread`` is not. The values read are the ones written."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tiervault.vault import array_file
from tiervault.vault.checked_array import BLOCK_BYTES

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")


@pytest.fixture
def advised(monkeypatch) -> list[tuple[int, int]]:
    """The (offset, length) of every WILLNEED asked from now on."""
    calls: list[tuple[int, int]] = []
    real = os.posix_fadvise

    def spy(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            calls.append((offset, length))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", spy)
    return calls


def test_eager_arrays_and_mapped_blocks_are_asked_for_in_one_request(tmp_path, advised) -> None:
    eager = np.arange(50_000, dtype=np.int64)
    lazy = np.arange(200_000, dtype=np.float64) * 0.5  # 1.6 MB: many blocks
    path = tmp_path / "x.bin"
    array_file.write(path, {"m": 1}, {"eager": eager, "lazy": lazy}, {"lazy"})
    table = array_file.read_meta(path)  # meta only: nothing read
    assert table == {"m": 1} and advised == []

    f = array_file.read(path)
    entries = {name: (e["offset"], e["nbytes"]) for name, e in _arrays(path).items()}
    assert advised == [entries["eager"]]  # the one array checked at open, whole
    assert np.array_equal(f.array("eager"), eager)

    advised.clear()
    mapped = f.checked("lazy")
    per = BLOCK_BYTES // 8
    lo, hi = 3 * per + 10, 5 * per + 7  # blocks 3..5
    assert np.array_equal(mapped.get(lo, hi), lazy[lo:hi])
    start = entries["lazy"][0]
    assert advised == [(start + 3 * BLOCK_BYTES, 3 * BLOCK_BYTES)]
    assert np.array_equal(mapped.get(lo, hi), lazy[lo:hi]) and len(advised) == 1  # checked once

    advised.clear()
    pread = f.checked("lazy", read=True)
    assert np.array_equal(pread.get(lo, hi), lazy[lo:hi])
    assert advised == []  # read with pread: exactly the bytes asked, no advice needed


def _arrays(path) -> dict:
    """The header's array table (array_file's own reader, through its public read)."""
    import json
    import struct

    raw = path.read_bytes()
    length = struct.unpack("<8sIIQ", raw[:24])[3]
    return json.loads(raw[24:24 + length])["arrays"]
