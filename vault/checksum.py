"""The CRC-32 every cache file is checked with: zlib's checksum, computed by Intel's
ISA-L when the ``isal`` package is installed (the ``crc`` extra), else by zlib.

The values are the same either way (ISA-L's ``crc32`` is zlib's, polynomial 0xEDB88320,
with the same running ``value``; tests/test_checksum.py), so a cache written with one is
read with the other. What differs is speed: zlib 1.2.13's ``crc32`` reads ~1.0 GB/s on
the bench machine, ISA-L's (carry-less multiplication) ~6.9 GB/s. A cache's blocks are
checked on first read and its arrays when written, so the 1M cold open + first query
and the 1M first build spend their CRC time here (bench/README.md, issue 16 session 17).
"""

from __future__ import annotations

import zlib
from typing import Callable

__all__ = ["crc32", "implementation", "use"]

_CRC: Callable[..., int] | None = None


def use(name: str | None = None) -> str:
    """Choose who computes :func:`crc32`: ``"isal"``, ``"zlib"``, or None (the default:
    ISA-L if installed, else zlib). Returns the name chosen. For tests and benchmarks;
    the values are the same."""
    global _CRC
    if name not in (None, "isal", "zlib"):
        raise ValueError(f"no CRC-32 implementation {name!r}: use 'isal' or 'zlib'")
    crc: Callable[..., int] = zlib.crc32
    if name != "zlib":
        try:
            from isal import isal_zlib  # optional ([crc] extra): imported at the first checksum
            crc = isal_zlib.crc32
        except ImportError:
            if name == "isal":
                raise
    _CRC = crc
    return implementation()


def _resolve() -> Callable[..., int]:
    use()
    assert _CRC is not None
    return _CRC


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """``zlib.crc32(data, value)``: the running CRC-32 of ``data`` after ``value``."""
    return (_CRC or _resolve())(data, value)


def implementation() -> str:
    """Which library computes :func:`crc32` here: ``"isal"`` or ``"zlib"``."""
    return "zlib" if (_CRC or _resolve()) is zlib.crc32 else "isal"
