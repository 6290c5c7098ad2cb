"""One file holding named NumPy arrays, uncompressed and aligned, opened by ``mmap``.

Layout::

    b"TVARRAYS"                          magic (8 bytes)
    uint32 LE   layout version (1)
    uint32 LE   CRC-32 of the header text
    uint64 LE   header length H
    H bytes     header: JSON {"meta": {...}, "size": file size,
                              "arrays": {name: {"dtype", "shape", "offset", "nbytes",
                                                "crc" | "blocks"}}}
    ...         each array's bytes at its offset (64 KiB aligned)

Why not ``np.savez``: an ``.npz`` member is read (and copied) whole; here opening
maps the file and every array is a zero-copy read-only view, so a process pays
in memory only for the pages it reads.

Verification on open (:func:`read`): magic, layout version, the header's CRC,
the file's exact size (a truncated or extended file is refused), each array's
dtype (numeric only: no pickles), shape, ``nbytes`` and bounds inside the file.
Then an array written with ``crc`` (small ones) is checked whole at once, and
one written with ``blocks`` (large ones, ``lazy=True`` at write) comes back as a
:class:`~tiervault.vault.checked_array.CheckedArray` verified block by block on
first read. Writes are atomic (:func:`~tiervault.vault.atomic_file.atomic_write`:
temporary file, rename), so a reader's mapping never changes under it; not fsynced
(``durable=False``): these checks cover every byte a reader uses, so what an OS
crash leaves of an unsynced file is refused like any damage (atomic_file.py).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path
from typing import Any, BinaryIO, Mapping

import numpy as np

from tiervault.vault.atomic_file import atomic_write
from tiervault.vault.checked_array import CheckedArray, block_crcs, block_step
from tiervault.vault.checksum import crc32

__all__ = ["ArrayFile", "read", "read_meta", "write"]

MAGIC = b"TVARRAYS"
LAYOUT = 1
_PREFIX = struct.Struct("<8sIIQ")
# Arrays start on 64 KiB boundaries, so a checked block (64 KiB, checked_array.py) is
# exactly one of the kernel's fault-around windows: with 64-byte alignment each
# isolated block read mapped two windows (~30% more resident pages at 1M entries).
_ALIGN = 1 << 16
_KINDS = "biuf"  # bool, int, uint, float: never object arrays


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def write(path: Path, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
          lazy: frozenset[str] | set[str] = frozenset(), *, mode: int = 0o600) -> None:
    """Write ``arrays`` (1-D or n-D, numeric) and ``meta`` (JSON-able) atomically.
    Arrays named in ``lazy`` get per-block CRCs (checked on first read), the others
    one CRC (checked on open)."""
    table: dict[str, dict[str, Any]] = {}
    bodies: list[tuple[int, np.ndarray]] = []
    offset = 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.kind not in _KINDS:
            raise ValueError(f"array {name} has dtype {a.dtype}: only numbers are stored")
        entry: dict[str, Any] = {"dtype": a.dtype.str, "shape": list(a.shape),
                                 "nbytes": int(a.nbytes)}
        if name in lazy:
            entry["blocks"] = block_crcs(a.reshape(-1))
        else:
            entry["crc"] = crc32(memoryview(a).cast("B")) if a.nbytes else 0
        table[name] = entry
        bodies.append((offset, a))
        entry["offset"] = offset  # relative to the data start for now
        offset = _align(offset + a.nbytes)
    # the header holds absolute offsets, which depend on its own length: iterate
    start = 0
    while True:
        for (rel, _), entry in zip(bodies, table.values()):
            entry["offset"] = start + rel
        size = start + (bodies[-1][0] + bodies[-1][1].nbytes if bodies else 0)
        header = json.dumps({"meta": dict(meta), "size": size, "arrays": table},
                            separators=(",", ":")).encode()
        need = _align(_PREFIX.size + len(header))
        if need == start:
            break
        start = need
    with atomic_write(path, binary=True, mode=mode, durable=False) as fh:
        fh.write(_PREFIX.pack(MAGIC, LAYOUT, crc32(header), len(header)))
        fh.write(header)
        pos = _PREFIX.size + len(header)
        for rel, a in bodies:
            fh.write(b"\0" * (start + rel - pos))
            fh.write(memoryview(a).cast("B"))
            pos = start + rel + a.nbytes


class ArrayFile:
    """An opened file: ``meta``, and ``array(name)`` / ``checked(name)`` views."""

    def __init__(self, meta: dict[str, Any], views: dict[str, np.ndarray],
                 blocks: dict[str, list[int]], offsets: dict[str, int] | None = None,
                 file: BinaryIO | None = None) -> None:
        self.meta = meta
        self._views = views
        self._blocks = blocks
        self._offsets = offsets or {}
        self._file = file  # open while an array reads through it (closed when collected)

    def names(self) -> set[str]:
        return set(self._views)

    def lazy_names(self) -> set[str]:
        """Arrays checked per block on first read."""
        return set(self._blocks)

    def array_size(self, name: str) -> int:
        """Number of elements of an array (no check needed: from the verified header)."""
        return int(self._views[name].size)

    def array(self, name: str) -> np.ndarray:
        """An array checked on open (``KeyError`` if absent, ``ValueError`` if lazy)."""
        if name in self._blocks:
            raise ValueError(f"array {name} is checked per block: use checked()")
        return self._views[name]

    def checked(self, name: str, bounds: tuple[int, int] | None = None, *,
                read: bool = False) -> CheckedArray:
        """A 1-D array as a :class:`CheckedArray` (lazy: per block; else already checked);
        ``read``: ranges are read with ``pread``, not through the mapping (checked_array.py)."""
        view = self._views[name]
        at = (self._file, self._offsets[name]) if self._file is not None else None
        return CheckedArray(view.reshape(-1), self._blocks.get(name), name, bounds,
                            at if read else None, None if read else at)


def read_meta(path: Path) -> dict[str, Any]:
    """Only the header's ``meta`` (magic, layout, CRC and file size checked; no array
    read or mapped): what a caller needs to tell whether the file is worth opening."""
    with open(path, "rb", buffering=0) as fh:
        return _header(fh, os.fstat(fh.fileno()).st_size).get("meta", {})


def _header(fh: BinaryIO, size: int) -> dict[str, Any]:
    """The verified header document of an opened file of ``size`` bytes."""
    prefix = fh.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        raise ValueError("file shorter than its header")
    magic, layout, crc, length = _PREFIX.unpack(prefix)
    if magic != MAGIC or layout != LAYOUT:
        raise ValueError("not a tiervault array file of this layout")
    if length > size:
        raise ValueError("header longer than the file")
    header = fh.read(length)
    if len(header) != length or crc32(header) != crc:
        raise ValueError("header fails its CRC-32")
    doc = json.loads(header)
    if doc.get("size") != size:
        raise ValueError(f"file is {size} bytes, its header says {doc.get('size')}")
    doc["_length"] = length
    return doc


def read(path: Path) -> ArrayFile:
    """Open and verify the header and the eagerly checked arrays (module docstring);
    any inconsistency raises ValueError."""
    fh = open(path, "rb", buffering=0)
    try:
        return _read(path, fh)
    except BaseException:
        fh.close()
        raise


def _prefetch_eager(fh: BinaryIO, arrays: dict[str, Any], size: int) -> None:
    """Ask the kernel to read the eagerly checked arrays now, in large requests: their
    CRCs read them whole next, through a mapping advised ``MADV_RANDOM``, where each page
    not in the OS cache was one 4 KiB read (a 1M cold open + first query whose tier files
    had left the OS cache spent ~3.5 s on ~140 MB: issue 16, session 22)."""
    if not hasattr(os, "posix_fadvise"):
        return
    for entry in arrays.values():
        if "blocks" not in entry and isinstance(entry.get("offset"), int) and isinstance(entry.get("nbytes"), int):
            offset, nbytes = entry["offset"], entry["nbytes"]
            if 0 <= offset and nbytes > 0 and offset + nbytes <= size:
                os.posix_fadvise(fh.fileno(), offset, nbytes, os.POSIX_FADV_WILLNEED)


def _read(path: Path, fh: BinaryIO) -> ArrayFile:
    size = os.fstat(fh.fileno()).st_size
    doc = _header(fh, size)
    length = doc.pop("_length")
    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        # Queries read scattered columns: no read-ahead around each page they touch
        # (it made ~30% of the mapped pages resident for nothing at 1,000,000 entries).
        mm.madvise(mmap.MADV_RANDOM)
    views: dict[str, np.ndarray] = {}
    offsets: dict[str, int] = {}
    blocks: dict[str, list[int]] = {}
    _prefetch_eager(fh, doc["arrays"], size)
    for name, entry in doc["arrays"].items():
        dtype = np.dtype(entry["dtype"])
        shape = tuple(int(x) for x in entry["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        offset, nbytes = int(entry["offset"]), int(entry["nbytes"])
        if dtype.kind not in _KINDS or dtype.hasobject or count * dtype.itemsize != nbytes:
            raise ValueError(f"array {name}: dtype {dtype} / shape {shape} / {nbytes} bytes disagree")
        if offset < _PREFIX.size + length or offset + nbytes > size:
            raise ValueError(f"array {name} lies outside the file")
        view = np.frombuffer(mm, dtype=dtype, count=count, offset=offset).reshape(shape)
        if "blocks" in entry:
            crcs = [int(c) for c in entry["blocks"]]
            if len(crcs) != -(-nbytes // block_step(dtype.itemsize)):
                raise ValueError(f"array {name} has {len(crcs)} block CRCs for {nbytes} bytes")
            blocks[name] = crcs
        elif (crc32(memoryview(view.reshape(-1)).cast("B")) if nbytes else 0) != entry["crc"]:
            raise ValueError(f"array {name} fails its CRC-32")
        views[name] = view
        offsets[name] = offset
    return ArrayFile(doc.get("meta", {}), views, blocks, offsets, fh)
